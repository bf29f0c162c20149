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
from .plan import Node, PlanSet

PROFILES = ("paper", "spark")
"""Engine profiles: ``paper`` is paper 001's PIPES model exactly; ``spark`` keeps a time window's elements
for its size plus the time until Spark's watermark passes them (see ``retention_extra``)."""


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
        out, cost = f.aggregate_output(s, node.groups), f.aggregate_cost(s, node.groups, size, k)
    elif op == "union":
        streams = [i.out for i in inputs]
        out = f.union_output(streams)
        cost = f.union_cost(out, k)
        if not out.is_empty:
            size = sum(i.size * i.out.rate for i in inputs) / out.rate
    elif op == "join":
        a, b = inputs
        buckets = node.buckets or (k.buckets, k.buckets)
        out = f.join_output(a.out, b.out, node.sel)
        cost = f.join_cost(a.out, b.out, node.sel, a.size, b.size, *buckets, node.kind == "nested", k)
        size = a.size + b.size
    else:  # pragma: no cover - parse_plan admits only the operators above
        raise AssertionError(op)
    return NodeEstimate(node.id, op, out, size, cost.memory, cost.cpu)
