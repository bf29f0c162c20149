"""The closed loop: measured state corrects the estimates the cycle decides on (``control/feedback.py``).

Pure: every tick is driven with plain values on the shared example plan
(``support.fakes``), the measurements made up as multiples of the model's own
estimate, so each test states how wrong the model is and checks what the
cycle does about it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from support.fakes import CONFIG, PLAN

from armd.control import feedback
from armd.control.cycle import Changes, Snapshot, decide, initial_state, observe
from armd.control.feedback import FeedbackRules, FeedbackState
from armd.control.model import build_model, estimate_rows, fractions_of
from armd.control.ports import BatchProgress, Observation, QueryMetrics, StreamStats
from armd.daemon.config import load_config
from armd.daemon.setup import setup_of, trigger_rules

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
RULES = FeedbackRules(window=60.0)
LATER = 200_000.0
"""Model time (ms) long after the first decision: every window (60 s at most) has filled since."""


def example(tmp_path, memory=200_000):
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=memory, dry_run="false", plan=PLAN, threshold=0.2))
    config = load_config(path)
    setup = setup_of(config, join_orders=False)
    return setup, build_model(setup, {}, {}, {}), initial_state(trigger_rules(config))


def started(setup, model, state):
    """The first tick (every query new) and the settings it put in force."""
    tick = decide(setup, model, state, Snapshot(AT, 0.0, {}, changes=Changes(queries=True)))
    return tick.state, {q: new for q, (_old, new) in tick.changes.items()}


def raw_estimates(model, state, running):
    problem = model.problem_of(state.admitted(model))
    return {r.query: r.memory_bytes for r in estimate_rows(problem, *fractions_of(problem, running), model.current_d(state.rates))
            if r.query is not None}


def measure(setup, model, state, running, factor, now=LATER):
    """Observe state ``factor`` × the model's estimate of what runs, every window filled long ago."""
    estimated = raw_estimates(model, state, running)
    queries = tuple(QueryMetrics(q, state_bytes=int(factor * m)) for q, m in estimated.items())
    at = AT + timedelta(milliseconds=now)
    return observe(setup, model, state, Observation(at, (), queries), at=at, now=now, running=running, changed_at={},
                   migrating=frozenset())


def test_ratios_are_smoothed_over_time_not_per_observation():
    state, _ = feedback.observe(FeedbackState(), RULES, at=AT, now=0.0, measured={"q": 200.0}, estimated={"q": 100.0},
                                steady={"q"}, usable=1e9, bound=1e9)
    assert state.queries["q"].memory == 2.0  # the first measurement is taken as it is
    once, _ = feedback.observe(state, RULES, at=AT, now=60.0, measured={"q": 100.0}, estimated={"q": 100.0},
                               steady={"q"}, usable=1e9, bound=1e9)
    assert once.queries["q"].memory == pytest.approx(2.0 - (1 - math.exp(-1)))  # one time constant later
    often = state
    for k in range(1, 61):  # the same minute in sixty observations: the same smoothing
        often, _ = feedback.observe(often, RULES, at=AT, now=float(k), measured={"q": 100.0}, estimated={"q": 100.0},
                                    steady={"q"}, usable=1e9, bound=1e9)
    assert often.queries["q"].memory == pytest.approx(once.queries["q"].memory)


def test_only_steady_observations_count_and_ratios_are_clamped():
    state, _ = feedback.observe(FeedbackState(), RULES, at=AT, now=0.0, measured={"q": 900.0, "m": 5.0},
                                estimated={"q": 100.0, "m": 100.0}, steady={"m"}, usable=1e9, bound=1e9)
    assert "q" not in state.queries  # migrating or still filling: not a steady state to compare with
    assert state.queries["m"].memory == RULES.min_ratio


def test_measured_state_over_the_bound_forces_a_cut_the_raw_model_calls_unnecessary(tmp_path):
    setup, model, state = example(tmp_path)
    state, running = started(setup, model, state)
    raw_total = sum(raw_estimates(model, state, running).values())
    assert raw_total <= setup.bounds.usable_memory  # the model says what runs fits
    observed = measure(setup, model, state, running, factor=2.0)
    assert observed.state.feedback.over_since == LATER

    without = replace(setup, feedback=FeedbackRules(enabled=False))
    blind = measure(without, model, state, running, factor=2.0)
    assert decide(without, model, blind.state, Snapshot(AT, LATER, running)).decision.trigger == "periodic"

    tick = decide(setup, model, observed.state, Snapshot(AT, LATER, running))
    assert tick.decision.trigger.startswith("measured state") and "over the usable memory bound" in tick.decision.trigger
    factors = tick.decision.inputs["feedback"]["factors"]
    assert factors["clicks_per_view"]["memory"] == pytest.approx(2.0, rel=1e-3)
    assert tick.changes, "the decision must cut"
    new = {q: s for q, (_old, s) in tick.changes.items()}
    assert sum(raw_estimates(model, state, {**running, **new}).values()) < raw_total
    assert tick.decision.estimated_memory_bytes >= sum(raw_estimates(model, state, {**running, **new}).values()) * 1.99
    assert not tick.state.feedback.due and tick.state.feedback.over_decided
    # Decided once for this time over the bound: the next tick has no new reason.
    assert feedback.trigger(tick.state.feedback) is None


def test_migrations_are_staged_against_measured_headroom(tmp_path):
    setup, model, state = example(tmp_path)
    state, running = started(setup, model, state)
    observed = measure(setup, model, state, running, factor=2.0)
    transient = lambda query, old, new, memory: memory  # noqa: E731 - a migration holds its new state once more
    tick = decide(setup, model, observed.state, Snapshot(AT, LATER, running, transient_memory=transient))
    measured = observed.state.feedback.measured_total
    assert tick.staging.held >= measured
    assert tick.decision.inputs["feedback"]["held_bytes"] >= measured
    # Over the bound already: not two migrations together; each holds its corrected (×2) new state extra.
    assert len(tick.staging.now) == 1 and tick.staging.over_bound
    query = tick.staging.now[0]
    assert tick.staging.extra[query] == pytest.approx(tick.decision.outputs["queries"][query]["estimated_memory_bytes"])


def test_an_adaptation_that_does_not_hold_the_bound_is_reported_recalibrated_and_tightened(tmp_path):
    setup, model, state = example(tmp_path)
    state, running = started(setup, model, state)
    settled = measure(setup, model, state, running, factor=1.0, now=100_000.0)  # the model is right so far
    tick = decide(setup, model, settled.state, Snapshot(AT, 100_000.0, running))  # periodic: promises the bound holds
    promise = tick.state.feedback.expectation
    assert promise is not None and promise.hold_at <= 100_000.0

    # The keys drift: the state triples while the smoothed ratio has barely moved (one observation, 1 s later).
    observed = measure(setup, model, tick.state, running, factor=3.0, now=101_000.0)
    (event,) = [e for e in observed.events if e.kind == "adaptation_ineffective"]
    assert event.severity == "warning" and event.details["measured"] > setup.bounds.memory
    assert event.details["predicted"] == pytest.approx(promise.predicted) and event.details["since"] == promise.since.isoformat()
    loop = observed.state.feedback
    assert loop.queries["clicks_per_view"].memory == pytest.approx(3.0, rel=1e-3)  # recalibrated at once, not smoothed
    assert loop.expectation is None and feedback.trigger(loop).startswith("the last adaptation was ineffective")

    tighter = decide(setup, model, observed.state, Snapshot(AT, 101_000.0, running))
    assert tighter.decision.trigger.startswith("the last adaptation was ineffective")
    assert tighter.changes and tighter.decision.estimated_memory_bytes <= setup.bounds.usable_memory
    again = measure(setup, model, tighter.state, running, factor=3.0, now=102_000.0)
    assert not [e for e in again.events if e.kind == "adaptation_ineffective"]  # the new settings are not in force yet


def test_no_check_while_a_query_is_not_steady(tmp_path):
    setup, model, state = example(tmp_path)
    state, running = started(setup, model, state)
    tick = decide(setup, model, measure(setup, model, state, running, 1.0, now=100_000.0).state, Snapshot(AT, 100_000.0, running))
    estimated = raw_estimates(model, tick.state, running)
    queries = tuple(QueryMetrics(q, state_bytes=int(3 * m)) for q, m in estimated.items())
    at = AT + timedelta(seconds=101)
    observed = observe(setup, model, tick.state, Observation(at, (), queries), at=at, now=101_000.0, running=running,
                       changed_at={}, migrating=frozenset({"clicks_per_view"}))
    assert not [e for e in observed.events if e.kind == "adaptation_ineffective"]


def test_a_rejected_query_is_readmitted_when_room_frees(tmp_path):
    setup, model, state = example(tmp_path, memory=13_000)  # usable 11,700 B; all three at their minimum need 14,716 B
    tick = decide(setup, model, state, Snapshot(AT, 0.0, {}, changes=Changes(queries=True)))
    assert [(a.query, a.admitted) for a in tick.admissions] == [
        ("clicks_per_view", True), ("clicks_per_second", True), ("big_orders", False)]
    running = {q: new for q, (_old, new) in tick.changes.items()}
    # The window holds a quarter of what the model assumes: the room is there.
    observed = measure(setup, model, tick.state, running, factor=0.25)
    again = decide(setup, model, observed.state, Snapshot(AT, LATER, running))
    (verdict,) = again.admissions
    assert verdict.query == "big_orders" and verdict.admitted and verdict.reason.startswith("re-admitted 'big_orders'")
    assert again.readmitted == ("big_orders",) and again.state.status["big_orders"] == "active"
    assert "big_orders" in again.decision.inputs["queries"] and "big_orders" in {r.query for r in again.desired}


def test_without_room_a_rejected_query_stays_rejected(tmp_path):
    setup, model, state = example(tmp_path, memory=13_000)
    tick = decide(setup, model, state, Snapshot(AT, 0.0, {}, changes=Changes(queries=True)))
    running = {q: new for q, (_old, new) in tick.changes.items()}
    again = decide(setup, model, measure(setup, model, tick.state, running, factor=1.0).state, Snapshot(AT, LATER, running))
    assert again.admissions == () and again.state.status["big_orders"] == "rejected"


def test_a_correction_scales_each_querys_estimates_and_the_totals(tmp_path):
    setup, model, _state = example(tmp_path)
    problem = model.full
    n = len(problem.queries)
    raw = problem.evaluate(np.full(n, 0.5), np.full(n, 0.5), model.plan_d)
    memory, cpu = np.array([2.0, 1.0, 0.5]), np.array([1.0, 3.0, 1.0])
    scaled = problem.corrected(memory, cpu).evaluate(np.full(n, 0.5), np.full(n, 0.5), model.plan_d)
    assert np.allclose(scaled.query_memory, raw.query_memory * memory) and np.allclose(scaled.query_cpu, raw.query_cpu * cpu)
    assert scaled.total_memory == pytest.approx(raw.total_memory + ((memory - 1) * raw.query_memory).sum())
    sub = problem.corrected(memory, cpu).subproblem(np.array([0, 2]))
    assert np.array_equal(sub.memory_scale, [2.0, 0.5])
    with pytest.raises(ValueError, match="one finite factor > 0 per query"):
        problem.corrected(np.array([1.0, 0.0, 1.0]), cpu)


def test_cpu_is_corrected_from_batch_durations_only_when_asked():
    streams = (StreamStats("s", 10, 1.0, 10.0, 100.0),)
    batches = tuple(BatchProgress("q", "run", i, AT, 5, ms) for i, ms in enumerate((200, 300)))
    busy = feedback.measured_cpu(Observation(AT, streams, (), batches), unit_seconds=0.001)
    assert busy == {"q": pytest.approx(0.5 / 1000)}  # seconds of batches per millisecond observed
    args = dict(at=AT, now=0.0, measured={"q": 100.0}, estimated={"q": 100.0}, steady={"q"}, usable=1e9, bound=1e9,
                cpu_measured=busy, cpu_estimated={"q": 0.5 / 4000})
    assert feedback.observe(FeedbackState(), RULES, **args)[0].queries["q"].cpu == 1.0  # estimates not in seconds: left alone
    calibrated = replace(RULES, cpu=True)
    assert feedback.observe(FeedbackState(), calibrated, **args)[0].queries["q"].cpu == pytest.approx(4.0)


def test_feedback_disabled_leaves_everything_as_the_model_says():
    off = FeedbackRules(enabled=False)
    state, events = feedback.observe(FeedbackState(), off, at=AT, now=0.0, measured={"q": 900.0}, estimated={"q": 100.0},
                                     steady={"q"}, usable=10.0, bound=10.0)
    assert state == FeedbackState() and events == [] and feedback.trigger(state) is None
    assert feedback.factors(state, off, ["q"])[0].tolist() == [1.0]


def test_a_crossing_within_the_arrivals_noise_is_no_reason_to_cut():
    args = dict(at=AT, now=0.0, measured={"q": 10_400.0}, estimated={"q": 10_000.0}, steady={"q"}, usable=10_000.0,
                bound=11_000.0)
    # 100 rows: two standard deviations are 20 % of the state; 4 % over is noise.
    assert feedback.observe(FeedbackState(), RULES, rows=100, **args)[0].over_since is None
    assert feedback.observe(FeedbackState(), RULES, rows=1_000_000, **args)[0].over_since == 0.0
    assert feedback.observe(FeedbackState(), RULES, **args)[0].over_since == 0.0  # rows not counted: no margin


def test_a_filling_window_gives_a_provisional_ratio_against_the_state_that_can_exist_so_far():
    """Bytes per row 2× the model's: half a window in, the state is what the model expects of a full one. The ratio is
    measured against half the estimate (2, not 1) and replaced by the first steady ratio."""
    args = dict(at=AT, estimated={"q": 100.0}, steady=set(), usable=1e9, bound=1e9)
    early, _ = feedback.observe(FeedbackState(), RULES, now=1.0, measured={"q": 20.0}, filling={"q": 0.1}, **args)
    assert early.queries["q"].memory_at is None  # a tenth of a window: too few rows to say anything
    half, _ = feedback.observe(FeedbackState(), RULES, now=5.0, measured={"q": 100.0}, filling={"q": 0.5}, **args)
    assert half.queries["q"].memory == pytest.approx(2.0) and half.queries["q"].provisional
    steady, _ = feedback.observe(half, RULES, now=6.0, measured={"q": 180.0}, **{**args, "steady": {"q"}})
    assert steady.queries["q"].memory == pytest.approx(1.8) and not steady.queries["q"].provisional


def test_the_factor_rises_within_seconds_and_falls_over_the_window():
    state = replace(FeedbackState(), queries={"q": feedback.QueryFeedback(memory=1.0, memory_at=0.0)})
    args = dict(at=AT, estimated={"q": 100.0}, steady={"q"}, usable=1e9, bound=1e9)
    up, _ = feedback.observe(state, RULES, now=5.0, measured={"q": 200.0}, **args)  # one rise time constant (5)
    assert up.queries["q"].memory == pytest.approx(1.0 + (1 - math.exp(-1)))
    down, _ = feedback.observe(replace(state, queries={"q": feedback.QueryFeedback(memory=2.0, memory_at=0.0)}), RULES,
                               now=5.0, measured={"q": 100.0}, **args)
    assert down.queries["q"].memory == pytest.approx(2.0 - (1 - math.exp(-5 / 60)))
    noise, _ = feedback.observe(state, RULES, now=5.0, measured={"q": 110.0}, **args)  # within the dead band: slow
    assert noise.queries["q"].memory == pytest.approx(1.0 + 0.1 * (1 - math.exp(-5 / 60)))


def test_no_over_bound_trigger_while_a_migration_holds_both_plans_and_any_ratio_floors_the_factor_when_over():
    args = dict(at=AT, now=0.0, measured={"q": 900.0}, estimated={"q": 100.0}, steady=set(), usable=500.0, bound=600.0)
    during, _ = feedback.observe(FeedbackState(), RULES, migrating=True, **args)
    assert during.over_since is None and feedback.trigger(during) is None
    after, _ = feedback.observe(FeedbackState(), RULES, stepped={"q"}, **args)  # a rate step: no steady ratio, but over
    assert feedback.trigger(after) is not None
    assert feedback.factors(after, RULES, ["q"])[0].tolist() == [RULES.max_ratio if 9.0 > RULES.max_ratio else 9.0]


def test_a_window_turning_over_since_a_step_is_projected_from_its_growth():
    """Keys that drift: a count per key held 60 kB at the step; 12 s into its 20 s window it holds 84 kB, so once the
    window has turned over it will hold 60 + 24 × 20/12 = 100 kB, though the model's estimate stays flat at 51 kB."""
    assert feedback.project((120.0, 60_000.0), 84_000.0, 132.0, 20.0) == pytest.approx(100_000.0)
    assert feedback.project((120.0, 60_000.0), 62_000.0, 123.0, 20.0) is None  # under a quarter of the window: noise
    assert feedback.project((120.0, 60_000.0), 99_000.0, 140.0, 20.0) is None  # turned over: the measurement itself
    args = dict(at=AT, now=132.0, measured={"q": 84_000.0}, estimated={"q": 51_000.0}, steady=set(), usable=80_000.0,
                bound=90_000.0, stepped={"q"})
    plain, _ = feedback.observe(FeedbackState(), RULES, **args)
    ahead, _ = feedback.observe(FeedbackState(), RULES, projected={"q": 100_000.0}, **args)
    assert feedback.factors(plain, RULES, ["q"])[0][0] == pytest.approx(84 / 51)
    assert feedback.factors(ahead, RULES, ["q"])[0][0] == pytest.approx(100 / 51)  # the cut is sized for where it goes


def test_at_a_rate_step_the_state_the_model_does_not_explain_is_assumed_to_grow_with_the_arrivals():
    """Keys that drift: a count per key held 1.3× its flat estimate (the 0.3 came with the arrivals: ids never seen
    before); at a ×4 step that excess is assumed ×4, so the decision at the step already cuts for about 2.2×, where
    the factor alone (1.3) left the next cut to the measurements 12 s later."""
    assert feedback.step_prior(1.3, 51_000.0, 51_000.0, 4.0) == pytest.approx(2.2)
    # The estimate grows with the rate too (a sum over the elements): the excess is a smaller share of it.
    assert feedback.step_prior(1.5, 25_000.0, 100_000.0, 4.0) is None  # 1 + 0.5 × 4 × ¼ = 1.5: no more than it has
    # An error every query of the stream shares (bytes per element 2×) follows the estimate: no prior from it.
    assert feedback.step_prior(2.0, 46_000.0, 46_000.0, 4.0, shared=2.0) is None
    assert feedback.step_prior(2.3, 46_000.0, 46_000.0, 4.0, shared=2.0) == pytest.approx(3.2)
    assert feedback.step_prior(1.3, 51_000.0, 51_000.0, 0.25) is None  # a fall: the factor stands
    assert feedback.step_prior(0.9, 51_000.0, 51_000.0, 4.0) is None  # over-estimated: nothing unexplained
    state = FeedbackState(queries={"q": feedback.QueryFeedback(memory=1.3, memory_at=0.0)}, prior={"q": (2.2, 121.0)})
    assert feedback.factors(state, RULES, ["q"])[0][0] == pytest.approx(2.2)


def test_an_estimate_over_the_bounds_waits_for_a_filling_querys_first_ratio_unless_measured_state_is_over():
    """Warm-up of a plan whose bytes per row is 2×: one query's ratio is known, the other's is seconds away; deciding
    now cuts too little and the next decision cuts the same queries again (two migrations each)."""
    rules = RULES
    assert feedback.waiting(FeedbackState(unmeasured=frozenset({"q"})), rules)
    assert not feedback.waiting(FeedbackState(unmeasured=frozenset({"q"}), over_since=5.0), rules)  # over: cut now
    assert not feedback.waiting(FeedbackState(), rules)
    assert not feedback.waiting(FeedbackState(unmeasured=frozenset({"q"})), replace(rules, enabled=False))


def test_decisions_aim_one_standard_deviation_of_the_arrivals_noise_under_the_usable_bound():
    """10,000 rows of 20 B: the measured total's noise is 1 % (one σ = 2,000 B), so the usable bound aimed at is
    2,000 B lower; without counted rows, or with feedback off, the bounds are the configured ones."""
    from armd.policies.problem import Bounds

    bounds = Bounds(memory=250_000.0, cpu=1.0, reserve=0.2)
    args = dict(at=AT, now=0.0, measured={"q": 200_000.0}, estimated={"q": 200_000.0}, steady={"q"}, usable=200_000.0,
                bound=250_000.0)
    counted, _ = feedback.observe(FeedbackState(), RULES, rows=10_000, **args)
    assert counted.spread == pytest.approx(2_000.0)
    assert feedback.with_margin(bounds, counted, RULES).usable_memory == pytest.approx(198_000.0)
    uncounted, _ = feedback.observe(FeedbackState(), RULES, **args)
    assert feedback.with_margin(bounds, uncounted, RULES) is bounds
    assert feedback.with_margin(bounds, counted, replace(RULES, enabled=False)) is bounds


def test_in_the_warm_up_a_decision_waits_for_the_first_ratio_of_a_filling_query(tmp_path):
    """Through the cycle: under GenMig (every plan starts empty) a query whose windows have filled less than a quarter
    has no ratio yet; an estimate of the settings in force over the bounds waits for it instead of deciding now."""
    setup, model, state = example(tmp_path)
    setup = replace(setup, migration=replace(setup.migration, strategy="genmig"))
    state, running = started(setup, model, state)
    estimated = raw_estimates(model, state, running)
    tight = replace(setup, bounds=replace(setup.bounds, memory=sum(estimated.values()) * 0.9))

    def tick_at(now: float):
        at = AT + timedelta(milliseconds=now)
        queries = tuple(QueryMetrics(q, state_bytes=int(m * 0.01)) for q, m in estimated.items())  # barely filled
        seen = observe(tight, model, state, Observation(at, (), queries), at=at, now=now, running=running,
                       changed_at={q: 0.0 for q in running}, migrating=frozenset())
        return seen.state, decide(tight, model, seen.state, Snapshot(at, now, running))

    early, tick = tick_at(100.0)  # 0.1 s into windows of seconds: no ratio yet
    assert early.estimate_over and early.feedback.unmeasured
    assert tick.decision is None
    blind = replace(tight, feedback=FeedbackRules(enabled=False))
    at = AT + timedelta(milliseconds=100.0)
    seen = observe(blind, model, state, Observation(at, (), ()), at=at, now=100.0, running=running,
                   changed_at={q: 0.0 for q in running}, migrating=frozenset())
    assert decide(blind, model, seen.state, Snapshot(at, 100.0, running)).decision is not None  # without feedback: now
