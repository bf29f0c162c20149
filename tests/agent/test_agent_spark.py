"""armd.agent on real local Spark and a real SQLite store: register, report, migrate by GenMig exactly, or only recommend.

The application's query is a windowed count per key written as a user
writes it (``s.window("w")``, ``s.slide("w")``, its own ``foreachBatch``
function). The daemon's side is played by writing ``desired_settings`` as
the control cycle does. The oracle is bench/migration.py's: the same query
run alone at the old and at the new settings over the same replayed input;
the agent's output must be the old results before T_split and the new ones
from T_split on — nothing lost, duplicated or wrong.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import func, select
from support import REPO
from support.spark import progress_listener, spark  # noqa: F401
from support.store import store  # noqa: F401 - the fixture
from support.polling import wait
from support.user_scenario import UserScenario

from armd.adapters.spark.managed import QueryManager
from armd.adapters.spark.sinks import MemorySink
from armd.adapters.spark.source import offset_seconds
from armd.adapters.store import applications as apps
from armd.adapters.store import models as m
from armd.agent import Agent
from armd.control.ports import ActualState, DesiredSettings, QuerySettings

sys.path.insert(0, str(REPO / "bench"))
import migration  # noqa: E402

RATES = {"clicks": 10.0}
QUERY = "clicks_per_key"



def now() -> datetime:
    return datetime.now(timezone.utc)


def declare(agent: Agent, name: str, start: float) -> Any:
    """The user's query: a sliding count per key; windows 4–12 s, slides 1–4 s; starts at 6 s / 2 s."""

    @agent.query(name, windows={"w": ("4 seconds", "12 seconds")}, slides={"w": ("1 second", "4 seconds")},
                 initial={"w": "6 seconds"}, initial_slide="2 seconds", sources=migration.sources(RATES, start))
    def clicks_per_key(spark, s):
        from pyspark.sql import functions as F

        return (s.source("clicks").withWatermark("event_time", "2 seconds")
                .groupBy(F.window("event_time", s.window("w"), s.slide("w")), "key").agg(F.count(F.lit(1)).alias("n")))

    return agent.declared[name]


def collecting() -> tuple[list[dict], Any]:
    rows: list[dict] = []
    lock = threading.Lock()

    def write_to_db(df, batch_id):  # the user's own foreachBatch function
        got = [r.asDict(recursive=True) for r in df.collect()]
        with lock:
            rows.extend(got)

    return rows, write_to_db


def desired(version: int, window: float, slide: float, *, recommend_only: bool = False) -> DesiredSettings:
    """A row as the control cycle writes it (model unit: 1 s in these tests)."""
    return DesiredSettings(QUERY, version, QuerySettings(1.0, 1.0, {f"{QUERY}.w": window}, slide, 0.9),
                           recommend_only=recommend_only, decision_id=f"d{version}", at=now())


def test_an_application_registers_reports_and_migrates_by_genmig_exactly(spark, progress_listener, store, tmp_path):  # noqa: F811
    """The migration replays (``replay=True``): the new run reads the larger window again from before the old run's
    position, and T_split lies just past that position."""
    start = migration.origin()
    agent = Agent(spark, store=store, app="shop", checkpoint_root=tmp_path / "ck", poll_seconds=0.25,
                  time_unit_seconds=1.0, listener=progress_listener, replay=True)
    declared = declare(agent, QUERY, start)
    rows, write_to_db = collecting()
    try:
        agent.start(QUERY, sink=lambda df: df.writeStream.foreachBatch(write_to_db))
        # Registered: the application, its query with the plan derived from the DataFrame, the settings in force.
        (row,) = apps.applications(store)
        assert (row.app, row.mode, row.status) == ("shop", "apply", "running")
        spec = apps.queries_of(store, "shop")[QUERY]
        assert spec["plan_source"] == "derived" and QUERY in spec["plan"]["queries"] and spec["nodes"]["w"] == f"{QUERY}.w"
        assert spec["nodes"]["agg1"] == f"{QUERY}.agg1"  # every derived label: measurements arrive under them
        assert store.actual_states()[QUERY].settings.windows == {f"{QUERY}.w": 6.0}
        wait(lambda: (r := progress_listener.latest(QUERY)) is not None and r.watermark is not None
             and r.watermark.timestamp() >= start + migration.MIGRATE_AT, 180, "the old run to pass 12 s of event time")
        store.write_desired([desired(1, 10.0, 1.0)])  # the daemon's decision: window 10 s, slide 1 s
        wait(lambda: (a := store.actual_states()[QUERY]).plan_version == 1 and a.phase == "steady"
             and not agent.coordinator.in_progress(), 180, "the migration to finish")
        migration._read_to_end(progress_listener, agent.manager, QUERY, start)
        assert agent.loop.errors == 0
    finally:
        agent.stop()
    # Reported through the daemon's own recording: batches of both runs, one observation per round at least.
    batches = store.transact(lambda s: s.scalar(select(func.count()).select_from(m.BatchRow).where(m.BatchRow.query == QUERY)))
    versions = store.transact(lambda s: set(s.scalars(select(m.BatchRow.plan_version).where(m.BatchRow.query == QUERY))))
    assert batches >= 5 and versions == {0, 1}
    (done,) = store.transact(lambda s: [(r.state, r.details) for r in s.scalars(select(m.Migration))])
    assert done[0] == "done" and done[1]["strategy"] == "genmig"
    split = float(done[1]["t_split"]) - start
    facts = done[1]["live"]["facts"]
    assert facts["replayed_seconds"] == 10.0 and facts["span_seconds"] == 0.0
    assert float(done[1]["t_split"]) - max(facts["positions"].values()) < 1.01  # one unit (1 s) + ε past the position
    first = min((r for r in progress_listener.records() if r.run_id == facts["new_run"] and r.input_rows),
                key=lambda r: r.batch_id)
    read = start + offset_seconds(first.sources[0].end_offset)
    assert read >= max(facts["positions"].values()) - 1e-3  # the replayed reach in one batch, not at the trigger's pace
    assert apps.applications(store)[0].status == "stopped" and apps.queries_of(store, "shop")[QUERY]["status"] == "removed"

    exactly_as_the_oracle(spark, progress_listener, tmp_path, declared, rows, start, split)


def exactly_as_the_oracle(spark, listener, tmp_path, declared, rows, start: float, split: float) -> None:  # noqa: F811 - spark: the fixture's value
    """The oracle: the same function alone at the old and at the new settings, over the same input, split at T_split."""
    scenario = UserScenario("agent count", "count", RATES, migration.Variant(6.0, 2.0), migration.Variant(10.0, 1.0),
                            build=declared.builder())
    manager, sink = QueryManager(spark, tmp_path / "oracle"), MemorySink()
    a = migration.alone(listener, manager, sink, "oracle_a", scenario, scenario.old)
    b = migration.alone(listener, manager, sink, "oracle_b", scenario, scenario.new)
    got, want = migration.results(rows, start), migration.expected(a, b, split)
    assert migration.compare(want, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == want.keys() and len(want) > 50
    assert any(k[0] < split for k in got) and any(k[0] >= split for k in got)
    assert all(k[0] - k[1] == 10 for k in got if k[0] >= split) and all(k[0] - k[1] == 6 for k in got if k[0] < split)


@pytest.mark.parametrize("how", ["died", "stopped"])
def test_a_restarted_application_finishes_the_migration_its_last_run_left_open(spark, progress_listener, store, tmp_path, how):  # noqa: F811
    """The application dies mid-migration (its runs stop between batches, the store is not told), or is stopped with
    ``agent.stop()``, and starts again: the agent resumes both runs from their checkpoints and the results are still
    exactly the oracle's."""
    start = migration.origin()
    first = Agent(spark, store=store, app="shop", checkpoint_root=tmp_path / "ck", poll_seconds=0.25,
                  time_unit_seconds=1.0, listener=progress_listener)
    declared = declare(first, QUERY, start)
    rows, write_to_db = collecting()
    first.start(QUERY, sink=lambda df: df.writeStream.foreachBatch(write_to_db))
    wait(lambda: (r := progress_listener.latest(QUERY)) is not None and r.watermark is not None
         and r.watermark.timestamp() >= start + migration.MIGRATE_AT, 180, "the old run to pass 12 s of event time")
    store.write_desired([desired(1, 10.0, 1.0)])
    wait(lambda: any("live" in (row.get("details") or {}) for row in store.open_migrations()), 120, "the migration to start")
    if how == "died":
        first.loop.stop()  # no more rounds, its runs gone, nothing said to the store
        first.applier.close()
    else:
        first.stop()
    assert store.open_migrations() and store.actual_states()[QUERY].phase == "migrating"

    second = Agent(spark, store=store, app="shop", checkpoint_root=tmp_path / "ck2", poll_seconds=0.25,
                   time_unit_seconds=1.0, listener=progress_listener)
    declare(second, QUERY, start)
    try:
        second.start(QUERY, sink=lambda df: df.writeStream.foreachBatch(write_to_db))
        assert second.manager.get(QUERY).params.version == 1 and QUERY in second.coordinator.in_progress()
        wait(lambda: (a := store.actual_states()[QUERY]).plan_version == 1 and a.phase == "steady"
             and not second.coordinator.in_progress(), 180, "the resumed migration to finish")
        migration._read_to_end(progress_listener, second.manager, QUERY, start)
    finally:
        second.stop()
    kinds = [e["kind"] for e in store.events(query=QUERY)]
    assert "migration_resumed" in kinds and "migration_finished" in kinds and "migration_failed" not in kinds, kinds
    (done,) = store.transact(lambda s: [(r.state, r.details) for r in s.scalars(select(m.Migration))])
    assert done[0] == "done"
    exactly_as_the_oracle(spark, progress_listener, tmp_path, declared, rows, start, float(done[1]["t_split"]) - start)


def test_in_recommend_mode_the_application_applies_nothing(spark, progress_listener, store, tmp_path):  # noqa: F811
    """Restarted in recommend mode: it starts with the settings in force (version 3, window 8 s) and keeps them."""
    start = migration.origin()
    in_force = QuerySettings(0.5, 1.0, {f"{QUERY}.w": 8.0}, 2.0, 0.5)
    store.write_actual(ActualState(QUERY, 3, in_force, "steady", at=now()))  # what the application's last run left
    agent = Agent(spark, store=store, app="shop", mode="recommend", checkpoint_root=tmp_path / "ck", poll_seconds=0.2,
                  time_unit_seconds=1.0, listener=progress_listener)
    declare(agent, QUERY, start)
    rows, write_to_db = collecting()
    try:
        spark_query = agent.start(QUERY, sink=lambda df: df.writeStream.foreachBatch(write_to_db))
        wait(lambda: progress_listener.latest(QUERY) is not None, 180, "a first batch")
        assert agent.manager.get(QUERY).params.windows == {f"{QUERY}.w": 8.0}
        store.write_desired([desired(4, 10.0, 1.0)])
        rounds = agent.loop.rounds
        wait(lambda: agent.loop.rounds >= rounds + 4, 30, "four rounds of the agent")
        actual = store.actual_states()[QUERY]
        assert (actual.plan_version, actual.phase, actual.settings.windows) == (3, "steady", {f"{QUERY}.w": 8.0})
        managed = agent.manager.get(QUERY)
        assert managed.query is spark_query and managed.params.version == 0 and managed.runs == 1
        assert not agent.applier.migrations
        assert managed.writer.keep is None  # no GenMig filter on the sink while nothing migrates
        assert 0 < agent.loop.cpu_seconds < 60  # the agent's own thread, measured (bench/fleet.py reports it)
        events = [e for e in store.events(query=QUERY) if e["kind"] == "recommendation"]
        assert len(events) == 1 and "applies nothing" in events[0]["message"]
        assert store.transact(lambda s: s.scalar(select(func.count()).select_from(m.Migration))) == 0
        assert apps.applications(store)[0].mode == "recommend"
    finally:
        agent.stop()
