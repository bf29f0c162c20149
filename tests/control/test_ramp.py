"""Cuts through a ramp are staged: the queries whose input does not rise go to their minimum first, the rising query's
cut waits for them to drain, then goes as deep as its migration's peak needs."""

from __future__ import annotations

import numpy as np
import pytest

from armd.control.ramp import peak, staged_cuts
from armd.costmodel.plan import parse_plan
from armd.policies.guardrails import Guardrails, Running, guard
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS


def problem() -> Problem:
    def query(stream: str) -> dict:
        return {"op": "aggregate", "size": 64, "inputs": [{"op": "window", "w": 30_000, "inputs": [{"op": "source", "stream": stream}]}]}
    doc = {"streams": {"up": {"d": 20, "size": 64}, "flat": {"d": 50, "size": 64}},
           "queries": {"rising": query("up"), "other": query("flat")}}
    return Problem(parse_plan(doc), {q: QueryQoS(window=(5_000, 30_000)) for q in ("rising", "other")})


def test_a_ramp_cuts_the_others_first_then_the_rising_query_as_deep_as_its_peak_needs():
    p = problem()
    d = np.array([10.0, 50.0])  # "up" at twice its planned rate (the forecast), "flat" as planned
    lag = np.full(2, 3_000.0)
    at_max = Running(np.ones(2), np.zeros(2), np.full(2, np.nan))
    steady = p.evaluate(np.ones(2), np.zeros(2), d)
    bounds = Bounds(memory=float(steady.total_memory) * 1.02 / 0.9, cpu=1e12)  # the maximum just fits at the forecast
    cut = guard(p, bounds, np.array([0.6, 1.0]), np.zeros(2), at_max, Guardrails(), now=100_000)
    assert peak(p, bounds, at_max, cut.fw, cut.fg, d, lag, 100_000, None) > bounds.usable_memory  # old + new of the cut
    rising = frozenset({"up"})
    first, stage = staged_cuts(p, bounds, cut, at_max, d, lag, 100_000, rising, np.zeros(2, dtype=bool))
    assert stage == "others to their minimum" and first.fw.tolist() == [1.0, 0.0]

    others_cut = Running(np.array([1.0, 0.0]), np.zeros(2), np.array([np.nan, 100_000.0]))
    waiting, stage = staged_cuts(p, bounds, cut, others_cut, d, lag, 104_000, rising, np.array([False, True]))
    assert stage == "waiting for the others to drain" and waiting.fw.tolist() == [1.0, 0.0]
    done, stage = staged_cuts(p, bounds, cut, others_cut, d, lag, 110_000, rising, np.zeros(2, dtype=bool))
    assert stage == "rising queries cut" and done.fw[1] == 0.0 and 0.0 <= done.fw[0] < 0.6
    fits = peak(p, bounds, others_cut, done.fw, done.fg, d, lag, 110_000, None) <= bounds.usable_memory
    assert fits or done.fw[0] == 0.0  # the deepest setting of the decision that fits, else the minimum


def test_nothing_changes_without_a_rising_stream_or_when_the_path_fits():
    p = problem()
    d = np.array([20.0, 50.0])
    at_max = Running(np.ones(2), np.zeros(2), np.full(2, np.nan))
    roomy = Bounds(memory=1e12, cpu=1e12)
    cut = guard(p, roomy, np.array([0.6, 1.0]), np.zeros(2), at_max, Guardrails(), now=100_000)
    lag = np.full(2, 3_000.0)
    assert staged_cuts(p, roomy, cut, at_max, d, lag, 100_000, frozenset(), np.zeros(2, dtype=bool)) == (cut, None)
    assert staged_cuts(p, roomy, cut, at_max, d, lag, 100_000, frozenset({"up"}), np.zeros(2, dtype=bool)) == (cut, None)
    assert staged_cuts(p, roomy, cut, at_max, d, None, 100_000, frozenset({"up"}), np.zeros(2, dtype=bool)) == (cut, None)


def test_the_cut_reserve_keeps_room_for_a_cut_to_the_minimum_to_start_at_any_time():
    # Deciding on the whole usable bound, the maximum fits and a later cut to the minimum breaks it while both plans
    # hold state; deciding on the bound lowered by the cut reserve, that cut's peak fits at the same rates.
    from armd.control.ramp import cut_reserve
    from armd.policies.weighted import WeightedQoS
    from armd.policies.base import PolicyInput

    p = problem()
    d = np.array([20.0, 50.0])
    lag = np.full(2, 3_000.0)
    steady = p.evaluate(np.ones(2), np.zeros(2), d)
    bounds = Bounds(memory=float(steady.total_memory) * 1.05 / 0.9, cpu=1e12, reserve=0.1)
    lowest = p.evaluate(np.zeros(2), np.zeros(2), d)
    reserved = cut_reserve(p, bounds, d)
    assert reserved.usable_memory == pytest.approx(bounds.usable_memory - float(lowest.total_memory))

    def emergency_peak(chosen: Bounds) -> float:
        decision = WeightedQoS().decide(PolicyInput(p, chosen, 0.0, d))
        settled = Running(decision.fw, decision.fg, np.full(2, np.nan))
        return peak(p, bounds, settled, np.zeros(2), np.zeros(2), d, lag, 100_000, None)

    assert emergency_peak(bounds) > bounds.usable_memory
    assert emergency_peak(reserved) <= bounds.usable_memory
    assert cut_reserve(p, Bounds(memory=float(lowest.total_memory) * 1.5, cpu=1e12), d) == \
        Bounds(memory=float(lowest.total_memory) * 1.5, cpu=1e12)  # the minimum is half the bound: no reserve


def test_no_cut_reserve_while_the_settings_in_force_break_the_bound():
    # A burst: the cut the bound needs is made as deep as without a reserve (a deeper one costs a migration more).
    from armd.control.ramp import cut_reserve, deciding_bounds

    p = problem()
    d = np.array([20.0, 50.0])
    at_max = Running(np.ones(2), np.zeros(2), np.full(2, np.nan))
    roomy = Bounds(memory=float(p.evaluate(np.ones(2), np.zeros(2), d).total_memory) * 1.3 / 0.9, cpu=1e12, reserve=0.1)
    assert deciding_bounds(p, roomy, at_max, d) == cut_reserve(p, roomy, d) != roomy
    burst = np.array([5.0, 50.0])  # "up" ×4
    assert deciding_bounds(p, roomy, at_max, burst) == roomy


def test_after_a_step_down_the_growths_of_the_reserved_decision_go_as_far_as_their_transient_fits():
    # The whole bound's decision grows both queries; only the one the reserved decision grows grows, towards the whole
    # bound's decision as far as its old state beside the new settings fits: one migration, not one now and more later.
    from armd.control.ramp import drained_growths
    from armd.policies.base import Decision

    p = problem()
    d = np.array([20.0, 50.0])
    running = Running(np.array([0.0, 0.5]), np.zeros(2), np.full(2, np.nan))

    def decision(fw):
        outcome = p.evaluate(np.array(fw), np.zeros(2), d)
        return Decision("test", True, np.array(fw), np.zeros(2), outcome, float(p.weighted_qos(outcome.qos)), "", state=fw)

    reserved, whole = decision([0.4, 0.5]), decision([0.8, 0.7])
    old = float(p.evaluate(running.fw, running.fg, d).query_memory[0])
    roomy = Bounds(memory=1e12, cpu=1e12)
    merged = drained_growths(p, roomy, d, running, reserved, whole)
    assert merged.fw.tolist() == [0.8, 0.5] and merged.state == [0.4, 0.5]
    halfway = float(p.evaluate(np.array([0.6, 0.5]), np.zeros(2), d).total_memory) + old
    tight = Bounds(memory=halfway / 0.9, cpu=1e12, reserve=0.1)
    short = drained_growths(p, tight, d, running, reserved, whole)
    assert 0.4 < short.fw[0] < 0.8 and short.fw[1] == 0.5
    assert float(short.outcome.total_memory) + old <= tight.usable_memory
    still = decision([0.0, 0.5])
    assert drained_growths(p, roomy, d, running, still, whole) is still  # nothing grows: the reserved decision as it is
