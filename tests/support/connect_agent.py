"""A whole ``armd.agent`` application over Spark Connect, against the oracle; prints one JSON object.

``test_spark_connect.py`` runs it, in a process of its own (a Connect
client session does not share a Python process with the classic local
session of the other Spark tests). It starts a Connect server from the
package (``ConnectServer``, ``local[2]``) and runs the application of
``tests/agent/test_agent_spark.py`` through it: an ``Agent`` on the Connect
session and a SQLite store registers the application and its query, the
user's own ``foreachBatch`` function (which runs in the server's Python, so
it writes Parquet files rather than collecting in this process) receives
every result, the listener reports progress, and a window change written to
``desired_settings`` — the daemon's part — is applied by GenMig. Over
Connect the agent has no JVM to derive the plan from or to instrument it
with (``df._jdf`` does not exist), so the application gives a plan file
(``Agent(plan=...)``) and the query runs without armd's probes (no measured
selectivities or group counts: the plan's figures stand). The oracle is the same
function run alone at the old and at the new settings over the same input,
through the same server.

    .venv/bin/python tests/support/connect_agent.py
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
from support.polling import wait  # noqa: E402
from support.user_scenario import UserScenario  # noqa: E402

from armd.agent.agent import KeywordLog  # noqa: E402

QUERY = "clicks_per_key"
RATES = {"clicks": 10.0}
PLAN = """
[streams.clicks]
rate = 0.01
size = 24

[queries.clicks_per_key]
op = "aggregate"
inputs = [{ op = "window", w = 12000, inputs = [{ op = "source", stream = "clicks" }] }]
"""


class WarningsKept(KeywordLog):
    """The agent's log, its warnings' event names kept."""

    def __init__(self) -> None:
        super().__init__()
        self.warnings: list[str] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.warnings.append(event)
        super().warning(event, **fields)


def parquet_rows(root: Path) -> list[dict[str, Any]]:
    """What the user's function wrote, one dict per result row."""
    import pyarrow.parquet as pq

    return [row for part in sorted(root.glob("batch=*/*.parquet")) for row in pq.read_table(part).to_pylist()]


def run(spark: Any, root: Path) -> dict[str, Any]:
    from datetime import datetime, timezone

    from armd.adapters.spark.listener import ProgressListener
    from armd.adapters.spark.managed import QueryManager
    from armd.adapters.store import applications as apps
    from armd.adapters.store.sql import SqlStore
    from armd.agent import Agent
    from armd.control.ports import DesiredSettings, QuerySettings

    store = SqlStore.open(f"sqlite:///{root}/armd.db")
    store.upgrade()
    (root / "plan.toml").write_text(PLAN)
    out = root / "user-output"
    listener = ProgressListener().attach(spark)
    start = migration.origin()
    log = WarningsKept()
    agent = Agent(spark, store=store, app="shop", checkpoint_root=root / "ck", poll_seconds=0.25, time_unit_seconds=1.0,
                  listener=listener, plan=root / "plan.toml", log=log)

    @agent.query(QUERY, windows={"w": ("4 seconds", "12 seconds")}, slides={"w": ("1 second", "4 seconds")},
                 initial={"w": "6 seconds"}, initial_slide="2 seconds", sources=migration.sources(RATES, start))
    def clicks_per_key(spark: Any, s: Any) -> Any:
        from pyspark.sql import functions as F

        return (s.source("clicks").withWatermark("event_time", "2 seconds")
                .groupBy(F.window("event_time", s.window("w"), s.slide("w")), "key").agg(F.count(F.lit(1)).alias("n")))

    def write_to_files(df: Any, batch_id: int) -> None:  # the user's own foreachBatch function, run in the server
        import uuid

        # a directory per call: during a migration two runs call this, each with its own batch ids (docs/agent.md)
        df.write.parquet(str(out / f"batch={batch_id}-{uuid.uuid4().hex}"))

    try:
        agent.start(QUERY, sink=lambda df: df.writeStream.foreachBatch(write_to_files))
        (row,) = apps.applications(store)
        registered = {"app": row.app, "status": row.status, "plan_source": apps.queries_of(store, "shop")[QUERY]["plan_source"]}
        wait(lambda: (r := listener.latest(QUERY)) is not None and r.watermark is not None
             and r.watermark.timestamp() >= start + migration.MIGRATE_AT, 300, "the old run to pass 12 s of event time")
        store.write_desired([DesiredSettings(QUERY, 1, QuerySettings(1.0, 1.0, {f"{QUERY}.w": 10.0}, 1.0, 0.9),
                                             decision_id="d1", at=datetime.now(timezone.utc))])
        wait(lambda: (a := store.actual_states()[QUERY]).plan_version == 1 and a.phase == "steady"
             and not agent.coordinator.in_progress(), 300, "the migration to finish")
        migration._read_to_end(listener, agent.manager, QUERY, start, timeout=300)
        errors = agent.loop.errors
    finally:
        agent.stop()
    (done,) = [m for m in store.transact(_migrations) if m["state"] == "done"]
    split = float(done["details"]["t_split"]) - start
    reported, observed = store.transact(_batches), store.transact(_observed)
    store.close()

    scenario = UserScenario("agent count", "count", RATES, migration.Variant(6.0, 2.0), migration.Variant(10.0, 1.0),
                            build=agent.declared[QUERY].builder())
    manager, sink = QueryManager(spark, root / "oracle"), ReadableParquetSink(root / "oracle-sink")
    a = migration.alone(listener, manager, sink, "oracle_a", scenario, scenario.old)
    b = migration.alone(listener, manager, sink, "oracle_b", scenario, scenario.new)
    got, want = migration.results(parquet_rows(out), start), migration.expected(a, b, split)
    return {"registered": registered, "agent_errors": errors, "reported_batches": reported, "observed_states": observed, "t_split_after_origin": split,
            "results": len(got), "before_split": sum(1 for k in got if k[0] < split),
            "from_split": sum(1 for k in got if k[0] >= split), **migration.compare(want, got),
            "same_keys": got.keys() == want.keys(), "app_status_after_stop": _status(root),
            "warnings": log.warnings}


def _migrations(session: Any) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from armd.adapters.store import models as m

    return [{"state": r.state, "details": r.details} for r in session.scalars(select(m.Migration))]


def _batches(session: Any) -> dict[str, int]:
    from sqlalchemy import func, select

    from armd.adapters.store import models as m

    rows = session.execute(select(m.BatchRow.plan_version, func.count()).where(m.BatchRow.query == QUERY)
                           .group_by(m.BatchRow.plan_version)).all()
    return {str(version): int(n) for version, n in rows}


def _observed(session: Any) -> int:
    """Observations of the query with a measured state: what the daemon decides on."""
    from sqlalchemy import func, select

    from armd.adapters.store import models as m

    return int(session.scalar(select(func.count()).select_from(m.ObservationRow)
                              .where(m.ObservationRow.query == QUERY, m.ObservationRow.state_bytes.is_not(None))))


def _status(root: Path) -> str:
    from armd.adapters.store import applications as apps
    from armd.adapters.store.sql import SqlStore

    store = SqlStore.open(f"sqlite:///{root}/armd.db")
    try:
        return apps.applications(store)[0].status
    finally:
        store.close()


if __name__ == "__main__":
    main("armd-connect-agent-", run)
