"""The vectorised evaluator (costmodel.batch) against the scalar reference, and the §5.4 workload generator."""

from __future__ import annotations

import copy
import json
import math
from collections import Counter

import numpy as np
from support import REPO
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armd.costmodel import batch as batch_module
from armd.costmodel.batch import BatchPlan
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import PlanSet, parse_plan
from armd.costmodel.workload import PLAN_TYPES, section54, section54_workload

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # a numpy RuntimeWarning (0/0, ∞−∞, …) fails the test

RTOL = 1e-9
EXAMPLE = REPO / "config" / "plans" / "example.json"


# --- comparison helpers ---------------------------------------------------------------------


def mismatches(actual, expected, rtol: float = RTOL) -> np.ndarray:
    """Positions where actual and expected differ by more than rtol relative (∞ only equals ∞; NaN never matches)."""
    a = np.asarray(actual, dtype=float)
    b = np.asarray(expected, dtype=float)
    assert a.shape == b.shape, (a.shape, b.shape)
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore"):
        close = finite & (np.abs(a - b) <= rtol * np.maximum(np.abs(a), np.abs(b)))
    return np.flatnonzero(~((a == b) | close))


def assert_close(actual, expected, what: str, rtol: float = RTOL) -> None:
    bad = mismatches(actual, expected, rtol)
    if bad.size:
        a = np.ravel(np.asarray(actual, dtype=float))
        b = np.ravel(np.asarray(expected, dtype=float))
        shown = ", ".join(f"[{i}] {a[i]!r} vs {b[i]!r}" for i in bad[:5])
        raise AssertionError(f"{what}: {bad.size} mismatch(es): {shown}")


def assert_matches_scalar(plan, result, profile: str = "paper") -> None:
    """BatchResult (1-D) equals estimate(plan) per node, per query and in total.

    Node arrays are in ``BatchPlan.node_ids`` order (level by level), which depends on the
    plan's structure only, so a plan with other values has the same order.
    """
    batch_ids = BatchPlan.compile(plan).node_ids
    ref = estimate(plan, profile)
    nodes = [ref.nodes[i] for i in batch_ids]
    assert_close(result.d, [n.out.d for n in nodes], "d")
    assert_close(result.l, [n.out.l for n in nodes], "l")
    assert_close(result.g, [n.out.g for n in nodes], "g")
    assert_close(result.size, [n.size for n in nodes], "size")
    assert_close(result.memory, [n.memory for n in nodes], "memory")
    assert_close(result.cpu, [n.cpu for n in nodes], "cpu")
    queries = list(plan.queries)
    assert_close(result.query_memory, [ref.queries[q].memory for q in queries], "query memory")
    assert_close(result.query_cpu, [ref.queries[q].cpu for q in queries], "query cpu")
    assert_close(result.total_memory, ref.total.memory, "total memory")
    assert_close(result.total_cpu, ref.total.cpu, "total cpu")


def named_nodes(doc) -> dict[str, dict]:
    """Node id → the node's dict in a plan document (every node of these documents has an explicit id)."""
    found: dict[str, dict] = {}
    stack = list(doc["queries"].values())
    while stack:
        node = stack.pop()
        if "ref" in node:
            continue
        found[node["id"]] = node
        stack.extend(node.get("inputs", []))
    return found


def test_comparison_helper_can_fail():
    assert mismatches([1.0, math.inf, 0.0], [1.0 + 1e-12, math.inf, 0.0]).size == 0
    assert mismatches([1.0], [1.0 + 1e-8]).size == 1
    assert mismatches([math.inf], [1e308]).size == 1
    assert mismatches([math.nan], [math.nan]).size == 1


# --- random plan documents ------------------------------------------------------------------

MULTIPLES = (1, 2, 3, 6)
"""Granularities of a random plan are base·m for m here; a coarser g is a whole multiple of any m dividing it."""

distances = st.one_of(
    st.floats(1e-3, 1.0),  # more than one element per time unit: Poisson form of hit_probability
    st.floats(1.0, 1e4),
    st.sampled_from([0.5, 1.0, 2.0, 10.0, 1000.0]),
)
window_sizes = st.one_of(st.floats(0.01, 6.0), st.floats(6.0, 1e4), st.sampled_from([1.0, 2.0, 4.5, 59.0]))
selectivities = st.one_of(st.floats(1e-3, 1.0), st.just(1.0))


@st.composite
def plan_documents(draw, max_depth: int = 4, max_queries: int = 4):
    """A random valid plan document using every operator, refs (shared nodes) and optional constants."""
    base = draw(st.sampled_from([1.0, 0.5, 3.0]))
    streams = {}
    for i in range(draw(st.integers(1, 4))):
        m = 1 if i == 0 else draw(st.sampled_from([1, 2]))  # stream s0 has the base granularity
        d = draw(distances)
        spec = {"rate": 1.0 / d} if draw(st.booleans()) and d > 1e-2 else {"d": d}
        spec.update(g=base * m, size=draw(st.sampled_from([8, 64, 100.5])))
        streams[f"s{i}"] = spec
    stream_multiple = {name: round(spec["g"] / base) for name, spec in streams.items()}
    completed: list[tuple[str, int]] = []  # (id, granularity multiple) of finished nodes: safe to ref
    counter = iter(range(10**6))

    def leaf(m: int) -> dict:
        shared = [node_id for node_id, mm in completed if mm == m]
        if shared and draw(st.integers(0, 3)) == 0:
            return {"ref": draw(st.sampled_from(shared))}
        exact = [s for s, mm in stream_multiple.items() if mm == m]
        if exact and draw(st.booleans()):
            source = named({"op": "source", "stream": draw(st.sampled_from(exact))}, m)
            if draw(st.booleans()):
                return source
            return named({"op": "window", "w": draw(window_sizes), "inputs": [source]}, m)
        finer = [s for s, mm in stream_multiple.items() if m % mm == 0]  # s0 always qualifies
        stream = draw(st.sampled_from(finer))
        node = named({"op": "source", "stream": stream}, stream_multiple[stream])
        if draw(st.integers(0, 3)) > 0:  # a bare source (l = its g) is dropped by any coarser granularity
            node = named({"op": "window", "w": draw(window_sizes), "inputs": [node]}, stream_multiple[stream])
        return named({"op": "granularity", "g": base * m, "inputs": [node]}, m)

    def named(node: dict, m: int) -> dict:
        node["id"] = f"n{next(counter)}"
        completed.append((node["id"], m))
        return node

    def build(m: int, depth: int) -> dict:
        if depth == 0:
            return leaf(m)
        op = draw(st.sampled_from(
            ["leaf", "window", "window", "select", "project", "granularity", "aggregate", "union", "join", "join"]
        ))
        if op == "leaf":
            return leaf(m)
        node: dict = {"op": op}
        if op == "window":
            if draw(st.integers(0, 2)) == 0:
                node["c"] = draw(st.integers(1, 50))
            else:
                node["w"] = draw(window_sizes)
        elif op == "select":
            node["sel"] = draw(selectivities)
        elif op == "project":
            if draw(st.booleans()):
                node["size"] = draw(st.floats(1.0, 500.0))
        elif op == "aggregate":
            if draw(st.booleans()):
                node["groups"] = draw(st.integers(1, 20))
            if draw(st.booleans()):
                node["size"] = draw(st.sampled_from([16, 32.5]))
        elif op == "join":
            node["sel"] = draw(selectivities)
            node["kind"] = draw(st.sampled_from(["hash", "nested"]))
            if draw(st.booleans()):
                node["buckets"] = draw(st.one_of(st.integers(1, 256), st.lists(st.integers(1, 256), min_size=2, max_size=2)))
        if op in ("select", "join") and draw(st.integers(0, 2)) == 0:  # paper 002 eq. 9's terms
            node["heralds"] = {"skip": draw(st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0]))),
                               "partition": draw(st.sampled_from([1, 50, 1000.5])),
                               "overhead": draw(st.sampled_from([0, 2.5, 150]))}
        if op == "granularity":
            finer = draw(st.sampled_from([mm for mm in MULTIPLES if m % mm == 0]))  # == m: the identity
            node["g"] = base * m
            node["inputs"] = [build(finer, depth - 1)]
        elif op == "union":
            node["inputs"] = [build(m, depth - 1) for _ in range(draw(st.integers(2, 4)))]
        elif op == "join":
            node["inputs"] = [build(m, depth - 1), build(m, depth - 1)]
        else:
            node["inputs"] = [build(m, depth - 1)]
        return named(node, m)

    queries = {
        f"q{i}": build(draw(st.sampled_from(MULTIPLES)), draw(st.integers(1, max_depth)))
        for i in range(draw(st.integers(1, max_queries)))
    }
    doc = {"streams": streams, "queries": queries}
    if draw(st.booleans()):
        doc["constants"] = {
            name: draw(st.sampled_from([0.0, 0.5, 2.5]))
            for name in draw(st.lists(st.sampled_from(["C_H", "C_P", "C_F", "C_O", "C_L", "C_Q", "C_T", "C_Rd"]),
                                      unique=True, max_size=4))
        }
        doc["constants"]["buckets"] = draw(st.integers(1, 100))
        doc["constants"]["aggregate_size"] = draw(st.sampled_from([8.0, 48.0, 100.0]))
    return doc


def random_overrides(batch: BatchPlan, rng: np.random.Generator, k: int | None = None):
    """Random w, g and stream_d overrides, with junk at the positions that must be ignored."""
    shape = (len(batch.node_ids),) if k is None else (len(batch.node_ids), k)
    w = np.full(shape, np.nan)
    g = np.full(shape, -1.0)
    windows = ~np.isnan(batch.w)
    grans = ~np.isnan(batch.g)
    w[windows] = 10 ** rng.uniform(-2, 4, size=(int(windows.sum()),) + shape[1:])
    g[grans] = 10 ** rng.uniform(-1, 1.5, size=(int(grans.sum()),) + shape[1:])
    s_shape = (len(batch.stream_names),) + shape[1:]
    stream_d = np.where(rng.random(s_shape) < 0.1, np.inf, 10 ** rng.uniform(-3, 4, size=s_shape))
    return w, g, stream_d


# --- the property: batch == scalar ------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents())
def test_batch_matches_scalar_on_random_plans(doc):
    plan = parse_plan(doc)
    result = BatchPlan.compile(plan).evaluate()
    assert_matches_scalar(plan, result)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(), st.floats(0, 50), st.floats(0, 20))
def test_batch_matches_scalar_with_the_spark_profile(doc, delay, trigger):
    doc = {**doc, "constants": {**doc.get("constants", {}), "watermark_delay": delay, "trigger_interval": trigger}}
    plan = parse_plan(doc)
    assert_matches_scalar(plan, BatchPlan.compile(plan, "spark").evaluate(), "spark")


def test_the_spark_profile_keeps_a_window_for_its_size_plus_delay_trigger_and_lag():
    # 10 elements a second (d = 0.1 s), window 30 s, watermark delay 2 s, trigger 5 s: Spark keeps each
    # element 30 + 2 + 5 + 0.1 s; the window's output validity is that plus the paper's one time unit.
    doc = {"streams": {"a": {"d": 0.1, "g": 0.1, "size": 10}},
           "constants": {"watermark_delay": 2, "trigger_interval": 5},
           "queries": {"j": {"op": "join", "id": "j", "sel": 0.5, "inputs": [
               {"op": "window", "id": "wa", "w": 30, "inputs": [{"op": "source", "stream": "a"}]},
               {"op": "window", "id": "wb", "w": 30, "inputs": [{"op": "source", "stream": "a"}]}]}}}
    plan = parse_plan(doc)
    paper, spark = estimate(plan, "paper"), estimate(plan, "spark")
    assert paper.nodes["wa"].out.l == pytest.approx(31.0)
    assert spark.nodes["wa"].out.l == pytest.approx(38.1)
    # Join state grows with the validity of what it holds: 38.1 / 31 as many elements per side.
    ratio = spark.nodes["j"].memory / paper.nodes["j"].memory
    assert ratio == pytest.approx(38.1 / 31.0, rel=0.02)
    batch = BatchPlan.compile(plan, "spark").evaluate()
    assert batch.total_memory == pytest.approx(spark.total.memory)
    with pytest.raises(LookupError, match="unknown engine profile 'flink'; available: paper, spark"):
        BatchPlan.compile(plan, "flink")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(max_depth=3, max_queries=3), st.integers(0, 2**32 - 1))
def test_overrides_equal_reparsing_with_those_values(doc, seed):
    """w and stream_d overrides on a random plan equal a plan document written with those values."""
    batch = BatchPlan.compile(parse_plan(doc))
    rng = np.random.default_rng(seed)
    w, _, _ = random_overrides(batch, rng)
    stream_d = 10 ** rng.uniform(-3, 4, size=len(batch.stream_names))
    changed = copy.deepcopy(doc)
    nodes = named_nodes(changed)
    for i, node_id in enumerate(batch.node_ids):
        if not np.isnan(batch.w[i]):
            nodes[node_id]["w"] = float(w[i])
    for j, name in enumerate(batch.stream_names):
        spec = changed["streams"][name]
        spec.pop("rate", None)
        spec["d"] = float(stream_d[j])
    assert_matches_scalar(parse_plan(changed), batch.evaluate(w=w, stream_d=stream_d))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(max_depth=3, max_queries=3), st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_trailing_axis_equals_separate_evaluations(doc, seed, k):
    batch = BatchPlan.compile(parse_plan(doc))
    w, g, stream_d = random_overrides(batch, np.random.default_rng(seed), k)
    stacked = batch.evaluate(w=w, g=g, stream_d=stream_d)
    n, q = len(batch.node_ids), len(batch.query_names)
    for field, shape in [("d", (n, k)), ("memory", (n, k)), ("query_cpu", (q, k)), ("total_memory", (k,))]:
        assert np.shape(getattr(stacked, field)) == shape, field
    for j in range(k):
        single = batch.evaluate(w=w[:, j], g=g[:, j], stream_d=stream_d[:, j])
        for field in ("d", "l", "g", "size", "memory", "cpu", "query_memory", "query_cpu", "total_memory", "total_cpu"):
            assert_close(np.asarray(getattr(stacked, field))[..., j], getattr(single, field), f"{field}[{j}]", rtol=1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(max_depth=3, max_queries=3), st.integers(0, 2**32 - 1), st.integers(1, 4),
       st.sets(st.sampled_from(["w", "g", "stream_d"]), min_size=1))
def test_trailing_axis_on_some_overrides_only(doc, seed, k, names):
    """A trailing axis on any subset of the overrides (the others keep the plan's values)."""
    batch = BatchPlan.compile(parse_plan(doc))
    w, g, stream_d = random_overrides(batch, np.random.default_rng(seed), k)
    given_overrides = {name: value for name, value in (("w", w), ("g", g), ("stream_d", stream_d)) if name in names}
    stacked = batch.evaluate(**given_overrides)
    for j in range(k):
        single = batch.evaluate(**{name: value[:, j] for name, value in given_overrides.items()})
        for field in ("d", "l", "g", "size", "memory", "cpu", "query_memory", "query_cpu", "total_memory", "total_cpu"):
            assert_close(np.asarray(getattr(stacked, field))[..., j], getattr(single, field), f"{field}[{j}]", rtol=1e-12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(max_depth=4, max_queries=4), st.integers(0, 2**32 - 1), st.sampled_from([None, 1, 3]),
       st.integers(1, 9))
def test_evaluation_in_small_chunks_equals_one_piece(doc, seed, k, chunk):
    """Blocks are evaluated in chunks of _CHUNK elements; chunk boundaries change no result."""
    plan = parse_plan(doc)
    batch = BatchPlan.compile(plan)
    w, g, stream_d = random_overrides(batch, np.random.default_rng(seed), k)
    whole = batch.evaluate(w=w, g=g, stream_d=stream_d)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch_module, "_CHUNK", chunk)
        chunked = batch.evaluate(w=w, g=g, stream_d=stream_d)
        if k is None:
            assert_matches_scalar(plan, batch.evaluate())
    for field in ("d", "l", "g", "size", "memory", "cpu", "query_memory", "query_cpu", "total_memory", "total_cpu"):
        assert np.array_equal(getattr(chunked, field), getattr(whole, field)), field


def test_section54_in_chunks_with_both_knobs_varying():
    """Several chunks per block on the §5.4 shapes, K settings of w and g at once, against re-parsing."""
    workload = section54(200, seed=4)
    batch = BatchPlan.compile(parse_plan(workload.doc))
    bounds = workload.bounds(batch.node_ids)
    rng = np.random.default_rng(5)
    k = 3
    fraction = rng.uniform(0, 1, (len(batch.node_ids), k))
    w = np.floor(bounds["w_min"][:, None] + fraction * (bounds["w_max"] - bounds["w_min"])[:, None])
    g = np.full((len(batch.node_ids), k), np.nan)
    for qos in workload.qos.values():  # one granularity per query and setting (a join needs equal inputs)
        if qos.granularity:
            per_setting = np.round(rng.uniform(qos.granularity[1], qos.granularity[0], k))
            g[[batch.node_ids.index(i) for i in qos.granularity_nodes]] = per_setting
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch_module, "_CHUNK", 50)
        result = batch.evaluate(w=w, g=g)
    for j in range(k):
        changed = copy.deepcopy(workload.doc)
        nodes = named_nodes(changed)
        for i in np.flatnonzero(~np.isnan(batch.w)):
            nodes[batch.node_ids[i]]["w"] = float(w[i, j])
        for i in np.flatnonzero(~np.isnan(batch.g)):
            nodes[batch.node_ids[i]]["g"] = float(g[i, j])
        single = BatchResultColumn(result, j)
        assert_matches_scalar(parse_plan(changed), single)


def test_a_kept_block_serves_smaller_evaluations_with_the_same_numbers():
    """A search alternates widths K (grid, refinement, lift): the block of a wider evaluation is
    reused by narrower ones (no fresh pages), and the numbers do not depend on which block is used."""
    workload = section54(60, seed=2)
    batch = BatchPlan.compile(parse_plan(workload.doc))
    rng = np.random.default_rng(3)
    w = np.where(np.isnan(batch.w), 1.0, batch.w)[:, None] * rng.uniform(0.5, 1.0, (len(batch.w), 8))
    batch.evaluate(w=w)  # K = 8; the result is dropped, so its block is kept
    (start,) = (block.__array_interface__["data"][0] for block in batch._spares.values())  # no reference kept

    def block_start(result) -> int:
        return result.d.base.__array_interface__["data"][0]

    narrow = batch.evaluate(w=w[:, :3])  # K = 3 reuses the block of K = 8 through its start
    assert block_start(narrow) == start
    fresh = BatchPlan.compile(parse_plan(workload.doc)).evaluate(w=w[:, :3])
    for name in ("d", "l", "memory", "cpu", "query_memory", "query_cpu", "total_memory", "total_cpu"):
        assert np.array_equal(getattr(narrow, name), getattr(fresh, name)), name
    del narrow
    tiny = batch.evaluate(w=w[:, :1])  # more than four times narrower: a block of its own
    assert block_start(tiny) != start


class BatchResultColumn:
    """Column j of a BatchResult with a trailing axis, as a 1-D result."""

    def __init__(self, result, j: int) -> None:
        for field in ("d", "l", "g", "size", "memory", "cpu", "query_memory", "query_cpu", "total_memory", "total_cpu"):
            setattr(self, field, np.asarray(getattr(result, field))[..., j])


# --- targeted branches (independent of what Hypothesis happens to draw) ---------------------------


def _doc(streams: dict, queries: dict) -> dict:
    return {"streams": streams, "queries": queries}


def _src(stream: str, node_id: str | None = None) -> dict:
    node = {"op": "source", "stream": stream}
    if node_id:
        node["id"] = node_id
    return node


def test_granularity_cases_and_identity():
    """Formula 8's three cases, the identity ĝ == g and an empty input, each checked to be the case hit."""

    def gran(node_id, g_new, w):
        window = {"op": "window", "w": w, "inputs": [_src("a")]}
        return {"op": "granularity", "id": node_id, "g": g_new, "inputs": [window]}

    doc = _doc(
        {"a": {"d": 3.0, "g": 1, "size": 10}},
        {
            "long": gran("long", 4, 20.0),  # l = 21 ≥ 2·4
            "short": gran("short", 4, 5.0),  # l = 6 in (4, 8)
            "drop": gran("drop", 4, 2.0),  # l = 3 ≤ 4
            "same": gran("same", 1, 5.0),  # ĝ == g
            "of_empty": {"op": "granularity", "id": "of_empty", "g": 8, "inputs": [{"ref": "drop"}]},
        },
    )
    plan = parse_plan(doc)
    batch = BatchPlan.compile(plan)
    result = batch.evaluate()
    assert_matches_scalar(plan, result)
    at = {node_id: i for i, node_id in enumerate(batch.node_ids)}
    assert (result.d[at["long"]], result.l[at["long"]]) == (3.0, 17.0)
    assert result.l[at["short"]] == 4.0 and result.d[at["short"]] == pytest.approx(3.0 * 4 / 2)
    assert (result.d[at["drop"]], result.l[at["drop"]], result.g[at["drop"]]) == (math.inf, 0.0, 4.0)
    assert (result.d[at["same"]], result.l[at["same"]], result.g[at["same"]]) == (3.0, 6.0, 1.0)
    assert (result.d[at["of_empty"]], result.l[at["of_empty"]], result.g[at["of_empty"]]) == (math.inf, 0.0, 8.0)


def test_empty_stream_propagates_like_the_scalar_code():
    """An empty window output (length 0) through every operator; joins keep the other side's state."""
    empty = {"op": "window", "id": "empty", "w": 0.5, "inputs": [_src("a")]}  # ⌊1.5/2⌋ = 0
    full = {"op": "window", "id": "full", "w": 100.0, "inputs": [_src("a")]}
    doc = _doc(
        {"a": {"d": 0.5, "g": 2, "size": 10}},
        {
            "join": {"op": "join", "id": "join", "sel": 0.1, "inputs": [empty, full]},
            "join_both": {"op": "join", "id": "join_both", "sel": 0.1, "kind": "nested",
                          "inputs": [{"ref": "empty"}, {"op": "select", "sel": 0.5, "inputs": [{"ref": "empty"}]}]},
            "union_some": {"op": "union", "id": "union_some", "inputs": [{"ref": "empty"}, {"ref": "full"}]},
            "union_none": {"op": "union", "id": "union_none",
                           "inputs": [{"ref": "empty"}, {"op": "project", "size": 3, "inputs": [{"ref": "empty"}]}]},
            "agg": {"op": "aggregate", "id": "agg", "groups": 3, "inputs": [{"ref": "empty"}]},
            "tuple": {"op": "window", "id": "tuple", "c": 5, "inputs": [{"ref": "empty"}]},
        },
    )
    plan = parse_plan(doc)
    batch = BatchPlan.compile(plan)
    result = batch.evaluate()
    assert_matches_scalar(plan, result)
    at = {node_id: i for i, node_id in enumerate(batch.node_ids)}
    for node_id in ("empty", "join", "join_both", "union_none", "agg", "tuple"):
        assert (result.d[at[node_id]], result.l[at[node_id]]) == (math.inf, 0.0), node_id
    # full: d = 2·0.5/2 = 0.5, l = ⌊101/2⌋·2 = 100; the empty side holds nothing and adds no growth term
    assert (result.d[at["full"]], result.l[at["full"]]) == (0.5, 100.0)
    assert result.memory[at["join"]] == math.ceil(100 / 0.5) * 10
    assert result.memory[at["join_both"]] == 0.0 and result.cpu[at["join_both"]] == 0.0
    assert result.memory[at["agg"]] == 0.0 and result.memory[at["tuple"]] == 0.0
    assert result.d[at["union_some"]] == result.d[at["full"]]
    assert result.size[at["union_none"]] == 10.0  # empty output: the first input's size


def test_aggregate_hit_probability_both_forms_and_groups():
    """d ≤ 1 uses 1 − e^(−k/d), d > 1 the log1p form; group-by splits d by n; d ≥ l is the sparse case."""
    doc = _doc(
        {"fast": {"d": 0.25, "g": 1, "size": 8}, "slow": {"d": 40.0, "g": 1, "size": 8}},
        {
            "poisson": {"op": "aggregate", "id": "poisson",
                        "inputs": [{"op": "window", "w": 99.0, "inputs": [_src("fast")]}]},
            "cardenas": {"op": "aggregate", "id": "cardenas",
                         "inputs": [{"op": "window", "w": 999.0, "inputs": [_src("slow")]}]},
            "grouped": {"op": "aggregate", "id": "grouped", "groups": 7, "size": 16,
                        "inputs": [{"op": "window", "w": 999.0, "inputs": [_src("slow")]}]},
            "sparse": {"op": "aggregate", "id": "sparse", "groups": 50,
                       "inputs": [{"op": "window", "w": 999.0, "inputs": [_src("slow")]}]},
        },
    )
    plan = parse_plan(doc)
    batch = BatchPlan.compile(plan)
    result = batch.evaluate()
    assert_matches_scalar(plan, result)
    at = {node_id: i for i, node_id in enumerate(batch.node_ids)}
    assert result.l[at["poisson"]] == pytest.approx(1.0 / -math.expm1(-2.0 / 0.25))
    assert result.l[at["cardenas"]] == pytest.approx(1.0 / (1 - (1 - 1 / 40.0) ** 2))
    assert result.d[at["grouped"]] == pytest.approx(1.0 / (1 - (1 - 1 / 280.0) ** 2) / 7)
    assert (result.d[at["sparse"]], result.memory[at["sparse"]]) == (40.0, 50 * 48.0)


def test_rounding_slack_in_floor_and_ceil():
    """Quotients that are integral in exact arithmetic but not in floats: 1.2/0.1 and 2.1/0.3."""
    assert 1.2 / 0.1 < 12 and 2.1 / 0.3 > 7  # the float error the slack absorbs
    doc = _doc(
        {"x": {"d": 0.3, "g": 2.1, "size": 10}, "y": {"d": 0.3, "g": 2.1, "size": 10},
         "z": {"d": 5.0, "g": 0.1, "size": 1}},
        {
            "join": {"op": "join", "id": "join", "sel": 0.5, "inputs": [_src("x"), _src("y")]},
            "window": {"op": "window", "id": "window", "w": 0.2, "inputs": [_src("z")]},
        },
    )
    plan = parse_plan(doc)
    batch = BatchPlan.compile(plan)
    result = batch.evaluate()
    assert_matches_scalar(plan, result)
    at = {node_id: i for i, node_id in enumerate(batch.node_ids)}
    assert result.memory[at["join"]] == 2 * (7 + 0.3 / 0.6) * 10  # ⌈l/d⌉ = 7, not 8
    assert result.l[at["window"]] == 12 * 0.1  # ⌊(w + 1)/g⌋ = 12, not 11


def test_example_plan_with_tuple_windows_and_stream_overrides():
    """The shipped example (refs, tuple window, groups, buckets): overriding stream d equals re-parsing."""
    doc = json.loads(EXAMPLE.read_text())
    batch = BatchPlan.compile(parse_plan(doc))
    assert_matches_scalar(parse_plan(doc), batch.evaluate())
    stream_d = np.array([7.0, 0.3, 123.0])
    changed = copy.deepcopy(doc)
    for name, d in zip(batch.stream_names, stream_d):
        changed["streams"][name] = {"d": float(d), "g": 1, "size": changed["streams"][name]["size"]}
    result = batch.evaluate(stream_d=stream_d)
    assert_matches_scalar(parse_plan(changed), result)
    tuple_window = batch.node_ids.index("big_orders.0.0")
    assert result.l[tuple_window] == math.floor(100 * 123.0 + 1)  # the time size c·d follows the new d


def test_section54_overrides_of_w_g_and_stream_d_equal_reparsing():
    workload = section54(120, seed=3)
    batch = BatchPlan.compile(parse_plan(workload.doc))
    rng = np.random.default_rng(11)
    bounds = workload.bounds(batch.node_ids)
    windows = ~np.isnan(bounds["w_min"])
    w = np.full(len(batch.node_ids), np.nan)
    w[windows] = np.floor(rng.uniform(bounds["w_min"][windows], bounds["w_max"][windows]))
    per_query_g = {q: int(rng.integers(qos.granularity[1], qos.granularity[0], endpoint=True))
                   for q, qos in workload.qos.items() if qos.granularity}
    g = np.full(len(batch.node_ids), 5.0)  # junk at non-granularity nodes
    changed = copy.deepcopy(workload.doc)
    nodes = named_nodes(changed)
    for q, qos in workload.qos.items():
        for node_id in qos.windows:
            nodes[node_id]["w"] = int(w[batch.node_ids.index(node_id)])
        for node_id in qos.granularity_nodes:
            nodes[node_id]["g"] = per_query_g[q]
            g[batch.node_ids.index(node_id)] = per_query_g[q]
    stream_d = 60000.0 / rng.uniform(2, 600, size=len(batch.stream_names))
    for name, d in zip(batch.stream_names, stream_d):
        changed["streams"][name]["d"] = float(d)
    result = batch.evaluate(w=w, g=g, stream_d=stream_d)
    assert_matches_scalar(parse_plan(changed), result)
    assert result.total_memory != batch.evaluate().total_memory  # the overrides did change something


def test_override_validation():
    batch = BatchPlan.compile(parse_plan(json.loads(EXAMPLE.read_text())))
    n = len(batch.node_ids)
    with pytest.raises(ValueError, match="shape"):
        batch.evaluate(w=np.ones(n + 1))
    with pytest.raises(ValueError, match="trailing axes"):
        batch.evaluate(w=np.ones((n, 2)), stream_d=np.ones((3, 3)))
    w = batch.w.copy()
    w[np.flatnonzero(~np.isnan(w))[0]] = 0.0
    with pytest.raises(ValueError, match="w"):
        batch.evaluate(w=w)
    with pytest.raises(ValueError):
        batch.w[0] = 1.0  # the defaults are read-only
    result = batch.evaluate(stream_d=np.full((3, 2), np.inf))  # all sources empty
    assert np.all(result.total_memory == 0.0) and np.all(result.total_cpu == 0.0)


def test_node_order_is_level_by_level_and_arrays_follow_it():
    """node_ids: every node once, inputs first, depth never decreasing; w, g and the index arrays follow it."""
    for plan in (parse_plan(json.loads(EXAMPLE.read_text())), parse_plan(section54_workload(60, seed=2))):
        batch = BatchPlan.compile(plan)
        assert sorted(batch.node_ids) == sorted(plan.nodes)
        position = {node_id: i for i, node_id in enumerate(batch.node_ids)}
        depth: dict[str, int] = {}
        for node_id in batch.node_ids:
            node = plan.nodes[node_id]
            assert all(position[j] < position[node_id] for j in node.inputs)
            depth[node_id] = 1 + max((depth[j] for j in node.inputs), default=-1)
        assert [depth[i] for i in batch.node_ids] == sorted(depth.values())
        assert batch.levels == max(depth.values())
        for i, node_id in enumerate(batch.node_ids):
            node = plan.nodes[node_id]
            time_window = node.op == "window" and node.c is None
            assert batch.w[i] == node.w if time_window else np.isnan(batch.w[i])
            assert batch.g[i] == node.g if node.op == "granularity" else np.isnan(batch.g[i])
        assert np.array_equal(batch.window_index, np.flatnonzero(~np.isnan(batch.w)))
        assert np.array_equal(batch.granularity_index, np.flatnonzero(~np.isnan(batch.g)))


@pytest.mark.parametrize("shared", [False, True])
def test_results_held_by_the_caller_survive_later_evaluations(shared):
    """evaluate reuses its memory only once every array of the previous result is gone."""
    doc = section54_workload(80, seed=6)
    if shared:  # a node used by two queries: per-query sums by the incidence matrix
        doc["queries"]["extra"] = {"op": "aggregate", "inputs": [{"ref": "q00000.w1"}]}
    batch = BatchPlan.compile(parse_plan(doc))
    n = len(batch.node_ids)
    w1 = np.where(np.isnan(batch.w), 1.0, batch.w)
    w2 = np.where(np.isnan(batch.w), 1.0, np.floor(batch.w / 3))
    first = batch.evaluate(w=np.stack([w1, w2], axis=1))
    kept = {field: np.array(getattr(first, field)) for field in ("d", "l", "memory", "cpu", "query_memory")}
    second = batch.evaluate(w=np.stack([w2, w1], axis=1))  # the result held: fresh memory
    for field, values in kept.items():
        assert np.array_equal(getattr(first, field), values), field
    assert np.array_equal(second.l[:, [1, 0]], first.l)
    del first, second
    third = batch.evaluate(w=np.stack([w1, w2], axis=1))  # nothing held: the memory of second
    view = third.l[:, 1]  # a view alone keeps its result alive
    assert view.shape == (n,)
    del third
    fourth = batch.evaluate(w=np.stack([w2, w1], axis=1))
    assert not np.shares_memory(fourth.l, view)
    assert np.array_equal(view, kept["l"][:, 1])
    assert np.array_equal(fourth.l[:, 0], kept["l"][:, 1])


@pytest.mark.parametrize("shared", [False, True])
def test_a_setting_gives_the_same_numbers_whatever_the_other_settings(shared):
    """Bit for bit: column j of K settings (in any chunking) equals the evaluation of setting j alone,
    so a bound computed from one evaluation is met exactly by the same setting in another."""
    workload = section54(150, seed=8)
    doc = copy.deepcopy(workload.doc)
    if shared:
        doc["queries"]["extra"] = {"op": "aggregate", "inputs": [{"ref": "q00001.w1"}]}
    batch = BatchPlan.compile(parse_plan(doc))
    bounds = workload.bounds(batch.node_ids)
    fraction = np.linspace(0.0, 1.0, 7)
    w = np.where(np.isnan(bounds["w_min"])[:, None], np.nan,
                 np.floor(bounds["w_min"][:, None] + fraction * (bounds["w_max"] - bounds["w_min"])[:, None]))
    g = np.where(np.isnan(bounds["g_fine"])[:, None], np.nan, bounds["g_fine"][:, None] * np.ones(7))
    fields = ("d", "l", "g", "size", "memory", "cpu", "query_memory", "query_cpu", "total_memory", "total_cpu")
    for chunk in (batch_module._CHUNK, 40):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(batch_module, "_CHUNK", chunk)
            stacked = batch.evaluate(w=w, g=g)
            for j in (0, 3, 6):
                single = batch.evaluate(w=w[:, j], g=g[:, j])
                for field in fields:
                    assert np.array_equal(np.asarray(getattr(stacked, field))[..., j], getattr(single, field)), field


def test_memory_is_reused_once_results_are_dropped():
    batch = BatchPlan.compile(parse_plan(section54_workload(40, seed=7)))
    address = batch.evaluate().d.__array_interface__["data"][0]
    again = batch.evaluate().d.__array_interface__["data"][0]
    if batch_module._UNREFERENCED > 0:  # CPython: exact reference counts
        assert again == address


# --- subsets of a compiled plan -------------------------------------------------------------------

NODE_FIELDS = ("d", "l", "g", "size", "memory", "cpu")
SUM_FIELDS = ("query_memory", "query_cpu", "total_memory", "total_cpu")


def restricted_plan(plan: PlanSet, names: list[str]) -> PlanSet:
    """The PlanSet of some queries and the nodes they reach: same streams and constants, nodes in plan order."""
    keep = set().union(*(plan.query_nodes(q) for q in names))
    return PlanSet(
        plan.streams,
        plan.constants,
        {node_id: node for node_id, node in plan.nodes.items() if node_id in keep},
        {q: plan.queries[q] for q in names},
        {node_id: g for node_id, g in plan.granularities.items() if node_id in keep},
    )


def assert_subset_equals_compiled(batch: BatchPlan, chosen, w=None, g=None, stream_d=None, exact_sums=False,
                                  profile: str = "paper"):
    """batch.subset(chosen) against BatchPlan.compile of the restricted plan, and against batch itself.

    Overrides are given in batch's node order (and for all of its streams). Per-node results must be
    equal bit for bit; per-query sums and totals too with ``exact_sums``, else to 1e-12 relative.
    """
    sub = batch.subset(np.asarray(chosen, dtype=np.intp))
    names = [batch.query_names[i] for i in chosen]
    expected_plan = restricted_plan(batch.plan, names)
    ref = BatchPlan.compile(expected_plan, profile)

    # the public attributes of a compiled plan, for the kept nodes and queries
    assert sub.query_names == tuple(names) == ref.query_names
    assert sub.stream_names == batch.stream_names == ref.stream_names
    assert np.array_equal(sub.stream_d, batch.stream_d)
    positions = sub.parent_positions
    assert positions.dtype == np.intp and np.all(np.diff(positions) > 0)
    assert sub.node_ids == tuple(batch.node_ids[p] for p in positions)
    assert sorted(sub.node_ids) == sorted(ref.node_ids)
    at = {node_id: i for i, node_id in enumerate(ref.node_ids)}
    perm = np.array([at[node_id] for node_id in sub.node_ids], dtype=np.intp)  # ref position of each node
    assert np.array_equal(sub.w, ref.w[perm], equal_nan=True) and np.array_equal(sub.g, ref.g[perm], equal_nan=True)
    assert np.array_equal(sub.window_index, np.flatnonzero(~np.isnan(sub.w)))
    assert np.array_equal(sub.granularity_index, np.flatnonzero(~np.isnan(sub.g)))
    assert sub.levels == ref.levels
    assert sub.plan == expected_plan and list(sub.plan.nodes) == list(expected_plan.nodes)
    with pytest.raises(ValueError):
        sub.w[0] = 1.0  # read-only, like a compiled plan's
    # the same evaluation choices as a compilation (sums by subtree or incidence, static sizes or not)
    assert sub._forest == ref._forest
    assert (sub._static_size is None) == (ref._static_size is None)

    def for_sub(x):
        return None if x is None else np.asarray(x)[positions]

    def for_ref(x):
        if x is None:
            return None
        out = np.empty((len(ref.node_ids),) + np.shape(x)[1:])
        out[perm] = np.asarray(x)[positions]
        return out

    got = sub.evaluate(w=for_sub(w), g=for_sub(g), stream_d=stream_d)
    want = ref.evaluate(w=for_ref(w), g=for_ref(g), stream_d=stream_d)
    whole = batch.evaluate(w=w, g=g, stream_d=stream_d)
    for field in NODE_FIELDS:
        assert np.array_equal(getattr(got, field), getattr(want, field)[perm]), field
        assert np.array_equal(getattr(got, field), getattr(whole, field)[positions]), field
    for field in SUM_FIELDS:
        if exact_sums:
            assert np.array_equal(getattr(got, field), getattr(want, field)), field
        else:
            assert_close(getattr(got, field), getattr(want, field), field, rtol=1e-12)
    for field in ("query_memory", "query_cpu"):
        assert_close(getattr(got, field), getattr(whole, field)[chosen], field, rtol=1e-12)
    return sub, got


def readers_of(plan: PlanSet, query_names, stream: str) -> np.ndarray:
    """Indices (into query_names) of the queries that read a stream."""
    return np.array([i for i, q in enumerate(query_names)
                     if any(plan.nodes[n].stream == stream for n in plan.query_nodes(q))], dtype=np.intp)


def test_subset_equals_compiling_the_restricted_plan_on_section54():
    """Bit for bit on the §5.4 shapes: the queries of one stream and random subsets, with overrides of
    w, g and stream_d, without and with a trailing axis."""
    workload = section54(600, seed=3)
    batch = BatchPlan.compile(parse_plan(workload.doc))
    rng = np.random.default_rng(12)
    q = len(batch.query_names)
    subsets = [
        readers_of(batch.plan, batch.query_names, "S07"),
        np.array([0]), np.array([q - 1]), np.arange(q),
        np.sort(rng.choice(q, 30, replace=False)), np.sort(rng.choice(q, 400, replace=False)),
    ]
    assert 10 < len(subsets[0]) < 100
    for chosen in subsets:
        assert_subset_equals_compiled(batch, chosen, exact_sums=True)
        for k in (None, 3):
            w, g, stream_d = random_overrides(batch, rng, k)
            sub, got = assert_subset_equals_compiled(batch, chosen, w, g, stream_d, exact_sums=True)
            assert_subset_equals_compiled(batch, chosen, w=w, exact_sums=True)
            assert_subset_equals_compiled(batch, chosen, stream_d=stream_d, exact_sums=True)
            # the total is over the kept nodes only, each once
            assert np.array_equal(got.total_memory, got.memory.sum(axis=0)) or np.allclose(
                got.total_memory, got.memory.sum(axis=0), rtol=1e-12, atol=0)
            if k is not None:  # column j of K settings is setting j alone
                single = sub.evaluate(w=w[sub.parent_positions, 1], g=g[sub.parent_positions, 1],
                                      stream_d=stream_d[:, 1])
                for field in NODE_FIELDS + SUM_FIELDS:
                    assert np.array_equal(np.asarray(getattr(got, field))[..., 1], getattr(single, field)), field


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(max_depth=4, max_queries=5), st.integers(0, 2**32 - 1), st.floats(0, 50), st.floats(0, 20))
def test_subset_equals_compiling_the_restricted_plan_with_the_spark_profile(doc, seed, delay, trigger):
    """A spark-profile subset re-derives its joins' constants (which inputs are join-fed) as a compilation would."""
    doc = {**doc, "constants": {**doc.get("constants", {}), "watermark_delay": delay, "trigger_interval": trigger}}
    batch = BatchPlan.compile(parse_plan(doc), "spark")
    rng = np.random.default_rng(seed)
    q = len(batch.query_names)
    chosen = np.sort(rng.choice(q, int(rng.integers(1, q + 1)), replace=False))
    assert_subset_equals_compiled(batch, chosen, profile="spark")
    w, g, stream_d = random_overrides(batch, rng, 3)
    assert_subset_equals_compiled(batch, chosen, w, g, stream_d, profile="spark")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_documents(max_depth=4, max_queries=5), st.integers(0, 2**32 - 1), st.sampled_from([None, 1, 3]))
def test_subset_equals_compiling_the_restricted_plan_on_random_plans(doc, seed, k):
    """Shared nodes, unions, tuple windows, both join kinds: per-node results bit for bit, sums to 1e-12."""
    batch = BatchPlan.compile(parse_plan(doc))
    rng = np.random.default_rng(seed)
    q = len(batch.query_names)
    chosen = np.sort(rng.choice(q, int(rng.integers(1, q + 1)), replace=False))
    assert_subset_equals_compiled(batch, chosen)
    w, g, stream_d = random_overrides(batch, rng, k)
    sub, _ = assert_subset_equals_compiled(batch, chosen, w, g, stream_d)
    # a subset of the subset is the subset of the parent
    inner = np.sort(rng.choice(len(chosen), int(rng.integers(1, len(chosen) + 1)), replace=False))
    nested = sub.subset(inner)
    direct = batch.subset(chosen[inner])
    assert nested.node_ids == direct.node_ids and nested.query_names == direct.query_names
    assert np.array_equal(sub.parent_positions[nested.parent_positions], direct.parent_positions)
    a = nested.evaluate(w=w[direct.parent_positions], g=g[direct.parent_positions], stream_d=stream_d)
    b = direct.evaluate(w=w[direct.parent_positions], g=g[direct.parent_positions], stream_d=stream_d)
    for field in NODE_FIELDS + SUM_FIELDS:
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


@pytest.mark.parametrize("shared", [False, True])
def test_subset_with_and_without_a_shared_node(shared):
    """A node used by two queries: subsets with both, one or the other (incidence or subtree sums)."""
    doc = section54_workload(40, seed=6)
    if shared:
        doc["queries"]["extra"] = {"op": "aggregate", "inputs": [{"ref": "q00003.w1"}]}
    # a query whose root feeds another query (a forest still, but not every top is a root)
    doc["queries"]["root_fed"] = {"op": "select", "sel": 0.5, "inputs": [{"ref": doc["queries"]["q00005"]["id"]}]}
    batch = BatchPlan.compile(parse_plan(doc))
    names = batch.query_names
    rng = np.random.default_rng(2)
    w, g, stream_d = random_overrides(batch, rng, 2)
    for picked in (["q00003"], ["q00003", "q00004"], ["q00001", "q00005"], ["root_fed"], ["q00005", "root_fed"],
                   list(names[-2:]), list(names)):
        chosen = np.array(sorted(names.index(p) for p in picked))
        assert_subset_equals_compiled(batch, chosen, w, g, stream_d)
        assert_subset_equals_compiled(batch, chosen)


def test_subset_of_the_example_plan():
    """Refs, a tuple window, groups, buckets and a union, query by query and in pairs."""
    batch = BatchPlan.compile(parse_plan(json.loads(EXAMPLE.read_text())))
    rng = np.random.default_rng(4)
    q = len(batch.query_names)
    for chosen in [[i] for i in range(q)] + [[i, j] for i in range(q) for j in range(i + 1, q)]:
        assert_subset_equals_compiled(batch, np.array(chosen))
        assert_subset_equals_compiled(batch, np.array(chosen), *random_overrides(batch, rng, 2))


def test_subset_in_small_chunks_equals_one_piece():
    workload = section54(120, seed=1)
    batch = BatchPlan.compile(parse_plan(workload.doc))
    sub = batch.subset(readers_of(batch.plan, batch.query_names, "S02"))
    w, g, stream_d = random_overrides(sub, np.random.default_rng(3), 4)
    whole = sub.evaluate(w=w, g=g, stream_d=stream_d)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch_module, "_CHUNK", 3)
        chunked = sub.evaluate(w=w, g=g, stream_d=stream_d)
    for field in NODE_FIELDS + SUM_FIELDS:
        assert np.array_equal(getattr(chunked, field), getattr(whole, field)), field


@pytest.mark.parametrize("shared", [False, True])
def test_subset_and_parent_never_overwrite_each_others_results(shared):
    """Each has its own evaluation memory: a held result of one survives evaluations of the other."""
    doc = section54_workload(60, seed=6)
    if shared:
        doc["queries"]["extra"] = {"op": "aggregate", "inputs": [{"ref": "q00000.w1"}]}
    batch = BatchPlan.compile(parse_plan(doc))
    sub = batch.subset(np.arange(0, len(batch.query_names), 2))
    positions = sub.parent_positions
    w1 = np.where(np.isnan(batch.w), 1.0, batch.w)
    w2 = np.where(np.isnan(batch.w), 1.0, np.floor(batch.w / 3))
    for first, second in ((batch, sub), (sub, batch)):
        def run(plan, w):
            return plan.evaluate(w=w if plan is batch else w[positions])
        held = run(first, w1)
        kept = {field: np.array(getattr(held, field)) for field in NODE_FIELDS + SUM_FIELDS}
        del held
        held = run(first, w1)  # in the memory of the dropped result, if it is reused
        other = run(second, w2)
        other_again = run(second, w1)
        for field, values in kept.items():
            assert np.array_equal(getattr(held, field), values), field
        for field in NODE_FIELDS:
            assert not np.shares_memory(getattr(held, field), getattr(other, field))
            assert not np.shares_memory(getattr(held, field), getattr(other_again, field))
    # both keep reusing their own memory once results are dropped
    for plan in (batch, sub):
        address = plan.evaluate().d.__array_interface__["data"][0]
        again = plan.evaluate().d.__array_interface__["data"][0]
        if batch_module._UNREFERENCED > 0:
            assert again == address


def test_subset_arguments_and_edge_cases():
    batch = BatchPlan.compile(parse_plan(section54_workload(30, seed=2)))
    q = len(batch.query_names)
    for bad in (np.array([3, 3]), np.array([5, 1, 5]), np.array([q]), np.array([-1]), np.array([0.0, 1.0]),
                np.array([[0, 1]]), np.array([True, False])):
        with pytest.raises(ValueError):
            batch.subset(bad)
    # distinct indices in another order: queries (and their sums) in that order, the nodes in batch's order
    sub = batch.subset(np.array([7, 2, 11]))
    assert sub.query_names == tuple(batch.query_names[i] for i in (7, 2, 11))
    assert np.all(np.diff(sub.parent_positions) > 0)
    whole, part = batch.evaluate(), sub.evaluate()
    assert np.array_equal(part.query_memory, whole.query_memory[[7, 2, 11]])
    assert part.total_memory == pytest.approx(whole.query_memory[[7, 2, 11]].sum(), rel=1e-12)
    assert sub.subset([0]).query_names == (batch.query_names[7],)  # a list will do
    # no query: nothing to evaluate, totals 0, every stream still there
    empty = batch.subset(np.array([], dtype=np.intp))
    assert empty.node_ids == () and empty.query_names == () and empty.stream_names == batch.stream_names
    result = empty.evaluate(stream_d=batch.stream_d * 2)
    assert result.d.shape == (0,) and result.query_memory.shape == (0,)
    assert result.total_memory == 0.0 and result.total_cpu == 0.0
    assert np.array_equal(empty.evaluate(stream_d=np.ones((len(batch.stream_names), 3))).total_cpu, np.zeros(3))
    # a compiled plan is its own parent
    assert batch.parent_positions is None


# --- the §5.4 workload generator -----------------------------------------------------------------

SHAPES = {
    "join2": "J(W,W)",
    "join3": "J(J(W,W),W)",
    "join4": "J(J(J(W,W),W),W)",
    "bushy": "J(J(W,W),J(W,W))",
    "agg": "A(G(W))",
    "agg_join": "J(A(G(W)),G(W))",
    "agg_agg": "J(A(G(W)),A(G(W)))",
}


def shape(node: dict) -> str:
    letter = {"join": "J", "window": "W", "aggregate": "A", "granularity": "G"}[node["op"]]
    inputs = node["inputs"]
    if node["op"] == "window":
        assert [i["op"] for i in inputs] == ["source"]
        return letter
    return f"{letter}({','.join(shape(i) for i in inputs)})"


@pytest.fixture(scope="module")
def workload_5000():
    return section54(5000, seed=0)


def test_section54_mix_and_parameters(workload_5000):
    doc, qos = workload_5000.doc, workload_5000.qos
    assert len(doc["queries"]) == 5000 and len(doc["streams"]) == 50
    counts = Counter(q.plan_type for q in qos.values())
    for plan_type, share in PLAN_TYPES.items():
        assert abs(counts[plan_type] / 5000 - share) < 0.025, (plan_type, counts[plan_type])
    rates = np.array([60000.0 / s["d"] for s in doc["streams"].values()])
    assert rates.min() >= 2 and rates.max() <= 600 and np.ptp(rates) > 400
    assert all(s["g"] == 1 and s["size"] > 0 for s in doc["streams"].values())

    kinds, sels, windows = [], [], []
    for name, tree in doc["queries"].items():
        q = qos[name]
        assert shape(tree) == SHAPES[q.plan_type], name
        nodes = named_nodes({"queries": {name: tree}})
        joins = [n for n in nodes.values() if n["op"] == "join"]
        kinds += [n["kind"] for n in joins]
        sels += [n["sel"] for n in joins]
        streams = [n["stream"] for n in nodes.values() if n["op"] == "source"]
        assert len(set(streams)) == len(streams)
        window_nodes = {i for i, n in nodes.items() if n["op"] == "window"}
        assert window_nodes == set(q.windows) and all(i.startswith(f"{name}.w") for i in window_nodes)
        for node_id, (w_min, w_max) in q.windows.items():
            w = nodes[node_id]["w"]
            assert isinstance(w, int) and w == w_max and 60_000 <= w_min <= w_max <= 1_800_000
            windows.append(w)
        gran = [i for i, n in nodes.items() if n["op"] == "granularity"]
        assert set(gran) == set(q.granularity_nodes)
        if gran:
            coarse, fine = q.granularity
            assert 1 <= fine <= coarse <= 10_000
            assert {nodes[i]["g"] for i in gran} == {fine} and isinstance(fine, int)
        else:
            assert q.granularity is None and q.plan_type.startswith(("join", "bushy"))
    assert abs(Counter(kinds)["nested"] / len(kinds) - 0.33) < 0.03
    assert 0.005 <= min(sels) and max(sels) <= 0.02
    assert abs(np.mean(windows) - 930_000) < 30_000  # uniform on 1–30 min


def test_section54_parses_and_batch_agrees(workload_5000):
    plan = parse_plan(workload_5000.doc)
    assert len(plan.queries) == 5000
    batch = BatchPlan.compile(plan)
    result = batch.evaluate()
    assert np.all(np.isfinite(result.query_memory)) and np.all(result.query_memory > 0)
    bounds = workload_5000.bounds(batch.node_ids)
    assert np.array_equal(np.isnan(bounds["w_max"]), np.isnan(batch.w))
    assert np.array_equal(bounds["w_max"][~np.isnan(batch.w)], batch.w[~np.isnan(batch.w)])
    assert np.array_equal(bounds["g_fine"][~np.isnan(batch.g)], batch.g[~np.isnan(batch.g)])


def test_section54_is_deterministic_by_seed():
    assert section54_workload(300, seed=5) == section54_workload(300, seed=5)
    assert section54_workload(300, seed=5) != section54_workload(300, seed=6)
    assert section54(300, seed=5).qos == section54(300, seed=5).qos
    assert section54_workload(40, n_streams=3, seed=1)["streams"].keys() == {"S00", "S01", "S02"}
    parse_plan(section54_workload(40, n_streams=3, seed=1))  # fewer streams than a query needs: repeats allowed


def test_small_workload_matches_scalar():
    plan = parse_plan(section54_workload(150, seed=9))
    assert_matches_scalar(plan, BatchPlan.compile(plan).evaluate())
