"""What ``armd estimate`` prints: the cost model's estimate of a plan as a JSON document or a fixed-width table."""

from __future__ import annotations

import math
from typing import Any

from armd.costmodel.evaluate import Estimate
from armd.costmodel.plan import PlanSet


def _number(value: float) -> float | str:
    """JSON has no infinity: write it as the string "inf"."""
    return "inf" if math.isinf(value) else value


def _owners(plan: PlanSet) -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {node_id: [] for node_id in plan.nodes}
    for query in plan.queries:
        for node_id in plan.query_nodes(query):
            owners[node_id].append(query)
    return owners


def estimate_json(plan: PlanSet, result: Estimate) -> dict[str, Any]:
    """The ``armd estimate --json`` document; a shared node is listed once, under its first query."""
    owners = _owners(plan)
    nodes = []
    for node_id, node in result.nodes.items():
        nodes.append(
            {
                "query": owners[node_id][0],
                "queries": owners[node_id],
                "id": node_id,
                "op": node.op,
                "d": _number(node.out.d),
                "l": node.out.l,
                "g": node.out.g,
                "size_bytes": node.size,
                "memory_bytes": node.memory,
                "cpu": node.cpu,
            }
        )
    return {
        "nodes": nodes,
        "queries": {q: {"memory_bytes": t.memory, "cpu": t.cpu} for q, t in result.queries.items()},
        "total": {"memory_bytes": result.total.memory, "cpu": result.total.cpu},
    }


def estimate_table(plan: PlanSet, result: Estimate) -> str:
    """A fixed-width table: one row per node, then per query, then the total."""
    owners = _owners(plan)
    rows = [("query", "node", "op", "d", "l", "g", "memory B", "cpu/unit")]
    for node_id, node in result.nodes.items():
        rows.append(
            (
                ",".join(owners[node_id]),
                node_id,
                node.op,
                f"{node.out.d:.4g}",
                f"{node.out.l:.4g}",
                f"{node.out.g:g}",
                f"{node.memory:,.0f}",
                f"{node.cpu:.4g}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.append("")
    name_width = max(len(q) for q in [*result.queries, "total"])
    for query, totals in [*result.queries.items(), ("total", result.total)]:
        lines.append(f"{query.ljust(name_width)}  memory {totals.memory:>14,.0f} B   cpu {totals.cpu:.4g}/unit")
    return "\n".join(lines)
