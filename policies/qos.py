"""QoS ranges, the values a policy may choose, and the QoS a setting achieves.

A query declares a range [min, max] for each of its time-based windows and
one granularity range from coarsest to finest for all its granularity
operators (they feed binary operators together, which need equal
granularities). A policy picks a *fraction* of each range; this module turns
fractions into allowed values and values back into achieved fractions.

Allowed values:

* window sizes are whole time units inside the range;
* granularities lie on the ladder fine·2^k (k = 0, 1, …) up to the coarsest
  bound. Each rung is a multiple of every finer rung, so any change between
  two allowed granularities keeps the granularity hierarchy of paper 001
  §2.1 valid (a coarser granularity is a subset of a finer one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np


class QoSError(ValueError):
    """An invalid QoS declaration; the message names the query and what is allowed.

    ``query`` is the query the declaration belongs to (``None`` when the mistake
    spans queries), and ``detail`` the message without it, so a caller can report
    the mistake under its own name for the query (the configuration: its key).
    """

    def __init__(self, detail: str, query: str | None = None) -> None:
        self.detail = detail
        self.query = query
        super().__init__(f"query {query!r}: {detail}" if query is not None else detail)


@dataclass(frozen=True)
class QueryQoS:
    """What a query allows a policy to choose, and how much it matters."""

    window: tuple[float, float] | None = None
    """Default [min, max] window size for every time-based window node of the query."""
    windows: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Per window node id: [min, max], overriding ``window``."""
    granularity: tuple[float, float] | None = None
    """(coarsest, finest) granularity for every granularity node of the query."""
    weight: float = 1.0
    """Priority of the query in the weighted QoS objective (> 0)."""
    drop_rate: tuple[float, float] = (0.0, 0.0)
    """[low, high] probability of dropping an input element before the windows (load shedding), in [0, 1);
    None is read as [0, 0] (a configuration without the key)."""

    def __post_init__(self) -> None:
        if self.drop_rate is None:
            object.__setattr__(self, "drop_rate", (0.0, 0.0))

    @property
    def sheds(self) -> bool:
        """True when the range allows dropping anything."""
        return float(self.drop_rate[1]) > 0.0

    def validate(self, query: str) -> None:
        if not (isinstance(self.weight, (int, float)) and self.weight > 0 and math.isfinite(self.weight)):
            raise QoSError(f"weight must be a finite number > 0, got {self.weight!r}", query)
        ranges = dict(self.windows)
        if self.window is not None:
            ranges["window"] = self.window
        for node, bounds in ranges.items():
            low, high = _pair(bounds, f"window range of {node!r}", query)
            if not 1 <= low <= high:
                raise QoSError(f"window range of {node!r} must satisfy 1 ≤ min ≤ max, got [{low:g}, {high:g}]", query)
            if math.floor(high) < math.ceil(low):
                raise QoSError(f"window range of {node!r} holds no whole time unit: [{low:g}, {high:g}]", query)
        low, high = _pair(self.drop_rate, "drop_rate range", query)
        if not 0 <= low <= high < 1:
            raise QoSError(f"drop_rate range must satisfy 0 ≤ low ≤ high < 1, got [{low:g}, {high:g}]", query)
        if self.granularity is not None:
            coarse, fine = _pair(self.granularity, "granularity range", query)
            if not coarse >= fine > 0:
                raise QoSError(
                    f"granularity range is (coarsest, finest) with coarsest ≥ finest > 0, got ({coarse:g}, {fine:g})",
                    query,
                )


def _pair(bounds: object, what: str, query: str) -> tuple[float, float]:
    if (
        not isinstance(bounds, (tuple, list))
        or len(bounds) != 2
        or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)
    ):
        raise QoSError(f"{what} must be two finite numbers, got {bounds!r}", query)
    return float(bounds[0]), float(bounds[1])


def window_values(fraction: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Whole window sizes closest to low + f·(high − low), kept inside [low, high]."""
    values = fraction * (high - low)
    values += low
    np.rint(values, out=values)
    np.maximum(values, np.ceil(low), out=values)
    return np.minimum(values, np.floor(high), out=values)


def window_fractions(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Where each window size lies in its range: 0 at min, 1 at max (1 for a one-value range)."""
    span = high - low
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, np.clip((values - low) / safe, 0.0, 1.0), 1.0)


def ladder_top(coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """Highest k with fine·2^k ≤ coarse: the coarsest allowed rung."""
    return np.floor(np.log2(coarse / fine) + 1e-12)


def granularity_values(fraction: np.ndarray, coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """The ladder rung fine·2^k closest to coarse + f·(fine − coarse)."""
    target = coarse + fraction * (fine - coarse)
    k_max = ladder_top(coarse, fine)
    below = np.clip(np.floor(np.log2(target / fine) + 1e-12), 0.0, k_max)
    lower = fine * np.exp2(below)
    upper = fine * np.exp2(np.minimum(below + 1.0, k_max))
    return np.where(upper - target < target - lower, upper, lower)


def granularity_fractions(values: np.ndarray, coarse: np.ndarray, fine: np.ndarray) -> np.ndarray:
    """Where each granularity lies in its range: 0 at the coarsest, 1 at the finest."""
    span = coarse - fine
    safe = np.where(span > 0, span, 1.0)
    return np.where(span > 0, np.clip((coarse - values) / safe, 0.0, 1.0), 1.0)


def drop_values(fraction: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Drop rates from drop fractions: high at 0 (most shedding), low at 1 (least)."""
    return high - np.clip(fraction, 0.0, 1.0) * (high - low)


def results_kept(drop: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Share of a query's results that survive dropping each of its ``inputs`` input streams at rate ``drop``.

    A result combines one element of every input (a k-way join: k inputs, an
    aggregation: one), and it survives only when none of them was dropped.
    """
    return (1.0 - drop) ** inputs
