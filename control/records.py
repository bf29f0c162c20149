"""What the cycle writes about a decision: its record, its client-generated id, JSON-safe details.

Why apart from the cycle: the record is the explanation an operator reads
(``armd report``, the ``decisions`` table), so its layout is kept in one
place, and the cycle stays about deciding. Ids are generated here, by the
client, when a record is made: records go to the store late, through the
outbox, and a later record (desired settings, a migration) must be able to
name the decision it follows without waiting for the store's row id.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime
from typing import Any, Mapping

import numpy as np

from armd.policies.base import Decision
from armd.policies.guardrails import Guarded, Guardrails
from armd.policies.problem import Bounds, Problem
from armd.policies.staging import Staging
from armd.policies.trajectory import Trajectory

from .ports import DecisionRecord, QuerySettings


def new_id() -> str:
    """A fresh client-generated record id (a random UUID4, as text)."""
    return str(uuid.uuid4())


def decision_record(
    *, id: str, at: datetime, now: float, trigger: str, policy: str, problem: Problem, bounds: Bounds, rails: Guardrails,
    stream_names: tuple[str, ...], stream_d: np.ndarray, changed: frozenset[str] | None, decision: Decision,
    guarded: Guarded, proposed: Mapping[str, QuerySettings], applied: Mapping[str, QuerySettings], cooling: set[str],
    trajectory: Trajectory | None, staging: Staging, join_orders: Mapping[str, Mapping[str, Any]], changes_something: bool,
    duration_ms: float, feedback: Mapping[str, Any] | None = None,
) -> DecisionRecord:
    """The decision as recorded: inputs enough to explain it, outputs per query with what the guardrails did."""
    per_query = {
        q: {
            "proposed": proposed[q].as_json(),
            "applied": applied[q].as_json(),
            "guardrail": guardrail_note(q, guarded, cooling),
            "estimated_memory_bytes": float(guarded.outcome.query_memory[i]),
            "estimated_cpu": float(guarded.outcome.query_cpu[i]),
        }
        for i, q in enumerate(problem.queries)
    }
    return DecisionRecord(
        at=at,
        policy=policy,
        trigger=trigger,
        feasible=bool(decision.feasible),
        dry_run=rails.dry_run,
        applied=guarded.apply and changes_something,
        weighted_qos=float(problem.weighted_qos(guarded.outcome.qos)),
        reason=decision.reason,
        estimated_memory_bytes=float(guarded.outcome.total_memory),
        estimated_cpu=float(guarded.outcome.total_cpu),
        duration_ms=duration_ms,
        inputs={
            "bounds": {"memory_bytes": bounds.memory, "cpu": bounds.cpu, "reserve": bounds.reserve,
                       "usable_memory_bytes": bounds.usable_memory, "usable_cpu": bounds.usable_cpu},
            "stream_d": {s: json_number(d) for s, d in zip(stream_names, stream_d)},
            "changed_streams": sorted(changed) if changed is not None else None,
            "queries": list(problem.queries),
            "guardrails": {"cooldown": rails.cooldown, "hysteresis": rails.hysteresis,
                           "max_step": rails.max_step, "dry_run": rails.dry_run},
            "now": now,
            "feedback": feedback,
        },
        outputs={
            "decision_id": id,
            "queries": per_query,
            "held": list(guarded.held),
            "limited": list(guarded.limited),
            "forced": list(guarded.forced),
            "fitted": list(guarded.fitted),
            "kept": list(guarded.kept),
            "deepened": list(guarded.deepened),
            "proposed_weighted_qos": float(decision.weighted_qos),
            "bounds_hold_at": trajectory.bounds_hold_at if trajectory else None,
            "staging": staging.as_json(),
            "join_orders": json_safe(dict(join_orders)),
            "trajectory": trajectory.as_rows() if trajectory else [],
            "details": json_safe(decision.details),
        },
        id=id,
    )


def guardrail_note(query: str, guarded: Guarded, cooling: set[str]) -> str | None:
    """What the guardrails did to ``query``'s proposal, in words (None: nothing)."""
    if query in guarded.deepened:
        return ("cut deeper (to the minimum window while the measured state is over the bound, else to half its state): "
                "its input rate stepped up, and a deeper cut ends its migration sooner")
    if query in guarded.kept:
        return "pending cut kept: the measured state is over the bound, so a cut still waiting is not taken back"
    if query in guarded.forced:
        return "forced: reduction applied despite the guardrails to keep the bounds"
    if query in guarded.limited:
        return "limited to the maximum step"
    if query in guarded.held:
        return "held by the cool-down" if query in cooling else "held by the hysteresis band"
    if query in guarded.fitted:
        return ("growth shortened or held: its live migration holds the old plan's state beside the new one's, and "
                "no more of it fits the memory bound")
    return None


def json_number(value: float) -> float | str:
    return "inf" if math.isinf(value) else float(value)


def json_safe(value: Any) -> Any:
    """Details as plain JSON: numpy scalars and arrays become numbers and lists, non-finite floats text."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist()) if value.size <= 64 else f"<array of {value.size}>"
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
