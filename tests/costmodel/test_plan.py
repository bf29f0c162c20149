"""Plan parsing: the JSON shape, auto ids, DAG sharing, and every rejected plan.

Every bad plan must raise ``PlanError`` with a message that names the place
(the node, stream or constants) and says what is allowed.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from armd.costmodel import evaluate as evaluate_module
from armd.costmodel.constants import CostConstants
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import PlanError, PlanSet, parse_plan


def approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=1e-12)


SOURCE_A = {"op": "source", "stream": "A"}

ISSUE_SHAPE: dict[str, Any] = {
    "streams": {"A": {"d": 10, "g": 1, "size": 64}},
    "constants": {"C_H": 1},
    "queries": {
        "q1": {
            "op": "join",
            "sel": 0.5,
            "buckets": 4,
            "inputs": [
                {"op": "window", "id": "wa", "w": 9, "inputs": [{"op": "source", "stream": "A"}]},
                {"ref": "wa"},
            ],
        }
    },
}


def plan_with(queries: dict[str, Any], streams: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    doc = {"streams": streams or {"A": {"d": 10, "g": 1, "size": 64}, "B": {"d": 5, "g": 2, "size": 32}}}
    doc["queries"] = queries
    doc.update(extra)
    return doc


# --- the document shape -------------------------------------------------------------------------


def test_issue_json_shape_parses_and_evaluates() -> None:
    """The issue's shape: streams, constants, queries with a ``{"ref": id}``; here a self-join
    of the shared window "wa" (both join inputs are the same node).

      A = (10, 1, 1), s = 64; wa: (7) d' = 1·10/1 = 10, l' = ⌊10/1⌋·1 = 10; C = 0.1·C_S = 0.1
      join (wa, wa), sel 0.5, 4 buckets, all constants 1:
        (9)  M = 2·(⌈10/10⌉ + 10/(2·10))·64 = 2·1.5·64 = 192
        (11) 0.2·3 = 0.6; (12) 0.01·(10/4 + 10/4) + 0.2 = 0.25; (13) 0.5·20·0.01 = 0.1; (14) 0.2·4 = 0.8
        C = 1.75;  output (4)+(2): d' = 100/(20·0.5) = 10, l' = 100/20 = 5
      q1: M = 192, C = 0.1 + 1.75 = 1.85 (wa counted once although used twice)
    """
    plan = parse_plan(copy.deepcopy(ISSUE_SHAPE))
    assert isinstance(plan, PlanSet)
    spec = plan.streams["A"]
    assert (spec.d, spec.g, spec.size) == (10.0, 1.0, 64.0)
    assert plan.constants.C_H == 1.0
    assert plan.queries == {"q1": "q1"}
    assert plan.nodes["q1"].inputs == ("wa", "wa")
    assert plan.query_nodes("q1") == ("wa.0", "wa", "q1")
    result = estimate(plan)
    join = result.nodes["q1"]
    assert (join.out.d, join.out.l) == (approx(10.0), approx(5.0))
    assert (join.memory, join.cpu) == (approx(192.0), approx(1.75))
    assert result.queries["q1"].memory == approx(192.0)
    assert result.queries["q1"].cpu == approx(1.85)
    assert result.total.cpu == approx(1.85)


def test_constants_override_only_the_named_constants() -> None:
    plan = parse_plan(plan_with({"q": SOURCE_A}, constants={"C_H": 2.5, "buckets": 16}))
    assert plan.constants.C_H == 2.5 and plan.constants.buckets == 16
    assert plan.constants.C_B == CostConstants().C_B


def test_rate_is_the_reciprocal_of_d_and_g_defaults_to_1() -> None:
    plan = parse_plan({"streams": {"A": {"rate": 0.25, "size": 8}}, "queries": {"q": SOURCE_A}})
    assert (plan.streams["A"].d, plan.streams["A"].g) == (4.0, 1.0)
    out = plan.streams["A"].characteristics
    assert (out.d, out.l, out.g) == (4.0, 1.0, 1.0)  # a source has l = g


def test_auto_ids_follow_the_position() -> None:
    """Root of query q is "q", its first input "q.0", that node's second input "q.0.1";
    a named node keeps its name and its inputs are numbered from it ("x.0")."""
    doc = plan_with(
        {
            "q": {
                "op": "aggregate",
                "inputs": [
                    {
                        "op": "union",
                        "inputs": [
                            SOURCE_A,
                            {"op": "select", "sel": 0.5, "inputs": [SOURCE_A]},
                            {"op": "project", "id": "x", "inputs": [SOURCE_A]},
                        ],
                    }
                ],
            }
        }
    )
    plan = parse_plan(doc)
    assert set(plan.nodes) == {"q", "q.0", "q.0.0", "q.0.1", "q.0.1.0", "x", "x.0"}
    assert plan.nodes["q.0"].inputs == ("q.0.0", "q.0.1", "x")
    order = list(plan.nodes)
    for node in plan.nodes.values():  # topological: inputs first
        assert all(order.index(i) < order.index(node.id) for i in node.inputs)


# --- DAG sharing -----------------------------------------------------------------------------------

SHARED = plan_with(
    {
        "q1": {"op": "select", "sel": 0.5, "inputs": [{"ref": "agg"}]},
        "q2": {
            "op": "project",
            "inputs": [
                {
                    "op": "aggregate",
                    "id": "agg",
                    "inputs": [{"op": "window", "w": 99, "inputs": [SOURCE_A]}],
                }
            ],
        },
    },
    constants={"C_S": 2, "C_P": 3, "C_F": 5, "C_O": 7, "C_U": 11, "C_L": 13, "C_I": 17},
)
"""q1 references "agg", which is defined later, inside q2 (a forward reference)."""


def test_shared_node_is_evaluated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = evaluate_module.evaluate_node

    def counting(node, inputs, plan, profile):  # type: ignore[no-untyped-def]
        calls.append(node.id)
        return original(node, inputs, plan, profile)

    monkeypatch.setattr(evaluate_module, "evaluate_node", counting)
    estimate(parse_plan(copy.deepcopy(SHARED)))
    assert sorted(calls) == sorted(["agg", "agg.0", "agg.0.0", "q1", "q2"])


def test_shared_node_counts_in_every_query_and_once_in_the_total() -> None:
    """A = (10, 1, 1); window w = 99: (10, 100, 1), C = 0.1·C_S = 0.2.
    agg (d = 10 < l = 100, s = 48 default, hit(10, 1) = 0.1, d' = 1/(1 − 0.9^2) = 1/0.19):
      (15) M = ⌈100·0.1⌉·48 = 480
      (17) (100/10)·0.1·(C_O + C_U) = 1·18 = 18; (18) 13/10 + 17/20 = 2.15;
      (19) (7 + 13)·0.19 + 7/10 = 4.5;  C = 24.65; output rate 0.19
    q1 select: 0.19·C_P = 0.57;  q2 project: 0.19·C_F = 0.95
      q1: M = 480, C = 0.2 + 24.65 + 0.57 = 25.42
      q2: M = 480, C = 0.2 + 24.65 + 0.95 = 25.80
      total: M = 480 (not 960), C = 0.2 + 24.65 + 0.57 + 0.95 = 26.37 (not 51.22)
    """
    plan = parse_plan(copy.deepcopy(SHARED))
    assert set(plan.query_nodes("q1")) == {"q1", "agg", "agg.0", "agg.0.0"}
    assert set(plan.query_nodes("q2")) == {"q2", "agg", "agg.0", "agg.0.0"}
    result = estimate(plan)
    assert result.nodes["agg"].memory == approx(480.0)
    assert result.nodes["agg"].cpu == approx(24.65)
    assert result.queries["q1"].memory == approx(480.0)
    assert result.queries["q1"].cpu == approx(25.42)
    assert result.queries["q2"].memory == approx(480.0)
    assert result.queries["q2"].cpu == approx(25.8)
    assert result.total.memory == approx(480.0)
    assert result.total.cpu == approx(26.37)


def test_a_query_may_be_a_reference_to_another_querys_node() -> None:
    doc = plan_with(
        {"q1": {"op": "window", "id": "w", "w": 9, "inputs": [SOURCE_A]}, "q2": {"ref": "w"}}
    )
    plan = parse_plan(doc)
    assert plan.queries == {"q1": "w", "q2": "w"}
    result = estimate(plan)
    assert result.queries["q1"] == result.queries["q2"] == result.total


# --- rejected plans ----------------------------------------------------------------------------------


def src(stream: str = "A") -> dict[str, Any]:
    return {"op": "source", "stream": stream}


BAD_PLANS: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "unknown operator",
        plan_with({"q1": {"op": "filter", "inputs": [src()]}}),
        ["node 'q1'", "unknown operator 'filter'", "allowed: source, window, granularity, select, project, union, join, aggregate"],
    ),
    (
        "unknown parameter",
        plan_with({"q1": {"op": "window", "w": 3, "sel": 0.5, "inputs": [src()]}}),
        ["node 'q1' (window)", "unknown parameter(s) ['sel']", "allowed parameters: c, w"],
    ),
    (
        "missing selectivity",
        plan_with({"q1": {"op": "select", "inputs": [src()]}}),
        ["node 'q1' (select)", "missing sel", "(0, 1]"],
    ),
    (
        "missing join selectivity",
        plan_with({"q1": {"op": "join", "id": "j", "inputs": [src(), src()]}}),
        ["node 'j' (join)", "missing sel", "(0, 1]"],
    ),
    (
        "missing window size",
        plan_with({"q1": {"op": "window", "inputs": [src()]}}),
        ["node 'q1' (window)", "exactly one of w", "or c"],
    ),
    (
        "both window sizes",
        plan_with({"q1": {"op": "window", "w": 3, "c": 3, "inputs": [src()]}}),
        ["node 'q1' (window)", "exactly one of w", "or c"],
    ),
    (
        "missing granularity",
        plan_with({"q1": {"op": "granularity", "inputs": [src()]}}),
        ["node 'q1' (granularity)", "missing g", "> 0"],
    ),
    (
        "missing stream",
        plan_with({"q1": {"op": "select", "sel": 0.5, "inputs": [{"op": "source"}]}}),
        ["node 'q1.0' (source)", "declared streams: A, B"],
    ),
    (
        "missing stream size",
        {"streams": {"A": {"d": 1}}, "queries": {"q1": src()}},
        ["stream 'A'", "missing size", "> 0"],
    ),
    (
        "wrong arity",
        plan_with({"q1": {"op": "join", "sel": 1, "inputs": [src()]}}),
        ["node 'q1' (join)", "exactly two inputs", "got 1"],
    ),
    (
        "negative window",
        plan_with({"q1": {"op": "window", "w": -3, "inputs": [src()]}}),
        ["node 'q1' (window)", "w must be > 0", "-3"],
    ),
    (
        "zero tuple count",
        plan_with({"q1": {"op": "window", "c": 0, "inputs": [src()]}}),
        ["node 'q1' (window)", "c must be > 0"],
    ),
    (
        "fractional tuple count",
        plan_with({"q1": {"op": "window", "c": 2.5, "inputs": [src()]}}),
        ["node 'q1' (window)", "c must be a whole number ≥ 1"],
    ),
    (
        "negative granularity",
        plan_with({"q1": {"op": "granularity", "g": -2, "inputs": [src()]}}),
        ["node 'q1' (granularity)", "g must be > 0", "-2"],
    ),
    (
        "negative groups",
        plan_with({"q1": {"op": "aggregate", "groups": -2, "inputs": [src()]}}),
        ["node 'q1' (aggregate)", "groups must be > 0", "-2"],
    ),
    (
        "negative aggregate size",
        plan_with({"q1": {"op": "aggregate", "size": -48, "inputs": [src()]}}),
        ["node 'q1' (aggregate)", "size must be > 0", "-48"],
    ),
    (
        "negative buckets",
        plan_with({"q1": {"op": "join", "sel": 1, "buckets": [4, -1], "inputs": [src(), src()]}}),
        ["node 'q1' (join)", "buckets must be > 0", "-1"],
    ),
    (
        "negative stream distance",
        {"streams": {"A": {"d": -1, "size": 8}}, "queries": {"q1": src()}},
        ["stream 'A'", "d must be > 0", "-1"],
    ),
    (
        "negative constant",
        plan_with({"q1": src()}, constants={"C_P": -1}),
        ["constants", "C_P", "≥ 0", "-1"],
    ),
    (
        "selectivity above 1",
        plan_with({"q1": {"op": "select", "sel": 1.5, "inputs": [src()]}}),
        ["node 'q1' (select)", "sel must be in (0, 1]", "1.5"],
    ),
    (
        "selectivity 0",
        plan_with({"q1": {"op": "join", "id": "j", "sel": 0, "inputs": [src(), src()]}}),
        ["node 'j' (join)", "sel must be in (0, 1]", "got 0"],
    ),
    (
        "negative selectivity",
        plan_with({"q1": {"op": "select", "sel": -0.1, "inputs": [src()]}}),
        ["node 'q1' (select)", "sel must be in (0, 1]", "-0.1"],
    ),
    (
        "cycle",
        plan_with(
            {
                "q1": {
                    "op": "select", "id": "a", "sel": 0.5,
                    "inputs": [{"op": "select", "id": "b", "sel": 0.5, "inputs": [{"ref": "a"}]}],
                }
            }
        ),
        ["node 'a'", "cycle (a → b → a)", "must be acyclic"],
    ),
    (
        "self cycle",
        plan_with({"q1": {"op": "select", "id": "a", "sel": 0.5, "inputs": [{"ref": "a"}]}}),
        ["node 'a'", "cycle (a → a)", "must be acyclic"],
    ),
    (
        "unknown stream",
        plan_with({"q1": {"op": "select", "sel": 0.5, "inputs": [src("Z")]}}),
        ["node 'q1.0' (source)", "unknown stream 'Z'", "declared streams: A, B"],
    ),
    (
        "unknown ref",
        plan_with({"q1": {"op": "select", "sel": 0.5, "inputs": [{"ref": "nope"}]}}),
        ["node 'q1'", "no node has id 'nope'"],
    ),
    (
        "different granularities at a join",
        plan_with({"q1": {"op": "join", "id": "j", "sel": 1, "inputs": [src("A"), src("B")]}}),
        ["node 'j' (join)", "different granularities 1 (j.0), 2 (j.1)", "put a granularity operator on the finer"],
    ),
    (
        "different granularities at a union",
        plan_with({"q1": {"op": "union", "inputs": [src("B"), src("A"), src("B")]}}),
        ["node 'q1' (union)", "different granularities", "same g"],
    ),
    (
        "granularity not a multiple",
        plan_with({"q1": {"op": "granularity", "g": 1.5, "inputs": [src()]}}),
        ["node 'q1' (granularity)", "g=1.5 is not a coarser granularity", "allowed: a whole multiple of 1"],
    ),
    (
        "granularity finer than its input",
        plan_with({"q1": {"op": "granularity", "g": 1, "inputs": [src("B")]}}),
        ["node 'q1' (granularity)", "g=1 is not a coarser granularity", "allowed: a whole multiple of 2"],
    ),
    (
        "duplicate id",
        plan_with(
            {
                "q1": {"op": "window", "id": "x", "w": 1, "inputs": [src()]},
                "q2": {"op": "window", "id": "x", "w": 2, "inputs": [src()]},
            }
        ),
        ["node 'x'", "id used twice", '{"ref": "x"}'],
    ),
    (
        "unknown constant",
        plan_with({"q1": src()}, constants={"C_X": 1}),
        ["constants", "unknown cost constant 'C_X'", "valid names: C_H, C_B, C_R"],
    ),
]


@pytest.mark.parametrize(("doc", "fragments"), [p[1:] for p in BAD_PLANS], ids=[p[0] for p in BAD_PLANS])
def test_bad_plan_is_rejected_naming_the_node_and_what_is_allowed(doc: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(PlanError) as caught:
        parse_plan(doc)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_unknown_ref_at_a_query_root_names_the_query() -> None:
    with pytest.raises(PlanError, match="q1") as caught:
        parse_plan(plan_with({"q1": {"ref": "nope"}}))
    assert "no node has id 'nope'" in str(caught.value)


def test_granularity_accepted_as_the_same_is_the_identity() -> None:
    """Source A (10, 1, 1) → granularity g = 1 + 10^−10: accepted as 1× its input's g, so it
    must round nothing: (10, 1, 1). armd applies (8)'s third case (l = 1 ≤ ĝ) → empty."""
    plan = parse_plan(plan_with({"q1": {"op": "granularity", "g": 1 + 1e-10, "inputs": [src()]}}))
    out = estimate(plan).nodes["q1"].out
    assert not out.is_empty


def test_values_that_would_overflow_a_formula_are_rejected() -> None:
    """w = 1e308 on a g = 0.5 source would make ⌊(w + 1)/g⌋ overflow in formula 7; the plan
    is rejected up front, naming the bound, instead of crashing in the evaluator."""
    with pytest.raises(PlanError, match=r"node 'q1' \(window\): w must be > 0 and at most 1e\+12"):
        parse_plan(
            plan_with({"q1": {"op": "window", "w": 1e308, "inputs": [src("H")]}}, streams={"H": {"d": 1, "g": 0.5, "size": 8}})
        )
