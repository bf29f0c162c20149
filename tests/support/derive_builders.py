"""Builders for the derivation tests: shapes armd's own builders do not have."""

from __future__ import annotations

from pyspark.sql import functions as F

from armd.adapters.spark.builders import synthetic


def stateful(spark, params):
    """A per-key running count by arbitrary stateful processing: not derivable, so it runs unmanaged."""
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key, frames, state):
        yield pd.DataFrame({"key": [key[0]], "n": [sum(len(f) for f in frames)]})

    return synthetic(spark, params, "clicks").groupBy("key").applyInPandasWithState(
        count, "key long, n long", "n long", "append", GroupStateTimeout.NoTimeout)


def tumbling_count(spark, params):
    """Count per key over a tumbling window ``w`` on the stream ``params.extra["stream"]``."""
    df = synthetic(spark, params, params.extra["stream"]).withWatermark("event_time", f"{params.extra['delay_seconds']} seconds")
    size = params.window("w", 20.0)
    return df.groupBy(F.window("event_time", f"{size:g} seconds"), "key").count()
