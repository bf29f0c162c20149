"""What a decision puts into the store besides its record: its changes staged, and only the desired rows not asked yet.

Why apart from the cycle: staging (which migrations may start now, given the
extra state each holds while it runs) and the rule that a repeated request is
not a new plan version are contracts of the desired-settings table on their
own, read by the controller and the coordinator as well as by the cycle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Mapping, Sequence

from armd.policies.staging import Staging, stage

from .model import same_settings, shrinks
from .ports import DesiredSettings, EventRecord, QuerySettings
from .records import json_safe

TransientMemory = Callable[[str, QuerySettings, QuerySettings, float], float]
"""Extra bytes a migration holds while it runs: (query, old, new, estimated memory of new) → bytes."""


def stage_changes(changes: Mapping[str, tuple[QuerySettings | None, QuerySettings]], held: float, memory: Mapping[str, float],
           transient: TransientMemory | None, bound: float) -> Staging:
    """Which changes migrate now: the applier's extra state while a migration runs must fit the memory bound."""
    extra = {q: 0.0 if transient is None or old is None else float(transient(q, old, new, memory.get(q, 0.0)))
             for q, (old, new) in changes.items()}
    return stage(held, extra, bound, [q for q, (old, new) in changes.items() if shrinks(old, new)])


def staged_message(staging: Staging, memory_bound: float) -> tuple[str, str] | None:
    """The ``migrations_staged`` event's severity and message, or None when every migration starts now."""
    if not (staging.later or staging.over_bound):
        return None
    message = ""
    if staging.later and not staging.now:
        message = (f"migrations of {', '.join(staging.later)} wait: growing them would add their extra state to "
                   f"a memory bound {memory_bound:,.0f} B already broken")
    elif staging.later:
        message = (f"migrations of {', '.join(staging.later)} wait until those of {', '.join(staging.now)} have finished: "
                   f"running them together would hold more than the memory bound {memory_bound:,.0f} B")
    if staging.over_bound:
        message = staging.over_bound_message(memory_bound) + (f"; {message}" if message else "")
    return ("warning" if staging.over_bound else "info"), message


def staged_events(staging: Staging, bound: float, at: datetime) -> list[EventRecord]:
    """``migrations_staged`` when some migrations wait for others, or one runs over the bound alone."""
    said = staged_message(staging, bound)
    return [] if said is None else [EventRecord(at, "migrations_staged", said[0], said[1], None, staging.as_json())]


def not_asked_yet(rows: Sequence[DesiredSettings], desired: Mapping[str, DesiredSettings]) -> list[DesiredSettings]:
    """``rows`` without those that repeat the last desired row of their query (same settings, order and flags): a new
    version of the same request would restart the retries of a change that fails."""
    def same(last: DesiredSettings | None, row: DesiredSettings) -> bool:
        return (last is not None and same_settings(last.settings, row.settings) and json_safe(last.join_order) == json_safe(row.join_order)
                and (last.recommend_only, last.may_start) == (row.recommend_only, row.may_start))

    return [row for row in rows if not same(desired.get(row.query), row)]
