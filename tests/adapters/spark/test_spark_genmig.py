"""GenMig on real local Spark against the oracle: old plan alone, new plan alone, and old → new live.

The ``armd-synthetic`` source replays the same rows for every query that
reads it, and its event time runs at a fixed speed, so the four runs of the
scenario see identical input: (a) the old plan alone, (b) the new plan
alone, (c) the old plan migrated to the new one by GenMig while it runs,
(d) the same change by a naive restart. (c) must be (a)'s results before
T_split plus (b)'s from T_split on — nothing lost, nothing twice, nothing
different — and (d) is counted against the same expectation to show what a
restart gets wrong. A three-way join whose join order changes runs the same way (without the
naive restart). The harness is bench/migration.py's.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from support import REPO
import pytest
from support.migration_batches import longer_batches
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark import drain, genmig
from armd.adapters.spark.genmig import GenMigApplier
from armd.adapters.spark.listener import ProgressListener
from armd.adapters.spark.managed import ManagedSpec, QueryManager
from armd.adapters.spark.sinks import MemorySink
from armd.control.errors import NotReady
from armd.adapters.spark.source import offset_seconds

sys.path.insert(0, str(REPO / "bench"))
import migration  # noqa: E402


def runs(spark, listener, tmp_path_factory, chosen, strategies):  # noqa: F811
    manager = QueryManager(spark, tmp_path_factory.mktemp("checkpoints"))
    sink = MemorySink()
    out = {"a": migration.alone(listener, manager, sink, "a", chosen, chosen.old),
           "b": migration.alone(listener, manager, sink, "b", chosen, chosen.new)}
    for strategy in strategies:
        out[strategy] = migration.migrate(listener, manager, sink, f"c_{strategy}", strategy, chosen)
    return out


def scenario(name: str) -> migration.Scenario:
    return next(s for s in migration.SCENARIOS if s.name.startswith(name))


@pytest.fixture(scope="module")
def window_change(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Windowed count per key, window 6 s → 10 s, slide 2 s → 1 s, migrated 12 s of event time into the stream."""
    return runs(spark, progress_listener, tmp_path_factory, scenario("count per key: window"), ("genmig", "naive"))


@pytest.fixture(scope="module")
def join_order_change(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Three-way join (a ⋈ b) ⋈ c → (a ⋈ c) ⋈ b: another order, the same results (in 6 s batches: the join's three
    stateful operators make every batch cost)."""
    with longer_batches():
        return runs(spark, progress_listener, tmp_path_factory, scenario("three-way join: order"), ("genmig",))


def split_of(run: dict) -> float:
    """T_split in seconds after the run's origin, checked to lie past where the new plan started."""
    assert [m.state for m in run["transitions"]] == ["running", "draining", "done"]
    first = run["transitions"][0]
    assert first.t_split > max(first.facts["positions"].values())
    return first.t_split - run["start"]


def test_genmig_equals_old_before_the_split_and_new_after_it(window_change):
    run = window_change["genmig"]
    split = split_of(run)
    got, want = run["rows"], migration.expected(window_change["a"], window_change["b"], split)
    assert migration.compare(want, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == want.keys()
    # Both plans answered, each on its side, and the new windows are 10 s long (identities are (end, start, key)).
    assert any(k[0] < split for k in got) and any(k[0] >= split for k in got)
    assert all(k[0] - k[1] == 10 for k in got if k[0] >= split) and all(k[0] - k[1] == 6 for k in got if k[0] < split)


def test_the_recorded_drain_is_where_the_old_runs_watermark_first_passes_the_split(window_change):
    """``drain_at`` (what Fig 7's prediction drains at) is the end of the old run's first batch whose watermark has
    passed T_split, read off Spark's own progress: the batch after the one whose newest event passed T_split + delay."""
    run = window_change["genmig"]
    first = run["transitions"][0]
    assert first.facts["batch_span_seconds"] == pytest.approx(migration.BATCH)
    passed = [r for r in run["old"] if r.watermark is not None and r.watermark.timestamp() >= first.t_split]
    assert passed, "the old run stopped before its watermark passed T_split"
    end = max(offset_seconds(s.end_offset) for s in min(passed, key=lambda r: r.batch_id).sources)
    assert first.facts["drain_at"] - run["start"] == pytest.approx(end, abs=1e-6)


def test_expected_drain_by_hand():
    # Batches of 2 s from the position 18; T_split 28.002, delay 2: the batch [30, 32) holds 30.002, the next batch's
    # watermark passes T_split, so the old run stops at 34. On arrival it stops with the batch reading past 28.002.
    assert drain.expected_drain(28.002, 2.0, 18.0, 2.0) == pytest.approx(34.0)
    assert drain.expected_drain(28.0, 2.0, 18.0, 2.0) == pytest.approx(34.0)  # 30 opens [30, 32)
    assert drain.expected_drain(28.002, 2.0, 18.0, 2.0, "arrival") == pytest.approx(30.0)
    assert drain.expected_drain(28.002, 2.0, 18.0, 0.0) == pytest.approx(30.002)  # no batch span known


def test_a_naive_restart_gets_results_wrong_on_the_same_input(window_change):
    split = window_change["genmig"]["transitions"][0].t_split - window_change["genmig"]["start"]
    want = migration.expected(window_change["a"], window_change["b"], split)
    counted = migration.compare(want, window_change["naive"]["rows"])
    assert counted["lost"] + counted["duplicated"] + counted["wrong"] > 0, counted


def test_a_join_order_change_loses_and_repeats_no_result(join_order_change):
    run = join_order_change["genmig"]
    split = split_of(run)
    first = run["transitions"][0]
    # A result's streams are each bound to a only, so results span two ranges: T_split lies two past the position.
    assert first.facts["span_seconds"] == 8.0 and first.facts["emits"] == "arrival"
    got, want = run["rows"], migration.expected(join_order_change["a"], join_order_change["b"], split)
    assert migration.compare(want, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == want.keys() and len(want) > 500
    # The orders agree on the results (the same predicate), and both plans wrote some.
    assert join_order_change["a"] == join_order_change["b"]
    assert run["versions"] == [0, 1]


def test_a_new_plan_that_does_not_start_loses_no_result(window_change, spark, progress_listener, tmp_path_factory):  # noqa: F811
    """The new run fails to start after the old run's filter was set to T_split (a cluster gave up on it after three
    attempts in the fleet benchmark). Meanwhile the old run wrote windows from T_split on, which its filter dropped;
    rolling the filter back lost them (4,778 results). A run of the old plan from the split positions answers from
    T_split instead: the output is the old plan's, every result exactly once, and the change is tried again later.

    The change is a cut (window 10 s → 6 s), so T_split lies only the new window past the position; the old plan's
    run replays its own 10 s before the position to answer from there."""
    window = scenario("count per key: window")  # 6 s → 10 s; here the other way round
    chosen = replace(window, old=window.new, new=window.old, speed=4.0)  # 10 s of wall time: the old run goes on past T_split
    manager, sink, start = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), MemorySink(), migration.origin()
    manager.register(ManagedSpec("unstartable", "support.builders:windowed_count_or_unstartable", sink,
                                 chosen.params(chosen.old, start), trigger=chosen.trigger))
    transitions: list = []
    applier = GenMigApplier(manager, progress_listener, migration.TIME_UNIT, on_transition=transitions.append)
    manager.start("unstartable")
    old_run = str(manager.get("unstartable").query.runId)
    try:
        assert progress_listener.wait_for(lambda: (r := progress_listener.latest("unstartable")) is not None
                                          and r.watermark is not None and r.watermark.timestamp() >= start + migration.MIGRATE_AT, 120)
        new = chosen.params(chosen.new, start)
        new = replace(new, extra={**new.extra, "fail_start": 6.0})
        for attempt in range(10):
            try:
                applier.migrate("unstartable", new)
            except NotReady:
                time.sleep(0.5)
                continue
            except RuntimeError as exc:
                assert "cannot start" in str(exc)
                break
        else:
            pytest.fail("the unstartable plan's migration never began")
        (running,) = transitions
        t_split = running.t_split
        assert running.facts["span_seconds"] == chosen.new.window  # the new plan's reach, not the old one's 10 s
        seen = progress_listener.latest_of_run(old_run)
        # The old run wrote windows past T_split while the new one failed: without the continuation, lost results.
        assert seen.watermark.timestamp() >= t_split + chosen.old.slide
        assert running.state == "running" and "did not start" in running.history[-1][2]
        assert running.new_plan["windows"] == {"w": chosen.old.window} and running.facts["continuation"]
        advance_until_closed(applier)
        assert [m.state for m in transitions] == ["running", "draining", "done"]
        migration._read_to_end(progress_listener, manager, "unstartable", start)
    finally:
        applier.close()
        manager.stop_all()
    got = migration.results(sink.rows("unstartable"), start)
    assert migration.compare(window_change["b"], got) == {"lost": 0, "duplicated": 0, "wrong": 0}  # the 10 s plan's alone
    assert got.keys() == window_change["b"].keys()


def running_past_migrate_at(spark, listener, tmp_path_factory, name: str, chosen: migration.Scenario,  # noqa: F811
                            sink: MemorySink) -> tuple[QueryManager, GenMigApplier, list, float]:
    """The scenario's old plan running as ``name``, its watermark past MIGRATE_AT: the manager, a GenMig applier whose
    transitions land in the list returned, and the stream's origin."""
    manager, start = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), migration.origin()
    manager.register(ManagedSpec(name, chosen.builder, sink, chosen.params(chosen.old, start), trigger=chosen.trigger))
    transitions: list = []
    applier = GenMigApplier(manager, listener, migration.TIME_UNIT, on_transition=transitions.append)
    manager.start(name)
    assert listener.wait_for(lambda: (r := listener.latest(name)) is not None and r.watermark is not None
                             and r.watermark.timestamp() >= start + migration.MIGRATE_AT, 120)
    return manager, applier, transitions, start


def advance_until_closed(applier: GenMigApplier, seconds: float = 120) -> None:
    """Step the applier's migrations, as the coordinator does, until none is open (at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    while applier.advance() and time.monotonic() < deadline:
        time.sleep(0.2)


def finishes_split_exactly(applier: GenMigApplier, listener, transitions: list, sink: MemorySink, name: str,
                           start: float, window_change) -> None:
    """The one migration of ``name`` goes on to its end, and the sink then holds the old plan's results before its
    T_split and the new plan's from it on, each once."""
    advance_until_closed(applier)
    assert [m.state for m in transitions] == ["running", "draining", "done"], transitions
    migration._read_to_end(listener, applier.manager, name, start)
    got = migration.results(sink.rows(name), start)
    want = migration.expected(window_change["a"], window_change["b"], transitions[0].t_split - start)
    assert migration.compare(want, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == want.keys()


def start_failing(manager: QueryManager, fails, times: float = 1) -> tuple:
    """A ``manager.start`` whose first ``times`` starts from a checkpoint that ``fails(checkpoint)`` picks raise, as a
    cluster short of executors would make them; and the list of the checkpoints it failed."""
    real_start, failures = manager.start, []

    def start(name, params=None, keep=None, checkpoint=None):
        if checkpoint is not None and len(failures) < times and fails(checkpoint):
            failures.append(checkpoint)
            raise RuntimeError("no executor could take the run")
        return real_start(name, params, keep=keep, checkpoint=checkpoint)

    return start, failures


def migrate_when_ready(applier: GenMigApplier, query: str, params) -> None:
    for _ in range(20):  # NotReady: no batch to place T_split from yet, or a batch outran the placing
        try:
            applier.migrate(query, params)
            return
        except NotReady:
            time.sleep(0.25)
    pytest.fail(f"the migration of {query!r} never began")


def test_a_superseded_migration_is_rolled_back_and_the_next_one_starts_from_the_old_run(window_change, spark,  # noqa: F811
                                                                                     progress_listener, tmp_path_factory):
    """A change decided while a migration runs (a burst's deeper cut) need not wait for it: while neither run has
    emitted a result from T_split on, the migration is rolled back — its new run stopped before writing anything, the
    old run answering alone again — and the newer change migrates from the old run. The output is the old plan's
    before the second T_split and the newest plan's from it on, exactly; the dropped plan wrote nothing."""
    window = scenario("count per key: window")  # 6 s → 10 s; here 6 s → 8 s, superseded by → 10 s
    # 40 s of wall time in all, a 2 s batch of event time per wall second: the rollback stays open for the old window
    # and the delay past the position (about 8 batches), time to start the new run and stop it again on a slow machine.
    # (At two batches per second that was about 4 s: enough here, little on a slower machine.)
    chosen = replace(window, speed=1.0)
    sink = MemorySink()
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "superseded", chosen, sink)
    try:
        migrate_when_ready(applier, "superseded", chosen.params(migration.Variant(8.0, 2.0), start))
        assert applier.supersede("superseded"), transitions
        assert [m.state for m in transitions] == ["running", "rolled_back"] and not applier.migrations
        assert manager.get("superseded").query.isActive  # the old run, answering alone again
        migrate_when_ready(applier, "superseded", chosen.params(chosen.new, start))
        advance_until_closed(applier)
        assert [m.state for m in transitions] == ["running", "rolled_back", "running", "draining", "done"], \
            [(m.state, m.t_split - start, m.history[-1][2]) for m in transitions]
        migration._read_to_end(progress_listener, manager, "superseded", start)
    finally:
        applier.close()
        manager.stop_all()
    dropped, second = transitions[0], transitions[2]
    # Waiting, the second migration would have started once the old run's watermark passed the first T_split, a new
    # window past a position at least the delay beyond it: superseding, it started sooner.
    assert second.t_split - dropped.t_split < chosen.new.window + migration.DELAY
    written = sink.rows("superseded")
    assert sorted({r["plan_version"] for r in written}) == [0, 2]  # the dropped plan (version 1) wrote nothing
    got = migration.results(written, start)
    want = migration.expected(window_change["a"], window_change["b"], second.t_split - start)
    assert migration.compare(want, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == want.keys()


def test_a_migration_whose_old_run_passed_t_split_is_not_superseded(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Once the old run's watermark has passed T_split it has dropped results the new run owns: rolling back would
    lose them, so the migration goes on and the newer change waits."""
    chosen = scenario("count per key: window")
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory, "kept",
                                                                   chosen, MemorySink())
    try:
        migrate_when_ready(applier, "kept", chosen.params(chosen.new, start))
        t_split, old_run = transitions[0].t_split, transitions[0].facts["old_run"]
        assert progress_listener.wait_for(lambda: (r := progress_listener.latest_of_run(old_run)) is not None
                                          and r.watermark is not None and r.watermark.timestamp() >= t_split, 60)
        assert not applier.supersede("kept")
        assert [m.state for m in transitions] == ["running"] and "kept" in applier.migrations  # not advanced: unchanged
    finally:
        applier.close()
        manager.stop_all()


def test_progress_that_reaches_armd_late_does_not_place_the_split(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Spark's listener bus can run batches behind the query (it did, by 3–4 batches, in full test runs). T_split
    placed from such stale progress lay behind windows the old run had already written, and they came out twice.
    GenMig asks the run itself for its newest progress: a listener that heard only the first batch changes nothing."""
    chosen = scenario("count per key: window")
    manager, start = QueryManager(spark, tmp_path_factory.mktemp("checkpoints")), migration.origin()
    manager.register(ManagedSpec("late", chosen.builder, MemorySink(), chosen.params(chosen.old, start, ""), trigger=chosen.trigger))
    query = manager.start("late")
    late = ProgressListener()  # hears the first batch only, as a bus running behind would
    applier = GenMigApplier(manager, late, migration.TIME_UNIT)
    try:
        assert progress_listener.wait_for(lambda: (r := progress_listener.latest("late")) is not None and r.batch_id >= 3, 120)
        late.onQueryStarted(SimpleNamespace(runId=query.runId, name=query.name))
        first = next(p for p in query.recentProgress if "addBatch" in p["durationMs"])
        late.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=first.json)))
        stale = late.latest_of_run(str(query.runId))
        written = manager.get("late").writer.last_batch_id
        applier.migrate("late", chosen.params(chosen.new, start, ""))
        placed = applier.migrations["late"]
        assert placed.state == "running" and written is not None and written > stale.batch_id + 1
        assert placed.facts["placed_from_batch"] >= written - 1  # the run's own newest batch, not the first one heard
    finally:
        applier.close()
        manager.stop_all()


def test_an_old_run_that_was_a_migrations_new_run_keeps_that_migrations_lower_bound(spark):  # noqa: F811
    """Two migrations in a row: the second's old run is the first's new run, which answers only from the first T_split
    on. Its windows before that split not emitted yet when the second migration starts must stay out (the fleet
    benchmark saw 2,373 such results come out twice when the old-side filter replaced the new-side one)."""
    from datetime import datetime, timezone

    ends = [5.0, 12.0, 25.0]
    df = spark.createDataFrame([(datetime.fromtimestamp(e, tz=timezone.utc),) for e in ends], "end timestamp")
    df = df.selectExpr("named_struct('end', end) AS window")
    kept = genmig.reference_filter("window.end", 20.0, "old", since=10.0)(df)
    assert [r.window.end.timestamp() for r in kept.collect()] == [12.0]
    assert [r.window.end.timestamp() for r in genmig.reference_filter("window.end", 20.0, "old")(df).collect()] == [5.0, 12.0]
    assert genmig.reference_filter("window.end", None, "new") is None  # the first run answers for the whole stream


def test_spark_proves_an_empty_old_side_false_so_a_split_never_lies_at_the_lower_bound(spark):  # noqa: F811
    """In the fleet benchmark a second migration started while the first one's new run was still replaying, and its
    T_split was clamped *to* the point that run answered from: the old side became [x, x), Spark optimised the whole
    batch away, state store commits included, and the run failed (STATE_STORE_COMMIT_VALIDATION_FAILED). That is why
    ``chained_split_time`` keeps a unit between the two."""
    from datetime import datetime, timezone

    df = spark.createDataFrame([(datetime.fromtimestamp(e, tz=timezone.utc),) for e in (5.0, 12.0)], "end timestamp")
    df = df.selectExpr("named_struct('end', end) AS window")

    def optimised(t_split: float) -> str:
        return genmig.reference_filter("window.end", t_split, "old", since=10.0)(df)._jdf.queryExecution().optimizedPlan().toString()

    assert optimised(10.0).startswith("LocalRelation <empty>")
    assert "Filter" in optimised(10.0 + migration.TIME_UNIT)


def test_a_new_run_that_does_not_restart_after_a_refused_supersession_is_started_again(window_change, spark,  # noqa: F811
                                                                                     progress_listener, tmp_path_factory,
                                                                                     monkeypatch):
    """A supersession refused after the new run was stopped starts that run again from its checkpoint; when that start
    fails, the migration does not lose the run's results from T_split on: the next step starts it again, and the output
    is still the old plan's before T_split and the new plan's from it on. (The refusal is forced, as when the old run's
    batches outrun armd; the first restart fails as a cluster short of executors would make it.)"""
    chosen = scenario("count per key: window")
    sink = MemorySink()
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "restarted", chosen, sink)
    monkeypatch.setattr(applier, "_emits_nothing_from", lambda *args: True)
    monkeypatch.setattr(applier, "_restore_old_filter", lambda *args: "forced: the old run's batches outran armd")
    failing, failures = start_failing(manager, lambda checkpoint: True)
    try:
        migrate_when_ready(applier, "restarted", chosen.params(chosen.new, start))
        monkeypatch.setattr(manager, "start", failing)
        assert not applier.supersede("restarted")
        assert failures and not manager.get("restarted").running  # the restart failed: no new run for now
        monkeypatch.undo()
        finishes_split_exactly(applier, progress_listener, transitions, sink, "restarted", start, window_change)
    finally:
        applier.close()
        manager.stop_all()


def test_a_resumed_migration_whose_new_run_does_not_start_at_first_starts_it_at_a_later_step(window_change, spark,  # noqa: F811
                                                                                            progress_listener,
                                                                                            tmp_path_factory, monkeypatch):
    """After a restart, ``resume`` starts both runs of a stored migration from their checkpoints; when the new run's
    start fails, the migration is not failed (which would leave no run to answer from T_split on once the old run is
    done): the old run goes on, the next step starts the new run again, and the output is still the old plan's before
    T_split and the new plan's from it on."""
    chosen = scenario("count per key: window")
    sink = MemorySink()
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "resumed", chosen, sink)
    failing, failures = start_failing(manager, lambda checkpoint: checkpoint == Path(transitions[-1].facts["new_checkpoint"]))
    try:
        migrate_when_ready(applier, "resumed", chosen.params(chosen.new, start))
        applier.close()  # the daemon stops: both runs stop between batches, their checkpoints kept
        stored = transitions[-1]
        assert stored.state == "running" and not applier.migrations
        monkeypatch.setattr(manager, "start", failing)
        applier.resume(stored)
        assert failures and not manager.get("resumed").running  # the old run goes on; the new one did not start
        assert [m.query for m in applier.running_migrations()] == ["resumed"]
        monkeypatch.undo()
        finishes_split_exactly(applier, progress_listener, transitions, sink, "resumed", start, window_change)
    finally:
        applier.close()
        manager.stop_all()


def test_a_draining_migration_whose_new_run_never_starts_again_fails_keeping_both_checkpoints(spark,  # noqa: F811
                                                                                             progress_listener,
                                                                                             tmp_path_factory,
                                                                                             monkeypatch):
    """A resumed draining migration whose new run never starts again fails at its timeout; its new run owned the
    results from T_split on, so its checkpoint is kept (with the old run's) for the query to go on from, nothing is
    left running, and the note says that no run answers from T_split on."""
    chosen = scenario("count per key: window")
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "never", chosen, MemorySink())
    never, failures = start_failing(manager, lambda checkpoint: checkpoint == Path(transitions[-1].facts["new_checkpoint"]),
                                    times=float("inf"))
    try:
        migrate_when_ready(applier, "never", chosen.params(chosen.new, start))
        applier.close()
        draining = transitions[-1].to("draining", transitions[-1].t_split, "the new plan has read past T_split")
        monkeypatch.setattr(manager, "start", never)
        applier.timeout_seconds = 5.0
        applier.resume(draining)
        advance_until_closed(applier, 60)
        failed = transitions[-1]
        assert failed.state == "failed" and "no run answers from T_split on" in failed.history[-1][2], failed.history
        assert len(failures) >= 2  # tried again at the steps after the resume
        assert Path(failed.facts["new_checkpoint"]).is_dir() and Path(failed.facts["old_checkpoint"]).is_dir()
        assert not manager.get("never").running and not applier.running_migrations()
    finally:
        monkeypatch.undo()
        applier.close()
        manager.stop_all()


def test_a_running_migration_whose_old_run_passed_t_split_is_not_handed_back_at_its_timeout(window_change, spark,  # noqa: F811
                                                                                           progress_listener,
                                                                                           tmp_path_factory, monkeypatch):
    """A resumed migration whose new run never starts again, judged at its timeout after its old run has passed
    T_split: that old run has dropped its results from T_split on, so handing the query back to it would lose them
    (and deleting the new run's checkpoint would lose them for good). The migration drains instead — the old run,
    done, stopped — and fails keeping both checkpoints; the query then runs from the new run's checkpoint, and the
    output is the old plan's before T_split and the new plan's from it on, nothing lost or repeated."""
    chosen = scenario("count per key: window")
    sink = MemorySink()
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "overdue", chosen, sink)
    never, failures = start_failing(manager, lambda checkpoint: checkpoint == Path(transitions[-1].facts["new_checkpoint"]),
                                    times=float("inf"))
    now = [0.0]
    applier.clock = lambda: now[0]
    try:
        migrate_when_ready(applier, "overdue", chosen.params(chosen.new, start))
        applier.close()
        stored = transitions[-1]
        t_split = float(stored.t_split)
        monkeypatch.setattr(manager, "start", never)
        applier.resume(stored)
        assert failures and not manager.get("overdue").running  # only the old run goes on
        assert progress_listener.wait_for(lambda: (r := progress_listener.latest("overdue")) is not None
                                          and r.watermark is not None and r.watermark.timestamp() > t_split, 120)
        now[0] = applier.timeout_seconds + 1  # the first step after the old run passed T_split is past the timeout
        applier.advance()
        assert [m.state for m in transitions[-2:]] == ["draining", "failed"], transitions[-2:]
        failed = transitions[-1]
        assert "had emitted everything before T_split" in failed.history[-1][2], failed.history
        assert Path(failed.facts["new_checkpoint"]).is_dir() and Path(failed.facts["old_checkpoint"]).is_dir()
        assert not manager.get("overdue").running and not applier.running_migrations()
        monkeypatch.undo()
        manager.start("overdue", genmig.QueryParams.from_json(failed.new_plan), checkpoint=Path(failed.facts["new_checkpoint"]),
                      keep=genmig.reference_filter(str(failed.facts["reference_point"]), t_split, "new"))
        migration._read_to_end(progress_listener, manager, "overdue", start)
        got = migration.results(sink.rows("overdue"), start)
        want = migration.expected(window_change["a"], window_change["b"], t_split - start)
        assert migration.compare(want, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
        assert got.keys() == want.keys()
    finally:
        monkeypatch.undo()
        applier.close()
        manager.stop_all()


def test_a_running_migration_that_cannot_be_handed_back_stays_open_past_its_timeout(window_change, spark,  # noqa: F811
                                                                                  progress_listener, tmp_path_factory,
                                                                                  monkeypatch):
    """At its timeout, a running migration whose old run has dropped results from T_split on (forced here; a join's
    old run that read past T_split on one input while the other is idle) is neither failed nor handed back: both runs
    go on, one error line says why, and once the runs move again the migration ends exactly."""
    chosen = scenario("count per key: window")
    sink = MemorySink()
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "overdue_open", chosen, sink)
    errors: list = []
    applier.log = SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None,
                                  error=lambda event, **k: errors.append((event, k)))
    now = [0.0]
    applier.clock = lambda: now[0]
    try:
        migrate_when_ready(applier, "overdue_open", chosen.params(chosen.new, start))
        old_writer = applier._old["overdue_open"].writer
        real = applier._emits_nothing_from
        monkeypatch.setattr(applier, "_emits_nothing_from",
                            lambda latest, writer, *rest: writer is not old_writer and real(latest, writer, *rest))
        monkeypatch.setattr(applier, "_old_done", lambda *args: (False, None, "forced"))
        now[0] = applier.timeout_seconds + 1
        for _ in range(3):
            applier.advance()
        assert [m.state for m in transitions] == ["running"], transitions
        assert manager.get("overdue_open").running and applier._old["overdue_open"].query.isActive
        assert [event for event, _ in errors] == ["genmig_overdue"], errors  # said once, not at every step
        assert "old run reached T_split" in errors[0][1]["message"]
        monkeypatch.undo()
        now[0] = 0.0
        finishes_split_exactly(applier, progress_listener, transitions, sink, "overdue_open", start, window_change)
    finally:
        monkeypatch.undo()
        applier.close()
        manager.stop_all()


def test_a_running_migration_whose_old_run_stopped_is_given_up_to_the_new_run_at_its_timeout(spark,  # noqa: F811
                                                                                           progress_listener,
                                                                                           tmp_path_factory):
    """An old run that stopped on its own (a crash) cannot take the query back: at the timeout the migration fails as
    a drain does, and the new run goes on as the query's run, answering from T_split on."""
    chosen = scenario("count per key: window")
    manager, applier, transitions, start = running_past_migrate_at(spark, progress_listener, tmp_path_factory,
                                                                   "old_died", chosen, MemorySink())
    now = [0.0]
    applier.clock = lambda: now[0]
    try:
        migrate_when_ready(applier, "old_died", chosen.params(chosen.new, start))
        applier._old["old_died"].query.stop()
        now[0] = applier.timeout_seconds + 1
        applier.advance()
        failed = transitions[-1]
        assert failed.state == "failed" and "the new plan answers from T_split on" in failed.history[-1][2], failed.history
        assert manager.get("old_died").running and str(manager.get("old_died").query.runId) == failed.facts["new_run"]
        assert not applier.running_migrations()
    finally:
        applier.close()
        manager.stop_all()
