"""GenMig on a user's own Python data source whose event time starts on 2031-03-07 (not armd's source).

Three runs read the same replayable ticks at the same pace, side by side:
the old plan alone, the new plan alone, and the old plan migrated to the new
one by GenMig once its watermark has passed 6 s of the stream. The migrated
run must give exactly the first's results before T_split and the second's
from it on, with T_split in the data's own event time (2031), not armd's
clock. A source that does not declare the contract is refused, in one
line, before anything starts.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from support import REPO
from support import user_source
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.genmig import GenMigApplier
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.spark.sinks import MemorySink
from armd.control.errors import PermanentError

sys.path.insert(0, str(REPO / "bench"))
import migration  # noqa: E402

ORIGIN = datetime(2031, 3, 7, tzinfo=timezone.utc).timestamp()
END_TICK = 80  # 40 s of event time at 0.5 s per tick
DELAY = 1.0



@pytest.fixture(scope="module", autouse=True)
def shipped_by_value():
    """Spark's Python workers do not have tests/ on their path: ship the user's source module by value."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(user_source)
    yield
    cloudpickle.unregister_pickle_by_value(user_source)


def params(window: float, slide: float, wall_start: float, data_source: str = "support.user_source:Ticks") -> QueryParams:
    ticks = {"format": "ticks", "data_source": data_source, "origin": repr(ORIGIN), "tick_seconds": "0.5",
             "wall_start": repr(wall_start), "ticks_per_second": "8", "end_tick": str(END_TICK), "max_ticks_per_batch": "8"}
    return QueryParams(windows={"w": window}, slides={"w": slide}, extra={"sources": {"ticks": ticks}, "delay_seconds": DELAY})


def read_to_end(manager: QueryManager, listener, name: str) -> None:
    def at_end() -> bool:
        latest = listener.latest(name)
        return latest is not None and all(json.loads(s.end_offset or "{}").get("tick", 0) >= END_TICK for s in latest.sources)

    assert listener.wait_for(at_end, 150), f"{name} did not read to the end of the ticks"
    manager.get(name).query.processAllAvailable()
    manager.stop(name)


@pytest.fixture(scope="module")
def migrated(spark, progress_listener, tmp_path_factory):  # noqa: F811
    manager, sink = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), MemorySink()
    builder = "support.user_source:count_per_key"
    wall_start = time.time() + 2
    old, new = params(6.0, 2.0, wall_start), params(10.0, 1.0, wall_start)
    for name, p in (("alone_old", old), ("alone_new", new), ("migrated", old)):
        manager.register(ManagedSpec(name, builder, sink, p))
        manager.start(name)
    transitions: list = []
    applier = GenMigApplier(manager, progress_listener, 1.0, on_transition=transitions.append, timeout_seconds=150)
    assert progress_listener.wait_for(lambda: (r := progress_listener.latest("migrated")) is not None and r.watermark is not None
                                      and r.watermark.timestamp() >= ORIGIN + 6, 150)
    applier.migrate("migrated", replace(new, version=0))
    deadline = time.monotonic() + 150
    while applier.advance() and time.monotonic() < deadline:
        time.sleep(0.2)
    for name in ("alone_old", "alone_new", "migrated"):
        read_to_end(manager, progress_listener, name)
    rows = {name: migration.results(sink.rows(name), ORIGIN) for name in ("alone_old", "alone_new", "migrated")}
    return rows, transitions


def test_genmig_on_a_users_source_is_exact_with_the_split_in_the_datas_event_time(migrated):
    rows, transitions = migrated
    assert [m.state for m in transitions] == ["running", "draining", "done"]
    first = transitions[0]
    position = first.facts["positions"]["ticks"]
    assert ORIGIN + 6 <= position < ORIGIN + 40  # the 2031 stream's own time, not armd's clock
    assert first.t_split == pytest.approx(position + 10 + 1 + 1e-3)  # + the larger window + one unit + ε
    split = first.t_split - ORIGIN
    want = migration.expected(rows["alone_old"], rows["alone_new"], split)
    assert migration.compare(want, rows["migrated"]) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert rows["migrated"].keys() == want.keys()
    assert any(k[0] < split for k in want) and any(k[0] >= split for k in want)


def test_a_user_source_that_does_not_declare_the_contract_is_refused_before_anything_starts(spark, progress_listener,  # noqa: F811
                                                                                            tmp_path_factory):
    manager, sink = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), MemorySink()
    undeclared = params(6.0, 2.0, time.time(), "support.user_source:Undeclared")
    manager.register(ManagedSpec("undeclared", "support.user_source:count_per_key", sink, undeclared))
    query = manager.start("undeclared")
    applier = GenMigApplier(manager, progress_listener, 1.0)
    try:
        with pytest.raises(PermanentError) as refused:
            applier.migrate("undeclared", replace(params(10.0, 1.0, time.time(), "support.user_source:Undeclared")))
        message = str(refused.value)
        assert "\n" not in message and "does not declare the GenMig contract" in message and "'ticks'" in message
        assert manager.get("undeclared").query is query and not applier.migrations  # the old run goes on alone
    finally:
        manager.stop("undeclared")


def test_a_builder_reading_another_source_than_it_declares_is_refused_not_placed_in_armds_clock(  # noqa: F811
        spark, progress_listener, tmp_path_factory):  # noqa: F811
    """The issue's bug: the sources declared are armd's synthetic ones, the builder reads its own 2031 ticks. GenMig
    must not place the ticks' offsets in the synthetic clock: it refuses, naming what the query really reads."""
    manager, sink = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), MemorySink()
    ticks = params(6.0, 2.0, time.time()).extra["sources"]["ticks"]
    synthetic = {"start": repr(time.time()), "schedule": '{"rate_per_second": 5}'}
    mistaken = QueryParams(windows={"w": 6.0}, extra={"sources": {"ticks": synthetic}, "ticks": ticks})
    manager.register(ManagedSpec("mistaken", "support.user_source:own_reader", sink, mistaken))
    query = manager.start("mistaken")
    applier = GenMigApplier(manager, progress_listener, 1.0)
    try:
        assert progress_listener.wait_for(lambda: progress_listener.latest("mistaken") is not None, 150)
        with pytest.raises(PermanentError) as refused:
            applier.migrate("mistaken", replace(mistaken, windows={"w": 10.0}))
        message = str(refused.value)
        assert "declared as armd-synthetic" in message and "but the query reads" in message and "\n" not in message
        assert manager.get("mistaken").query is query and not applier.migrations
    finally:
        manager.stop("mistaken")


def test_a_migration_whose_source_stops_short_of_the_split_fails_after_its_timeout(spark, progress_listener,  # noqa: F811
                                                                                  tmp_path_factory):
    """The ticks end 10 s into the stream, before T_split: the new run can never read past it. The migration must
    not stay open for good: it fails after its timeout, and the old run answers alone again, unfiltered."""
    manager, sink = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), MemorySink()
    short = params(6.0, 2.0, time.time())
    short.extra["sources"]["ticks"]["end_tick"] = "20"
    manager.register(ManagedSpec("short", "support.user_source:count_per_key", sink, short))
    manager.start("short")
    transitions: list = []
    applier = GenMigApplier(manager, progress_listener, 1.0, on_transition=transitions.append, timeout_seconds=8)
    try:
        assert progress_listener.wait_for(lambda: (r := progress_listener.latest("short")) is not None and r.input_rows > 0, 150)
        old_query = manager.get("short").query
        applier.migrate("short", replace(params(10.0, 1.0, time.time()), extra={**short.extra}))
        deadline = time.monotonic() + 60
        while applier.advance() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert [m.state for m in transitions] == ["running", "failed"]
        assert "timed out" in transitions[-1].history[-1][2] and "old plan answers alone again" in transitions[-1].history[-1][2]
        assert not applier.migrations and manager.get("short").query is old_query and old_query.isActive
        assert manager.get("short").writer.keep is None  # its results are no longer cut at T_split
    finally:
        manager.stop("short")
