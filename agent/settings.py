"""What a user's builder sees (``s``) and the ranges a user allows, read from Spark interval strings.

Why: a user's query code speaks Spark (``F.window("ts", "1 minute",
"15 seconds")``), armd speaks seconds and model time units. ``Settings``
wraps the ``QueryParams`` in force so ``s.window("w")`` and ``s.slide("w")``
return Spark interval strings of the values armd decided, and
``s.source(stream)`` reads a declared source the way GenMig can start a new
run of it where the old one stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pytimeparse2 import parse as parse_duration

from armd.adapters.spark.managed import QueryParams


class AgentError(ValueError):
    """A declaration armd cannot use; the message names what is wrong and what is allowed."""


def seconds(value: Any, what: str) -> float:
    """A duration as seconds: a number, or a string like ``"10 seconds"``, ``"1 minute"``, ``"500ms"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        text = str(value).strip()
        parsed = parse_duration(text.replace("milliseconds", "ms").replace("millisecond", "ms"))
        if parsed is None:
            raise AgentError(f"{what}: {value!r} is not a duration; write e.g. '15 seconds', '1 minute' or a number of seconds")
        out = float(parsed)
    if not out > 0:
        raise AgentError(f"{what}: a duration must be > 0, got {value!r}")
    return out


def interval(value_seconds: float) -> str:
    """A Spark interval string of whole milliseconds (what ``F.window`` accepts)."""
    ms = int(round(float(value_seconds) * 1000))
    if ms <= 0:
        raise AgentError(f"an interval must be at least 1 ms, got {value_seconds!r} seconds")
    return f"{ms} milliseconds"


@dataclass(frozen=True)
class Range:
    low: float
    high: float

    @classmethod
    def parse(cls, value: Any, what: str) -> "Range":
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise AgentError(f"{what}: give a (min, max) pair of durations, e.g. ('1 minute', '10 minutes'); got {value!r}")
        low, high = seconds(value[0], f"{what} min"), seconds(value[1], f"{what} max")
        if low > high:
            raise AgentError(f"{what}: min {value[0]!r} is larger than max {value[1]!r}")
        return cls(low, high)

    def fraction(self, value: float) -> float:
        return 1.0 if self.high == self.low else min(1.0, max(0.0, (value - self.low) / (self.high - self.low)))

    def as_json(self) -> list[float]:
        return [self.low, self.high]


class Settings:
    """The settings in force for one run of a user's builder (``s`` in ``f(spark, s)``)."""

    def __init__(self, spark: Any, params: QueryParams, windows: Mapping[str, Range], slides: Mapping[str, Range]) -> None:
        self.spark, self.params, self._windows, self._slides = spark, params, windows, slides

    def window_seconds(self, node: str) -> float:
        if node not in self._windows:
            raise AgentError(f"s.window({node!r}): the query declares windows {sorted(self._windows)}; "
                             f"add {node!r} to @agent.query(windows=...)")
        return self.params.window(node, self._windows[node].high)

    def slide_seconds(self, node: str) -> float:
        """The node's slide, never longer than its window (Spark refuses that)."""
        default = self._slides[node].low if node in self._slides else self.window_seconds(node)
        slide = self.params.slide(node, default) if node in self._slides else default
        return min(slide, self.window_seconds(node))

    def window(self, node: str) -> str:
        return interval(self.window_seconds(node))

    def slide(self, node: str) -> str:
        return interval(self.slide_seconds(node))

    def source(self, stream: str) -> Any:
        """The streaming DataFrame of a source declared in ``@agent.query(sources=...)`` (GenMig can migrate it)."""
        from armd.adapters.spark.sources import read_source

        return read_source(self.spark, self.params.extra.get("sources") or {}, stream)

    @property
    def version(self) -> int:
        return self.params.version
