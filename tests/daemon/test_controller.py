"""The control cycle against recording fakes of the store, the applier and the alert sink.

The store fake keeps what it is given in lists and can be switched off, so
these tests see every record the controller writes, in order, and what
happens while the store is down. The real store is covered by
``test_store.py`` and the whole daemon by ``test_daemon.py``.
"""

from __future__ import annotations
from dataclasses import replace
import pytest
from structlog.testing import capture_logs
from armd.daemon.config import load_config
from armd.control.ports import QueryMetrics
from datetime import timedelta

from support.fakes import CONFIG, PLAN, Applier, apply, apply_side, cycle, make, use_applier


def test_a_cycle_observes_decides_applies_and_records(tmp_path):
    controller, store, applier, _, clock = make(tmp_path)
    cycle(controller, clock)
    assert store.of("sync_config") == [["clicks_per_view", "clicks_per_second", "big_orders"]]
    assert {q for q, s in store.of("status")} == {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert len(store.of("observation")) == 1
    (decision,) = store.of("decision")
    assert decision.feasible and decision.trigger == "queries added or removed"
    decision_estimates = [rows for decision_id, rows in store.of("estimates") if decision_id is not None]
    assert decision_estimates and decision_estimates[0][-1].query is None  # the total comes last
    assert {q for q, _ in applier.applied} == {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert set(store.settings) == {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert [state for _, _, state in store.of("migration")] == ["running"] * 3
    assert [state for _, state in store.of("migration_update")] == ["done"] * 3
    assert decision.estimated_memory_bytes <= 200_000


def test_a_tick_observes_then_decides_and_writes_the_desired_settings(tmp_path):
    controller, store, applier, _, clock = make(tmp_path)
    clock.advance(1)
    controller.tick()
    assert len(store.of("observation")) == 1 and len(store.of("decision")) == 1 and applier.applied == []
    (rows,) = store.of("desired")
    assert {row.query for row in rows} == {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert {row.decision_id for row in rows} == {store.of("decision")[0].id}
    apply(controller)  # the reconciler reads them from the store and puts them into force
    assert set(store.settings) == {row.query for row in rows}


def test_no_decision_without_a_trigger_until_the_period_passes(tmp_path):
    controller, store, _, _, clock = make(tmp_path, threshold=100.0)  # no rate moves that far
    for _ in range(10):  # t = 1 … 10 s: the first decision at 1 s, then nothing for decide_seconds = 10
        cycle(controller, clock)
    assert len(store.of("decision")) == 1
    cycle(controller, clock)
    assert [d.trigger for d in store.of("decision")] == ["queries added or removed", "periodic"]


def test_a_rate_burst_triggers_a_decision_that_fits_again(tmp_path):
    # clicks ×20 from t = 5 s: the settings in force no longer fit, the next decision cuts them.
    controller, store, _, _, clock = make(tmp_path, memory=150_000, burst=("clicks", 5.0, 20.0))
    cycle(controller, clock)
    first = store.of("decision")[-1]
    for _ in range(8):
        cycle(controller, clock)
    triggered = [d for d in store.of("decision") if d.trigger.startswith("rate of")]
    assert triggered, [d.trigger for d in store.of("decision")]
    last = triggered[-1]
    assert last.feasible and last.estimated_memory_bytes <= 150_000
    assert last.weighted_qos < first.weighted_qos


def test_dry_run_decides_and_records_but_applies_nothing(tmp_path):
    controller, store, applier, _, clock = make(tmp_path, dry_run=True)
    for _ in range(3):
        cycle(controller, clock)
    assert store.of("decision") and all(d.dry_run and not d.applied for d in store.of("decision"))
    assert applier.applied == [] and store.of("settings") == [] and store.of("migration") == []
    assert store.desired and all(d.recommend_only for d in store.desired.values())  # recommendations, shown only
    assert store.actual == {}


def test_one_query_failing_to_apply_does_not_stop_the_others(tmp_path):
    controller, store, applier, alerts, clock = make(tmp_path, failing={"clicks_per_view"})
    with capture_logs() as logs:
        cycle(controller, clock)
    assert {q for q, _ in applier.applied} == {"clicks_per_second", "big_orders"}
    assert apply_side(controller).counters["query_errors"] == 1
    # An unexpected error may pass: recorded and retried with backoff; alerted only when the query gives up.
    assert alerts.events == []
    assert any(line["event"] == "apply_retrying" and line["query"] == "clicks_per_view" for line in logs)
    assert [state for _, state in store.of("migration_update")].count("failed") == 1
    retrying = store.actual["clicks_per_view"]
    assert retrying.phase == "retrying" and retrying.attempts == 1 and "cluster refused" in retrying.error
    assert retrying.retry_at == clock.now + timedelta(seconds=controller.config.apply.retry_initial_seconds)
    applier.failing.clear()
    clock.advance(1)
    apply(controller)  # the failed change is retried
    assert "clicks_per_view" in store.settings
    assert store.actual["clicks_per_view"].phase == "steady"


def test_a_permanent_apply_error_marks_only_its_query_failed_and_alerts_once(tmp_path):
    from support.fakes import permanent

    controller, store, applier, alerts, clock = make(tmp_path)
    applier.raising["clicks_per_view"] = permanent("clicks_per_view")
    for _ in range(5):
        cycle(controller, clock)
    # Tried once per desired version (a later decision may ask for other settings: a newer version), never retried.
    versions = store.desired["clicks_per_view"].plan_version
    assert applier.attempts.count("clicks_per_view") == versions
    assert store.statuses["clicks_per_view"] == "failed" and store.actual["clicks_per_view"].phase == "failed"
    assert store.actual["clicks_per_view"].target_version == versions
    assert [(e.kind, e.query) for e in alerts.events] == [("apply_failed", "clicks_per_view")] * versions
    for _ in range(3):  # nothing newer asked: nothing tried
        clock.advance(100)
        apply(controller)
    assert applier.attempts.count("clicks_per_view") == versions
    assert {q for q, _ in applier.applied} == {"clicks_per_second", "big_orders"}
    assert {store.actual[q].phase for q in ("clicks_per_second", "big_orders")} == {"steady"}


def test_records_wait_while_the_store_is_down_and_none_is_lost(tmp_path):
    controller, store, _, _, clock = make(tmp_path)
    cycle(controller, clock)
    written = len(store.of("observation"))
    store.down = True
    with capture_logs() as logs:
        for _ in range(4):
            cycle(controller, clock)
    assert len(store.of("observation")) == written
    assert [line["event"] for line in logs].count("store_unavailable") == 1  # said once per outage
    store.down = False
    cycle(controller, clock)
    observations = store.of("observation")
    assert len(observations) == written + 5
    times = [o.at for o in observations]
    assert times == sorted(times)  # in order


def test_a_query_that_cannot_fit_even_at_its_minimum_is_rejected(tmp_path):
    # 15,000 bytes hold the all-minimum setting of the first two queries (4,588 B) but not big_orders' fixed 10,128 B on top.
    controller, store, _, alerts, clock = make(tmp_path, memory=12_000)
    cycle(controller, clock)
    assert store.statuses["big_orders"] == "rejected"
    assert store.statuses["clicks_per_view"] == "active"
    (event,) = [e for e in alerts.events if e.kind == "query_rejected"]
    assert event.query == "big_orders" and "memory" in event.message and event.details["memory_shortfall_bytes"] > 0
    assert "big_orders" not in controller.problem.queries


def test_changes_applied_while_the_store_is_down_keep_their_own_migration_rows(tmp_path):
    controller, store, applier, _, clock = make(tmp_path)
    read = store.desired_settings

    def read_then_fail():  # the store goes down right after the reconciler has read what to apply
        rows = read()
        store.down = bool(rows)  # (the decision reads none before it writes them)
        return rows

    store.desired_settings = read_then_fail
    cycle(controller, clock)  # decides, and applies all three queries into the backlog
    store.desired_settings = read
    assert len(applier.applied) == 3 and store.of("migration") == []
    store.down = False
    cycle(controller, clock)
    started = store.migration_uids  # the ids armd generated: an update needs no answer from the store
    updated = [migration_id for migration_id, _ in store.of("migration_update")]
    assert len(set(started)) == 3 and sorted(updated) == sorted(started)  # each migration finished once, under its own id


def test_settings_in_force_estimated_over_the_bound_trigger_a_decision(tmp_path):
    # No rate trigger can fire (threshold 100×), yet clicks ×4 from t = 3 s carries the estimate over the bound.
    controller, store, _, _, clock = make(tmp_path, memory=150_000, threshold=100.0, burst=("clicks", 3.0, 4.0))
    for _ in range(8):
        cycle(controller, clock)
    triggers = [d.trigger for d in store.of("decision")]
    assert "the estimate of the settings in force exceeds the bounds" in triggers, triggers
    assert "periodic" not in triggers  # it came before the 10 s period
    last = store.of("decision")[-1]
    assert last.feasible and last.estimated_memory_bytes <= 150_000 * 0.9


def test_measured_selectivities_are_smoothed_and_rebuild_the_model(tmp_path):
    controller, store, _, _, clock = make(tmp_path, threshold=0.5)
    join = controller.config.plan.queries["clicks_per_view"]
    assert controller.model.full.plan.nodes[join].sel == 0.01
    cycle(controller, clock)
    observe = controller.source.observe

    def with_selectivity(at):
        observation = observe(at)
        return replace(observation, queries=[*observation.queries, QueryMetrics("clicks_per_view", selectivities={join: 0.05})])

    controller.source.observe = with_selectivity
    before = store.of("decision")[-1].estimated_cpu
    for _ in range(3):
        cycle(controller, clock)
    triggers = [d.trigger for d in store.of("decision")]
    assert triggers[-1].startswith("measured selectivity of 1 node(s) moved past the threshold: clicks_per_view=0.05"), triggers
    assert controller.model.full.plan.nodes[join].sel == pytest.approx(0.05)
    assert store.of("decision")[-1].estimated_cpu > before  # five times the join results to process downstream
    cycle(controller, clock)
    assert len(store.of("decision")) == len(triggers)  # the same measurement again moves nothing


class GenMigLike(Applier):
    """Reports transitions like GenMigApplier: running at apply, draining and done on the next advances."""

    name = "genmig"

    def __init__(self, source, controller) -> None:
        super().__init__(source)
        self.controller, self.live = controller, {}

    def report(self, migration):
        apply_side(self.controller).coordinator.transition(migration)

    def apply(self, query, old, new):
        from armd.migrations.genmig import Migration

        super().apply(query, old, new)
        if old is not None:
            self.live[query] = Migration(query, "genmig", {}, {}).to("running", 1.0, "started", t_split=5.0)
            self.report(self.live[query])
        return "genmig"

    def advance(self):
        for query, m in list(self.live.items()):  # a migration moves on with time, once per advance here
            m = self.live[query] = m.to("draining" if m.state == "running" else "done", 2.0, "step")
            self.report(m)
            if m.final:
                del self.live[query]
        return tuple(self.live.values())

    def running_migrations(self):
        return tuple(self.live.values())

    def transient_memory(self, query, old, new, new_memory):
        return 0.0


class LiveApplier(GenMigLike):
    """GenMig-like, and its migrations hold the new plan's state on top of the old one while they run."""

    def transient_memory(self, query, old, new, new_memory):
        return new_memory


def test_a_live_migration_stays_open_until_the_applier_reports_it_done(tmp_path):
    controller, store, _, _, clock = make(tmp_path, memory=100_000)
    coordinator = use_applier(controller, GenMigLike(controller.source, controller)).coordinator
    cycle(controller, clock)  # first starts: no old plan, finished at once
    assert [s for _, s in store.of("migration_update")] == ["done"] * 3
    clock.advance(60)
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=300_000, dry_run="false", plan=PLAN, threshold=0.2))
    controller.reload(load_config(path))
    cycle(controller, clock)
    updates = [s for _, s in store.of("migration_update")][3:]
    assert "running" in updates and "done" not in updates  # started, not finished within apply
    assert coordinator.in_progress()
    assert {store.actual[q].phase for q in coordinator.in_progress()} == {"migrating"}
    assert {store.actual[q].migration_state for q in coordinator.in_progress()} == {"running"}
    for _ in range(3):
        cycle(controller, clock)
    updates = [s for _, s in store.of("migration_update")][3:]
    assert updates.count("draining") == updates.count("done") >= 1 and not coordinator.in_progress()
    assert {a.phase for a in store.actual.values()} == {"steady"}
    finished = [e for e in store.of("event") if e.kind == "migration_finished" and e.details.get("t_split") is not None]
    assert finished and "step" in finished[0].message


class Resumable(GenMigLike):
    """GenMig-like and able to continue a stored migration, unless its runs' checkpoints are gone."""

    def __init__(self, source, controller, gone=()) -> None:
        super().__init__(source, controller)
        self.gone, self.resumed = set(gone), []

    def resume(self, migration):
        if migration.query in self.gone:
            raise FileNotFoundError(f"cannot resume from /ckpt/{migration.query}: it was deleted")
        self.resumed.append(migration)
        self.live[migration.query] = migration


def stored_migration(id_, query, live=True):
    from armd.migrations.genmig import Migration

    record = Migration(query, "genmig", {"windows": {"w": 1}}, {"windows": {"w": 2}}).to("running", 1.0, "started", t_split=5.0)
    details = {"decision_id": 3, **({"live": record.as_record()} if live else {})}
    return {"id": id_, "query": query, "strategy": "genmig", "state": "running", "details": details}


def test_a_restarted_daemon_hands_open_live_migrations_back_to_the_applier(tmp_path):
    controller, store, _, _, clock = make(tmp_path)
    applier = Resumable(controller.source, controller, gone={"clicks_per_second"})
    coordinator = use_applier(controller, applier).coordinator
    store.open = [stored_migration(7, "big_orders"), stored_migration(8, "clicks_per_view", live=False),
                  stored_migration(9, "clicks_per_second")]
    assert coordinator.resume() == ("big_orders",)
    assert [(m.query, m.state, m.t_split) for m in applier.resumed] == [("big_orders", "running", 5.0)]
    # The two that cannot go on are closed as failed, saying why; their queries start like any other.
    assert store.of("migration_update") == [(8, "failed"), (9, "failed")]
    failed = [e for e in store.of("event") if e.kind == "migration_failed"]
    assert "left no state" in failed[0].message and "it was deleted" in failed[1].message
    assert [e.query for e in store.of("event") if e.kind == "migration_resumed"] == ["big_orders"]
    # The resumed one is open again: its next transitions update its own row, and it finishes.
    for _ in range(2):
        cycle(controller, clock)
    assert (7, "draining") in store.of("migration_update") and (7, "done") in store.of("migration_update")
    assert not coordinator.open


def test_with_the_store_down_at_start_nothing_is_resumed_and_nothing_fails(tmp_path):
    controller, store, _, _, _ = make(tmp_path)
    applier = Resumable(controller.source, controller)
    coordinator = use_applier(controller, applier).coordinator
    store.open, store.down = [stored_migration(7, "big_orders")], True
    assert coordinator.resume() == ()
    assert not applier.resumed


def test_live_migrations_whose_extra_state_would_break_the_bound_are_staged(tmp_path):
    controller, store, _, _, clock = make(tmp_path, memory=100_000)
    applier = LiveApplier(controller.source, controller)
    use_applier(controller, applier)
    cycle(controller, clock)
    assert {q for q, _ in applier.applied} == {"clicks_per_view", "clicks_per_second", "big_orders"}  # starts: no old state
    applier.applied.clear()
    clock.advance(60)  # past every cool-down
    path = tmp_path / "armd.toml"
    free = "\n[migration_cost]\nqos_per_bound_second = 0\nqos_per_gap_second = 0\n"  # staging alone decides, unpriced
    path.write_text(CONFIG.format(memory=300_000, dry_run="false", plan=PLAN, threshold=0.2) + free)
    controller.reload(load_config(path))
    for _ in range(8):
        cycle(controller, clock)
    decision = [d for d in store.of("decision") if d.trigger == "bounds changed"][0]
    staging = decision.outputs["staging"]
    assert staging["later"] and staging["now"] and not staging["over_bound"], staging
    assert staging["peak_memory_bytes"] <= 300_000
    grown = sum(d["estimated_memory_bytes"] for d in decision.outputs["queries"].values())
    assert grown <= 300_000 * 0.9  # the decision fits; only the way there would not, all at once
    events = [e for e in store.of("event") if e.kind == "migrations_staged"]
    assert events and "wait until those of" in events[0].message
    # The waiting changes are applied once the first ones have drained.
    order = [q for q, _ in applier.applied]
    assert set(staging["now"] + staging["later"]) <= set(order)
    assert max(order.index(q) for q in staging["now"]) < min(order.index(q) for q in staging["later"])


def test_a_rejected_query_is_readmitted_when_room_frees_and_the_alert_hooks_are_told(tmp_path):
    controller, store, _, alerts, clock = make(tmp_path, memory=13_000)  # big_orders does not fit at the minima
    cycle(controller, clock)
    assert store.statuses["big_orders"] == "rejected" and [e.kind for e in alerts.events] == ["query_rejected"]
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=200_000, dry_run="false", plan=PLAN, threshold=0.2))
    controller.reload(load_config(path))  # the operator adds memory: room has freed
    cycle(controller, clock)
    assert store.statuses["big_orders"] == "active" and "big_orders" in store.settings
    (event,) = [e for e in store.of("event") if e.kind == "query_admitted" and e.query == "big_orders"]
    assert event.message.startswith("re-admitted 'big_orders'") and event.details == {"readmitted": True}
    assert [e.kind for e in alerts.events] == ["query_rejected", "query_admitted"]


def test_a_reload_with_another_plan_forgets_the_feedback_ratios(tmp_path):
    import json

    from armd.control.feedback import FeedbackState, QueryFeedback

    controller, _, _, _, _ = make(tmp_path)
    measured = FeedbackState(queries={"clicks_per_view": QueryFeedback(memory=2.0, last_memory=2.0, memory_at=1.0)})
    controller.state = replace(controller.state, feedback=measured)
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=300_000, dry_run="false", plan=PLAN, threshold=0.2))
    controller.reload(load_config(path))  # only the bounds: what the plan's estimates miss is unchanged
    assert controller.state.feedback == measured
    plan = json.loads(PLAN.read_text())
    plan["streams"]["clicks"]["size"] = 128
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    path.write_text(CONFIG.format(memory=300_000, dry_run="false", plan=tmp_path / "plan.json", threshold=0.2))
    controller.reload(load_config(path))
    assert controller.state.feedback == FeedbackState()


def test_metrics_show_settings_in_force_and_recommended_and_lose_a_removed_query(tmp_path):
    import json

    from support import REPO
    from support.fakes import CONFIG

    from armd.daemon.metrics import Metrics

    controller, _, _, _, clock = make(tmp_path, dry_run=True)
    metrics = controller.metrics = Metrics(controller.config.model.time_unit_seconds)
    get = metrics.registry.get_sample_value
    cycle(controller, clock)
    # A dry run applies nothing: every query has recommended settings, none in force.
    queries = {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert all(0 < get("armd_query_recommended_qos_ratio", {"query": q}) <= 1 for q in queries)
    assert all(get("armd_query_qos_ratio", {"query": q}) is None for q in queries)
    doc = json.loads((REPO / "config" / "plans" / "example.json").read_text())
    del doc["queries"]["big_orders"]
    (tmp_path / "plan.json").write_text(json.dumps(doc))
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=200_000, dry_run="true", plan=tmp_path / "plan.json", threshold=0.2))
    controller.reload(load_config(path))
    clock.advance(1)
    cycle(controller, clock)
    names = {s.name for m in metrics.registry.collect() for s in m.samples if s.labels.get("query") == "big_orders"}
    assert names == set()
    assert get("armd_query_recommended_qos_ratio", {"query": "clicks_per_view"}) is not None
