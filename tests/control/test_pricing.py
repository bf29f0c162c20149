"""Pricing changes: a change the maximum step cut short is made whole when migrations are priced."""

from __future__ import annotations

import numpy as np

from armd.control.pricing import whole_steps
from armd.costmodel.plan import parse_plan
from armd.policies.guardrails import Guardrails, Running, guard
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS


def problem() -> Problem:
    window = {"op": "window", "w": 30_000, "inputs": [{"op": "source", "stream": "s"}]}
    doc = {"streams": {"s": {"d": 20, "size": 64}}, "queries": {"q": {"op": "aggregate", "size": 64, "inputs": [window]}}}
    return Problem(parse_plan(doc), {"q": QueryQoS(window=(5_000, 30_000))})


def test_a_raise_cut_in_half_by_the_maximum_step_goes_the_whole_way_when_it_fits():
    p = problem()
    at_max = p.evaluate(np.array([1.0]), np.zeros(1))
    running = Running(np.array([0.0]), np.zeros(1), np.array([0.0]))
    roomy = Bounds(memory=float(at_max.total_memory) * 2, cpu=float(at_max.total_cpu) * 10)
    guarded = guard(p, roomy, np.array([1.0]), np.zeros(1), running, Guardrails(max_step=0.5), now=100)
    assert guarded.fw.tolist() == [0.5] and guarded.limited == ("q",)
    whole = whole_steps(p, roomy, guarded, (np.array([1.0]), np.zeros(1)), None)
    assert whole.fw.tolist() == [1.0] and whole.limited == () and whole.outcome.fits(roomy)
    tight = Bounds(memory=float(at_max.total_memory) * 0.9, cpu=float(at_max.total_cpu) * 10)
    assert whole_steps(p, tight, guarded, (np.array([1.0]), np.zeros(1)), None) is guarded  # the whole way breaks it
    assert whole_steps(p, roomy, guarded, None, None) is guarded
