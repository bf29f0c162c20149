"""``armd history``: one timeline of what armd decided and what happened, newest first.

The store keeps decisions and events in two tables; an operator asks one
question — what changed, when, and why — so this module merges them into one
list of entries ordered by time. A decision entry names, per query, the
settings before and after it (``old`` → ``new``), taken from the decision
before it; a dry run's entry says its settings were only recommended. The
JSON keeps the store's own rows under ``decisions`` and ``events`` (with the
guardrails' ``cooldown`` in the configured seconds, not model time units) and
adds the merged ``timeline``.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from .render import Words
from .units import instant


def _applied(decision: Mapping[str, Any]) -> dict[str, Any]:
    queries = ((decision.get("outputs") or {}).get("queries") or {})
    return {q: v.get("applied") for q, v in queries.items() if v.get("applied") is not None}


def _same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.get("windows") or {}) == (b.get("windows") or {}) and a.get("granularity") == b.get("granularity")


def _when(at: Any) -> datetime:
    """An entry's time, comparable whatever its text's precision (``…:42+00:00`` and ``…:42.5+00:00``)."""
    when = datetime.fromisoformat(at) if isinstance(at, str) else at
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def in_seconds(decision: Mapping[str, Any], unit_seconds: float) -> dict[str, Any]:
    """The decision row with its guardrails' ``cooldown`` in seconds, as configured (the store keeps model units)."""
    row = copy.deepcopy(dict(decision))
    rails = (row.get("inputs") or {}).get("guardrails")
    if isinstance(rails, dict) and isinstance(rails.get("cooldown"), (int, float)):
        rails["cooldown"] = rails["cooldown"] * unit_seconds
        rails["cooldown_unit"] = "seconds"
    return row


def timeline(decisions: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]], *,
             query: str | None = None, limit: int) -> list[dict[str, Any]]:
    """Decisions and events merged, newest first, at most ``limit``.

    ``decisions`` are newest first; one more than shown may be passed as the baseline of the oldest. A
    decision is listed when it changed some query's settings (only ``query``'s with ``query``), or when it
    changed none but was recorded anyway (nothing to apply, infeasible), unless ``query`` is given.
    """
    entries: list[dict[str, Any]] = []
    ordered = list(decisions)
    for i, decision in enumerate(ordered):
        before = _applied(ordered[i + 1]) if i + 1 < len(ordered) else {}
        after = _applied(decision)
        changes = [{"query": q, "old": before.get(q), "new": new} for q, new in sorted(after.items())
                   if not _same(before.get(q), new) and (i + 1 < len(ordered) or decision.get("applied"))]
        if query is not None:
            changes = [c for c in changes if c["query"] == query]
            if not changes:
                continue
        elif i + 1 == len(ordered) and len(ordered) > limit:
            continue  # only the baseline of the one before
        entries.append({
            "at": decision["at"], "kind": "decision", "id": decision["id"], "policy": decision["policy"],
            "trigger": decision["trigger"], "feasible": decision["feasible"], "dry_run": decision["dry_run"],
            "applied": decision["applied"], "weighted_qos": decision["weighted_qos"], "changes": changes,
        })
    for event in events:
        if query is None or event.get("query") == query:
            entries.append({"at": event["at"], "kind": "event", "severity": event["severity"], "event": event["kind"],
                            "query": event.get("query"), "message": event["message"]})
    entries.sort(key=lambda e: _when(e["at"]), reverse=True)
    return entries[:limit]


def history_text(entries: Sequence[Mapping[str, Any]], words: Words) -> str:
    """One line per entry (a decision's changes indented below it)."""
    if not entries:
        return "nothing recorded in this period"
    lines = []
    for e in entries:
        at = instant(e["at"])
        if e["kind"] == "event":
            where = f" [{e['query']}]" if e.get("query") else ""
            lines.append(f"{at}  {e['severity']:<7}  {e['event']}{where}: {e['message']}")
            continue
        verb = ("recommended (dry run)" if e["dry_run"] else "applied" if e["applied"] else "nothing to apply")
        feasible = "" if e["feasible"] else ", INFEASIBLE"
        lines.append(f"{at}  decision  {e['policy']} on {e['trigger']}: weighted QoS {e['weighted_qos']:.3f}, "
                     f"{verb}{feasible}")
        for c in e["changes"]:
            old = words.settings(c["old"]) if c["old"] is not None else "?"
            lines.append(f"    {c['query']}: {old} → {words.settings(c['new'])}")
    return "\n".join(lines)
