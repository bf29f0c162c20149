"""The join-ordering policy: cost of an order from formulas 9–14, exact and greedy search, margin and cool-down."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.policies.join_order import (
    JoinOrderState,
    JoinStats,
    best_order,
    decide,
    plan_cost,
    shape_of,
)


def left_deep(names):
    order = names[0]
    for n in names[1:]:
        order = (order, n)
    return order


def stats(rates, sel=0.01, window=10.0, pairs=None):
    return JoinStats(rates=rates, windows={n: window for n in rates}, selectivity=pairs or {},
                     default_selectivity=sel)


@st.composite
def join_stats(draw, low=2, high=5):
    n = draw(st.integers(low, high))
    names = [f"s{i}" for i in range(n)]
    rates = {s: draw(st.floats(0.01, 50)) for s in names}
    pairs = {frozenset(p): draw(st.floats(0.001, 1)) for p in itertools.combinations(names, 2)}
    return JoinStats(rates=rates, windows={s: draw(st.floats(1, 100)) for s in names}, selectivity=pairs)


@settings(max_examples=60, deadline=None)
@given(join_stats())
def test_left_deep_search_is_the_minimum_over_all_permutations(s):
    order, cost = best_order(s, "left-deep")
    brute = min(plan_cost(left_deep(list(p)), s) for p in itertools.permutations(s.names))
    assert cost == pytest.approx(brute, rel=1e-9)
    assert plan_cost(order, s) == pytest.approx(cost, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(join_stats())
def test_bushy_is_never_worse_than_left_deep_and_greedy_never_beats_exact(s):
    _, deep = best_order(s, "left-deep")
    bushy_order, bushy = best_order(s, "bushy")
    assert bushy <= deep * (1 + 1e-9)
    assert plan_cost(bushy_order, s) == pytest.approx(bushy, rel=1e-9)
    for shape in ("left-deep", "bushy"):
        greedy_order, greedy = best_order(s, shape, exact_limit=1)
        assert greedy >= best_order(s, shape)[1] * (1 - 1e-9)
        assert plan_cost(greedy_order, s) == pytest.approx(greedy, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(join_stats(3, 5))
def test_cost_is_positive_and_symmetric_in_the_inputs_of_a_join(s):
    names = list(s.names)
    order = left_deep(names)
    swapped = (order[1], order[0])
    assert plan_cost(order, s) > 0
    assert plan_cost(swapped, s) == pytest.approx(plan_cost(order, s), rel=1e-12)
    assert shape_of(order) == shape_of(swapped)


def test_the_fast_stream_joins_last():
    s = stats({"fast": 100.0, "a": 1.0, "b": 1.0, "c": 1.0})
    order, _ = best_order(s, "left-deep")
    assert order[1] == "fast"


def test_a_selective_pair_joins_first():
    s = stats({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}, sel=0.5, pairs={frozenset({"c", "d"}): 0.001})
    order, _ = best_order(s, "left-deep")
    assert set(order[0][0]) == {"c", "d"}


def test_greedy_covers_twenty_one_streams():
    names = [f"s{i:02d}" for i in range(21)]
    s = stats({n: 1.0 + i for i, n in enumerate(names)})
    for shape in ("left-deep", "bushy"):
        order, cost = best_order(s, shape)
        assert plan_cost(order, s) == pytest.approx(cost)
        assert len(shape_of(order)) == 20


def test_decide_migrates_beyond_the_margin_and_then_waits_for_the_cool_down():
    s = stats({"fast": 100.0, "a": 1.0, "b": 1.0, "c": 1.0})
    bad = ((("fast", "a"), "b"), "c")
    first = decide(bad, s, now=0.0, margin=0.2, cooldown=60.0)
    assert first.migrate and first.best_cost < 0.8 * first.current_cost
    assert first.state == JoinOrderState(last_migration=0.0)
    assert shape_of(first.order) == shape_of(best_order(s)[0])
    again = decide(bad, s, now=30.0, state=first.state, margin=0.2, cooldown=60.0)
    assert not again.migrate and "cool-down" in again.reason and again.order == bad
    later = decide(bad, s, now=61.0, state=first.state, margin=0.2, cooldown=60.0)
    assert later.migrate and later.state.last_migration == 61.0


def test_decide_keeps_an_order_within_the_margin():
    s = stats({"a": 1.0, "b": 1.1, "c": 1.2})
    best, _ = best_order(s)
    kept = decide(best, s, now=0.0)
    assert not kept.migrate and "margin" in kept.reason
    near = decide(best, s, now=0.0, margin=0.99)
    assert not near.migrate


def test_inputs_are_validated():
    with pytest.raises(ValueError, match="rate"):
        stats({"a": 0.0, "b": 1.0})
    with pytest.raises(ValueError, match="selectivity"):
        stats({"a": 1.0, "b": 1.0}, sel=0.0)
    with pytest.raises(ValueError, match="same streams"):
        JoinStats(rates={"a": 1.0, "b": 1.0}, windows={"a": 1.0})
    with pytest.raises(ValueError, match="shape"):
        best_order(stats({"a": 1.0, "b": 1.0}), "star")
    with pytest.raises(ValueError, match="covers"):
        plan_cost(("a", "b"), stats({"a": 1.0, "b": 1.0, "c": 1.0}))
    with pytest.raises(ValueError, match="margin"):
        decide(("a", "b"), stats({"a": 1.0, "b": 1.0}), now=0.0, margin=1.5)
