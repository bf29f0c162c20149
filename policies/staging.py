"""Staging plan changes whose migrations hold extra memory while they run.

A live migration (GenMig) runs the old and the new plan side by side until
the split time has passed, so for a while a query holds its old state plus
the state the new plan builds up. A decision whose settings fit the memory
bound can therefore break it on the way there if every changed query
migrates at once. ``stage`` picks the migrations that can run together now
and leaves the others for later, when the first ones have finished; the
caller records the staging with the decision and applies it in steps.

Pure: memory figures in bytes come from the caller (the cycle gives the
measured state held when it is more than the estimate, and each migration's
extra state from the corrected estimate of its query); nothing is measured here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping


@dataclass(frozen=True)
class Staging:
    now: tuple[str, ...]
    """Queries to migrate now, together."""
    later: tuple[str, ...]
    """Queries whose migration waits until those of ``now`` have finished."""
    peak_memory: float
    """Estimated memory while the migrations of ``now`` run: the state held plus their extra state."""
    over_bound: bool
    """Not even one migration fits the bound; the one with the least extra state runs alone anyway."""
    held: float = 0.0
    """The state held before any of them starts."""
    extra: Mapping[str, float] = field(default_factory=dict)
    """Extra bytes per migration while it runs."""

    def as_json(self) -> dict:
        return {"now": list(self.now), "later": list(self.later), "peak_memory_bytes": self.peak_memory,
                "over_bound": self.over_bound, "held_bytes": self.held, "extra_bytes": dict(self.extra)}

    def over_bound_message(self, bound: float) -> str:
        """Why the first migration runs alone over the bound: its own extra state and the state already held, apart."""
        if len(self.now) > 1:
            extra = sum(self.extra.get(q, 0.0) for q in self.now)
            return (f"the migrations of {', '.join(self.now)} cut state and hold {extra:,.0f} B of extra state while they "
                    f"run; with the {self.held:,.0f} B held now that is {self.peak_memory:,.0f} B, over the memory bound "
                    f"{bound:,.0f} B; they run together, which frees the state soonest")
        query = self.now[0]
        return (f"the migration of {query} holds {self.extra.get(query, 0.0):,.0f} B of extra state while it runs; with the "
                f"{self.held:,.0f} B held now that is {self.peak_memory:,.0f} B, over the memory bound {bound:,.0f} B; "
                "no smaller step exists, so it runs alone")


def stage(held: float, extra: Mapping[str, float], memory_bound: float, cuts: Collection[str] | None = None) -> Staging:
    """Which of the migrations (query → extra bytes while it runs) can run at once on top of ``held`` bytes.

    Greedy by ascending extra state, so that as many migrations as possible
    start now; ties by query name, so the result does not depend on the
    order of ``extra``. A migration without extra state (a restart) always
    fits. When none fits, the cheapest runs alone (``over_bound``): waiting
    would not make room, since the held state only shrinks once settings
    change. ``cuts`` are migrations to smaller settings (when the caller
    says which): when none fits, they all start together (the state held
    drops once the longest of them has drained, where one after another it
    drops only after the sum of their durations), and a migration that
    grows waits while the state held is over the bound already — it would
    only add its extra state to the breach.
    """
    if memory_bound <= 0:
        raise ValueError(f"memory_bound must be > 0, got {memory_bound!r}")
    negative = sorted(q for q, e in extra.items() if not e >= 0)
    if negative:
        raise ValueError(f"extra memory must be ≥ 0; got {', '.join(f'{q}={extra[q]!r}' for q in negative)}")
    order = sorted(extra, key=lambda q: (extra[q], q))
    now: list[str] = []
    total = float(held)
    for query in order:
        if total + extra[query] <= memory_bound or extra[query] == 0:
            now.append(query)
            total += extra[query]
    over = False
    if order and not now:
        now = [q for q in order if q in cuts] if cuts is not None else []
        if not now and (cuts is None or held <= memory_bound):
            now = [order[0]]
        total, over = float(held) + sum(extra[q] for q in now), bool(now)
    later = tuple(q for q in order if q not in now)
    return Staging(tuple(now), later, total, over, float(held), {q: float(extra[q]) for q in order})
