"""Pricing changes: a change the maximum step cut short is made whole when migrations are priced; a growth is taken
only as far as its live migration's transient (old plan beside the new one) fits the usable bound; a small cut is
taken back when the other cuts, deeper, make its room; a cut still waiting is not taken back while the state is over
the bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from armd.control.pricing import (concentrate_cuts, cut_deep_on_step, hold_small_cuts, keep_pending_cuts, transient_fit,
                                 whole_steps)
from armd.costmodel.plan import parse_plan
from armd.policies.guardrails import Guardrails, Running, guard
from armd.policies.migration_cost import Priced, genmig
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
    assert fitted.fitted == ("q",) and grown.fitted == ()  # the record says why the growth is shorter
    assert transient_fit(p, bounds, grown, running, None, live=False) is grown  # in place: no transient
    roomy = Bounds(memory=float(high.total_memory) * 3, cpu=float(high.total_cpu) * 10)
    assert transient_fit(p, roomy, grown, running, None, live=True) is grown


def test_a_growth_shortened_below_the_hysteresis_keeps_its_setting():
    """A sliver of a growth (5.0 → 5.33 s of a 5–30 s range) is a whole migration: where the guardrails would hold it
    back if the policy asked for it, they hold it back when the transient's room shortens a growth to it."""
    p = problem()
    low, high = p.evaluate(np.array([0.0]), np.zeros(1)), p.evaluate(np.array([1.0]), np.zeros(1))
    running = Running(np.array([0.0]), np.zeros(1), np.array([0.0]))
    bounds = Bounds(memory=float(high.total_memory) / 0.9 * 1.001, cpu=float(high.total_cpu) * 10)
    grown = guard(p, bounds, np.array([1.0]), np.zeros(1), running, Guardrails(), now=100)
    share = float(transient_fit(p, bounds, grown, running, None, live=True).fw[0])
    assert transient_fit(p, bounds, grown, running, None, live=True, hysteresis=share * 0.9).fw[0] == share
    held = transient_fit(p, bounds, grown, running, None, live=True, hysteresis=share * 1.1)
    assert held.fw.tolist() == [0.0] and float(held.outcome.total_memory) == float(low.total_memory)
    assert held.fitted == ("q",)


def two_queries() -> Problem:
    def query(stream: str) -> dict:
        return {"op": "aggregate", "size": 64, "inputs": [{"op": "window", "w": 30_000, "inputs": [{"op": "source", "stream": stream}]}]}

    doc = {"streams": {"a": {"d": 20, "size": 64}, "b": {"d": 20, "size": 64}}, "queries": {"big": query("a"), "small": query("b")}}
    return Problem(parse_plan(doc), {q: QueryQoS(window=(5_000, 30_000)) for q in ("big", "small")})


def test_a_small_cut_is_taken_back_when_a_deeper_cut_of_a_query_already_migrating_makes_its_room():
    """Both at 30 s, the bound needs a fifth of that cut: the policy cuts both a little, but cutting one of them (already
    migrating) a little more costs less QoS than the other's migration, whose old plan holds 30 s of state meanwhile."""
    p = two_queries()
    full = p.evaluate(np.ones(2), np.zeros(2))
    running = Running(np.ones(2), np.zeros(2), np.array([0.0, 0.0]))
    tight = p.evaluate(np.array([0.62, 0.98]), np.zeros(2))
    bounds = Bounds(memory=float(tight.total_memory), cpu=float(full.total_cpu) * 10)  # the decision just fits
    decided = guard(p, bounds, np.array([0.62, 0.98]), np.zeros(2), running, Guardrails(), now=100)
    assert decided.outcome.fits(bounds) and not p.evaluate(np.array([0.62, 1.0]), np.zeros(2)).fits(bounds)
    old = float(full.query_memory[0])

    def priced(scale: float) -> dict[str, Priced]:  # the small cut's migration lasts longer: its new window is larger
        return {q: Priced(-0.01, genmig(w, 2.0, 1.0, old), scale * (w + 4.0), "required") for q, w in (("big", 20.5), ("small", 29.5))}

    fewer, verdicts = concentrate_cuts(p, bounds, decided, running, None, priced(0.002), live=True)
    assert [verdicts[q].verdict for q in ("big", "small")] == ["required", "vetoed"]
    assert fewer.fw[1] == 1.0 and fewer.fw[0] < 0.62 and fewer.outcome.fits(bounds)
    one_cut = {"big": priced(0.002)["big"]}
    assert concentrate_cuts(p, bounds, decided, running, None, one_cut, live=True)[0] is decided  # nothing to move to
    assert concentrate_cuts(p, bounds, decided, running, None, priced(0.002), live=False)[0] is decided  # in place


def test_a_cut_freeing_less_than_its_new_plan_holds_waits_while_the_reserve_takes_it():
    """Near the usable bound a 6.1 → 5.5 s cut frees a tenth of the query's state at its drain and holds its new plan
    (nine tenths) beside the old one until then: within the reserve it is taken back; a deep cut is not, nor any cut
    once measured state is over the usable bound or when the memory bound itself would break."""
    p = problem()
    running = Running(np.array([0.05]), np.zeros(1), np.array([0.0]))
    at_run = p.evaluate(running.fw, np.zeros(1))
    bounds = Bounds(memory=float(at_run.total_memory) * 1.05, cpu=float(at_run.total_cpu) * 10)  # usable: 0.945×
    small = guard(p, bounds, np.array([0.02]), np.zeros(1), running, Guardrails(), now=100)
    assert small.fw.tolist() == [0.02]
    held = hold_small_cuts(p, bounds, small, running, None, live=True, over=False)
    assert held.fw.tolist() == [0.05] and float(held.outcome.total_memory) == float(at_run.total_memory)
    assert hold_small_cuts(p, bounds, small, running, None, live=True, over=True) is small
    assert hold_small_cuts(p, bounds, small, running, None, live=False, over=False) is small
    tight = Bounds(memory=float(at_run.total_memory) * 0.99, cpu=float(at_run.total_cpu) * 10)
    assert hold_small_cuts(p, tight, small, running, None, live=True, over=False) is small  # the bound itself
    deep = replace(small, fw=np.array([0.0]), outcome=p.evaluate(np.array([0.0]), np.zeros(1)))
    big = Running(np.array([1.0]), np.zeros(1), np.array([0.0]))
    assert hold_small_cuts(p, Bounds(memory=float(at_run.total_memory) * 30, cpu=1e9), deep, big, None, live=True,
                           over=False) is deep  # frees more than its new plan holds


def test_a_cut_still_waiting_is_not_taken_back_while_the_measured_state_is_over_the_bound():
    """The s38 fleet run's flip: with two queries' cuts pending behind their migrations, the next decision moved the
    burst's cut from one to the other (big back up, small down). While the state is over the bound, each keeps at
    most its pending cut; a deeper cut and a query without a pending cut are left as decided, and so is everything
    once the state is under the bound."""
    p = two_queries()
    running = Running(np.ones(2), np.zeros(2), np.array([0.0, 0.0]))
    pending = (np.array([0.2, 1.0]), np.zeros(2))  # big's cut to 0.2 waits; small has nothing pending
    decided = guard(p, Bounds(memory=1e12, cpu=1e12), np.array([0.9, 0.3]), np.zeros(2), running, Guardrails(), now=100)
    kept = keep_pending_cuts(p, decided, running, pending, None, over=True)
    assert kept.fw.tolist() == [0.2, 0.3] and kept.kept == ("big",)
    assert float(kept.outcome.total_memory) == float(p.evaluate(np.array([0.2, 0.3]), np.zeros(2)).total_memory)
    assert float(kept.outcome.total_memory) < float(decided.outcome.total_memory)
    assert keep_pending_cuts(p, decided, running, pending, None, over=False) is decided
    assert keep_pending_cuts(p, decided, running, None, None, over=True) is decided
    deeper = guard(p, Bounds(memory=1e12, cpu=1e12), np.array([0.1, 0.3]), np.zeros(2), running, Guardrails(), now=100)
    assert keep_pending_cuts(p, deeper, running, pending, None, over=True) is deeper
    growth_pending = (np.array([1.0, 1.0]), np.zeros(2))  # nothing below what runs: no cut waits
    low = Running(np.array([0.5, 1.0]), np.zeros(2), np.array([0.0, 0.0]))
    assert keep_pending_cuts(p, decided, low, growth_pending, None, over=True) is decided


def test_while_the_measured_state_is_over_a_cut_of_a_query_whose_rate_stepped_up_goes_to_its_minimum_window():
    """The s38 fleet run's first cut of the burst was 16 → 13.2 s: a GenMig migration of 25 s holding the old plan's state
    beside 13 s of the new rate's. While the measured state is over the bound, the cut of a query whose input stepped up
    goes to the minimum window (its migration ends soonest and adds least); the other query keeps its decided cut, a
    growth is left alone, and nothing changes when changes are made in place."""
    p = two_queries()
    running = Running(np.ones(2), np.zeros(2), np.array([0.0, 0.0]))
    decided = guard(p, Bounds(memory=1e12, cpu=1e12), np.array([0.3, 0.2]), np.zeros(2), running, Guardrails(), now=100)
    stepped_up = np.array([True, False])
    deep = cut_deep_on_step(p, decided, running, None, stepped_up, over=True, live=True)
    assert deep.fw.tolist() == [0.0, 0.2] and deep.deepened == ("big",)
    assert float(deep.outcome.total_memory) == float(p.evaluate(np.array([0.0, 0.2]), np.zeros(2)).total_memory)
    assert cut_deep_on_step(p, decided, running, None, stepped_up, over=True, live=False) is decided
    assert cut_deep_on_step(p, decided, running, None, np.array([False, False]), over=True, live=True) is decided
    low = Running(np.array([0.2, 1.0]), np.zeros(2), np.array([0.0, 0.0]))  # big grows 0.2 → 0.3: not a cut
    assert cut_deep_on_step(p, decided, low, None, stepped_up, over=True, live=True) is decided
    near = guard(p, Bounds(memory=1e12, cpu=1e12), np.array([0.05, 0.7]), np.zeros(2), running, Guardrails(), now=100)
    assert cut_deep_on_step(p, near, running, None, stepped_up, over=True, live=True, hysteresis=0.1) is near  # a sliver


def test_under_the_bound_a_sliver_cut_of_a_query_whose_rate_stepped_up_goes_as_deep_as_frees_what_it_holds():
    """The s40 fleet run: right after the step the rate is measured half-way up it, and the cut the bound asked of a
    count was 16 → 15.5 s, whose migration held both plans for 22 s of the burst while the deeper cut waited. Under the
    bound such a cut (freeing less than its new plan holds) goes to the largest window whose state is at most half the
    old one; a cut freeing more than it holds is left as decided, and so is a sliver of a query whose input did not
    step."""
    p = two_queries()
    running = Running(np.ones(2), np.zeros(2), np.array([0.0, 0.0]))
    slivers = guard(p, Bounds(memory=1e12, cpu=1e12), np.array([0.95, 0.9]), np.zeros(2), running, Guardrails(), now=100)
    deep = cut_deep_on_step(p, slivers, running, None, np.array([True, False]), over=False, live=True)
    assert deep.deepened == ("big",) and deep.fw[1] == 0.9 and 0 < deep.fw[0] < 0.95

    def state(fw: float) -> float:
        return float(p.evaluate(np.array([fw, 0.9]), np.zeros(2)).query_memory[0])

    half = state(1.0) / 2
    assert state(deep.fw[0]) <= half < state(deep.fw[0] + 0.95 / 32)  # the largest share of the decided cut that halves
    assert float(deep.outcome.total_memory) == float(p.evaluate(deep.fw, np.zeros(2)).total_memory)
    deeper = guard(p, Bounds(memory=1e12, cpu=1e12), np.array([0.3, 0.9]), np.zeros(2), running, Guardrails(), now=100)
    assert cut_deep_on_step(p, deeper, running, None, np.array([True, False]), over=False, live=True) is deeper
    assert cut_deep_on_step(p, slivers, running, None, np.array([False, False]), over=False, live=True) is slivers
