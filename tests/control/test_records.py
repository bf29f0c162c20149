"""What a decision record says of each query: the guardrail notes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from armd.control.records import guardrail_note
from armd.costmodel.plan import parse_plan
from armd.policies.guardrails import Guardrails, Running, guard
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS


def problem() -> Problem:
    window = {"op": "window", "w": 30_000, "inputs": [{"op": "source", "stream": "s"}]}
    doc = {"streams": {"s": {"d": 20, "size": 64}}, "queries": {"q": {"op": "aggregate", "size": 64, "inputs": [window]}}}
    return Problem(parse_plan(doc), {"q": QueryQoS(window=(5_000, 30_000))})


def test_a_growth_the_transient_fit_shortened_or_held_is_named_with_the_reason():
    p = problem()
    high = p.evaluate(np.array([1.0]), np.zeros(1))
    running = Running(np.array([0.0]), np.zeros(1), np.array([0.0]))
    guarded = guard(p, Bounds(memory=float(high.total_memory) * 2, cpu=1e9), np.array([1.0]), np.zeros(1), running,
                    Guardrails(), now=100)
    assert guardrail_note("q", guarded, set()) is None
    assert "no more of it fits the memory bound" in guardrail_note("q", replace(guarded, fitted=("q",)), set())
