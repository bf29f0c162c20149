"""What the read commands print for people: status, explain and history.

The store returns plain JSON-able rows (the ``--json`` output); this module
turns them into short fixed-width text, so the two never disagree.
"""

from __future__ import annotations

from typing import Any, Mapping


def _bytes(value: float | None) -> str:
    if value is None:
        return "—"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _settings(settings: Mapping[str, Any] | None) -> tuple[str, str]:
    if not settings:
        return "—", "—"
    windows = ", ".join(f"{node}={size:g}" for node, size in (settings.get("windows") or {}).items()) or "—"
    granularity = settings.get("granularity")
    return windows, "—" if granularity is None else f"{granularity:g}"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def status_text(data: Mapping[str, Any], store: str) -> str:
    lines = [f"armd status — store {store}", ""]
    rows = [("query", "status", "qos", "windows", "granularity", "est. memory", "measured", "est. cpu")]
    for query in data["queries"]:
        windows, granularity = _settings(query.get("settings"))
        qos = query.get("qos_fraction")
        rows.append((
            query["name"], query["status"], "—" if qos is None else f"{qos:.3f}", windows, granularity,
            _bytes(query.get("estimated_memory_bytes")), _bytes(query.get("measured_state_bytes")),
            _number(query.get("estimated_cpu")),
        ))
    total = data.get("total") or {}
    rows.append(("total", "", "", "", "", _bytes(total.get("estimated_memory_bytes")),
                 _bytes(total.get("measured_state_bytes")), _number(total.get("estimated_cpu"))))
    lines += _table(rows) if len(rows) > 1 else ["no queries"]
    lines.append("")
    decision = data.get("last_decision")
    lines.append("last decision: " + (_decision_line(decision) if decision else "none yet"))
    migrations = data.get("migrations") or []
    lines.append(f"running migrations: {len(migrations) or 'none'}")
    for migration in migrations:
        lines.append(f"  #{migration['id']} {migration['query']} {migration['strategy']} {migration['state']} since {migration['started_at']}")
    return "\n".join(lines)


def _decision_line(decision: Mapping[str, Any]) -> str:
    flags = [
        "feasible" if decision["feasible"] else "INFEASIBLE",
        "dry run" if decision["dry_run"] else ("applied" if decision["applied"] else "nothing to apply"),
    ]
    return (
        f"#{decision['id']} at {decision['at']} by {decision['policy']} ({decision['trigger']}): "
        f"weighted QoS {decision['weighted_qos']:.3f}, estimate {_bytes(decision['estimated_memory_bytes'])} / "
        f"{_number(decision['estimated_cpu'])} cpu, {', '.join(flags)}"
    )


def explanation(query: Mapping[str, Any], decision: Mapping[str, Any] | None) -> dict[str, Any]:
    """The facts behind a query's settings: its ranges, the last decision's view of it, the system's budget."""
    result: dict[str, Any] = {
        "query": query["name"],
        "status": query["status"],
        "status_reason": query.get("status_reason"),
        "weight": query.get("weight"),
        "qos_ranges": query.get("qos"),
        "settings": query.get("settings"),
        "settings_changed_at": query.get("settings_changed_at"),
        "decision": None,
    }
    if decision is None:
        return result
    inputs, outputs = decision.get("inputs") or {}, decision.get("outputs") or {}
    mine = (outputs.get("queries") or {}).get(query["name"])
    bounds = inputs.get("bounds") or {}
    result["decision"] = {
        "id": decision["id"],
        "at": decision["at"],
        "policy": decision["policy"],
        "trigger": decision["trigger"],
        "reason": decision["reason"],
        "feasible": decision["feasible"],
        "dry_run": decision["dry_run"],
        "considered": mine is not None,
        "proposed": mine and mine.get("proposed"),
        "applied": mine and mine.get("applied"),
        "guardrail": mine and mine.get("guardrail"),
        "query_estimate": mine and {"memory_bytes": mine.get("estimated_memory_bytes"), "cpu": mine.get("estimated_cpu")},
        "system": {
            "estimated_memory_bytes": decision["estimated_memory_bytes"],
            "usable_memory_bytes": bounds.get("usable_memory_bytes"),
            "estimated_cpu": decision["estimated_cpu"],
            "usable_cpu": bounds.get("usable_cpu"),
            "reserve": bounds.get("reserve"),
            "weighted_qos": decision["weighted_qos"],
            "bounds_hold_at": outputs.get("bounds_hold_at"),
        },
        "policy_details": outputs.get("details"),
    }
    return result


def explanation_text(data: Mapping[str, Any]) -> str:
    lines = [f"query {data['query']}: {data['status']}" + (f" — {data['status_reason']}" if data.get("status_reason") else "")]
    ranges = data.get("qos_ranges") or {}
    if ranges:
        parts = []
        if ranges.get("window"):
            parts.append(f"window {ranges['window']}")
        for node, bounds in (ranges.get("windows") or {}).items():
            parts.append(f"{node} {bounds}")
        if ranges.get("granularity"):
            parts.append(f"granularity (coarsest, finest) {ranges['granularity']}")
        lines.append(f"QoS ranges: {', '.join(parts) or 'none'}; weight {data.get('weight')}")
    else:
        lines.append("QoS ranges: none (the plan's values are fixed)")
    windows, granularity = _settings(data.get("settings"))
    qos = (data.get("settings") or {}).get("qos")
    lines.append(f"in force: windows {windows}, granularity {granularity}"
                 + (f", QoS {qos:.3f}" if qos is not None else "") + (f" (since {data['settings_changed_at']})" if data.get("settings_changed_at") else ""))
    decision = data.get("decision")
    if decision is None:
        lines.append("no decision recorded yet")
        return "\n".join(lines)
    lines.append(f"last decision #{decision['id']} at {decision['at']} by {decision['policy']}, trigger: {decision['trigger']}")
    lines.append(f"  policy: {decision['reason']}")
    if not decision["considered"]:
        lines.append("  this query was not part of it (not admitted at the time)")
    else:
        for label in ("proposed", "applied"):
            w, g = _settings(decision[label])
            lines.append(f"  {label}: windows {w}, granularity {g}, QoS {decision[label]['qos']:.3f}")
        lines.append(f"  guardrail: {decision['guardrail'] or 'none held this query'}")
        estimate = decision["query_estimate"]
        lines.append(f"  this query's estimate: {_bytes(estimate['memory_bytes'])}, {_number(estimate['cpu'])} cpu")
    system = decision["system"]
    lines.append(
        f"  system: memory {_bytes(system['estimated_memory_bytes'])} of {_bytes(system['usable_memory_bytes'])} usable, "
        f"cpu {_number(system['estimated_cpu'])} of {_number(system['usable_cpu'])} usable (reserve {system['reserve']}), "
        f"weighted QoS {system['weighted_qos']:.3f}"
    )
    if system.get("bounds_hold_at") is not None:
        lines.append(f"  bounds hold from model time {system['bounds_hold_at']:.6g} on (after old windows expire)")
    if decision["dry_run"]:
        lines.append("  dry run: nothing was applied")
    return "\n".join(lines)


def history_text(data: Mapping[str, Any]) -> str:
    lines = ["decisions:"]
    lines += [f"  {_decision_line(d)}" for d in data["decisions"]] or ["  none"]
    lines.append("events:")
    lines += [
        f"  {e['at']} {e['severity']:<7} {e['kind']}{' [' + e['query'] + ']' if e.get('query') else ''}: {e['message']}"
        for e in data["events"]
    ] or ["  none"]
    return "\n".join(lines)
