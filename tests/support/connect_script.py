"""What the Spark Connect scripts share: a server from the package, a client session, one JSON line printed.

``connect_genmig.py`` and ``connect_agent.py`` each run in a process of
their own (a Connect client session does not share a Python process with
the classic local session of the other Spark tests) and print one JSON
object for ``tests/adapters/spark/test_spark_connect.py``: what they found,
or the error with the tail of the server's log.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from support.cluster import ConnectServer
from support.migration_batches import longer_batches

from armd.adapters.spark.sinks import ParquetSink


class ReadableParquetSink(ParquetSink):
    """``ParquetSink`` whose batches this process reads back with pyarrow, as ``MemorySink.rows`` gives them."""

    def rows(self, query: str) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        out = []
        for batch in sorted(self.root.glob(f"plan_version=*/query={query}/batch_id=*")):
            keys = {"query": query, "plan_version": int(batch.parent.parent.name.split("=")[1]),
                    "batch_id": int(batch.name.split("=")[1])}
            for part in sorted(batch.glob("*.parquet")):
                out += [{**row, **keys} for row in pq.read_table(part).to_pylist()]
        return out


def main(prefix: str, body: Callable[[Any, Path], dict[str, Any]]) -> None:
    """Start a ``local[2]`` server, run ``body(spark, root)`` in the tests' 6 s batches, print its result, exit."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    server = ConnectServer("local[2]", root).start()
    try:
        from pyspark import cloudpickle
        from pyspark.sql import SparkSession

        from armd.adapters.spark.source import register

        spark = SparkSession.builder.remote(server.url).getOrCreate()
        register(spark)
        # sinks of this module are pickled into the server's Python, which has no ``support`` package to import
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        with longer_batches():
            found = body(spark, root)
        spark.stop()
    except Exception as exc:  # noqa: BLE001 - the test prints what failed, with the server's log
        found = {"error": f"{type(exc).__name__}: {exc}", "log": server.log(30)}
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)  # checkpoints, sinks, the server's log (its tail is in ``found``)
    print(json.dumps(found, default=str))
    sys.stdout.flush()
    os._exit(0 if "error" not in found else 1)  # not sys.exit: after a failure the Connect client's threads would keep the process alive
