"""A herald as announced outside the stream: through the metadata store or ``armd herald add`` (paper 002 §II).

In-stream heralds are ``Herald`` objects among the tuples; a herald that a
person or a program announces through the store is a row instead, naming its
stream, a closed range per attribute and one lifespan: a count of tuples, or
seconds of event time from ``starts_at``. ``HeraldRecord`` is that row's
shape, validated once here so the store, its in-memory fake and the command
line refuse the same things with the same one-line messages, and turned into
a core ``Herald`` with ``to_herald`` when a stream's timestamps are known.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from .herald import Herald
from .patterns import Range

Bound = float | None
"""An end of a range; None is unbounded."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
MAX_NAME = 200
MAX_COUNT = 2**63 - 1
"""The most tuples a count lifespan may cover: what every database's BIGINT holds."""


class InvalidHerald(ValueError):
    """A herald record that cannot be a herald; the message is one line naming what is wrong and what is allowed."""


@dataclass(frozen=True)
class HeraldRecord:
    """``patterns``: attribute → (low, high), closed, None for an unbounded end; exactly one of count, seconds."""

    stream: str
    patterns: Mapping[str, tuple[Bound, Bound]]
    starts_at: datetime
    count: int | None = None
    seconds: float | None = None
    source: str = "sql"
    id: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.stream, str) or not 0 < len(self.stream) <= MAX_NAME:
            raise InvalidHerald(f"a herald's stream is a name of 1 to {MAX_NAME} characters, got {self.stream!r}")
        if not self.patterns:
            raise InvalidHerald("a herald needs at least one attribute range, e.g. region=25:32")
        for name, bounds in self.patterns.items():
            check_range(name, bounds)
        if (self.count is None) == (self.seconds is None):
            raise InvalidHerald("a herald has exactly one lifespan: a count of tuples or a number of seconds")
        if self.count is not None and (isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= MAX_COUNT):
            raise InvalidHerald(f"a herald's count is a whole number of tuples in [1, {MAX_COUNT}], got {self.count!r}")
        if self.seconds is not None and not (isinstance(self.seconds, (int, float)) and 0 < self.seconds < math.inf):
            raise InvalidHerald(f"a herald's seconds are a positive finite number, got {self.seconds!r}")
        if self.starts_at.tzinfo is None:
            raise InvalidHerald("a herald's starts_at must be a timezone-aware UTC time")

    def to_herald(self, ts: float | None = None) -> Herald:
        """The core herald; ``ts`` is ``starts_at`` in the stream's timestamp units (needed for seconds)."""
        patterns = {name: Range(-math.inf if low is None else low, math.inf if high is None else high)
                    for name, (low, high) in self.patterns.items()}
        if self.count is not None:
            return Herald.of(patterns, count=self.count)
        if ts is None:
            raise InvalidHerald("a time-based herald needs its start in the stream's timestamps")
        return Herald.of(patterns, time=self.seconds, ts=ts)

    def patterns_json(self) -> dict[str, list[Bound]]:
        return {name: [low, high] for name, (low, high) in sorted(self.patterns.items())}


def check_range(name: Any, bounds: Any) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise InvalidHerald(f"attribute name {name!r} is not allowed; use letters, digits, '_' and '.', not starting with a digit")
    if not (isinstance(bounds, (tuple, list)) and len(bounds) == 2):
        raise InvalidHerald(f"attribute {name}: a range is [low, high], got {bounds!r}")
    low, high = bounds
    for end in (low, high):
        if end is not None and (isinstance(end, bool) or not isinstance(end, (int, float)) or not math.isfinite(end)):
            raise InvalidHerald(f"attribute {name}: a bound is a finite number or empty (unbounded), got {end!r}")
    if low is None and high is None:
        raise InvalidHerald(f"attribute {name}: give at least one bound (a range with none promises nothing)")
    if low is not None and high is not None and low > high:
        raise InvalidHerald(f"attribute {name}: low {low:g} is above high {high:g}; allowed: low <= high")


def from_json(patterns: Any) -> dict[str, tuple[Bound, Bound]]:
    """Patterns as stored (``{"a": [low, high]}``) back into ranges; what SQL wrote is checked like the rest."""
    if not isinstance(patterns, Mapping):
        raise InvalidHerald(f"a herald's patterns are a JSON object of attribute to [low, high], got {patterns!r}")
    out = {}
    for name, bounds in patterns.items():
        check_range(name, bounds)
        out[name] = (bounds[0], bounds[1])
    return out
