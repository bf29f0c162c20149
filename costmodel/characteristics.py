"""Stream characteristics (d, l, g) of paper 001 §3.2.

Every estimate in armd flows through this triple: the average distance d
between successive start timestamps, the average validity length l of an
element, and the granularity g of its timestamps, all in application time
units. The empty stream (d = ∞, l = 0) is an ordinary value so that an
operator that drops everything propagates cleanly instead of producing NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Stream:
    """Characteristics of one physical stream.

    A stream whose d is infinite or whose l is zero carries no valid element;
    it is normalised to the canonical empty stream (d = ∞, l = 0).
    """

    d: float
    """Average time distance between successive start timestamps (> 0, ∞ for the empty stream)."""
    l: float  # noqa: E741 - the paper's name
    """Average length of the elements' time intervals (≥ 0)."""
    g: float
    """Time distance of the stream's granularity (> 0)."""

    def __post_init__(self) -> None:
        for name in ("d", "l", "g"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ValueError(f"stream characteristic {name} must be a number, got {value!r}")
        if not self.d > 0:
            raise ValueError(f"stream characteristic d must be > 0 (∞ for the empty stream), got {self.d!r}")
        if self.l < 0 or math.isinf(self.l):
            raise ValueError(f"stream characteristic l must be finite and ≥ 0, got {self.l!r}")
        if not (self.g > 0) or math.isinf(self.g):
            raise ValueError(f"stream characteristic g must be finite and > 0, got {self.g!r}")
        if math.isinf(self.d) or self.l == 0:
            object.__setattr__(self, "d", math.inf)
            object.__setattr__(self, "l", 0.0)

    @classmethod
    def empty(cls, g: float) -> Stream:
        """The empty stream at granularity g."""
        return cls(math.inf, 0.0, g)

    @classmethod
    def source(cls, d: float, g: float = 1.0) -> Stream:
        """A source stream: each element is valid for one instant of its granularity (l = g)."""
        return cls(d, g, g)

    @property
    def is_empty(self) -> bool:
        return math.isinf(self.d)

    @property
    def rate(self) -> float:
        """Elements per time unit (1/d); 0 for the empty stream."""
        return 0.0 if self.is_empty else 1.0 / self.d
