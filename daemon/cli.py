"""The ``armd`` command line.

Each subcommand parses its arguments, calls into the package and turns a
user mistake into one line on stderr and exit status 2; a traceback means a
bug in armd, never in the user's input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from pathlib import Path
from typing import Any, Sequence

from armd.costmodel.evaluate import PROFILES, Estimate, estimate
from armd.costmodel.plan import PlanError, PlanSet, parse_plan

EXIT_USAGE = 2


class UserError(Exception):
    """A mistake in the user's input; printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UserError as exc:
        print(f"armd: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="armd", description="Adaptive resource manager for Spark Structured Streaming")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    est = commands.add_parser("estimate", help="estimate memory and CPU of the queries in a plan file")
    est.add_argument("plan", type=Path, help="plan file (.json or .toml), see docs/plan-format.md")
    est.add_argument("--json", action="store_true", help="print JSON instead of a table")
    est.add_argument("--profile", choices=PROFILES, default="paper", help="engine profile (default: paper)")
    est.set_defaults(handler=_estimate)
    return parser


def load_plan(path: Path) -> PlanSet:
    """Read and validate a plan file; every failure is a ``UserError`` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise UserError(f"plan {path} is not valid {kind}: {exc}") from None
    try:
        return parse_plan(doc)
    except PlanError as exc:
        raise UserError(f"plan {path}: {exc}") from None


def _estimate(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    result = estimate(plan, args.profile)
    if args.json:
        print(json.dumps(estimate_json(plan, result), indent=2))
    else:
        print(estimate_table(plan, result))
    return 0


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
