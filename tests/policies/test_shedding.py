"""The weighted-QoS policy with load shedding: it sheds where shedding keeps more QoS per byte, inside the range only."""

from __future__ import annotations

import numpy as np
import pytest

from armd.costmodel.plan import parse_plan
from armd.policies.base import PolicyInput
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS
from armd.policies.weighted import WeightedQoS

STREAMS = {"a": {"d": 2, "size": 64}, "b": {"d": 5, "size": 64}}
PLAN = parse_plan({"streams": STREAMS, "queries": {
    "join": {"op": "join", "sel": 0.01, "inputs": [
        {"op": "window", "w": 400, "inputs": [{"op": "source", "stream": "a"}]},
        {"op": "window", "w": 400, "inputs": [{"op": "source", "stream": "b"}]}]},
    "agg": {"op": "aggregate", "groups": 10, "inputs": [
        {"op": "window", "w": 400, "inputs": [{"op": "source", "stream": "b"}]}]},
}})


def _decide(qos: dict[str, QueryQoS], query: str, share: float, feasible: bool = True):
    """The decision when ``query`` may keep ``share`` of its full-setting memory (CPU unbounded)."""
    problem = Problem(PLAN, qos)
    n = len(problem.queries)
    full = problem.evaluate(np.ones(n), np.ones(n), fd=np.ones(n))
    i = problem.queries.index(query)
    bounds = Bounds(memory=float(full.total_memory - (1 - share) * full.query_memory[i]), cpu=1e9)
    decision = WeightedQoS().decide(PolicyInput(problem, bounds, 0.0))
    assert decision.feasible is feasible
    assert (float(decision.outcome.total_memory) <= bounds.memory) is feasible
    rates = problem.drop_rates(decision.fd) if decision.fd is not None else np.zeros(n)
    return problem, decision, rates, i


@pytest.mark.parametrize("share", [0.75, 0.5, 0.25])
def test_a_join_with_a_wide_window_range_reduces_its_windows_instead_of_shedding(share: float) -> None:
    # a window fraction f keeps ~f of a join's results and its memory; shedding p keeps (1 − p)² of the results
    problem, decision, rates, i = _decide({"join": QueryQoS(window=(1, 400), drop_rate=(0.0, 0.9))}, "join", share)
    assert rates[i] == 0.0
    assert decision.fw[i] == pytest.approx(share, abs=0.05)


@pytest.mark.parametrize("share", [0.75, 0.5, 0.25])
def test_an_aggregation_with_a_narrow_window_range_sheds(share: float) -> None:
    # halving the window costs all of the range's QoS; dropping half the input keeps half the results
    problem, decision, rates, i = _decide({"agg": QueryQoS(window=(200, 400), drop_rate=(0.0, 0.9))}, "agg", share)
    assert rates[i] > 0.0
    window_only = (share * 400 - 200) / 200  # the QoS window reduction alone could reach, at best
    assert decision.outcome.qos[i] > max(window_only, 0.0)
    assert decision.details["drop_rates"]["agg"] == pytest.approx(rates[i])
    assert "shedding agg" in decision.reason


def test_the_drop_rate_stays_inside_its_range() -> None:
    # shares of the memory at p = 0.1; p = 0.4 reaches about 0.67 of it
    for share, feasible in ((0.99, True), (0.8, True), (0.7, True), (0.3, False)):
        problem, decision, rates, i = _decide({"agg": QueryQoS(window=(390, 400), drop_rate=(0.1, 0.4))}, "agg", share, feasible)
        assert 0.1 <= rates[i] <= 0.4
        assert rates[i] == pytest.approx(0.4) or feasible  # out of reach: the most shedding the range allows
        assert rates[problem.queries.index("join")] == 0.0  # no range: never sheds


def test_no_drop_range_never_sheds_and_decides_as_before() -> None:
    qos = {"agg": QueryQoS(window=(200, 400))}
    plain = Problem(PLAN, qos)
    assert not plain.sheds
    n = len(plain.queries)
    full = plain.evaluate(np.ones(n), np.ones(n))
    bounds = Bounds(memory=float(full.total_memory) * 0.6, cpu=1e9)
    decision = WeightedQoS().decide(PolicyInput(plain, bounds, 0.0))
    assert decision.fd is None
    with_zero_range = Problem(PLAN, {"agg": QueryQoS(window=(200, 400), drop_rate=(0.0, 0.0))})
    assert not with_zero_range.sheds
    again = WeightedQoS().decide(PolicyInput(with_zero_range, bounds, 0.0))
    assert again.fd is None and again.fw.tolist() == decision.fw.tolist()


def test_a_re_decision_after_a_rate_change_keeps_the_drop_inside_the_bounds() -> None:
    problem, decision, rates, i = _decide({"agg": QueryQoS(window=(200, 400), drop_rate=(0.0, 0.9))}, "agg", 0.5)
    faster = problem.batch.stream_d / np.array([1.0, 1.5])  # stream b 1.5× faster
    # the join (no knob) grows with b; the bound grows by as much, so the aggregation must hold its memory
    j = problem.queries.index("join")
    grown = problem.evaluate(decision.fw, decision.fg, faster, fd=decision.fd).query_memory[j] - decision.outcome.query_memory[j]
    bounds = Bounds(memory=float(decision.outcome.total_memory + grown) * 1.0001, cpu=1e9)
    again = WeightedQoS().decide(PolicyInput(problem, bounds, 1.0, faster, decision.state, frozenset({"b"})))
    assert again.feasible
    assert float(again.outcome.total_memory) <= bounds.memory
    assert problem.drop_rates(again.fd)[i] > rates[i]
