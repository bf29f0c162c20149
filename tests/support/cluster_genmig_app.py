"""A Spark application for ``spark-submit --master spark://…``: GenMig of a windowed count, checked against its oracle.

Why an application of its own: on a standalone cluster the query's tasks —
the ``armd-synthetic`` source's readers, the aggregation, the sink's writes
— run in executors (other JVMs, other Python workers) while armd's
listener, ``QueryManager`` and ``GenMigApplier`` stay in the driver. This
is the program a user would submit, with armd's code inside.

It runs bench/migration.py's window-change scenario (window 6 s → 10 s,
slide 2 s → 1 s) in the tests' 6 s batches (``support.migration_batches``)
three times at once over the same replayed input: the old
plan alone, the new plan alone (the oracle), and old → new by GenMig while
the query runs. Every run writes through a ``ParquetSink`` and checkpoints
under ``SHARED`` (a directory every executor can write: on one machine any
local directory), and its results are read back from those files, not from
driver memory. The report (JSON at ``OUT``) has the lost, duplicated and
wrong counts of the GenMig run against the old plan's results before
T_split and the new plan's from T_split on, and what shows the work was
distributed: the executors and the Python each one ran.

    spark-submit --master spark://HOST:PORT cluster_genmig_app.py OUT SHARED
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))

import migration  # noqa: E402
from pyspark import TaskContext  # noqa: E402
from support.migration_batches import longer_batches  # noqa: E402

from armd.adapters.spark.listener import ProgressListener  # noqa: E402
from armd.adapters.spark.managed import QueryManager  # noqa: E402
from armd.adapters.spark.session import build_session  # noqa: E402
from armd.adapters.spark.sinks import ParquetSink  # noqa: E402

SCENARIO = "count per key: window"


class SharedParquetSink(ParquetSink):
    """armd's Parquet sink, read back the way ``MemorySink.rows`` gives rows (for bench/migration.py's harness)."""

    def __init__(self, root: Path, spark: Any) -> None:
        super().__init__(root)
        self.spark = spark

    def rows(self, query: str) -> list[dict[str, Any]]:
        paths = sorted(str(p) for p in self.root.glob(f"plan_version=*/query={query}"))
        if not paths:
            return []
        frame = self.spark.read.option("basePath", str(self.root)).parquet(*paths)
        return [row.asDict(recursive=True) for row in frame.collect()]

    def files(self, query: str) -> int:
        return len(list(self.root.glob(f"plan_version=*/query={query}/batch_id=*/*.parquet")))


def where_tasks_ran(spark: Any) -> list[dict[str, Any]]:
    """Which executor, process and Python each of a few tasks ran in."""

    def who(_: Any) -> list[dict[str, Any]]:
        time.sleep(0.3)  # long enough that both executors are offered tasks
        context = TaskContext.get()
        return [{"executor_pid": os.getppid(), "python": sys.executable, "pid": os.getpid(), "host": socket.gethostname(),
                 "stage": context.stageId() if context else None}]

    return spark.sparkContext.parallelize(range(8), 8).mapPartitions(who).collect()


def main(out: Path, shared: Path) -> None:
    spark = build_session(None, "armd-cluster-genmig", shuffle_partitions=2)  # the master is spark-submit's
    master = spark.sparkContext.master
    listener = ProgressListener().attach(spark)
    scenario = next(s for s in migration.SCENARIOS if s.name.startswith(SCENARIO))
    manager = QueryManager(spark, shared / "checkpoints", keep_checkpoints=True)
    sink = SharedParquetSink(shared / "sink", spark)
    # The three runs overlap: a batch here waits mostly on scheduling, not on the two executor cores, and each
    # run's results are relative to its own origin, so they compare however the runs interleave. Each starts once
    # the one before has finished a batch: a query's start launches Python processes (the source's planner), and
    # several launched at once on a loaded machine miss Spark's wait for them to connect back.
    with longer_batches(), ThreadPoolExecutor(3) as pool:
        alone_old = pool.submit(migration.alone, listener, manager, sink, "a", scenario, scenario.old)
        listener.wait_for(lambda: listener.latest("a") is not None, 60)
        alone_new = pool.submit(migration.alone, listener, manager, sink, "b", scenario, scenario.new)
        listener.wait_for(lambda: listener.latest("b") is not None, 60)
        migrated = pool.submit(migration.migrate, listener, manager, sink, "c", "genmig", scenario)
        a, b, run = alone_old.result(), alone_new.result(), migrated.result()
    first = run["transitions"][0]
    split = first.t_split - run["start"]
    want = migration.expected(a, b, split)
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    report = {
        "master": master,
        **migration.compare(want, run["rows"]),
        "expected": len(want), "got": len(run["rows"]), "alone_old": len(a), "alone_new": len(b),
        "split_s": split,
        "results_before_split": sum(1 for k in run["rows"] if k[0] < split),
        "results_from_split": sum(1 for k in run["rows"] if k[0] >= split),
        "states": [t.state for t in run["transitions"]], "versions": run["versions"],
        "executors": executors, "tasks": where_tasks_ran(spark), "driver_pid": os.getpid(),
        "parquet_files": {name: sink.files(name) for name in ("a", "b", "c")},
        "checkpoints": sorted(str(p.relative_to(shared)) for p in (shared / "checkpoints").glob("*/*")),
    }
    out.write_text(json.dumps(report))
    listener.detach(spark)
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
