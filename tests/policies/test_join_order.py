"""The join-ordering policy: cost of an order from formulas 9–14, exact and greedy search, margin and cool-down."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from armd.policies.join_order import (
    JoinOrderState,
    JoinStats,
    best_order,
    decide,
    join_tree,
    plan_cost,
    plan_in_order,
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


def test_decide_prices_the_migration_with_parallel_track_and_keeps_an_order_the_saving_does_not_pay_back():
    """Three levels of joins: the old tree keeps processing for 2W; the saving must cover that within ``payback``."""
    s = stats({"fast": 100.0, "a": 1.0, "b": 1.0, "c": 1.0})
    bad = ((("fast", "a"), "b"), "c")
    first = decide(bad, s, now=0.0, margin=0.2, cooldown=60.0)
    window = max(s.windows.values())
    needed = first.current_cost * 2 * window / (first.current_cost - first.best_cost)  # payback time of the migration
    paid = decide(bad, s, now=0.0, margin=0.2, cooldown=60.0, payback=needed * 1.01)
    assert paid.migrate
    unpaid = decide(bad, s, now=0.0, margin=0.2, cooldown=60.0, payback=needed * 0.99)
    assert not unpaid.migrate and "Parallel Track" in unpaid.reason and unpaid.order == bad


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


# --- the cost model's plan of a reordered join ----------------------------------------------------


def join_plan(s: JoinStats, order) -> dict:
    """A plan document: the streams of ``s`` joined in ``order`` over one window per stream."""
    def tree(o):
        if isinstance(o, str):
            return {"op": "window", "id": f"w_{o}", "w": s.windows[o], "inputs": [{"op": "source", "stream": o}]}
        return {"op": "join", "sel": s.default_selectivity, "inputs": [tree(o[0]), tree(o[1])]}
    return {"streams": {n: {"rate": r, "g": 1, "size": 64} for n, r in s.rates.items()}, "queries": {"q": tree(order)}}


def random_order(rnd, names):
    forest = list(names)
    rnd.shuffle(forest)
    while len(forest) > 1:
        i = rnd.randrange(len(forest) - 1)
        forest[i:i + 2] = [(forest[i], forest[i + 1])]
    return forest[0]


@settings(max_examples=40, deadline=None)
@given(join_stats(2, 5), st.randoms(use_true_random=False))
def test_the_cost_model_of_a_reordered_plan_differs_between_orders_as_the_policy_does(s, rnd):
    """Whatever order the plan was written in, rebuilding it in o1 and o2 moves the model's CPU by plan_cost(o1) − plan_cost(o2)."""
    plan = parse_plan(join_plan(s, random_order(rnd, s.names)))
    o1, o2 = random_order(rnd, s.names), random_order(rnd, s.names)
    cpu = [estimate(plan_in_order(plan, "q", o, s.selectivity, s.default_selectivity)).queries["q"].cpu for o in (o1, o2)]
    expected = plan_cost(o1, s) - plan_cost(o2, s)
    assert cpu[0] - cpu[1] == pytest.approx(expected, rel=1e-9, abs=1e-9 * max(cpu))


def test_rebuilding_a_join_in_its_own_order_changes_no_estimate_and_keeps_the_node_ids():
    s = stats({"a": 2.0, "b": 2.0, "c": 8.0}, sel=0.1)
    plan = parse_plan(join_plan(s, (("a", "c"), "b")))
    joins, inputs = join_tree(plan, "q")
    assert inputs == {"a": "w_a", "b": "w_b", "c": "w_c"} and joins[-1] == plan.queries["q"]
    same = plan_in_order(plan, "q", (("a", "c"), "b"), {}, 0.1)
    totals = [(t.memory, t.cpu) for t in (estimate(same).total, estimate(plan).total)]
    assert totals[0] == pytest.approx(totals[1])
    other = plan_in_order(plan, "q", (("b", "a"), "c"), {frozenset("ab"): 0.5}, 0.1)
    lower, root = (other.nodes[j] for j in joins)
    assert lower.inputs == ("w_b", "w_a") and root.inputs == (lower.id, "w_c") and plan.queries["q"] == root.id
    # g(S) = (geometric mean of S's pairs)^(|S| − 1); the root's cut is g(abc) / g(ab)
    assert lower.sel == pytest.approx(0.5) and root.sel == pytest.approx((0.5 * 0.1 * 0.1) ** (2 / 3) / 0.5)


def test_only_a_tree_of_joins_over_one_input_per_stream_can_be_rebuilt():
    s = stats({"a": 1.0, "b": 1.0, "c": 1.0})
    doc = join_plan(s, (("a", "b"), "c"))
    doc["queries"]["other"] = {"ref": doc["queries"]["q"]["inputs"][0].setdefault("id", "ab")}
    with pytest.raises(ValueError, match=r"shared with \['other'\]"):
        join_tree(parse_plan(doc), "q")
    doc = join_plan(s, (("a", "b"), "c"))
    doc["queries"]["q"]["inputs"][1]["inputs"] = [{"op": "union", "inputs": [{"op": "source", "stream": "c"},
                                                                            {"op": "source", "stream": "a"}]}]
    with pytest.raises(ValueError, match="reads \\['a', 'c'\\]: each input"):
        join_tree(parse_plan(doc), "q")
    with pytest.raises(ValueError, match="root 'w_a' is 'window'"):
        join_tree(parse_plan(join_plan(s, "a")), "q")
    with pytest.raises(ValueError, match="must name each stream"):
        plan_in_order(parse_plan(join_plan(s, (("a", "b"), "c"))), "q", ("a", "b"), {}, 0.1)
