"""Re-decision triggers, guardrails and the predicted trajectory: each tested on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from armd.costmodel.plan import parse_plan
from armd.policies.guardrails import Guardrails, Running, guard
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS
from armd.policies.trajectory import predict
from armd.policies.triggers import RateTracker, decision_due


def window_problem() -> Problem:
    """Two independent windowed joins with ranges [1000, 61000]; memory grows with the window."""
    streams = {"A": {"d": 10, "size": 100}, "B": {"d": 10, "size": 100}, "C": {"d": 10, "size": 100}}

    def join(left: str, right: str) -> dict:
        return {"op": "join", "sel": 0.01, "inputs": [
            {"op": "window", "w": 61_000, "inputs": [{"op": "source", "stream": left}]},
            {"op": "window", "w": 61_000, "inputs": [{"op": "source", "stream": right}]},
        ]}

    doc = {"streams": streams, "queries": {"p": join("A", "B"), "q": join("B", "C")}}
    return Problem(parse_plan(doc), {q: QueryQoS(window=(1_000, 61_000)) for q in ("p", "q")})


# --- triggers -----------------------------------------------------------------------------------------


def test_exponential_smoothing_and_threshold() -> None:
    """α = 0.5: 100 then 200 → 150; the decision used 100, so 150 moved by 50 % > 20 %."""
    tracker = RateTracker(alpha=0.5, threshold=0.2).observe({"A": 100.0})
    assert tracker.drifted() == {"A"}  # never decided
    tracker = tracker.decide_with()
    assert tracker.drifted() == frozenset()
    tracker = tracker.observe({"A": 110.0})  # 105: +5 %, below the threshold
    assert tracker.smoothed["A"] == pytest.approx(105.0)
    assert decision_due(tracker) is None
    tracker = tracker.observe({"A": 200.0})  # 152.5: +52.5 %
    assert tracker.drifted() == {"A"}
    assert "1 stream(s)" in decision_due(tracker)


def test_bad_measurements_are_ignored_and_other_reasons_win() -> None:
    tracker = RateTracker().observe({"A": 10.0}).decide_with()
    tracker = tracker.observe({"A": math.inf, "B": -1.0, "C": float("nan")})
    assert tracker.smoothed == {"A": 10.0}
    assert decision_due(tracker, queries_changed=True) == "queries added or removed"
    assert decision_due(tracker, bounds_changed=True) == "bounds changed"


def test_only_the_decided_streams_are_marked() -> None:
    tracker = RateTracker(threshold=0.1).observe({"A": 10.0, "B": 10.0}).decide_with(frozenset({"A"}))
    assert tracker.drifted() == {"B"}


@pytest.mark.parametrize("kwargs", [{"alpha": 0}, {"alpha": 1.5}, {"threshold": 0}])
def test_tracker_settings_are_checked(kwargs) -> None:
    with pytest.raises(ValueError):
        RateTracker(**kwargs)


# --- guardrails -----------------------------------------------------------------------------------------


def running(fw, changed_at=(np.nan, np.nan)) -> Running:
    return Running(np.array(fw, dtype=float), np.zeros(2), np.array(changed_at, dtype=float))


def generous(problem: Problem) -> Bounds:
    high = problem.evaluate(np.ones(2), np.ones(2))
    return Bounds(memory=float(high.total_memory) * 2, cpu=float(high.total_cpu) * 2)


def test_first_decision_is_applied_as_proposed() -> None:
    problem = window_problem()
    out = guard(problem, generous(problem), np.array([0.3, 0.7]), np.zeros(2), None, Guardrails(max_step=0.1), now=0)
    assert out.fw.tolist() == [0.3, 0.7] and out.apply


def test_hysteresis_ignores_small_changes() -> None:
    problem = window_problem()
    out = guard(problem, generous(problem), np.array([0.52, 0.9]), np.zeros(2), running([0.5, 0.5]),
                Guardrails(hysteresis=0.05), now=100)
    assert out.fw.tolist() == [0.5, 0.9]
    assert out.held == ("p",)


def test_cooldown_holds_a_recently_changed_query() -> None:
    problem = window_problem()
    out = guard(problem, generous(problem), np.array([0.9, 0.9]), np.zeros(2), running([0.5, 0.5], (95.0, 10.0)),
                Guardrails(cooldown=30), now=100)
    assert out.fw.tolist() == [0.5, 0.9]
    assert out.held == ("p",)


def test_max_step_limits_each_change() -> None:
    problem = window_problem()
    out = guard(problem, generous(problem), np.array([0.9, 0.1]), np.zeros(2), running([0.5, 0.5]),
                Guardrails(max_step=0.1), now=100)
    assert out.fw == pytest.approx([0.6, 0.4])
    assert out.limited == ("p", "q")


def test_guardrails_never_hold_the_system_over_its_bounds() -> None:
    """Running at 1.0 breaks the bound; the proposal cuts p to 0.2. A max step of 0.1 and a
    cool-down would keep p too large, so the reduction goes through in full."""
    problem = window_problem()
    at_proposal = problem.evaluate(np.array([0.2, 0.5]), np.zeros(2))
    bounds = Bounds(memory=float(at_proposal.total_memory) * 1.001, cpu=float(at_proposal.total_cpu) * 10)
    out = guard(problem, bounds, np.array([0.2, 0.5]), np.zeros(2), running([1.0, 0.5], (99.0, np.nan)),
                Guardrails(cooldown=60, max_step=0.1), now=100)
    assert out.fw.tolist() == [0.2, 0.5]
    assert out.forced == ("p",)
    assert out.outcome.fits(bounds)


def test_dry_run_records_but_does_not_apply() -> None:
    problem = window_problem()
    out = guard(problem, generous(problem), np.array([0.9, 0.1]), np.zeros(2), running([0.5, 0.5]),
                Guardrails(dry_run=True), now=100)
    assert not out.apply and out.fw.tolist() == [0.9, 0.1]


@pytest.mark.parametrize("kwargs", [{"cooldown": -1}, {"hysteresis": 1}, {"max_step": 0}, {"max_step": 2}])
def test_guardrail_settings_are_checked(kwargs) -> None:
    with pytest.raises(ValueError):
        Guardrails(**kwargs)


# --- trajectory --------------------------------------------------------------------------------------


def window_change() -> tuple:
    """The change these trajectory tests share: p's window from its largest (61,000) to its smallest (1,000), q kept."""
    problem = window_problem()
    old_fw, new_fw = np.array([1.0, 1.0]), np.array([0.0, 1.0])
    w_old, g_old = problem.values(old_fw, np.zeros(2))
    w_new, g_new = problem.values(new_fw, np.zeros(2))
    return (problem, (w_old, g_old, problem.evaluate(old_fw, np.zeros(2))),
            (w_new, g_new, problem.evaluate(new_fw, np.zeros(2))))


def test_window_reduction_frees_memory_only_after_the_old_window_expires() -> None:
    """p goes from w = 61,000 to 1,000 at t = 0: the state starts shrinking at t = 1,000 and is at
    its new size at t = 61,000 (paper 001 §4.2); in between it falls linearly. The bound that the
    new setting meets holds from 61,000 on, not before."""
    problem, (w_old, g_old, before), (w_new, g_new, after) = window_change()
    bounds = Bounds(memory=float(after.total_memory) * 1.0001, cpu=float(before.total_cpu) * 2)
    path = predict(problem, bounds, 0.0, (w_old, g_old, before), (w_new, g_new, after))
    assert path.times.tolist() == [0.0, 1_000.0, 61_000.0]
    assert path.memory[0] == pytest.approx(float(before.total_memory))
    assert path.memory[1] == pytest.approx(float(before.total_memory))
    assert path.memory[2] == pytest.approx(float(after.total_memory))
    assert path.bounds_hold_at == 61_000.0
    assert path.as_rows()[2]["t"] == 61_000.0


def test_trajectory_of_a_setting_that_never_fits_has_no_hold_time() -> None:
    problem = window_problem()
    fw = np.ones(2)
    w, g = problem.values(fw, np.zeros(2))
    now = problem.evaluate(fw, np.zeros(2))
    tight = Bounds(memory=float(now.total_memory) / 2, cpu=float(now.total_cpu) * 2)
    path = predict(problem, tight, 5.0, (w, g, now), (w, g, now))
    assert path.bounds_hold_at is None and path.times.tolist() == [5.0]


def test_hysteresis_holds_a_tiny_cut_within_the_reserve_but_not_past_the_bound() -> None:
    """Running at 0.5 is 1 % over the usable bound (10 % reserve), the proposal 0.48 (which fits): too small to be worth a
    migration, and the reserve is there for such noise. Over the bound itself the same cut is forced."""
    problem = window_problem()
    held = float(problem.evaluate(np.array([0.5, 0.5]), np.zeros(2)).total_memory)
    cpu = float(problem.evaluate(np.array([1.0, 1.0]), np.zeros(2)).total_cpu) * 10
    within_reserve = Bounds(memory=held / 0.9 / 1.01, cpu=cpu, reserve=0.1)
    out = guard(problem, within_reserve, np.array([0.48, 0.5]), np.zeros(2), running([0.5, 0.5]),
                Guardrails(hysteresis=0.05), now=100)
    assert out.fw.tolist() == [0.5, 0.5] and out.forced == () and out.held == ("p",)
    past_bound = Bounds(memory=held / 1.01, cpu=cpu)  # no reserve: the usable bound is the bound
    out = guard(problem, past_bound, np.array([0.46, 0.5]), np.zeros(2), running([0.5, 0.5]),
                Guardrails(hysteresis=0.05), now=100)
    assert out.fw.tolist() == [0.46, 0.5] and out.forced == ("p",)


def test_a_live_migration_holds_both_plans_until_the_old_one_drains() -> None:
    """GenMig (lag given): the new plan fills from empty over its window + lag while the old plan keeps all of its
    state; at the drain time the old state goes at once, and only from then on does the bound hold."""
    problem, (w_old, g_old, before), (w_new, g_new, after) = window_change()
    bounds = Bounds(memory=float(after.total_memory) * 1.0001, cpu=float(before.total_cpu) * 4)
    path = predict(problem, bounds, 0.0, (w_old, g_old, before), (w_new, g_new, after), lag=np.array([3_000.0, 3_000.0]))
    drain = 1_000.0 + 3_000.0  # p's new window + lag
    old_p, new_p = float(before.query_memory[0]), float(after.query_memory[0])
    assert path.times[0] == 0.0 and path.times[-1] == drain
    assert path.memory[-2] == pytest.approx(float(before.total_memory) + new_p)  # just before the drain: both plans
    assert path.memory[-1] == pytest.approx(float(before.total_memory) + new_p - old_p)
    assert path.memory[-1] == pytest.approx(float(after.total_memory))
    assert path.bounds_hold_at == drain


def test_a_live_migration_drains_at_the_split_the_applier_placed():
    """Spark's GenMig splits at the change + the larger window: given that split, the old plan drains there + lag while
    the new plan still fills over its own window + lag."""
    problem, (w_old, g_old, before), (w_new, g_new, after) = window_change()
    bounds = Bounds(memory=float(before.total_memory) * 4, cpu=float(before.total_cpu) * 4)
    split = np.array([float(w_old[problem.win_idx].max()), 0.0])
    path = predict(problem, bounds, 0.0, (w_old, g_old, before), (w_new, g_new, after), lag=np.array([3_000.0, 3_000.0]),
                   split=split)
    drain = split[0] + 3_000.0
    new_p, old_p = float(after.query_memory[0]), float(before.query_memory[0])
    assert path.times[-1] == drain
    filled = 1_000.0 + 3_000.0  # the new window + lag: from there on the new plan holds its steady state
    at_filled = int(np.flatnonzero(path.times == filled)[0])
    assert path.memory[at_filled] == pytest.approx(float(before.total_memory) + new_p)
    assert path.memory[-2] == pytest.approx(float(before.total_memory) + new_p)
    assert path.memory[-1] == pytest.approx(float(before.total_memory) + new_p - old_p)


def test_a_live_migration_drains_when_the_applier_expects_it():
    """An applier that knows its old run's drain better than T_split + lag (Spark: the end of a batch) gives it; the
    old state then stays until that moment and goes there at once."""
    problem, (w_old, g_old, before), (w_new, g_new, after) = window_change()
    bounds = Bounds(memory=float(after.total_memory) * 1.0001, cpu=float(before.total_cpu) * 4)
    split = np.array([float(w_old[problem.win_idx].max()), 0.0])
    later = split[0] + 3_000.0 + 1_500.0
    path = predict(problem, bounds, 0.0, (w_old, g_old, before), (w_new, g_new, after), lag=np.array([3_000.0, 3_000.0]),
                   split=split, drain=np.array([later, np.nan]))
    new_p, old_p = float(after.query_memory[0]), float(before.query_memory[0])
    assert path.times[-1] == later
    assert split[0] + 3_000.0 not in path.times  # T_split + lag is no longer a drain time
    assert path.memory[-2] == pytest.approx(float(before.total_memory) + new_p)
    assert path.memory[-1] == pytest.approx(float(before.total_memory) + new_p - old_p)
    assert path.bounds_hold_at == later
