"""The migration coordinator against fakes: live migrations followed to their end, resumed after a restart, staged.

What it must guarantee: every transition of a live migration updates that
migration's own row and the query's actual state; a restart hands every
open migration that can go on back to the applier and closes the others as
failed, saying why; staging asks only a live applier for extra state.
"""

from __future__ import annotations

from support.fakes import Applier, LiveFake, apply_rig

from armd.control.coordinator import stage_changes, staged_message
from armd.control.ports import ActualState, Applier as ApplierPort, DesiredSettings, LiveApplier, QuerySettings, ResumableApplier
from armd.migrations.genmig import Migration


def settings(window: float) -> QuerySettings:
    return QuerySettings(0.5, 1.0, {"w": window}, None, 0.5)


def migrating_rig(extra=0.0):
    reconciler, store, applier, emitted, clock = apply_rig(LiveFake(extra=extra))
    store.actual["q1"] = ActualState("q1", 1, settings(10.0), "steady")
    reconciler.coordinator.load()
    store.write_desired([DesiredSettings("q1", 2, settings(20.0))])
    reconciler.tick()
    return reconciler, store, applier, emitted, clock


def test_capabilities_are_protocols_checked_with_isinstance():
    live, plain = LiveFake(), Applier(None)
    assert isinstance(live, LiveApplier) and isinstance(live, ResumableApplier) and isinstance(live, ApplierPort)
    assert isinstance(plain, ApplierPort) and not isinstance(plain, LiveApplier) and not isinstance(plain, ResumableApplier)


def test_every_transition_updates_the_migrations_row_and_the_actual_state():
    reconciler, store, _, emitted, _ = migrating_rig(extra=250.0)
    coordinator = reconciler.coordinator
    ((row_id, state),) = store.of("migration_update")
    assert state == "running" and coordinator.in_progress() == ("q1",)
    assert (store.actual["q1"].phase, store.actual["q1"].migration_state) == ("migrating", "running")
    assert store.actual["q1"].extra_state_bytes == 250.0 and store.actual["q1"].target_version == 2
    coordinator.advance()
    assert store.of("migration_update")[-1] == (row_id, "draining") and store.actual["q1"].migration_state == "draining"
    coordinator.advance()
    assert store.of("migration_update")[-1] == (row_id, "done") and not coordinator.in_progress()
    assert store.actual["q1"].phase == "steady" and store.actual["q1"].extra_state_bytes is None
    assert store.actual["q1"].plan_version == 2 and store.actual["q1"].settings == settings(20.0)
    assert emitted.kinds("q1") == ["migration_started", "migration_finished"]
    coordinator.advance()  # nothing open: the applier is not asked
    assert len(store.of("migration_update")) == 3


def test_a_live_migration_that_fails_is_alerted_and_marks_its_query_failed():
    reconciler, store, applier, emitted, _ = migrating_rig()
    applier.live["q1"] = applier.live["q1"].to("failed", 3.0, "the new run died")
    reconciler.coordinator.transition(applier.live.pop("q1"))
    assert store.actual["q1"].phase == "failed" and "the new run died" in store.actual["q1"].error
    assert emitted.alerts == [("migration_failed", "q1")]


def test_an_applier_that_raises_while_advancing_does_not_stop_the_job():
    reconciler, _, applier, _, _ = migrating_rig()

    def broken():
        raise RuntimeError("listener gone")

    applier.advance = broken
    reconciler.coordinator.advance()  # logged; the next run tries again
    assert reconciler.coordinator.in_progress() == ("q1",)


def stored(id_, query, live=True, version=2):
    record = Migration(query, "genmig", {"windows": {"w": 1}}, {"windows": {"w": 2}}).to("running", 1.0, "started", t_split=5.0)
    details = {"decision_id": "3", "plan_version": version, **({"live": record.as_record()} if live else {})}
    return {"id": id_, "query": query, "strategy": "genmig", "state": "running", "details": details}


def test_a_restart_resumes_what_can_go_on_and_closes_the_rest_as_failed():
    reconciler, store, applier, emitted, _ = apply_rig(LiveFake())
    applier.gone = {"q3"}
    store.actual = {q: ActualState(q, 2, settings(20.0), "migrating", target_version=2) for q in ("q1", "q2", "q3")}
    store.open = [stored(7, "q1"), stored(8, "q2", live=False), stored(9, "q3")]
    coordinator = reconciler.coordinator
    coordinator.load()
    assert coordinator.resume() == ("q1",)
    assert [(m.query, m.state, m.t_split) for m in applier.resumed] == [("q1", "running", 5.0)]
    assert store.of("migration_update") == [(8, "failed"), (9, "failed")]
    failed = [d["message"] for kind, _, _, d in emitted.events if kind == "migration_failed"]
    assert "left no state" in failed[0] and "it was deleted" in failed[1]
    assert emitted.alerts == [("migration_failed", "q2"), ("migration_failed", "q3")]
    coordinator.advance()
    coordinator.advance()
    assert store.of("migration_update")[-2:] == [(7, "draining"), (7, "done")]
    assert store.actual["q1"].phase == "steady" and not coordinator.open


def test_with_the_store_down_at_start_nothing_is_resumed_and_nothing_fails():
    reconciler, store, applier, emitted, _ = apply_rig(LiveFake())
    store.open, store.down = [stored(7, "q1")], True
    assert reconciler.coordinator.resume() == ()
    assert applier.resumed == [] and emitted.events == []


def test_an_applier_that_cannot_resume_closes_the_stored_migration():
    reconciler, store, _, emitted, _ = apply_rig(Applier(None))
    store.open = [stored(7, "q1")]
    assert reconciler.coordinator.resume() == ()
    assert store.of("migration_update") == [(7, "failed")] and emitted.kinds("q1") == ["migration_failed"]


def test_staging_asks_only_a_live_applier_for_extra_state():
    changes = {"q1": (settings(10.0), settings(20.0)), "q2": (settings(10.0), settings(30.0)), "new": (None, settings(5.0))}
    live = stage_changes(changes, 500.0, {"q1": 100.0, "q2": 100.0}, LiveFake(extra=400.0), 1000.0)
    assert live.now == ("new", "q1") and live.later == ("q2",) and live.peak_memory == 900.0
    plain = stage_changes(changes, 500.0, {"q1": 100.0, "q2": 100.0}, Applier(None), 1000.0)
    assert set(plain.now) == {"q1", "q2", "new"} and not plain.later
    severity, message = staged_message(live, 1000.0)
    assert severity == "info" and "migrations of q2 wait until those of new, q1 have finished" in message
    assert staged_message(plain, 1000.0) is None
    alone = stage_changes({"q1": (settings(20.0), settings(10.0))}, 900.0, {"q1": 100.0}, LiveFake(extra=400.0), 1000.0)
    assert alone.now == ("q1",) and alone.over_bound and staged_message(alone, 1000.0)[0] == "warning"
    growth = stage_changes({"q1": changes["q1"]}, 1100.0, {"q1": 100.0}, LiveFake(extra=400.0), 1000.0)
    assert growth.now == () and growth.later == ("q1",) and not growth.over_bound  # a growth never breaks the bound
    assert "already broken" in staged_message(growth, 1000.0)[1]
