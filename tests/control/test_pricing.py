"""Pricing changes: a change the maximum step cut short is made whole when migrations are priced; a growth is taken
only as far as its live migration's transient (old plan beside the new one) fits the usable bound."""

from __future__ import annotations

import numpy as np

from armd.control.pricing import transient_fit, whole_steps
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


def test_a_growth_goes_only_as_far_as_old_plus_new_state_fits_the_usable_bound():
    p = problem()
    low, high = p.evaluate(np.array([0.0]), np.zeros(1)), p.evaluate(np.array([1.0]), np.zeros(1))
    running = Running(np.array([0.0]), np.zeros(1), np.array([0.0]))
    bounds = Bounds(memory=float(high.total_memory) / 0.9 * 1.001, cpu=float(high.total_cpu) * 10)  # the maximum fits
    grown = guard(p, bounds, np.array([1.0]), np.zeros(1), running, Guardrails(), now=100)
    assert grown.fw.tolist() == [1.0]
    fitted = transient_fit(p, bounds, grown, running, None, live=True)
    assert 0.0 < fitted.fw[0] < 1.0  # the old plan's 5 s beside the new window: not the whole 30 s
    assert float(fitted.outcome.total_memory) + float(low.total_memory) <= bounds.usable_memory
    assert transient_fit(p, bounds, grown, running, None, live=False) is grown  # in place: no transient
    roomy = Bounds(memory=float(high.total_memory) * 3, cpu=float(high.total_cpu) * 10)
    assert transient_fit(p, roomy, grown, running, None, live=True) is grown
