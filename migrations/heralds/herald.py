"""Heralds, their lifespans, and the one herald in force on a stream (paper 002 §II).

A herald promises that the tuples after it match its attribute patterns for
its lifespan: the next ``n`` tuples (count-based) or the tuples with a
timestamp in ``[ts, ts + span)`` (time-based); either may be infinite.

The paper keeps one valid herald per stream: a new herald is merged with the
one in force into the strictest constraint. Merging only holds while both
promises hold, so ``InForce`` keeps every herald whose lifespan has not run
out and reports their intersection; when one of them runs out the
intersection loosens again. Its caller (the partitioner) starts a new
partition whenever that intersection changes. A time-based herald is only
dropped lazily, when a later tuple shows its span has passed, so a new
herald that contradicts a time-based one retires it (a truthful one cannot
cover the tuple that the new herald covers next). Any other contradiction
is ruled out by the paper's model, and by us, with an error naming both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from .patterns import Range

COUNT, TIME = "count", "time"

Patterns = tuple[tuple[str, Range], ...]
"""Attribute patterns, sorted by attribute, unbounded ones left out: hashable, so decisions can be cached by them."""


class HeraldConflict(ValueError):
    """A herald contradicts the heralds still in force on its stream."""


class HeraldViolation(ValueError):
    """A tuple does not match the herald that covers it (only raised when checking is on)."""


@dataclass(frozen=True)
class Lifespan:
    """``kind`` is ``"count"`` (tuples) or ``"time"`` (timestamp units); ``value`` may be ``math.inf``."""

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind not in (COUNT, TIME):
            raise ValueError(f"a lifespan is {COUNT!r} or {TIME!r}, got {self.kind!r}")
        if not self.value > 0:
            raise ValueError(f"a lifespan must be positive, got {self.value!r}")
        if self.kind == COUNT and self.value != math.inf and self.value != int(self.value):
            raise ValueError(f"a count lifespan is a whole number of tuples, got {self.value!r}")


@dataclass(frozen=True)
class Herald:
    """Attribute patterns and a lifespan; ``ts`` is when a time-based lifespan starts."""

    patterns: Patterns
    lifespan: Lifespan
    ts: float | None = None

    def __post_init__(self) -> None:
        empty = [a for a, r in self.patterns if r.empty]
        if empty:
            raise ValueError(f"a herald's patterns must each admit a value; {empty} admit none")
        if self.lifespan.kind == TIME and self.ts is None:
            raise ValueError("a herald with a time-based lifespan needs the timestamp it starts at (ts)")

    @classmethod
    def of(
        cls,
        patterns: Mapping[str, Range],
        *,
        count: float | None = None,
        time: float | None = None,
        ts: float | None = None,
    ) -> Herald:
        """``Herald.of({"region": Range.point(26)}, count=5000)``; give exactly one of count and time."""
        if (count is None) == (time is None):
            raise ValueError("give a herald exactly one lifespan: count=… or time=…")
        life = Lifespan(COUNT, count) if count is not None else Lifespan(TIME, time)  # type: ignore[arg-type]
        return cls(normalise(patterns), life, ts)

    def range(self, attribute: str) -> Range:
        return dict(self.patterns).get(attribute, Range())


def normalise(patterns: Mapping[str, Range]) -> Patterns:
    return tuple(sorted((a, r) for a, r in patterns.items() if not r.unbounded))


def intersect(a: Patterns, b: Patterns) -> Patterns:
    merged = dict(a)
    for attribute, r in b:
        merged[attribute] = merged[attribute].intersect(r) if attribute in merged else r
    return tuple(sorted(merged.items()))


def hull(a: Patterns, b: Patterns) -> Patterns:
    """The strictest patterns that every tuple matching ``a`` or ``b`` matches: per attribute both
    constrain, the smallest range holding both (an attribute only one constrains is unconstrained).
    A stream that interleaves two partitions (a join's output) can announce this for both."""
    theirs = dict(b)
    out = []
    for attribute, r in a:
        o = theirs.get(attribute)
        if o is None:
            continue
        low, low_open = min((r.low, r.low_open), (o.low, o.low_open))
        high, high_open = max((r.high, not r.high_open), (o.high, not o.high_open))
        out.append((attribute, Range(low, high, low_open, not high_open)))
    return tuple(out)


class _Active:
    """One herald in force: how many tuples (count) or until which timestamp (time) it still covers."""

    __slots__ = ("herald", "remaining", "until")

    def __init__(self, herald: Herald, remaining: float = math.inf, until: float = math.inf) -> None:
        self.herald = herald
        self.remaining = remaining
        self.until = until


class InForce:
    """The heralds still in force on one stream and their merged (strictest) patterns.

    ``rows_left`` and ``time_left`` are kept up to date rather than
    recomputed, because the partitioner reads them for every slice.
    """

    __slots__ = ("active", "merged", "rows_left", "time_left")

    def __init__(self) -> None:
        self.active: list[_Active] = []
        self.merged: Patterns | None = None
        """None when no herald is in force (the tuples are anonymous)."""
        self.rows_left = math.inf
        """How many more tuples the count-based heralds cover before the first of them runs out."""
        self.time_left = math.inf
        """The first timestamp at which a time-based herald no longer covers a tuple."""

    def arrive(self, herald: Herald) -> None:
        life = herald.lifespan
        if not self.active and life.kind == COUNT:  # the common case: a count herald alone, set directly
            self.active = [_Active(herald, life.value)]
            self.merged = herald.patterns
            self.rows_left, self.time_left = life.value, math.inf
            return
        if self.merged is None:  # nothing to merge with; a herald's own patterns are never empty
            merged = herald.patterns
        else:
            merged = intersect(self.merged, herald.patterns)
            if any(r.empty for _, r in merged) and self.time_left != math.inf:
                # The new herald covers the next tuple. A truthful time-based herald that contradicts it
                # cannot cover that tuple, so its span has passed (rows come in timestamp order): drop it.
                self.active = [a for a in self.active if a.until == math.inf]
                merged = herald.patterns
                for a in self.active:
                    merged = intersect(merged, a.herald.patterns)
            empty = [a for a, r in merged if r.empty]
            if empty:
                raise HeraldConflict(
                    f"herald {_show(herald.patterns)} contradicts the heralds in force {_show(self.merged)} "
                    f"on {empty}; a stream's heralds must not contradict while both are alive"
                )
        if herald.lifespan.kind == COUNT:
            self.active.append(_Active(herald, remaining=herald.lifespan.value))
        else:
            self.active.append(_Active(herald, until=herald.ts + herald.lifespan.value))  # type: ignore[operator]
        self.merged = merged
        self._bounds()

    def consume(self, rows: int) -> bool:
        """``rows`` tuples went by; returns whether a herald ran out (the merged patterns changed)."""
        if self.rows_left == math.inf:
            return False
        self.rows_left -= rows
        if len(self.active) == 1:  # the common case: one herald in force
            if self.rows_left > 0:
                self.active[0].remaining = self.rows_left
                return False
            self.active = []
            self.merged = None
            self.rows_left = self.time_left = math.inf
            return True
        for a in self.active:
            a.remaining -= rows
        if self.rows_left > 0:
            return False
        self._keep([a for a in self.active if a.remaining > 0])
        return True

    def expire(self, ts: float) -> bool:
        """A tuple with timestamp ``ts`` arrives; returns whether a time-based herald ran out."""
        if self.time_left > ts:
            return False
        self._keep([a for a in self.active if a.until > ts])
        return True

    def _keep(self, kept: list[_Active]) -> None:
        self.active = kept
        merged: Patterns | None = None
        for a in kept:
            merged = a.herald.patterns if merged is None else intersect(merged, a.herald.patterns)
        self.merged = merged
        self._bounds()

    def _bounds(self) -> None:
        active = self.active
        if not active:
            self.rows_left = self.time_left = math.inf
        elif len(active) == 1:
            self.rows_left, self.time_left = active[0].remaining, active[0].until
        else:
            self.rows_left = min([a.remaining for a in active], default=math.inf)
            self.time_left = min([a.until for a in active], default=math.inf)


def _show(patterns: Patterns) -> str:
    return "<" + ", ".join(f"{a}={r}" for a, r in patterns) + ">"
