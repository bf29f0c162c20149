"""GenMig over Spark Connect against the oracle; prints one JSON object (``test_spark_connect.py`` runs it).

A process of its own: the Connect client session and the classic local
session of the other Spark tests do not share a Python process. It starts a
Connect server from the package (``ConnectServer``, ``local[2]``), and runs
bench/migration.py's window change three times through armd's
``QueryManager`` over Connect, in the tests' 6 s batches
(``support.migration_batches``) — the old plan alone, the new plan alone, the
old one migrated to the new one by GenMig — each into a ``ParquetSink``
(a ``MemorySink`` would collect in the server's Python, not here). It
prints the migration's transitions and ``compare`` of its results against
the old plan's before T_split and the new plan's from it on.

    .venv/bin/python tests/support/connect_genmig.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[2] / "bench"))

import migration  # noqa: E402
from support.cluster import ConnectServer  # noqa: E402
from support.migration_batches import longer_batches  # noqa: E402

from armd.adapters.spark.sinks import ParquetSink  # noqa: E402


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


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="armd-connect-genmig-"))
    server = ConnectServer("local[2]", root).start()
    try:
        from pyspark.sql import SparkSession

        from armd.adapters.spark.listener import ProgressListener
        from armd.adapters.spark.managed import QueryManager
        from armd.adapters.spark.source import register

        spark = SparkSession.builder.remote(server.url).getOrCreate()
        register(spark)
        listener = ProgressListener().attach(spark)
        manager, sink = QueryManager(spark, root / "checkpoints"), ReadableParquetSink(root / "sink")
        chosen = next(s for s in migration.SCENARIOS if s.name.startswith("count per key: window"))
        with longer_batches():
            a = migration.alone(listener, manager, sink, "a", chosen, chosen.old)
            b = migration.alone(listener, manager, sink, "b", chosen, chosen.new)
            run = migration.migrate(listener, manager, sink, "c", "genmig", chosen)
        states = [m.state for m in run["transitions"]]
        split = run["transitions"][0].t_split - run["start"]
        want = migration.expected(a, b, split)
        found = {"states": states, "t_split_after_origin": split, "results": sum(len(v) for v in run["rows"].values()),
                 "before_split": sum(1 for k in run["rows"] if k[0] < split),
                 "from_split": sum(1 for k in run["rows"] if k[0] >= split),
                 **migration.compare(want, run["rows"]), "same_keys": run["rows"].keys() == want.keys()}
        spark.stop()
    except Exception as exc:  # noqa: BLE001 - the test prints what failed, with the server's log
        found = {"error": f"{type(exc).__name__}: {exc}", "log": server.log(30)}
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)  # checkpoints, the sink, the server's log (its tail is in ``found``)
    print(json.dumps(found, default=str))
    return 0 if "error" not in found else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # not sys.exit: after a failure the Connect client's threads would keep the process alive
