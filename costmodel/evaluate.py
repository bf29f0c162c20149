"""Bottom-up evaluation of a plan DAG with the scalar formulas (paper 001 §3.3–3.4).

Each node is evaluated once, however many queries share it. A query's cost
is the sum over the nodes it uses; the total counts every node once, so
shared sub-plans are not double-counted. This is the reference evaluator and
the one the CLI uses; ``costmodel.batch`` is the fast path for many plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from . import formulas as f
from .characteristics import Stream
from .constants import CostConstants
from .heralds import herald_cpu
from .plan import Node, PlanSet

PROFILES = ("paper", "spark")
"""Engine profiles: ``paper`` is paper 001's PIPES model exactly; ``spark`` keeps a time window's elements
for its size plus the time until Spark's watermark passes them (see ``retention_extra``), and a join
matches within the logical lengths while it holds for the retention (see ``spark_join``)."""


def retention_extra(profile: str, constants: CostConstants, d: float) -> float:
    """Time a time window's element stays in state beyond the window size: 0 in PIPES (``paper``).

    Spark (``spark``) drops state only when the watermark passes it. The
    watermark trails the newest event time by the delay D, is taken once per
    micro-batch (one trigger interval T of event time later), and follows the
    newest element, on average d (the input's inter-arrival time) old. So a
    window of size w holds its elements for w + D + T + d; measured on local
    Spark in docs/spark-mapping.md.
    """
    if profile == "paper":
        return 0.0
    return spark_retention(0.0, constants.watermark_delay, constants.trigger_interval, d)


def spark_retention(validity: float, delay: float, trigger: float, d: float) -> float:
    """Time Spark keeps an element (or window) of the given validity: validity + D + T + d.

    d is the mean inter-arrival time of the stream that sets the watermark
    (1/r); an empty stream (d = inf) adds no lag. The one place of this rule:
    ``retention_extra`` and ``adapters/spark/mapping.py`` both use it.
    """
    return validity + delay + trigger + (d if math.isfinite(d) else 0.0)


def join_fed(plan: PlanSet, node_id: str) -> bool:
    """Whether the node is a join's output, directly or through projections and selections (which pass
    Spark's watermark on unchanged): a join reading it is join-fed (``spark_join``)."""
    node = plan.nodes[node_id]
    while node.op in ("project", "select"):
        node = plan.nodes[node.inputs[0]]
    return node.op == "join"


def spark_join(a: NodeEstimate, b: NodeEstimate, fed: tuple[bool, bool], sel: float, buckets: tuple[float, float],
               nested: bool, k: CostConstants) -> tuple[Stream, f.Cost]:
    """A join under the ``spark`` profile: it matches within the logical lengths and holds for the retention.

    In this profile a stream's l is the time its elements are held: the
    logical validity λ plus D + T + d (``spark_retention``, d the stream's
    own inter-arrival time), as a time window gives it. Spark's range join
    matches within the logical range only, so the join takes λ = l − (D + T + d)
    (at least one granule g; up to the window's rounding it is the window's
    ⌊(w + 1)/g⌋·g) and computes its output (formula 4) and result cost (13)
    from the λ's. Its output gets the same form: l' = λ' + D + T + d'.

    A join fed by a join (``fed``: its input is a join's output, directly or
    through projections and selections): the first join's results carry an event time up to
    its range before the newest input (Spark delays the watermark after a
    range join by the range), so the second join's watermark lags its inputs'
    by that range, and both its sides hold their elements that much longer.
    The range of a join result of logical validity λ' = λ_a·λ_b/(λ_a + λ_b) is
    2λ' (the range itself when both windows are equal, their harmonic mean
    otherwise); with two join-fed inputs the larger lag counts. The states
    (formula 9) and the probes (12) use the held lengths l + lag. For
    (a ⋈ b) ⋈ c with windows R that keeps c's rows 2R + D + T + 1/r and the
    first join's results R/2 + R + D + T, as measured (``three_way_join_rows``
    in adapters/spark/mapping.py keeps these 1.75·R + D + T + 1/r: Spark's
    builder stamps a result with a's time, the model with the intersection).
    """
    logical = [0.0 if s.out.is_empty else max(s.out.l - spark_retention(0.0, k.watermark_delay, k.trigger_interval, s.out.d), s.out.g)
               for s in (a, b)]
    lag = max((2.0 * m for is_fed, m in zip(fed, logical) if is_fed), default=0.0)
    out = f.join_output(Stream(a.out.d, logical[0], a.out.g), Stream(b.out.d, logical[1], b.out.g), sel)
    if not out.is_empty:
        out = Stream(out.d, out.l + spark_retention(0.0, k.watermark_delay, k.trigger_interval, out.d), out.g)
    held_a, held_b = (Stream(s.out.d, s.out.l + lag, s.out.g) for s in (a, b))
    cost = f.join_cost(held_a, held_b, sel, a.size, b.size, *buckets, nested, k, matched=(logical[0], logical[1]))
    return out, cost


def groups_in_window(node: Node, s: Stream, profile: str, k: CostConstants) -> float:
    """An aggregation's group count: the constant, or its per-window model n(w) at the window its input has.

    The window is recovered from the input's validity: a granularity
    operator (the slide) shortened l by its g, so g is added back; under
    ``spark`` l then is the held length l_h = w + D + T + d, and the window
    w = l_h − (D + T + d) (as in ``spark_join``), up to a source granule.

    Under ``spark`` the state holds one row per key and *live* window, and
    the windows still open hold only the keys seen so far: a window of age a
    holds n(min(a, w)) keys. Over live windows of ages spread evenly on
    [0, l_h] that is on average n(w − w²/(2·l_h)) (n is linear), which is
    the count used. A key set that does not drift (growth 0) is unaffected.
    """
    if node.group_growth is None:
        return node.groups
    if s.is_empty:
        return max(1.0, node.groups)
    held = s.l + s.g
    w = aggregated_window(s, profile, k)
    if profile == "spark" and held > 0:
        w -= w * w / (2.0 * held)
    return max(1.0, node.groups + node.group_growth * w)


def aggregated_window(s: Stream, profile: str, k: CostConstants) -> float:
    """The window w an aggregation's input ``s`` comes from: its held length l + g less the retention beyond the
    window (``groups_in_window``)."""
    return max(s.l + s.g - retention_extra(profile, k, s.d), 0.0)


def spark_aggregate_memory(s: Stream, groups: float, size: float, window: float, measured: bool) -> float:
    """An aggregation's state under ``spark``: one row per group and live window that holds an element of it.

    Spark keeps one row per (window, group) from the group's first element
    in the window until the watermark passes the window's end. A new window
    starts every slide g (the granularity, which shortened the held length
    l_h = w + D + T + d by g) and each lives l_h, so l_h/g windows are live;
    over the batches their count alternates between the integers around it
    (no ceiling).

    ``measured``: ``groups`` is the measured n(w) (``groups_in_window``), the
    distinct keys a window holds, so each has its row in every live window.
    Otherwise ``groups`` is the declared key count, each key an even share
    of the stream (formula 6's split, spacing n·d), and a window holds the
    keys with an element in its w (formula 15's ``hit_probability`` over the
    window, not over one granule: each element lives in every window it falls
    in, so a key sparser than the slide still has a row in most of them).
    Windows still filling have seen less than w, so for keys sparser than w
    this is an upper bound. Measured on local Spark: a count per key w = 10 s,
    slide 2 s, D = 2 s, T = 1 s, 20 elements/s over 5 keys holds 32.4 rows
    (docs/spark-mapping.md; formula 15 gave 30, this 32.6), with T = 2 s at
    10 elements/s 35 (``bench/trajectory.py``; 30 against 34.6); 40
    elements/s over 1,000 keys, w = 16 s, slide 1 s, D = 2 s (the fleet
    benchmark's count per page, 558 keys measured per window) 10,345 rows:
    10,044 from the measured keys, 8,500 from the declared 1,000, and 696
    with formula 15's hit of one granule (docs/spark-mapping.md).
    """
    if s.is_empty:
        return 0.0
    live = (s.l + s.g) / s.g
    if measured:
        return groups * live * size
    spacing = groups * s.d
    hit = f.hit_probability(spacing, window) if math.isfinite(spacing) else 0.0
    return groups * live * hit * size


@dataclass(frozen=True)
class NodeEstimate:
    """Output characteristics and resource use of one node."""

    id: str
    op: str
    out: Stream
    size: float
    """Bytes per output element."""
    memory: float
    """Bytes held in state."""
    cpu: float
    """Cost units per time unit."""


@dataclass(frozen=True)
class Totals:
    memory: float
    cpu: float


@dataclass(frozen=True)
class Estimate:
    nodes: Mapping[str, NodeEstimate]
    queries: Mapping[str, Totals]
    total: Totals


def estimate(plan: PlanSet, profile: str = "paper") -> Estimate:
    """Evaluate every node of the plan once, bottom-up, and sum per query and in total."""
    if profile not in PROFILES:
        raise LookupError(f"unknown engine profile {profile!r}; available: {', '.join(PROFILES)}")
    results: dict[str, NodeEstimate] = {}
    for node in plan.nodes.values():
        results[node.id] = evaluate_node(node, [results[i] for i in node.inputs], plan, profile)
    queries = {}
    for name in plan.queries:
        members = [results[i] for i in plan.query_nodes(name)]
        queries[name] = Totals(sum(n.memory for n in members), sum(n.cpu for n in members))
    total = Totals(sum(n.memory for n in results.values()), sum(n.cpu for n in results.values()))
    return Estimate(results, queries, total)


def evaluate_node(node: Node, inputs: list[NodeEstimate], plan: PlanSet, profile: str = "paper") -> NodeEstimate:
    """Apply one operator's output and cost formulas to its inputs' estimates."""
    k = plan.constants
    op = node.op
    if op == "source":
        spec = plan.streams[node.stream]
        return NodeEstimate(node.id, op, spec.characteristics, spec.size, 0.0, 0.0)
    first = inputs[0]
    s, size = first.out, first.size
    if op == "project":
        out, cost = f.project_output(s), f.project_cost(s, k)
        size = node.size or size
    elif op == "select":
        out, cost = f.select_output(s, node.sel), f.select_cost(s, k)
    elif op == "window" and node.c is not None:
        out = f.window_output(s, f.tuple_window_size(s, node.c))
        cost = f.tuple_window_cost(s, node.c, size, k)
    elif op == "window":
        out, cost = f.window_output(s, node.w + retention_extra(profile, k, s.d)), f.window_cost(s, k)
    elif op == "granularity":
        out, cost = f.granularity_output(s, node.g), f.granularity_cost(s, k)
    elif op == "aggregate":
        size = node.size or k.aggregate_size
        n = groups_in_window(node, s, profile, k)
        out, cost = f.aggregate_output(s, n), f.aggregate_cost(s, n, size, k)
        if profile == "spark":
            cost = f.Cost(spark_aggregate_memory(s, n, size, aggregated_window(s, profile, k), node.group_growth is not None),
                          cost.cpu)
    elif op == "union":
        streams = [i.out for i in inputs]
        out = f.union_output(streams)
        cost = f.union_cost(out, k)
        if not out.is_empty:
            size = sum(i.size * i.out.rate for i in inputs) / out.rate
    elif op == "join":
        a, b = inputs
        buckets = node.buckets or (k.buckets, k.buckets)
        if profile == "spark":
            fed = (join_fed(plan, node.inputs[0]), join_fed(plan, node.inputs[1]))
            out, cost = spark_join(a, b, fed, node.sel, buckets, node.kind == "nested", k)
        else:
            out = f.join_output(a.out, b.out, node.sel)
            cost = f.join_cost(a.out, b.out, node.sel, a.size, b.size, *buckets, node.kind == "nested", k)
        size = a.size + b.size
    else:  # pragma: no cover - parse_plan admits only the operators above
        raise AssertionError(op)
    cpu = cost.cpu
    if node.heralds is not None:  # paper 002 §VII: the same output, less evaluation work, an overhead per herald
        if op == "select":
            evaluation = cost.cpu
        else:
            nested = node.kind == "nested"
            evaluation = f.join_comparisons(inputs[0].out, inputs[1].out, *((1.0, 1.0) if nested else buckets), k)
        cpu = herald_cpu(cost.cpu, evaluation, [i.out for i in inputs], node.heralds, k)
    return NodeEstimate(node.id, op, out, size, cost.memory, cpu)
