"""An attribute pattern: the range a herald promises for one attribute (paper 002 §II).

A pattern is one interval, each end open or closed or unbounded; ``*`` (no
constraint) is the unbounded interval. Heralds in force on one stream are
combined by intersecting their patterns, and the reasoner turns a pattern
into at most two atoms against constants, so a pattern needs nothing more
than ``intersect``, ``contains`` and ``atoms``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real
from typing import Any, NamedTuple

from .predicates import LE, LT, Atom, Attr, Const

Number = Real | Fraction


class Range(NamedTuple):
    """``[low, high]``; ``low_open``/``high_open`` make an end strict; ±inf is unbounded.

    A named tuple rather than a dataclass: operators look decisions up by
    a herald's patterns once per partition, and a tuple hashes in C.
    """

    low: Number = -math.inf
    high: Number = math.inf
    low_open: bool = False
    high_open: bool = False

    @classmethod
    def point(cls, value: Number) -> Range:
        return cls(value, value)

    @classmethod
    def closed(cls, low: Number, high: Number) -> Range:
        return cls(low, high)

    @classmethod
    def below(cls, high: Number, *, strict: bool = True) -> Range:
        return cls(high=high, high_open=strict)

    @classmethod
    def above(cls, low: Number, *, strict: bool = True) -> Range:
        return cls(low=low, low_open=strict)

    @property
    def unbounded(self) -> bool:
        return self.low == -math.inf and self.high == math.inf

    @property
    def empty(self) -> bool:
        """No real number lies in the range."""
        if self.low > self.high:
            return True
        return self.low == self.high and (self.low_open or self.high_open)

    def contains(self, value: Any) -> bool:
        if value < self.low or (self.low_open and value == self.low):
            return False
        return not (value > self.high or (self.high_open and value == self.high))

    def intersect(self, other: Range) -> Range:  # type: ignore[override]
        if other.low > self.low or (other.low == self.low and other.low_open):
            low, low_open = other.low, other.low_open
        else:
            low, low_open = self.low, self.low_open
        if other.high < self.high or (other.high == self.high and other.high_open):
            high, high_open = other.high, other.high_open
        else:
            high, high_open = self.high, self.high_open
        return Range(low, high, low_open, high_open)

    def atoms(self, attribute: str) -> tuple[Atom, ...]:
        """The pattern as atoms against constants (none for an unbounded end)."""
        out = []
        if self.low != -math.inf:
            out.append(Atom(Const(self.low), LT if self.low_open else LE, Attr(attribute)))
        if self.high != math.inf:
            out.append(Atom(Attr(attribute), LT if self.high_open else LE, Const(self.high)))
        return tuple(out)

    def __str__(self) -> str:  # type: ignore[override]
        if self.unbounded:
            return "*"
        return f"{'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"
