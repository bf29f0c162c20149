"""The reconciler against fakes: desired settings in, the applier called, actual state out; errors by kind.

What it must guarantee: each desired version is applied once; a dry run's
recommendations never; ``NotReady`` waits quietly; temporary errors are
retried with bounded exponential backoff; a permanent error (or the last
attempt) marks only that query failed and alerts, and a failed query waits
for a newer version.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from support.fakes import Applier, LiveFake, SupersedingFake, apply_rig, not_ready, permanent, temporary

from armd.control.ports import ActualState, DesiredSettings, QuerySettings
from armd.control.reconciler import RetryPolicy


def settings(window: float, qos: float = 0.5, granularity: float | None = None) -> QuerySettings:
    return QuerySettings(0.5, 1.0, {"w": window}, granularity, qos)


def want(store, query, version, window, granularity=None, **fields):
    store.write_desired([DesiredSettings(query, version, settings(window, granularity=granularity), **fields)])


def test_a_newer_desired_version_is_applied_once_and_reported():
    reconciler, store, applier, emitted, clock = apply_rig()
    want(store, "q1", 1, 10.0)
    want(store, "q2", 1, 20.0)
    reconciler.tick()
    assert applier.applied == [("q1", settings(10.0)), ("q2", settings(20.0))]
    assert store.actual["q1"] == ActualState("q1", 1, settings(10.0), "steady", at=clock.now)
    assert store.settings == {"q1": settings(10.0), "q2": settings(20.0)}
    assert [s for _, _, s in store.of("migration")] == ["running", "running"]
    assert [s for _, s in store.of("migration_update")] == ["done", "done"]
    assert emitted.kinds("q1") == ["migration_started", "migration_finished"]
    clock.advance(1)
    reconciler.tick()
    assert len(applier.applied) == 2  # nothing newer: nothing applied again
    want(store, "q1", 2, 15.0)
    reconciler.tick()
    assert applier.applied[-1] == ("q1", settings(15.0)) and store.actual["q1"].plan_version == 2


def test_a_dry_run_recommendation_is_never_applied():
    reconciler, store, applier, emitted, _ = apply_rig()
    want(store, "q1", 1, 10.0, recommend_only=True)
    reconciler.tick()
    assert applier.applied == [] and store.actual == {} and store.of("migration") == [] and emitted.events == []


def test_a_change_staging_holds_back_waits_for_the_migration_in_progress():
    # Each live migration holds 600 B extra; the bound of 1,000 B takes one at a time on top of 200 B held.
    reconciler, store, applier, emitted, clock = apply_rig(LiveFake(extra=600.0), memory_bound=1000.0)
    for q in ("q1", "q2"):
        store.actual[q] = ActualState(q, 1, settings(10.0), "steady")
    reconciler.coordinator.load()
    want(store, "q1", 2, 20.0)
    want(store, "q2", 2, 20.0, may_start=False)
    reconciler.tick()
    assert [q for q, _ in applier.applied] == ["q1"] and store.actual["q1"].phase == "migrating"
    assert store.actual["q1"].migration_state == "running" and store.actual["q1"].extra_state_bytes == 600.0
    reconciler.tick()
    assert [q for q, _ in applier.applied] == ["q1"]  # q2 waits while q1 migrates
    reconciler.coordinator.advance()  # draining
    reconciler.tick()
    assert [q for q, _ in applier.applied] == ["q1"] and store.actual["q1"].migration_state == "draining"
    reconciler.coordinator.advance()  # done
    assert store.actual["q1"].phase == "steady"
    reconciler.tick()  # restaged alone: it fits now
    assert [q for q, _ in applier.applied] == ["q1", "q2"]
    assert "migrations_staged" not in emitted.kinds()


def test_held_back_changes_are_staged_again_so_that_together_they_fit():
    # Three held back, 600 B extra each on 300 B held: one at a time, the cheapest name first.
    reconciler, store, applier, emitted, _ = apply_rig(LiveFake(extra=600.0), memory_bound=1000.0)
    for q in ("q1", "q2", "q3"):
        store.actual[q] = ActualState(q, 1, settings(10.0), "steady")
        want(store, q, 2, 20.0, may_start=False)
    reconciler.coordinator.load()
    order = []
    for _ in range(9):
        reconciler.tick()
        order += [q for q, _ in applier.applied if q not in order]
        assert len(reconciler.coordinator.in_progress()) <= 1
        reconciler.coordinator.advance()
    assert order == ["q1", "q2", "q3"]
    staged = [d for kind, _, _, d in emitted.events if kind == "migrations_staged"]
    assert staged and staged[0]["now"] == ["q1"] and staged[0]["later"] == ["q2", "q3"]


def migrating(applier, running: float, target: float, granularity: float | None = None):
    """The apply rig with q1 running a ``running`` window, desired version 2 (``target``) applied and still migrating."""
    rig = apply_rig(applier)
    reconciler, store = rig[0], rig[1]
    store.actual["q1"] = ActualState("q1", 1, settings(running, granularity=granularity), "steady")
    reconciler.coordinator.load()
    want(store, "q1", 2, target, granularity=granularity)
    reconciler.tick()
    return rig


def test_a_query_still_migrating_takes_its_next_version_after():
    reconciler, store, applier, _, _ = migrating(LiveFake(), 10.0, 20.0)
    want(store, "q1", 3, 30.0)
    reconciler.tick()
    assert [s.windows["w"] for _, s in applier.applied] == [20.0]
    reconciler.coordinator.advance()
    reconciler.coordinator.advance()
    reconciler.tick()
    assert [s.windows["w"] for _, s in applier.applied] == [20.0, 30.0] and store.actual["q1"].plan_version == 3


def test_a_deeper_cut_supersedes_the_running_migration_and_starts_at_once():
    reconciler, store, applier, emitted, _ = migrating(SupersedingFake(), 20.0, 10.0)
    want(store, "q1", 3, 5.0)  # decided while the cut to 10 still migrates
    reconciler.tick()
    assert applier.superseded == ["q1"] and [s.windows["w"] for _, s in applier.applied] == [10.0, 5.0]
    assert [s for _, s in store.of("migration_update")][:2] == ["running", "rolled_back"]
    assert emitted.kinds("q1") == ["migration_started", "migration_rolled_back", "migration_started"]
    assert emitted.alerts == []  # a rollback for a newer change is no fault
    actual = store.actual["q1"]
    assert (actual.plan_version, actual.settings, actual.phase) == (3, settings(5.0), "migrating")
    reconciler.coordinator.advance()
    reconciler.coordinator.advance()
    assert store.actual["q1"].phase == "steady" and store.actual["q1"].plan_version == 3


def test_a_deeper_cut_with_a_coarser_slide_supersedes_too_and_a_finer_one_waits():
    for granularity, supersedes in ((2.0, True), (0.5, False)):
        reconciler, store, applier, _, _ = migrating(SupersedingFake(), 20.0, 10.0, granularity=1.0)
        want(store, "q1", 3, 5.0, granularity=granularity)
        reconciler.tick()
        assert applier.superseded == (["q1"] if supersedes else []), granularity


def test_a_change_that_is_not_only_a_deeper_cut_waits_for_the_running_migration():
    for applier, next_window in ((SupersedingFake(), 15.0), (SupersedingFake(), 9.0), (SupersedingFake(refuse=True), 5.0)):
        reconciler, store, applier, emitted, _ = migrating(applier, 20.0, 10.0)
        want(store, "q1", 3, next_window)  # grows the target (15 > 10), a sliver (9), or the applier cannot drop it
        reconciler.tick()
        assert applier.superseded == [] and [s.windows["w"] for _, s in applier.applied] == [10.0]
        assert store.actual["q1"].plan_version == 2 and "migration_rolled_back" not in emitted.kinds("q1")
        reconciler.coordinator.advance()
        reconciler.coordinator.advance()
        reconciler.tick()
        assert [s.windows["w"] for _, s in applier.applied] == [10.0, next_window]


def test_not_ready_is_retried_at_the_next_tick_quietly():
    applier = Applier(None, raising={"q1": not_ready("q1")})
    reconciler, store, applier, emitted, clock = apply_rig(applier)
    want(store, "q1", 1, 10.0)
    for _ in range(3):
        reconciler.tick()
        clock.advance(0.1)
    assert applier.attempts == ["q1"] * 3  # every tick, no backoff
    assert emitted.events == [] and emitted.alerts == [] and store.of("migration") == []
    assert store.actual["q1"].phase == "retrying" and store.actual["q1"].attempts == 0
    assert len(store.of("actual")) == 1  # said once
    del applier.raising["q1"]
    reconciler.tick()
    assert store.actual["q1"].phase == "steady" and store.actual["q1"].plan_version == 1


def test_a_temporary_error_is_retried_with_doubling_backoff_and_limited():
    applier = Applier(None, failing={"q1"})
    reconciler, store, applier, emitted, clock = apply_rig(applier, retry=RetryPolicy(1.0, 3.0, 4))
    want(store, "q1", 1, 10.0)
    want(store, "q2", 1, 20.0)
    tried_at = []
    for _ in range(60):  # 15 s in 0.25 s ticks
        before = len(applier.attempts)
        reconciler.tick()
        if "q1" in applier.attempts[before:]:
            tried_at.append(clock.now)
        clock.advance(0.25)
    assert len(tried_at) == 4  # max_attempts, then it gives up
    assert [(b - a).total_seconds() for a, b in zip(tried_at, tried_at[1:])] == [1.0, 2.0, 3.0]  # doubling, capped at 3 s
    states = [s for s in store.of("actual") if s.query == "q1"]
    assert [(s.phase, s.attempts) for s in states] == [("retrying", 1), ("retrying", 2), ("retrying", 3), ("failed", 4)]
    assert [s.retry_at for s in states[:3]] == tried_at[1:]
    assert states[-1].retry_at is None and "cluster refused" in states[-1].error and states[-1].target_version == 1
    assert store.statuses == {"q1": "failed"}
    assert emitted.kinds("q1").count("apply_retrying") == 3 and emitted.alerts == [("apply_failed", "q1")]
    assert [s for _, s in store.of("migration_update")].count("failed") == 4  # each attempt's row closed as failed
    assert ("q2", settings(20.0)) in applier.applied and store.actual["q2"].phase == "steady"  # the others go on


def test_the_errors_retry_after_stretches_the_backoff():
    applier = Applier(None, raising={"q1": temporary("q1", retry_after=5.0)})
    reconciler, store, _, _, clock = apply_rig(applier, retry=RetryPolicy(1.0, 60.0, 10))
    want(store, "q1", 1, 10.0)
    reconciler.tick()
    assert store.actual["q1"].retry_at == clock.now + timedelta(seconds=5.0)
    clock.advance(4.9)
    reconciler.tick()
    assert applier.attempts == ["q1"]
    clock.advance(0.1)
    reconciler.tick()
    assert applier.attempts == ["q1", "q1"]


def test_a_permanent_error_fails_the_query_at_once_and_only_it_until_a_newer_version():
    applier = Applier(None, raising={"q1": permanent("q1")})
    reconciler, store, applier, emitted, clock = apply_rig(applier)
    want(store, "q1", 1, 10.0)
    want(store, "q2", 1, 20.0)
    reconciler.tick()
    assert store.actual["q1"].phase == "failed" and store.actual["q1"].attempts == 1
    assert "event-time offsets" in store.actual["q1"].error and store.statuses == {"q1": "failed"}
    assert emitted.alerts == [("apply_failed", "q1")]
    assert store.actual["q2"].phase == "steady"
    for _ in range(5):
        clock.advance(100)
        reconciler.tick()
    assert applier.attempts.count("q1") == 1  # failed: not retried for the same version
    del applier.raising["q1"]
    want(store, "q1", 2, 12.0)
    reconciler.tick()
    assert store.actual["q1"].phase == "steady" and store.actual["q1"].plan_version == 2
    assert store.statuses["q1"] == "active"


def test_nothing_is_applied_while_the_store_is_down():
    reconciler, store, applier, _, _ = apply_rig()
    want(store, "q1", 1, 10.0)
    store.down = True
    reconciler.tick()
    assert applier.applied == []
    store.down = False
    reconciler.tick()
    assert applier.applied == [("q1", settings(10.0))]


class Orders:
    def __init__(self):
        self.epoch, self.order, self.published = 0, ["a", "c", "b"], []

    def queries(self):
        return ["j"]

    def current(self, query):
        return self.epoch, self.order

    def publish(self, query, epoch, order):
        self.epoch, self.order = epoch, order
        self.published.append((epoch, order))


def test_a_join_order_is_published_with_the_next_epoch_and_recorded_as_a_jisc_migration():
    orders = Orders()
    reconciler, store, applier, _, _ = apply_rig(join_orders=orders)
    store.actual["j"] = ActualState("j", 1, settings(10.0), "steady")
    reconciler.coordinator.load()
    want(store, "j", 2, 10.0, join_order=[["a", "b"], "c"])
    reconciler.tick()
    assert orders.published == [(1, [["a", "b"], "c"])]
    assert applier.applied == []  # the settings did not change: only the order
    assert store.of("migration") == [("j", "jisc", "done")]
    assert store.actual["j"].plan_version == 2 and store.actual["j"].join_order == [["a", "b"], "c"]
    want(store, "j", 3, 10.0, join_order=(("a", "b"), "c"))  # the same order again: nothing to publish
    reconciler.tick()
    assert len(orders.published) == 1


def test_a_restart_resumes_open_migrations_and_starts_every_other_query_with_its_settings():
    from armd.migrations.genmig import Migration

    reconciler, store, applier, emitted, _ = apply_rig(LiveFake())
    applier.gone = {"q4"}
    store.actual = {"q1": ActualState("q1", 2, settings(20.0), "migrating", target_version=2),
                    "q2": ActualState("q2", 1, settings(10.0), "steady"),
                    "q4": ActualState("q4", 3, settings(40.0), "migrating", target_version=3)}
    store.settings = {"q3": settings(30.0)}  # from before the actual states existed
    live = Migration("q1", "genmig", {}, {}).to("running", 1.0, "started", t_split=5.0)
    store.open = [{"id": 7, "query": "q1", "strategy": "genmig", "state": "running",
                   "details": {"plan_version": 2, "live": live.as_record()}},
                  {"id": 8, "query": "q4", "strategy": "genmig", "state": "running",
                   "details": {"plan_version": 3, "live": replace(live, query="q4").as_record()}}]
    assert reconciler.restore() == ("q1",)
    assert [m.query for m in applier.resumed] == ["q1"]
    # Not q1: it goes on. q4's migration cannot (its checkpoints are gone): it starts anew with its settings.
    assert applier.applied == [("q2", settings(10.0)), ("q3", settings(30.0)), ("q4", settings(40.0))]
    assert store.actual["q4"].phase == "steady" and (8, "failed") in store.of("migration_update")
    assert store.actual["q3"].plan_version == 0 and store.actual["q3"].phase == "steady"
    assert emitted.kinds("q1") == ["migration_resumed"]
    reconciler.coordinator.advance()
    reconciler.coordinator.advance()
    assert (7, "done") in store.of("migration_update") and store.actual["q1"].phase == "steady"
