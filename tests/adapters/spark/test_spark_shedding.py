"""Load shedding on Spark: a source read through ``builders.synthetic`` drops ≈ p of its rows, and nothing at p = 0."""

from __future__ import annotations

import json
import math
import time

from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.builders import synthetic
from armd.adapters.spark.managed import QueryParams
from armd.adapters.spark.source import schedule_json
from armd.adapters.synthetic import Schedule
from armd.control.ports import QuerySettings


def _rows(spark, drop_rate: float, start: float) -> list[tuple]:  # noqa: F811
    options = {"start": repr(float(start)), "schedule": json.dumps(schedule_json(Schedule(600.0))), "keys": "8",
               "seed": "11", "end_seconds": "10", "max_seconds_per_batch": "10"}
    params = QueryParams(extra={"sources": {"clicks": options}}).with_settings(
        QuerySettings(1.0, 1.0, {}, None, 1.0, drop_rate=drop_rate), 1.0)
    assert params.drop_rate == drop_rate
    rows: list = []
    query = synthetic(spark, params, "clicks").writeStream.foreachBatch(
        lambda d, _b: rows.extend(d.select("event_time", "key", "value").collect())).start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return [(r.event_time.timestamp(), r.key, r.value) for r in rows]


def test_the_inserted_drop_keeps_about_one_minus_p_of_the_rows(spark) -> None:  # noqa: F811
    start = math.floor(time.time()) - 3600  # one origin: both runs read the same rows
    everything = _rows(spark, 0.0, start)
    kept = _rows(spark, 0.3, start)
    n = len(everything)
    assert n > 5000  # 600 rows/s for 10 s
    share = len(kept) / n
    sigma = math.sqrt(0.3 * 0.7 / n)
    assert abs(share - 0.7) <= 4 * sigma, (share, sigma)
    assert set(kept) <= set(everything)  # a filter: no row is changed or made up
