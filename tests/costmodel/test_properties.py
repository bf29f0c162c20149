"""Properties of paper 001's cost model over its valid domain (Hypothesis).

The domain drawn here: d from 10^−3 (a thousand elements per time unit, so
d < 1 and the Poisson limit) to 10^9 (one element per 10^9 time units),
granularities 10^−2 … 10^4, windows 10^−2 … 10^12 time units, tuple windows of
1 … 10^6 elements, selectivities 10^−6 … 1, 1 … 1000 groups, element sizes
1 … 10^4 bytes and cost constants 0 … 100. Plans are parsed and evaluated end
to end (``parse_plan`` + ``estimate``) unless a property is about a single
formula.

Only what the model guarantees is asserted; where an intuitive property does
NOT hold in the paper's model, the docstring says why and a concrete test
pins the counterexample (formula 9's purge-growth term, the d = 1 seam of the
Poisson limit).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armd.costmodel import formulas as f
from armd.costmodel.characteristics import Stream
from armd.costmodel.constants import CostConstants
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan

settings.register_profile(
    "armd-properties",
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
PROPERTY = settings.get_profile("armd-properties")

REL = 1e-12
"""Slack for 'never decreases': float noise only, far below any real model step."""


def log_uniform(low_exp: float, high_exp: float) -> st.SearchStrategy[float]:
    return st.floats(low_exp, high_exp, allow_nan=False).map(lambda e: float(10.0**e))


D = log_uniform(-3, 9)
G = log_uniform(-2, 4)
W = log_uniform(-2, 12)
COUNT = st.integers(1, 10**6)
SEL = log_uniform(-6, 0)
SIZE = log_uniform(0, 4)
GROUPS = st.integers(1, 1000)
MULTIPLE = st.integers(1, 50)
BUCKETS = st.integers(1, 4096)
KIND = st.sampled_from(["hash", "nested"])
CONSTANT = st.one_of(st.just(0.0), st.floats(0.0, 100.0, allow_nan=False))
CONSTANTS = st.fixed_dictionaries(
    {name: CONSTANT for name in CostConstants.names() if name not in ("aggregate_size", "buckets")}
)


def source(stream: str) -> dict[str, Any]:
    return {"op": "source", "stream": stream}


def window(spec: dict[str, float], child: dict[str, Any]) -> dict[str, Any]:
    return {"op": "window", **spec, "inputs": [child]}


def evaluate(streams: dict[str, Any], query: dict[str, Any], constants: dict[str, float] | None = None):
    doc: dict[str, Any] = {"streams": streams, "queries": {"q": query}}
    if constants:
        doc["constants"] = constants
    return estimate(parse_plan(doc))


def memory(streams: dict[str, Any], query: dict[str, Any]) -> float:
    return evaluate(streams, query).total.memory


@st.composite
def growing_windows(draw: st.DrawFn) -> tuple[dict[str, float], dict[str, float]]:
    """Two window specs of one kind, the second at least as large: time (w) or tuple (c)."""
    if draw(st.booleans()):
        a, b = sorted((draw(W), draw(W)))
        return {"w": a}, {"w": b}
    a, b = sorted((draw(COUNT), draw(COUNT)))
    return {"c": a}, {"c": b}


def window_spec() -> st.SearchStrategy[dict[str, float]]:
    return st.one_of(W.map(lambda w: {"w": w}), COUNT.map(lambda c: {"c": c}))


def assert_not_larger(smaller: float, larger: float) -> None:
    assert smaller <= larger * (1 + REL) + 1e-300, (smaller, larger)


# --- memory grows with the window ------------------------------------------------------------


@PROPERTY
@given(
    d_a=D, d_b=D, g=G, windows=growing_windows(), other=window_spec(),
    size_a=SIZE, size_b=SIZE, sel=SEL, kind=KIND, buckets=BUCKETS,
)
def test_window_join_memory_never_decreases_as_a_window_grows(
    d_a, d_b, g, windows, other, size_a, size_b, sel, kind, buckets
) -> None:
    """window → join: (7) gives l' = ⌊(w+1)/g⌋g, non-decreasing in w, and d' = g·d/l
    independent of w; (9) is non-decreasing in each l. A window that is empty
    (l' = 0) contributes no state; when it becomes non-empty its own state and
    the other side's purge-growth term d_j/(2d_i) both appear, so memory only
    grows. Tuple windows (w = c·d) grow with c."""
    streams = {"A": {"d": d_a, "g": g, "size": size_a}, "B": {"d": d_b, "g": g, "size": size_b}}

    def plan(spec: dict[str, float]) -> dict[str, Any]:
        return {
            "op": "join", "sel": sel, "kind": kind, "buckets": buckets,
            "inputs": [window(spec, source("A")), window(other, source("B"))],
        }

    small, large = windows
    assert_not_larger(memory(streams, plan(small)), memory(streams, plan(large)))


@PROPERTY
@given(d=D, g=G, windows=growing_windows(), multiple=MULTIPLE, groups=GROUPS, size=SIZE)
def test_window_granularity_aggregate_memory_never_decreases_as_the_window_grows(
    d, g, windows, multiple, groups, size
) -> None:
    """window → granularity ĝ = m·g → aggregate: (8) maps a longer l to a longer
    (or equally long) l' and, in its middle case, to a smaller d'; (15) is
    non-decreasing in l and ⌈·⌉ ≥ 1 whenever d < l, so M never falls below the
    s of the d ≥ l case."""
    streams = {"A": {"d": d, "g": g, "size": size}}

    def plan(spec: dict[str, float]) -> dict[str, Any]:
        coarse = {"op": "granularity", "g": multiple * g, "inputs": [window(spec, source("A"))]}
        return {"op": "aggregate", "groups": groups, "size": size, "inputs": [coarse]}

    small, large = windows
    assert_not_larger(memory(streams, plan(small)), memory(streams, plan(large)))


@PROPERTY
@given(d=D, g=G, windows=growing_windows(), groups=GROUPS, size=SIZE)
def test_window_aggregate_memory_never_decreases_as_the_window_grows(d, g, windows, groups, size) -> None:
    """window → aggregate with n groups: n scalar aggregations over (n·d, l, g);
    (15) is non-decreasing in l for fixed d, g."""
    streams = {"A": {"d": d, "g": g, "size": size}}

    def plan(spec: dict[str, float]) -> dict[str, Any]:
        return {"op": "aggregate", "groups": groups, "size": size, "inputs": [window(spec, source("A"))]}

    small, large = windows
    assert_not_larger(memory(streams, plan(small)), memory(streams, plan(large)))


# --- a coarser granularity never costs more aggregation memory --------------------------------


@PROPERTY
@given(d=D, g=G, spec=window_spec(), m=MULTIPLE, extra=st.integers(1, 50), groups=GROUPS, size=SIZE)
def test_coarser_granularity_never_increases_aggregation_memory(d, g, spec, m, extra, groups, size) -> None:
    """window → granularity m·g → aggregate versus (m + k)·g. With G = m·g, case 1 of
    (8) feeds (15) with (l − G)/G · (1 − (1 − 1/d)^G): (l/G − 1) falls with G and
    h(G) = 1 − (1 − 1/d)^G is concave with h(0) = 0, so l·h(G)/G − h(G) falls
    too (same for the Poisson form 1 − e^(−G/d)); cases 2 and 3 give s and 0.
    m = 1 is the identity (ĝ == g), which keeps the full l, so it costs at least
    as much as any coarser ĝ."""
    streams = {"A": {"d": d, "g": g, "size": size}}

    def plan(multiple: int) -> dict[str, Any]:
        coarse = {"op": "granularity", "g": multiple * g, "inputs": [window(spec, source("A"))]}
        return {"op": "aggregate", "groups": groups, "size": size, "inputs": [coarse]}

    assert_not_larger(memory(streams, plan(m + extra)), memory(streams, plan(m)))


# --- nothing is negative, infinite or NaN -----------------------------------------------------


def assert_sound_stream(s: Stream) -> None:
    assert not math.isnan(s.d) and not math.isnan(s.l) and not math.isnan(s.g)
    assert s.d > 0 and s.l >= 0 and math.isfinite(s.l) and s.g > 0 and math.isfinite(s.g)
    assert s.is_empty == (s.l == 0.0)


def assert_sound_cost(memory: float, cpu: float) -> None:
    for value in (memory, cpu):
        assert not math.isnan(value)
        assert math.isfinite(value) and value >= 0, (memory, cpu)


@PROPERTY
@given(
    d_a=D, d_b=D, g=G, wa=window_spec(), wb=window_spec(), sel=SEL, jsel=SEL, kind=KIND,
    buckets=st.tuples(BUCKETS, BUCKETS), m=MULTIPLE, groups=GROUPS, groups2=GROUPS,
    size_a=SIZE, size_b=SIZE, psize=SIZE, constants=CONSTANTS,
)
def test_no_operator_produces_negative_or_nan_values(
    d_a, d_b, g, wa, wb, sel, jsel, kind, buckets, m, groups, groups2, size_a, size_b, psize, constants
) -> None:
    """A plan with every operator (both window kinds, selection, projection, join of
    either kind, union, granularity, scalar and group-by aggregation) over the
    whole domain, including d < 1, huge windows, tiny rates and zero constants:
    every output is a valid (d, l, g) and every memory and CPU value is finite
    and ≥ 0."""
    streams = {"A": {"d": d_a, "g": g, "size": size_a}, "B": {"d": d_b, "g": g, "size": size_b}}
    left = {
        "op": "project", "size": psize,
        "inputs": [{"op": "select", "sel": sel, "inputs": [window(wa, source("A"))]}],
    }
    right = window(wb, source("B"))
    join = {
        "op": "join", "id": "j", "sel": jsel, "kind": kind, "buckets": list(buckets),
        "inputs": [left, {"op": "window", "id": "wb", **wb, "inputs": [source("B")]}],
    }
    union = {"op": "union", "inputs": [join, {"ref": "wb"}, right]}
    query = {
        "op": "union",
        "inputs": [
            {"op": "aggregate", "groups": groups,
             "inputs": [{"op": "granularity", "g": m * g, "inputs": [union]}]},
            {"op": "granularity", "g": m * g, "inputs": [{"op": "aggregate", "groups": groups2, "inputs": [{"ref": "j"}]}]},
        ],
    }
    result = evaluate(streams, query, constants)
    for node in result.nodes.values():
        assert_sound_stream(node.out)
        assert_sound_cost(node.memory, node.cpu)
    assert_sound_cost(result.total.memory, result.total.cpu)


@st.composite
def characteristics(draw: st.DrawFn) -> Stream:
    """Arbitrary characteristics, l independent of g (join outputs have l < g), or empty."""
    g = draw(G)
    if draw(st.integers(0, 9)) == 0:
        return Stream.empty(g)
    return Stream(draw(D), draw(log_uniform(-3, 12)), g)


@PROPERTY
@given(
    a=characteristics(), b=characteristics(), w=W, c=COUNT, sel=SEL, m=MULTIPLE, groups=GROUPS,
    size=SIZE, buckets=BUCKETS, nested=st.booleans(), constants=CONSTANTS,
)
def test_every_formula_is_sound_on_arbitrary_characteristics(
    a, b, w, c, sel, m, groups, size, buckets, nested, constants
) -> None:
    """Each output and cost function on arbitrary valid (d, l, g), not only on what a
    plan produces: l < g, l ≫ g, d < 1, d ≫ l and the empty stream."""
    k = CostConstants().with_overrides(constants)
    b = Stream(b.d, b.l, a.g)  # binary operators need equal granularities (§3.3.2)
    outputs = [
        f.project_output(a), f.select_output(a, sel), f.union_output([a, b]), f.join_output(a, b, sel),
        f.aggregate_output(a), f.aggregate_output(a, groups), f.window_output(a, w),
        f.window_output(a, f.tuple_window_size(a, c)), f.granularity_output(a, m * a.g),
    ]
    for out in outputs:
        assert_sound_stream(out)
    costs = [
        f.project_cost(a, k), f.select_cost(a, k), f.union_cost(f.union_output([a, b]), k), f.window_cost(a, k),
        f.tuple_window_cost(a, c, size, k), f.granularity_cost(a, k),
        f.join_cost(a, b, sel, size, size, buckets, buckets, nested, k),
        f.scalar_aggregate_cost(a, size, k), f.aggregate_cost(a, groups, size, k),
    ]
    for cost in costs:
        assert_sound_cost(*cost)


# --- selectivity and a downstream join -----------------------------------------------------------


def join_memory_per_side(a: Stream, b: Stream, size: float) -> float:
    """Bytes of side a's status structure alone: formula 9 with s_b = 0."""
    return f.join_cost(a, b, 1.0, size, 0.0, 1.0, 1.0, False, CostConstants()).memory


@PROPERTY
@given(d_a=D, d_b=D, g=G, wa=window_spec(), wb=window_spec(), s1=SEL, s2=SEL, size_a=SIZE, size_b=SIZE, kind=KIND)
def test_smaller_selectivity_on_both_inputs_never_increases_join_memory(
    d_a, d_b, g, wa, wb, s1, s2, size_a, size_b, kind
) -> None:
    """σ_sel on both inputs of a join: both d grow by 1/sel, so the purge-growth
    terms d_j/(2d_i) of (9) are unchanged and ⌈l_i/d_i⌉ shrinks. Memory never
    increases as sel decreases. (A selection on ONE input does not have this
    property; see the next two tests.)"""
    streams = {"A": {"d": d_a, "g": g, "size": size_a}, "B": {"d": d_b, "g": g, "size": size_b}}

    def plan(sel: float) -> dict[str, Any]:
        return {
            "op": "join", "sel": 1, "kind": kind,
            "inputs": [
                {"op": "select", "sel": sel, "inputs": [window(wa, source("A"))]},
                {"op": "select", "sel": sel, "inputs": [window(wb, source("B"))]},
            ],
        }

    low, high = sorted((s1, s2))
    assert_not_larger(memory(streams, plan(low)), memory(streams, plan(high)))


@PROPERTY
@given(a=characteristics(), b=characteristics(), s1=SEL, s2=SEL, size=SIZE, buckets=BUCKETS, nested=st.booleans())
def test_smaller_selectivity_on_one_input_shrinks_that_side_and_the_cpu(a, b, s1, s2, size, buckets, nested) -> None:
    """σ_sel on input a only: side a's state ⌈l_a·sel/d_a⌉ + sel·d_b/(2d_a) never
    grows as sel decreases, and neither does the join's CPU (every term of
    (11)–(14) is non-decreasing in the rate 1/d_a). The other side's state
    ⌈l_b/d_b⌉ + d_a/(2·sel·d_b) DOES grow, because side b is purged only when
    an element of a arrives (formula 9) — so the total may grow."""
    b = Stream(b.d, b.l, a.g)
    low, high = sorted((s1, s2))
    a_low, a_high = f.select_output(a, low), f.select_output(a, high)
    assert_not_larger(join_memory_per_side(a_low, b, size), join_memory_per_side(a_high, b, size))
    k = CostConstants()

    def cpu(x: Stream) -> float:
        return f.join_cost(x, b, 0.5, size, size, buckets, buckets, nested, k).cpu

    assert_not_larger(cpu(a_low), cpu(a_high))


def test_smaller_selectivity_on_one_input_can_increase_join_memory() -> None:
    """Counterexample to 'a smaller selectivity never increases a downstream join's
    memory' — it is formula 9 itself, not an implementation bug. Sources A and B,
    d = 1, g = 1, size 1, windows w = 9 (→ (1, 10, 1)):

      sel = 1:    (⌈10/1⌉ + 1/2)·1 + (⌈10/1⌉ + 1/2)·1           = 10.5 + 10.5  = 21
      sel = 0.01 on B → B = (100, 10, 1):
                  (⌈10/1⌉ + 100/2)·1 + (⌈10/100⌉ + 1/200)·1     = 60   + 1.005 = 61.005

    Fewer B elements mean fewer purges of A's status structure. (As sel → 0 the
    memory grows without bound, while an input that is exactly empty drops the
    term — armd's heartbeat assumption — so memory is discontinuous there.)
    """
    streams = {"A": {"d": 1, "g": 1, "size": 1}, "B": {"d": 1, "g": 1, "size": 1}}

    def plan(sel: float) -> dict[str, Any]:
        return {
            "op": "join", "sel": 1,
            "inputs": [
                window({"w": 9}, source("A")),
                {"op": "select", "sel": sel, "inputs": [window({"w": 9}, source("B"))]},
            ],
        }

    assert memory(streams, plan(1.0)) == pytest.approx(21.0, rel=1e-12)
    assert memory(streams, plan(0.01)) == pytest.approx(61.005, rel=1e-12)


# --- aggregation memory and the rate -------------------------------------------------------------


PER_GROUP_D = st.one_of(
    st.tuples(st.just("poisson"), log_uniform(-3, math.log10(0.999)), log_uniform(-3, math.log10(0.999))),
    st.tuples(
        st.just("closed form"),
        st.floats(1.0, 1e9, exclude_min=True, allow_nan=False),
        st.floats(1.0, 1e9, exclude_min=True, allow_nan=False),
    ),
)


@PROPERTY
@given(per_group=PER_GROUP_D, l=log_uniform(-2, 12), g=G, groups=GROUPS, size=SIZE)
def test_aggregation_memory_never_grows_with_d_on_either_side_of_1(per_group, l, g, groups, size) -> None:  # noqa: E741
    """(15) falls as d grows: ⌈(l/g)·h⌉ with h = 1 − (1 − 1/d)^g for d > 1 and the
    Poisson h = 1 − e^(−g/d) for d ≤ 1 are both decreasing in d; the d ≥ l case is
    s ≤ any d < l value. With n groups the per-group distance is n·d. This holds
    on each side of the seam n·d = 1 separately — across it, it does not (see the seam test
    below), so both distances are drawn on the same side."""
    _, x1, x2 = per_group
    low, high = sorted((x1 / groups, x2 / groups))
    k = CostConstants()
    m_low = f.aggregate_cost(Stream(low, l, g), groups, size, k).memory
    m_high = f.aggregate_cost(Stream(high, l, g), groups, size, k).memory
    assert_not_larger(m_high, m_low)


def test_aggregation_memory_steps_up_across_the_seam_at_d_equals_1() -> None:
    """The documented step where the Poisson limit (d ≤ 1) meets the closed form (d > 1). window w = 99 over a source (1, 1, 1) gives (1, 100, 1);
    select → aggregate, s = 48 (default aggregate size):
      sel = 1:        d = 1 → Poisson: ⌈100·(1 − e^(−1))⌉ = ⌈63.21⌉ = 64 → 3072 bytes
      sel = 0.999999: d = 1.000001 → closed form: ⌈100·(1 − (1 − 1/1.000001))⌉
                      = ⌈99.9999⌉ = 100 → 4800 bytes
    Fewer elements, more memory (even sel = 2/3, d = 1.5: ⌈100/1.5⌉ = 67 → 3216 > 3072)."""
    streams = {"A": {"d": 1, "g": 1, "size": 8}}

    def plan(sel: float) -> dict[str, Any]:
        return {"op": "aggregate", "inputs": [{"op": "select", "sel": sel, "inputs": [window({"w": 99}, source("A"))]}]}

    assert memory(streams, plan(1.0)) == pytest.approx(3072.0, rel=1e-12)
    assert memory(streams, plan(0.999999)) == pytest.approx(4800.0, rel=1e-12)
