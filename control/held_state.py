"""The state the fleet holds, measured: each query's newest report, not only those of the last observation.

Why: ``armd.agent`` applications report on rounds of their own, so an
observation (what the store received since the last tick) often holds the
queries of one application only. Summing it gave that application's state
as the fleet's: in a fleet run with two applications the daemon's measured
total read 0.46 MB while the runs held 4 MB, and the bound's watcher, the
feedback's over-the-bound test, the pending cuts' rule and the staging
headroom each judged a part of the state, whichever application had
reported last. Here each query keeps its newest report while it is admitted
and the report is younger than a limit (the stale-statistics one, so a query
whose application went quiet stops counting when its streams are called
stale); the measured total is their sum. Pure: the time comes in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Collection, Mapping, NamedTuple


class Report(NamedTuple):
    at: datetime
    state_bytes: float
    state_rows: int | None
    """The rows behind ``state_bytes`` when the source counts them."""


@dataclass(frozen=True)
class HeldState:
    """The newest state report per query."""

    reports: Mapping[str, Report] = field(default_factory=dict)

    def observe(self, at: datetime, reported: Mapping[str, tuple[float, int | None]], admitted: Collection[str],
                max_age_seconds: float) -> HeldState:
        """With this observation's reports (query → bytes, rows); only admitted queries, reports at most
        ``max_age_seconds`` old."""
        kept = {q: r for q, r in self.reports.items()
                if q in admitted and q not in reported and (at - r.at).total_seconds() <= max_age_seconds}
        kept.update({q: Report(at, float(size), rows) for q, (size, rows) in reported.items() if q in admitted})
        return HeldState(kept)

    def per_query(self) -> dict[str, float]:
        return {q: r.state_bytes for q, r in self.reports.items()}

    def total(self) -> float | None:
        """The measured state of the fleet (None: no query has reported)."""
        return float(sum(r.state_bytes for r in self.reports.values())) if self.reports else None

    def rows(self) -> int | None:
        """The state rows behind ``total``, when every report counts them."""
        counts = [r.state_rows for r in self.reports.values()]
        return sum(counts) if counts and all(c is not None for c in counts) else None  # type: ignore[misc]
