"""``armd plan MODULE:FUNCTION`` and ``armd explain QUERY --plan``: a derived plan beside the Spark operators it came from.

Both build the query (nothing runs), derive its plan
(``armd.adapters.spark.derive``) and print it as a tree, one line per
model node with its parameters — measured ones marked ``*`` with their
default — and the Spark operators it stands for; ``--json`` prints the plan
document itself, ready to be used as a ``[plan] file``.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from .config import Config

SHOWN = ("stream", "w", "g", "sel", "groups", "size", "c", "kind")


class PlanViewError(Exception):
    """A mistake in what the user asked for; the CLI prints it as one line."""


def derivation_text(d: Any, note: str | None = None) -> str:
    """The derived plan as an indented tree with the Spark operators of every node."""
    measured = {(m.where, m.param) for m in d.measured}
    rows: list[tuple[str, str, str, str]] = []

    def visit(node: dict[str, Any], depth: int) -> None:
        node_id = node.get("id") or f"{d.query}.{node.get('stream')}"
        params = []
        for key in SHOWN:
            if key in node and not (node["op"] == "source" and key == "stream"):
                star = "*" if (node_id, key) in measured else ""
                params.append(f"{key}={node[key]:g}{star}" if isinstance(node[key], (int, float)) else f"{key}={node[key]}")
        if node["op"] == "source":
            params.insert(0, f"stream={node['stream']}")
        spark = d.operators.get(node_id, [])
        rows.append(("  " * depth + node_id, node["op"], " ".join(params), spark[0] if spark else ""))
        rows.extend(("", "", "", more) for more in spark[1:])
        for child in node.get("inputs", []):
            visit(child, depth + 1)

    visit(d.root, 0)
    head = ("node", "op", "parameters", "Spark operators")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    lines = [f"query {d.query} (time unit {d.time_unit_seconds:g} s; * = measured while it runs, default shown)"]
    if note:
        lines.append(note)
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  " + head[3])
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3] for r in rows]
    lines.append("streams:")
    for name, spec in d.streams.items():
        delay = d.watermark_delays.get(name)
        lines.append(f"  {name}: rate={spec['rate']:g}* size={spec['size']:g}* g={spec['g']:g}"
                     f"  watermark delay {'none' if delay is None else f'{delay:g} s'}  ({d.sources.get(name, '')})")
    trigger = f"{d.trigger_seconds:g} s" if d.trigger_seconds else "as fast as possible"
    lines.append(f"trigger: {trigger}")
    if d.nodes:
        lines.append("builder names: " + ", ".join(f"{k} → {v}" for k, v in sorted(d.nodes.items())))
    return "\n".join(lines)


def derive_for(builder: str, query: str, config: Config | None) -> Any:
    """Derive ``builder`` as query ``query`` with the configuration's streams and that query's ``[managed]`` values."""
    from armd.adapters.spark.derive import DerivationError, derive_builder
    from armd.adapters.spark.managed import QueryParams, load_builder
    from armd.adapters.spark.session import build_session

    from .config.derived import params_for

    try:
        load_builder(builder)
    except LookupError as exc:
        raise PlanViewError(str(exc)) from None
    unit = config.model.time_unit_seconds if config else 1.0
    if config is not None:
        spark = build_session(config.spark.master, config.spark.app_name, config.spark.conf, state_store=config.spark.state_store)
        m = config.managed.get(query)
        sources = {name: {"start": "0", "keys": s.keys, "all_streams": ",".join(config.source.streams),
                          "schedule": json.dumps({"rate_per_second": s.rate_per_second, "steps": [], "bursts": []})}
                   for name, s in config.source.streams.items()}
        values = {"watermark_delay_seconds": m.watermark_delay_seconds if m else 0.0,
                  "trigger_seconds": m.trigger_seconds if m else None, "params": dict(m.params) if m else {}}
        # the daemon's names map to a plan file's ids; a derived plan's ids come from the builder's own names
        params = params_for(values, sources, m.nodes if m and query not in config.derivations else None)
        if query in config.plan.queries:  # a plan file's window sizes and granularity, as the daemon starts the query
            nodes = [config.plan.nodes[n] for n in config.plan.query_nodes(query)]
            windows = {n.id: n.w * unit for n in nodes if n.op == "window" and n.w is not None}
            granularity = next((n.g * unit for n in nodes if n.op == "granularity" and n.g is not None), None)
            params = QueryParams(windows=windows, granularity=granularity, extra=params.extra)
        trigger = m.trigger_seconds if m else None
    else:
        spark = build_session("local[1]", "armd-plan")
        params, trigger = QueryParams(), None
    try:
        return derive_builder(spark, builder, query, params, trigger_seconds=trigger, time_unit_seconds=unit)
    except DerivationError as exc:
        raise PlanViewError(f"query {query!r} ({builder}): {exc}") from None
    except Exception as exc:  # the user's builder failed to build
        hint = "" if config else "; give --config so the builder gets the configuration's streams and params"
        raise PlanViewError(f"builder {builder} failed to build the query: {type(exc).__name__}: {exc}{hint}") from None


def plan_command(builder: str, query: str | None, config: Config | None, as_json: bool, out: Callable[[str], None]) -> int:
    """``armd plan MODULE:FUNCTION``: the query named after the ``[managed]`` entry using the builder, else the function."""
    if query is None and config is not None:
        query = next((name for name, m in config.managed.items() if m.builder == builder), None)
    query = query or builder.rpartition(":")[2] or "query"
    d = derive_for(builder, query, config)
    out(json.dumps(d.document, indent=2) if as_json else derivation_text(d))
    return 0


def explain_plan(query: str, config: Config, as_json: bool, out: Callable[[str], None]) -> int:
    """``armd explain QUERY --plan``: the derived plan of a configured query (derived again when a plan file is used)."""
    if query not in config.managed:
        raise PlanViewError(f"no [managed.{query}] in {config.path}; managed queries: {', '.join(config.managed) or 'none'}")
    if query in config.unmanaged:
        raise PlanViewError(f"query {query!r} runs unmanaged: {config.unmanaged[query]}")
    d = config.derivations.get(query)
    note = None
    if d is None:
        d = derive_for(config.managed[query].builder, query, config)
        note = "the configuration's [plan] overrides this derived plan"
    out(json.dumps(d.document, indent=2) if as_json else derivation_text(d, note))
    return 0
