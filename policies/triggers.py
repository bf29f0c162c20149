"""When to decide again (paper 001 §3.2.2 and §4.1).

Source rates are smoothed exponentially; a new decision is due only when a
smoothed d has moved more than a threshold away from the value the last
decision used, when queries are added or removed, or when the bounds change.
Everything here is a pure value transformation: the caller passes in
measurements and keeps the returned tracker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping


@dataclass(frozen=True)
class RateTracker:
    """Smoothed d per stream and the d each stream had at the last decision."""

    alpha: float = 0.3
    """Weight of a new measurement in the exponential smoothing, in (0, 1]."""
    threshold: float = 0.2
    """Relative change of a smoothed d that makes a new decision due, > 0."""
    smoothed: Mapping[str, float] = field(default_factory=dict)
    decided: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"smoothing alpha must be in (0, 1], got {self.alpha!r}")
        if not self.threshold > 0:
            raise ValueError(f"re-decision threshold must be > 0, got {self.threshold!r}")

    def observe(self, measured_d: Mapping[str, float]) -> RateTracker:
        """Fold one measurement of d per stream into the smoothed values.

        A measurement that is not a positive finite number is ignored: a
        stream that delivered nothing in an interval keeps its last estimate.
        """
        smoothed = dict(self.smoothed)
        for stream, d in measured_d.items():
            if not (isinstance(d, (int, float)) and math.isfinite(d) and d > 0):
                continue
            previous = smoothed.get(stream)
            smoothed[stream] = d if previous is None else self.alpha * d + (1 - self.alpha) * previous
        return replace(self, smoothed=smoothed)

    def drifted(self) -> frozenset[str]:
        """Streams whose smoothed d moved more than the threshold since the last decision (or never decided)."""
        moved = set()
        for stream, d in self.smoothed.items():
            before = self.decided.get(stream)
            if before is None or abs(d - before) > self.threshold * before:
                moved.add(stream)
        return frozenset(moved)

    def decide_with(self, streams: frozenset[str] | None = None) -> RateTracker:
        """Record that a decision used the current smoothed values (of ``streams``, or all)."""
        decided = dict(self.decided)
        for stream, d in self.smoothed.items():
            if streams is None or stream in streams:
                decided[stream] = d
        return replace(self, decided=decided)


def decision_due(
    tracker: RateTracker, queries_changed: bool = False, bounds_changed: bool = False
) -> str | None:
    """The reason a new decision is due, or None when the last one still stands."""
    if queries_changed:
        return "queries added or removed"
    if bounds_changed:
        return "bounds changed"
    drifted = tracker.drifted()
    if drifted:
        listed = ", ".join(sorted(drifted)[:5]) + (" …" if len(drifted) > 5 else "")
        return f"rate of {len(drifted)} stream(s) moved past the threshold: {listed}"
    return None
