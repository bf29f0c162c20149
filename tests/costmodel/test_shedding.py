"""Load shedding in the vectorised evaluation: a drop rate p prices exactly like a written-in selection of 1 − p."""

from __future__ import annotations

import numpy as np
import pytest

from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from armd.policies.problem import Problem
from armd.policies.qos import QoSError, QueryQoS

STREAMS = {"a": {"d": 2, "size": 64}, "b": {"d": 5, "size": 32}}


def _source(stream: str, drop: float | None) -> dict:
    node = {"op": "source", "stream": stream}
    return node if drop is None else {"op": "select", "sel": 1.0 - drop, "inputs": [node]}


def _plan(drop_join: float | None = None, drop_agg: float | None = None):
    return parse_plan({"streams": STREAMS, "queries": {
        "join": {"op": "join", "sel": 0.01, "inputs": [
            {"op": "window", "w": 400, "inputs": [_source("a", drop_join)]},
            {"op": "window", "w": 400, "inputs": [_source("b", drop_join)]}]},
        "agg": {"op": "aggregate", "groups": 10, "inputs": [
            {"op": "granularity", "g": 4, "inputs": [{"op": "window", "w": 300, "inputs": [_source("a", drop_agg)]}]}]},
    }})


QOS = {"join": QueryQoS(window=(100, 400), drop_rate=(0.0, 0.6)),
       "agg": QueryQoS(window=(100, 300), granularity=(8, 4), drop_rate=(0.0, 0.5))}


@pytest.mark.parametrize("profile", ["paper", "spark"])
def test_a_drop_rate_prices_like_the_plan_with_an_explicit_select(profile: str) -> None:
    problem = Problem(_plan(), QOS, profile=profile)
    fd = np.array([0.5, 0.0])  # the join drops 0.3, the aggregation 0.5
    p = problem.drop_rates(fd)
    assert p == pytest.approx([0.3, 0.5])
    # the windows at their maxima: the written-in plans have those sizes
    fw, fg = np.ones(2), np.full(2, 1.0)
    got = problem.evaluate(fw, fg, fd=fd)
    expected = estimate(_plan(0.3, 0.5), profile=profile)
    for i, q in enumerate(problem.queries):
        assert got.query_memory[i] == pytest.approx(expected.queries[q].memory, rel=1e-9)
        assert got.query_cpu[i] == pytest.approx(expected.queries[q].cpu, rel=1e-9)
    assert float(got.total_cpu) == pytest.approx(expected.total.cpu, rel=1e-9)
    # results kept: (1 − p)^2 for the two-way join, (1 − p) for the aggregation
    full = problem.evaluate(fw, fg, fd=np.ones(2))
    assert got.qos / full.qos == pytest.approx([0.7 ** 2, 0.5])


def test_a_grid_of_drop_settings_prices_each_column_like_one_setting() -> None:
    problem = Problem(_plan(), QOS)
    fd = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.25]])
    together = problem.evaluate(np.full((2, 3), 0.5), np.full((2, 3), 0.5), fd=fd)
    for k in range(3):
        alone = problem.evaluate(np.full(2, 0.5), np.full(2, 0.5), fd=fd[:, k])
        assert together.query_memory[:, k] == pytest.approx(alone.query_memory, rel=1e-12)
        assert together.query_cpu[:, k] == pytest.approx(alone.query_cpu, rel=1e-12)
        assert together.qos[:, k] == pytest.approx(alone.qos, rel=1e-12)


def test_no_drop_range_prices_as_before() -> None:
    plain = Problem(_plan(), {q: QueryQoS(window=s.window, granularity=s.granularity) for q, s in QOS.items()})
    assert not plain.sheds
    shedding = Problem(_plan(), QOS)
    a = plain.evaluate(np.full(2, 0.3), np.full(2, 0.6))
    b = shedding.evaluate(np.full(2, 0.3), np.full(2, 0.6), fd=np.ones(2))  # p = 0: nothing dropped, nothing paid
    assert a.query_memory.tolist() == b.query_memory.tolist()
    assert a.query_cpu.tolist() == b.query_cpu.tolist()
    assert a.qos.tolist() == b.qos.tolist()


def test_a_sub_problem_keeps_its_queries_drops() -> None:
    problem = Problem(_plan(), QOS)
    sub = problem.subproblem(np.array([1]))
    whole = problem.evaluate(np.full(2, 0.5), np.full(2, 0.5), fd=np.zeros(2))
    part = sub.evaluate(np.full(1, 0.5), np.full(1, 0.5), fd=np.zeros(1))
    assert part.query_memory[0] == pytest.approx(whole.query_memory[1], rel=1e-12)
    assert part.query_cpu[0] == pytest.approx(whole.query_cpu[1], rel=1e-12)


@pytest.mark.parametrize("bad, message", [
    ((0.2, 0.1), "0 ≤ low ≤ high < 1"),
    ((0.0, 1.0), "0 ≤ low ≤ high < 1"),
    ((-0.1, 0.5), "0 ≤ low ≤ high < 1"),
    ((0.5,), "two finite numbers"),
])
def test_a_bad_drop_rate_range_is_one_clear_error(bad, message) -> None:
    with pytest.raises(QoSError, match=message):
        Problem(_plan(), {"join": QueryQoS(drop_rate=bad)})


def test_a_query_sharing_a_node_cannot_shed() -> None:
    plan = parse_plan({"streams": STREAMS, "queries": {
        "q1": {"op": "window", "w": 10, "inputs": [{"op": "source", "stream": "a", "id": "src"}]},
        "q2": {"op": "window", "w": 10, "inputs": [{"ref": "src"}]},
    }})
    with pytest.raises(QoSError, match="'src' also serve other queries"):
        Problem(plan, {"q1": QueryQoS(drop_rate=(0.0, 0.5))})
