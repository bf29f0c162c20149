"""The names people gave, shown instead of the ids armd generated.

A plan node without an ``id`` gets one from its position (``clicks_per_view.1``:
input 1 of the query's root). That is a key, not a name: nobody wrote it and
nobody can tell which window it is. Where armd shows a node to a person it
uses the id the plan gave, else — for a window, the nodes whose sizes armd
changes — the stream it reads (``views``), and only when neither says more
the generated id.
"""

from __future__ import annotations

import re

from armd.costmodel.plan import PlanSet


def _generated(plan: PlanSet, node_id: str) -> bool:
    head, _, rest = node_id.partition(".")
    return head in plan.queries and bool(re.fullmatch(r"\d+(\.\d+)*", rest))


def _streams(plan: PlanSet, node_id: str) -> set[str]:
    node = plan.nodes[node_id]
    if node.op == "source" and node.stream is not None:
        return {node.stream}
    return set().union(*(_streams(plan, i) for i in node.inputs)) if node.inputs else set()


def node_labels(plan: PlanSet) -> dict[str, str]:
    """Node id → what to show: the id a person wrote, else a window's one stream, else the generated id."""
    labels: dict[str, str] = {}
    for node_id in plan.nodes:
        label = node_id
        if _generated(plan, node_id) and plan.nodes[node_id].op == "window":
            streams = _streams(plan, node_id)
            if len(streams) == 1:
                label = next(iter(streams))
        labels[node_id] = label
    shown = list(labels.values())
    # Two windows over one stream in different queries: the stream alone would not say which; keep them apart.
    return {n: (label if shown.count(label) == 1 or label == n else f"{label} ({n.partition('.')[0]})")
            for n, label in labels.items()}
