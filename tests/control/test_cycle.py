"""The pure control cycle: a snapshot in, estimates, a decision, staging and desired settings out.

Every input is a plain value (no store, no source, no clock), so each test
states the situation and checks what one tick decides. The configurations
are the shared example plan (``support.fakes``) and the three-way JISC join
of ``support.jisc_plan``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from support.fakes import CONFIG, PLAN
from support.jisc_plan import PLAN as JISC_PLAN
from support.jisc_plan import first_pair

from armd.control.cycle import Changes, Snapshot, decide, initial_state, observe, orders_for_model
from armd.control.model import Migrations, build_model
from armd.control.ports import Observation, QueryMetrics, StreamStats
from armd.daemon.config import load_config
from armd.daemon.setup import setup_of, trigger_rules
from armd.policies.migration_cost import Exchange
from armd.policies.triggers import TriggerRules

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
QUERIES = ("clicks_per_view", "clicks_per_second", "big_orders")


def example(tmp_path, memory=200_000, dry_run=False):
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=memory, dry_run=str(dry_run).lower(), plan=PLAN, threshold=0.2))
    config = load_config(path)
    setup = setup_of(config, join_orders=False)
    return setup, build_model(setup, {}, {}, {}), initial_state(trigger_rules(config))


def ids():
    n = iter(range(1, 1000))
    return lambda: f"decision-{next(n)}"


def first(setup, model, state, **snapshot):
    """The first tick: every configured query is new."""
    return decide(setup, model, state, Snapshot(AT, 0.0, {}, changes=Changes(queries=True), **snapshot), make_id=ids())


def test_the_first_tick_admits_decides_and_desires_every_query(tmp_path):
    setup, model, state = example(tmp_path)
    tick = first(setup, model, state)
    assert [(a.query, a.admitted) for a in tick.admissions] == [(q, True) for q in QUERIES]
    assert tick.decision.trigger == "queries added or removed" and tick.decision.feasible
    assert tick.decision.id == tick.decision.outputs["decision_id"] == "decision-1"
    assert [d.query for d in tick.desired] == list(QUERIES)
    for row in tick.desired:
        assert (row.plan_version, row.may_start, row.recommend_only, row.decision_id, row.at) == (1, True, False, "decision-1", AT)
        assert row.settings == tick.changes[row.query][1] and row.join_order is None
    assert tick.estimates[-1].query is None
    assert tick.estimates[-1].memory_bytes == pytest.approx(tick.decision.estimated_memory_bytes)
    assert tick.state.last_decision_at == 0.0 and tick.state.status == {q: "active" for q in QUERIES}


def test_plan_versions_follow_the_previous_desired_ones(tmp_path):
    setup, model, state = example(tmp_path)
    earlier = first(setup, model, state)
    desired = {row.query: replace(row, plan_version=7) for row in earlier.desired}
    tick = first(setup, model, state, desired=desired)
    assert {row.plan_version for row in tick.desired} == {8}


def test_a_dry_run_desires_recommendations_only(tmp_path):
    setup, model, state = example(tmp_path, memory=100_000, dry_run=True)
    tick = first(setup, model, state, transient_memory=lambda q, old, new, memory: memory)
    assert tick.desired and all(row.recommend_only for row in tick.desired)
    assert not tick.guarded.apply and tick.decision.dry_run and not tick.decision.applied
    assert not [e for e in tick.events if e.kind == "migrations_staged"]


def test_without_a_trigger_nothing_is_decided_until_the_period_has_passed(tmp_path):
    setup, model, state = example(tmp_path)
    tick = first(setup, model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    quiet = decide(setup, model, tick.state, Snapshot(AT, 5.0, running))
    assert quiet.decision is None and quiet.desired == () and quiet.state == tick.state
    periodic = decide(setup, model, tick.state, Snapshot(AT, setup.decide_period, running))
    assert periodic.decision.trigger == "periodic" and periodic.desired == ()  # nothing moved: nothing to change


def test_changes_are_explicit_inputs(tmp_path):
    setup, model, state = example(tmp_path)
    tick = first(setup, model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    bounds = decide(setup, model, tick.state, Snapshot(AT, 1.0, running, changes=Changes(bounds=True)))
    assert bounds.decision.trigger == "bounds changed" and bounds.decision.inputs["changed_streams"] is None
    over = decide(setup, model, replace(tick.state, estimate_over=True), Snapshot(AT, 1.0, running))
    assert over.decision.trigger == "the estimate of the settings in force exceeds the bounds"
    assert over.state.estimate_over is False


def test_migrations_whose_extra_state_would_break_the_bound_may_not_start_yet(tmp_path):
    small, model, state = example(tmp_path, memory=100_000)
    before = first(small, model, state)
    running = {q: new for q, (_, new) in before.changes.items()}
    grown, model, _ = example(tmp_path, memory=300_000)  # the bound triples: every query grows, each migration holds its new state
    grown = replace(grown, migration=replace(grown.migration, exchange=Exchange()))  # every change goes through, unpriced
    tick = decide(grown, model, before.state, Snapshot(AT, 100.0, running, changes=Changes(bounds=True),
                                                       transient_memory=lambda q, old, new, memory: memory))
    waiting = {row.query for row in tick.desired if not row.may_start}
    assert waiting and waiting == set(tick.staging.later) and tick.staging.now
    assert [e.kind for e in tick.events] == ["migrations_staged"]


def test_an_admission_that_fails_is_a_failure_of_that_query_only(tmp_path):
    setup, model, state = example(tmp_path, memory=12_000)
    tick = first(setup, model, state)
    assert dict((a.query, a.admitted) for a in tick.admissions) == {"clicks_per_view": True, "clicks_per_second": True,
                                                                    "big_orders": False}
    assert "big_orders" not in [row.query for row in tick.desired]


def test_observe_smooths_rates_estimates_the_settings_in_force_and_watches(tmp_path):
    setup, model, state = example(tmp_path, memory=100_000)
    tick = first(setup, model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    observation = Observation(AT, [StreamStats("clicks", 200, 1.0, 200.0, 5.0), StreamStats("views", 25, 1.0, 25.0, 40.0)],
                              [QueryMetrics("clicks_per_view", 10, 500_000)])
    observed = observe(setup, model, tick.state, observation, at=AT, now=1.0, running=running, changed_at={}, migrating=frozenset())
    assert observed.state.rates.smoothed == {"clicks": 5.0, "views": 40.0}
    assert observed.estimates[-1].query is None and observed.state.estimate_over is (observed.estimates[-1].memory_bytes > 100_000)
    assert observed.measured == {"clicks_per_view": 500_000.0}
    assert [e.kind for e in observed.events] == ["bound_exceeded"]


# --- load shedding --------------------------------------------------------------------------------

SHEDDING_PLAN = {"streams": {"a": {"rate": 0.05, "size": 64}, "b": {"rate": 0.05, "size": 64}}, "queries": {
    "pairs": {"op": "join", "sel": 0.01, "inputs": [
        {"op": "window", "w": 60000, "inputs": [{"op": "source", "stream": "a"}]},
        {"op": "window", "w": 60000, "inputs": [{"op": "source", "stream": "b"}]}]}}}


def shedding_example(tmp_path, memory):
    (tmp_path / "plan.json").write_text(json.dumps(SHEDDING_PLAN))
    text = (CONFIG.split("[plan]")[0].format(memory=memory, dry_run="false", threshold=0.2).replace("cpu = 100", "cpu = 1e9")
            + '[plan]\nfile = "plan.json"\n[queries.pairs]\nwindow = [59000, 60000]\ndrop_rate = [0.0, 0.6]\n')
    path = tmp_path / "armd.toml"
    path.write_text(text)
    config = load_config(path)
    setup = setup_of(config, join_orders=False)
    return setup, build_model(setup, {}, {}, {}), initial_state(trigger_rules(config))


def test_a_query_whose_window_barely_moves_sheds_and_the_drop_rate_reaches_the_desired_settings(tmp_path):
    full = build_model(*shedding_example(tmp_path, 10**9)[:1], {}, {}, {}).full
    memory = float(full.evaluate([1.0], [1.0]).total_memory)
    setup, model, state = shedding_example(tmp_path, memory * 0.6)  # 0.9 reserve: 54 % of the full state usable
    tick = first(setup, model, state)
    (row,) = tick.desired
    assert 0.4 <= row.settings.drop_rate <= 0.6
    assert tick.decision.outputs["queries"]["pairs"]["applied"]["drop_rate"] == row.settings.drop_rate
    assert tick.estimates[-1].memory_bytes <= memory * 0.6 * 0.9
    # the same rates next time: the drop in force is read back, nothing changes
    running = {"pairs": row.settings}
    later = decide(setup, model, tick.state, Snapshot(AT, 100.0, running, changes=Changes(queries=True)), make_id=ids())
    assert later.changes == {} and later.desired == ()


# --- join orders ---------------------------------------------------------------------------------

JISC_CONFIG = """
[store]
url = "sqlite:///unused.db"
[model]
time_unit_seconds = 1
[bounds]
memory_bytes = 1e12
cpu = 1e12
[guardrails]
dry_run = {dry_run}
[source]
kind = "spark"
[spark]
state_store = "rocksdb"
[managed.triple]
builder = "armd.adapters.spark.builders:multiway_join"
nodes = {{ w = "t_wa" }}
[managed.triple.join_order]
order = ["a", "c", "b"]
control = "{tmp}/order.json"
cooldown_seconds = 30
[plan]
file = "plan.json"
"""
CONFIGURED = (("a", "c"), "b")


def jisc(tmp_path, dry_run=False):
    (tmp_path / "plan.json").write_text(json.dumps(JISC_PLAN))
    path = tmp_path / "armd.toml"
    path.write_text(JISC_CONFIG.format(tmp=tmp_path, dry_run=str(dry_run).lower()))
    config = load_config(path)
    setup = setup_of(config, join_orders=True)
    model = build_model(setup, {}, {"triple": CONFIGURED}, {})
    state = replace(initial_state(TriggerRules(0.0, 0.2)), status={"triple": "active"}, last_decision_at=0.0)
    state = replace(state, rates=replace(state.rates, smoothed={"a": 0.5, "b": 0.5, "c": 0.125}).decide_with())
    running = {"triple": first(setup, model, initial_state(TriggerRules(0.0, 0.2))).changes["triple"][1]}
    return setup, model, state, running


def test_a_cheaper_join_order_goes_through_the_decision_into_the_desired_settings(tmp_path):
    setup, model, state, running = jisc(tmp_path)
    tick = decide(setup, model, state, Snapshot(AT, 10.0, running, orders={"triple": (0, CONFIGURED)}))
    (change,) = tick.join_orders
    assert change.epoch == 1 and first_pair(change.new) == {"a", "b"} and change.details["old_order"] == [["a", "c"], "b"]
    assert tick.decision.trigger == "join order of 'triple' changed" and "triple" in tick.decision.outputs["join_orders"]
    (row,) = tick.desired
    assert row.join_order == change.new and row.may_start and not row.recommend_only and row.plan_version == 1
    assert tick.model.orders == {"triple": change.new}  # the decision estimates the order it asks for
    assert tick.state.join_states["triple"].last_migration == 10.0
    held = decide(setup, tick.model, tick.state, Snapshot(AT, 20.0, running, orders={"triple": (1, change.new)},
                                                          desired={"triple": row}))
    assert held.join_orders == () and held.desired == ()  # in force, and the cool-down holds any other change


def test_a_dry_run_recommends_a_join_order_and_keeps_estimating_the_one_in_force(tmp_path):
    setup, model, state, running = jisc(tmp_path, dry_run=True)
    tick = decide(setup, model, state, Snapshot(AT, 10.0, running, orders={"triple": (0, CONFIGURED)}))
    (change,) = tick.join_orders
    (row,) = tick.desired
    assert row.recommend_only and row.join_order == change.new and not tick.guarded.apply
    assert tick.model.orders == {"triple": CONFIGURED}
    assert orders_for_model({"triple": (0, CONFIGURED)}, {"triple": row}) == {"triple": CONFIGURED}


def test_an_unreadable_control_file_is_a_failure_once_the_query_runs(tmp_path):
    setup, model, state, running = jisc(tmp_path)
    error = ValueError("order.json: epoch must be an integer")
    tick = decide(setup, model, state, Snapshot(AT, 10.0, running, unreadable_orders={"triple": error}))
    (failure,) = tick.failures
    assert (failure.kind, failure.query, failure.error) == ("join_order_failed", "triple", error)
    assert "order.json" in failure.message
    idle = decide(setup, model, state, Snapshot(AT, 10.0, {}, unreadable_orders={"triple": error}))
    assert idle.failures == ()  # not running yet: nothing to choose


def test_the_cycle_imports_no_io_library():
    code = ("import sys, armd.control.cycle, armd.control.watchers; "
            "print(sorted(m for m in ('sqlalchemy', 'structlog', 'pyspark', 'apscheduler') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def priced(setup, per_bound_second):
    """``setup`` migrating with GenMig, extra state priced at ``per_bound_second`` QoS units."""
    return replace(setup, migration=Migrations("genmig", Exchange(per_bound_second, 0.0), {}))


def test_a_gain_too_small_for_its_migration_is_not_applied_and_the_record_says_why(tmp_path):
    small, model, state = example(tmp_path, memory=100_000)
    before = first(small, model, state)
    running = {q: new for q, (_, new) in before.changes.items()}
    # More room: clicks_per_view may grow, with room for its GenMig transient too (control/pricing.transient_fit)
    grown, model, _ = example(tmp_path, memory=200_000)
    cheap = decide(priced(grown, 0.0), model, before.state, Snapshot(AT, 100.0, running, changes=Changes(bounds=True)))
    assert "clicks_per_view" in cheap.changes  # free migrations: the growth goes through
    dear = decide(priced(grown, 10.0), model, before.state, Snapshot(AT, 100.0, running, changes=Changes(bounds=True)))
    assert "clicks_per_view" not in dear.changes and "clicks_per_view" not in [r.query for r in dear.desired]
    cost = dear.decision.outputs["migration_cost"]["clicks_per_view"]
    assert cost["verdict"] == "vetoed" and 0 < cost["gain"] < cost["price"] and cost["strategy"] == "genmig"
    assert cost["extra_state_bytes"] == pytest.approx(before.estimates[0].memory_bytes)  # the old plan's state, held
    assert dear.decision.outputs["queries"]["clicks_per_view"]["applied"] == running["clicks_per_view"].as_json()


def test_a_cut_the_bounds_require_is_never_priced_away(tmp_path):
    large, model, state = example(tmp_path, memory=200_000)
    before = first(large, model, state)
    running = {q: new for q, (_, new) in before.changes.items()}
    cut, model, _ = example(tmp_path, memory=60_000)  # the settings in force no longer fit
    tick = decide(priced(cut, 1e6), model, before.state, Snapshot(AT, 100.0, running, changes=Changes(bounds=True)))
    assert tick.changes and tick.decision.estimated_memory_bytes <= 60_000 * 0.9
    verdicts = {q: c["verdict"] for q, c in tick.decision.outputs["migration_cost"].items()}
    assert set(tick.changes) <= {q for q, v in verdicts.items() if v in ("required", "applied")}
    assert "required" in verdicts.values()


def test_an_estimate_over_the_bounds_does_not_redecide_while_the_last_decision_is_still_being_put_into_force(tmp_path):
    """Re-deciding each second on noisy rates while the migrations wait would only move their target."""
    setup, model, state = example(tmp_path)
    tick = first(setup, model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    query = next(iter(running))
    smaller = replace(running[query], windows={n: w / 2 for n, w in running[query].windows.items()})
    pending = {query: replace(tick.desired[0], query=query, settings=smaller, plan_version=2)}
    waiting = decide(setup, model, replace(tick.state, estimate_over=True), Snapshot(AT, 1.0, running, desired=pending))
    assert waiting.decision is None
    put = decide(setup, model, replace(tick.state, estimate_over=True),
                 Snapshot(AT, 1.0, {**running, query: smaller}, desired=pending))
    assert put.decision.trigger == "the estimate of the settings in force exceeds the bounds"


def test_shrinks_is_a_cut_of_windows_only():
    from armd.control.model import shrinks
    from armd.control.ports import QuerySettings

    old = QuerySettings(1.0, 0.0, {"w": 30.0, "v": 10.0}, None, 1.0)
    assert shrinks(old, replace(old, windows={"w": 20.0, "v": 10.0}))
    assert not shrinks(old, old) and not shrinks(None, old)
    assert not shrinks(old, replace(old, windows={"w": 20.0, "v": 11.0}))
    assert not shrinks(old, replace(old, windows={"w": 20.0, "v": 10.0}, drop_rate=0.1))


def test_holds_no_more_allows_a_coarser_slide_and_more_shedding_but_nothing_larger():
    from armd.control.model import holds_no_more
    from armd.control.ports import QuerySettings

    old = QuerySettings(1.0, 1.0, {"w": 30.0, "v": 10.0}, 1000.0, 1.0)
    assert holds_no_more(old, old) and not holds_no_more(None, old)
    assert holds_no_more(old, replace(old, windows={"w": 20.0, "v": 10.0}, granularity=2000.0, drop_rate=0.1))
    assert not holds_no_more(old, replace(old, windows={"w": 20.0, "v": 11.0}))
    assert not holds_no_more(old, replace(old, granularity=500.0)) and not holds_no_more(old, replace(old, granularity=None))
    assert not holds_no_more(replace(old, drop_rate=0.2), old)
    assert not holds_no_more(old, replace(old, windows={"w": 20.0}))


# --- the cut reserve after a step down ------------------------------------------------------------

TWO_SUMS = {"streams": {"a": {"d": 20, "size": 64}, "b": {"d": 20, "size": 64}}, "queries": {
    "sum_a": {"op": "aggregate", "inputs": [{"op": "window", "id": "wa", "w": 30000, "inputs": [{"op": "source", "stream": "a"}]}]},
    "sum_b": {"op": "aggregate", "inputs": [{"op": "window", "id": "wb", "w": 30000, "inputs": [{"op": "source", "stream": "b"}]}]}}}


def test_the_growth_after_a_step_down_is_not_capped_by_the_cut_reserve(tmp_path):
    """Forecasting with live migrations keeps a cut reserve; while a stream's state drains after its rate stepped down
    (the end of a burst) the growth back is decided on the whole bound, once, not in two steps."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(TWO_SUMS))
    (tmp_path / "armd.toml").write_text(f"""
[store]
url = "sqlite:///unused.db"
[bounds]
memory_bytes = 230000
cpu = 1000000
reserve = 0.1
[schedule]
observe_seconds = 1
decide_seconds = 30
[forecast]
enabled = true
[plan]
file = "{plan}"
[queries.sum_a]
window = [5000, 30000]
[queries.sum_b]
window = [5000, 30000]
weight = 100
""")
    config = load_config(tmp_path / "armd.toml")
    setup = setup_of(config, join_orders=False)
    setup = replace(setup, migration=replace(setup.migration, strategy="genmig", timings={q: (2.0, 1.0) for q in ("sum_a", "sum_b")}))
    model, state = build_model(setup, {}, {}, {}), initial_state(trigger_rules(config))
    tick = first(setup, model, state)
    state, maxima = tick.state, {q: new for q, (_, new) in tick.changes.items()}
    # sum_a was cut to its minimum in a burst of "a" (200/s), sum_b kept its maximum; each holds its window's elements
    running = {"sum_a": replace(maxima["sum_a"], fw=0.0, windows={"wa": 5000.0}, qos=0.0), "sum_b": maxima["sum_b"]}
    assert maxima["sum_b"].windows == {"wb": 30000.0}
    changed = {"sum_a": -1e9, "sum_b": -1e9}

    def seen(state, now, rate_a):
        observation = Observation(AT, [StreamStats("a", rate_a, 1.0, float(rate_a), 1000.0 / rate_a),
                                       StreamStats("b", 50, 1.0, 50.0, 20.0)],
                                  [QueryMetrics("sum_a", rate_a * 5, rate_a * 5 * 64), QueryMetrics("sum_b", 1500, 1500 * 64)])
        return observe(setup, model, state, observation, at=AT, now=now, running=running, changed_at=changed,
                       migrating=frozenset()).state

    for second in range(1, 20):
        state = seen(state, second * 1000.0, 200)
    state = decide(setup, model, state, Snapshot(AT, 19_000.0, running, changed_at=changed), make_id=ids()).state
    state = seen(state, 20_000.0, 50)  # the burst ends: a step down
    assert state.feedback.fell_at == {"a": 20_000.0}
    after = decide(setup, model, state, Snapshot(AT, 20_000.0, running, changed_at=changed), make_id=ids())
    held = decide(setup, model, replace(state, feedback=replace(state.feedback, fell_at={})),
                  Snapshot(AT, 20_000.0, running, changed_at=changed), make_id=ids())
    grown, capped = (t.changes["sum_a"][1].windows for t in (after, held))
    assert max(grown.values()) > max(capped.values()) > 5000.0


def test_a_cut_still_waiting_is_kept_by_the_next_decision_while_the_measured_state_is_over_the_bound(tmp_path):
    """A decision while a cut waits for its query's migration would take the cut back when the estimates allow
    (here: the bounds doubled); while the measured state is over the bound it keeps it, and the record says so."""
    setup, model, state = example(tmp_path, memory=100_000)
    tick = first(setup, model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    query = "clicks_per_view"
    cut = replace(running[query], windows={n: w / 2 for n, w in running[query].windows.items()},
                  fw=running[query].fw / 2)
    pending = {query: replace(next(d for d in tick.desired if d.query == query), settings=cut, plan_version=2)}
    roomy, model, _ = example(tmp_path, memory=200_000)

    def decided(measured):
        after = replace(tick.state, feedback=replace(tick.state.feedback, measured_total=measured))
        return decide(roomy, model, after, Snapshot(AT, 100.0, running, changes=Changes(bounds=True), desired=pending))

    under = decided(150_000.0)
    assert under.decision.outputs["queries"][query]["applied"]["fw"] > cut.fw  # the cut is no longer needed
    over = decided(250_000.0)
    applied = over.decision.outputs["queries"][query]
    assert applied["applied"]["fw"] <= cut.fw and applied["guardrail"].startswith("pending cut kept")
    assert over.decision.outputs["kept"] == [query]


def test_the_measured_total_is_every_querys_newest_report_when_applications_report_apart(tmp_path):
    """Agents report on rounds of their own: an observation holding one application's queries is not the fleet's state."""
    setup, model, state = example(tmp_path, memory=100_000)
    tick = first(setup, model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    streams = [StreamStats("clicks", 200, 1.0, 200.0, 5.0), StreamStats("views", 25, 1.0, 25.0, 40.0)]
    one = observe(setup, model, tick.state, Observation(AT, streams, [QueryMetrics("clicks_per_view", 10, 60_000)]),
                  at=AT, now=1.0, running=running, changed_at={}, migrating=frozenset())
    assert one.state.feedback.measured_total == 60_000 and not one.events
    later = AT.replace(second=1)
    two = observe(setup, model, one.state, Observation(later, streams, [QueryMetrics("big_orders", 10, 50_000)]),
                  at=later, now=2.0, running=running, changed_at={}, migrating=frozenset())
    assert two.measured == {"big_orders": 50_000.0}
    assert two.state.feedback.measured_total == 110_000
    exceeded = [e for e in two.events if e.kind == "bound_exceeded"]
    assert len(exceeded) == 1 and exceeded[0].details["queries"] == {"clicks_per_view": 60_000.0, "big_orders": 50_000.0}


def test_while_the_measured_state_is_over_a_cut_of_a_query_whose_rate_stepped_up_goes_to_its_minimum_window(tmp_path):
    """Live migrations (GenMig): with the measured state over the bound and the rate of ``clicks`` stepped up a moment
    ago, the cut the tighter bound needs of ``clicks_per_view`` goes to its minimum window, and the record says why;
    without the step, or after a step of a stream it does not read, it is the decided cut."""
    setup, model, state = example(tmp_path, memory=100_000)
    live = replace(setup.migration, strategy="genmig", timings={q: (2.0, 1.0) for q in QUERIES})
    tick = first(replace(setup, migration=live), model, state)
    running = {q: new for q, (_, new) in tick.changes.items()}
    tight, model, _ = example(tmp_path, memory=70_000)
    tight = replace(tight, migration=live)

    def decided(stepped_at):
        feedback = replace(tick.state.feedback, measured_total=90_000.0, stepped_at=stepped_at)
        return decide(tight, model, replace(tick.state, feedback=feedback),
                      Snapshot(AT, 100.0, running, changes=Changes(bounds=True))).decision.outputs

    for unrelated in ({}, {"orders": 99.0}):
        plain = decided(unrelated)
        assert 0 < plain["queries"]["clicks_per_view"]["applied"]["fw"] < running["clicks_per_view"].fw
        assert plain["deepened"] == []
    stepped = decided({"clicks": 99.0})
    deep = stepped["queries"]["clicks_per_view"]
    assert deep["applied"]["fw"] == 0.0 and deep["guardrail"].startswith("cut deeper (to the minimum window")
    assert stepped["deepened"] == ["clicks_per_view"]
