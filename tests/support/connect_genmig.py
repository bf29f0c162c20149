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

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[2] / "bench"))

import migration  # noqa: E402
from support.connect_script import ReadableParquetSink, main  # noqa: E402


def run(spark: Any, root: Path) -> dict[str, Any]:
    from armd.adapters.spark.listener import ProgressListener
    from armd.adapters.spark.managed import QueryManager

    listener = ProgressListener().attach(spark)
    manager, sink = QueryManager(spark, root / "checkpoints"), ReadableParquetSink(root / "sink")
    chosen = next(s for s in migration.SCENARIOS if s.name.startswith("count per key: window"))
    a = migration.alone(listener, manager, sink, "a", chosen, chosen.old)
    b = migration.alone(listener, manager, sink, "b", chosen, chosen.new)
    run = migration.migrate(listener, manager, sink, "c", "genmig", chosen)
    states = [m.state for m in run["transitions"]]
    split = run["transitions"][0].t_split - run["start"]
    want = migration.expected(a, b, split)
    return {"states": states, "t_split_after_origin": split, "results": sum(len(v) for v in run["rows"].values()),
            "before_split": sum(1 for k in run["rows"] if k[0] < split),
            "from_split": sum(1 for k in run["rows"] if k[0] >= split),
            **migration.compare(want, run["rows"]), "same_keys": run["rows"].keys() == want.keys()}


if __name__ == "__main__":
    main("armd-connect-genmig-", run)
