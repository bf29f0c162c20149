"""What the read commands print for people: status and explain (history: ``history.py``).

The store returns plain JSON-able rows (the ``--json`` output); this module
turns them into short fixed-width text, so the two never disagree. People
read durations, not model time units, IEC sizes, wall-clock instants and the
names they gave (``Words``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping

from .units import format_duration, format_size, instant


@dataclass(frozen=True)
class Words:
    """How numbers from the store become words: the model's time unit and the plan's node names."""

    unit_seconds: float = 1.0
    labels: Mapping[str, str] = field(default_factory=dict)

    def duration(self, units: float | None) -> str:
        """A size in model time units as a duration."""
        return "—" if units is None else format_duration(units * self.unit_seconds)

    def settings(self, settings: Mapping[str, Any] | None) -> str:
        """``clicks_10s 10s, views 20s; granularity 1s`` (``—``: none)."""
        if not settings:
            return "—"
        parts = [f"{self.labels.get(node, node)} {self.duration(size)}" for node, size in (settings.get("windows") or {}).items()]
        text = ", ".join(parts)
        if settings.get("granularity") is not None:
            text += ("; " if text else "") + f"granularity {self.duration(settings['granularity'])}"
        return text or "—"

    def model_instant(self, units: float | None, now_units: float | None, at: Any) -> str:
        """A model time (``units``) as the wall-clock instant it stands for, given the decision's own ``now`` and ``at``."""
        if units is None or now_units is None or at is None:
            return "—"
        start = datetime.fromisoformat(at) if isinstance(at, str) else at
        return instant(start + timedelta(seconds=(units - now_units) * self.unit_seconds))


def _bytes(value: float | None) -> str:
    return format_size(value)


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def status_text(data: Mapping[str, Any], store: str, words: Words = Words()) -> str:
    lines = [f"armd status — store {store}", ""]
    recommending = any(q.get("recommended") for q in data["queries"])
    head = ("query", "status", "qos", "settings in force", *(("recommended",) if recommending else ()),
            "est. memory", "measured", "est. cpu", "busy")
    rows = [head]
    for query in data["queries"]:
        qos = query.get("qos_fraction")
        busy = query.get("measured_busy_fraction")
        rows.append((
            query["name"], query["status"], "—" if qos is None else f"{qos:.3f}", words.settings(query.get("settings")),
            *((words.settings(query.get("recommended")),) if recommending else ()),
            _bytes(query.get("estimated_memory_bytes")), _bytes(query.get("measured_state_bytes")),
            _number(query.get("estimated_cpu")), "—" if busy is None else f"{busy:.1%}",
        ))
    total = data.get("total") or {}
    rows.append(("total", "", "", "", *(("",) if recommending else ()), _bytes(total.get("estimated_memory_bytes")),
                 _bytes(total.get("measured_state_bytes")), _number(total.get("estimated_cpu")), ""))
    lines += _table(rows) if len(rows) > 2 else ["no queries"]
    lines.append("")
    lines.append("est. cpu: the model's cost units per time unit; busy: measured, the share of wall time Spark spent in "
                 "the query's micro-batches (recent batches)")
    if recommending:
        lines.append("recommended: not applied (a dry run, or an application in recommend mode)")
    decision = data.get("last_decision")
    lines.append("last decision: " + (_decision_line(decision) if decision else "none yet"))
    migrations = data.get("migrations") or []
    lines.append(f"running migrations: {len(migrations) or 'none'}")
    for migration in migrations:
        lines.append(f"  #{migration['id']} {migration['query']} {migration['strategy']} {migration['state']} "
                     f"since {instant(migration['started_at'])}")
    return "\n".join(lines)


def _decision_line(decision: Mapping[str, Any]) -> str:
    flags = [
        "feasible" if decision["feasible"] else "INFEASIBLE",
        "dry run: recommended only" if decision["dry_run"] else ("applied" if decision["applied"] else "nothing to apply"),
    ]
    return (
        f"#{decision['id']} at {instant(decision['at'])} by {decision['policy']} ({decision['trigger']}): "
        f"weighted QoS {decision['weighted_qos']:.3f}, estimate {_bytes(decision['estimated_memory_bytes'])} / "
        f"{_number(decision['estimated_cpu'])} cpu, {', '.join(flags)}"
    )


def explanation(query: Mapping[str, Any], decision: Mapping[str, Any] | None, words: Words = Words(), *,
                recommended: Mapping[str, Any] | None = None, busy: float | None = None) -> dict[str, Any]:
    """The facts behind a query's settings: its ranges, the last decision's view of it, the system's budget.

    ``recommended``: a dry run's desired settings for the query; ``busy``: its measured share of wall time in
    Spark micro-batches.
    """
    result: dict[str, Any] = {
        "query": query["name"],
        "status": query["status"],
        "status_reason": query.get("status_reason"),
        "weight": query.get("weight"),
        "qos_ranges": query.get("qos"),
        "settings": query.get("settings"),
        "settings_changed_at": query.get("settings_changed_at"),
        "recommended": recommended,
        "measured_busy_fraction": busy,
        "decision": None,
    }
    if decision is None:
        return result
    inputs, outputs = decision.get("inputs") or {}, decision.get("outputs") or {}
    mine = (outputs.get("queries") or {}).get(query["name"])
    bounds = inputs.get("bounds") or {}
    hold = outputs.get("bounds_hold_at")
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
            "bounds_hold_at": hold,
            "bounds_hold_from": None if hold is None else words.model_instant(hold, inputs.get("now"), decision["at"]),
        },
        "policy_details": outputs.get("details"),
    }
    return result


def _ranges(ranges: Mapping[str, Any], words: Words) -> str:
    def span(pair: Any) -> str:
        return f"{words.duration(pair[0])} to {words.duration(pair[1])}"

    parts = []
    if ranges.get("window"):
        parts.append(f"window {span(ranges['window'])}")
    for node, pair in (ranges.get("windows") or {}).items():
        parts.append(f"{words.labels.get(node, node)} {span(pair)}")
    if ranges.get("granularity"):
        parts.append(f"granularity {span(ranges['granularity'])} (coarsest to finest)")
    return ", ".join(parts) or "none"


def explanation_text(data: Mapping[str, Any], words: Words = Words()) -> str:
    lines = [f"query {data['query']}: {data['status']}" + (f" — {data['status_reason']}" if data.get("status_reason") else "")]
    ranges = data.get("qos_ranges") or {}
    if ranges:
        lines.append(f"QoS ranges: {_ranges(ranges, words)}; weight {data.get('weight')}")
    else:
        lines.append("QoS ranges: none (the plan's values are fixed)")
    qos = (data.get("settings") or {}).get("qos")
    since = f" (since {instant(data['settings_changed_at'])})" if data.get("settings_changed_at") else ""
    lines.append(f"in force: {words.settings(data.get('settings'))}" + (f", QoS {qos:.3f}" if qos is not None else "") + since)
    if data.get("recommended"):
        rec = data["recommended"]
        lines.append(f"recommended (dry run, not applied): {words.settings(rec)}, QoS {rec.get('qos', 0):.3f}")
    if data.get("measured_busy_fraction") is not None:
        lines.append(f"measured CPU: Spark spent {data['measured_busy_fraction']:.1%} of recent wall time in its micro-batches")
    decision = data.get("decision")
    if decision is None:
        lines.append("no decision recorded yet")
        return "\n".join(lines)
    lines.append(f"last decision #{decision['id']} at {instant(decision['at'])} by {decision['policy']}, "
                 f"trigger: {decision['trigger']}")
    lines.append(f"  policy: {decision['reason']}")
    if not decision["considered"]:
        lines.append("  this query was not part of it (not admitted at the time)")
    else:
        result = "recommended" if decision["dry_run"] else "applied"
        for label, key in (("proposed", "proposed"), (result, "applied")):
            lines.append(f"  {label}: {words.settings(decision[key])}, QoS {decision[key]['qos']:.3f}")
        lines.append(f"  guardrail: {decision['guardrail'] or 'none held this query'}")
        estimate = decision["query_estimate"]
        lines.append(f"  this query's estimate: {_bytes(estimate['memory_bytes'])}, {_number(estimate['cpu'])} cpu "
                     "(cost units per time unit)")
    system = decision["system"]
    lines.append(
        f"  system: memory {_bytes(system['estimated_memory_bytes'])} of {_bytes(system['usable_memory_bytes'])} usable, "
        f"cpu {_number(system['estimated_cpu'])} of {_number(system['usable_cpu'])} usable (reserve {system['reserve']}), "
        f"weighted QoS {system['weighted_qos']:.3f}"
    )
    if system.get("bounds_hold_from"):
        lines.append(f"  bounds hold from {system['bounds_hold_from']} on (after the old windows expire)")
    return "\n".join(lines)
