"""Forecast each stream's rate at the horizon of the adaptation delay (paper 001 §4.4).

A smaller window frees state only as the elements admitted under the old
one expire (§4.2), so a cut decided when a rising rate has already carried
memory to the bound holds the bound only a window later. Deciding against
the rate forecast for when the new settings will have taken full effect
makes the cut early enough to hold the bound through a ramp, not only after it.

The forecast is Holt's exponential smoothing with an additive trend
(``statsmodels.tsa.holtwinters.Holt``), its parameters fitted on the last
``history`` observed rates of the stream; while fewer than ``min_history``
observations exist it is the last value. Fitting costs a few milliseconds
per stream, so it is done only when deciding, on a bounded history. Only a
forecast *above* the measured rate is acted on: growing windows ahead of a
fall that may not come would break the bound if it does not.

Pure: times and rates come in as arguments; no clock.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class ForecastRules:
    """``[forecast]``: whether to decide against forecast rates, how far ahead and on how much history."""

    enabled: bool = False
    horizon_seconds: float | None = None
    """How far ahead; None: the adaptation delay of the settings in force (longest window + watermark delay)."""
    history: int = 60
    """Observations the model is fitted on (the most recent ones)."""
    min_history: int = 10
    """Fewer observations than this: the forecast is the last value."""
    trend_seconds: float = 20.0
    """The window of the trend test (``policies.ramp``) that tells a ramp early and stages its cuts."""
    trend_significance: float = 1e-4
    """One-sided p-value under which a rise is a ramp (per observation; on the plant no steady stream reached 4e-3 in 600 s)."""

    def __post_init__(self) -> None:
        if self.horizon_seconds is not None and not (math.isfinite(self.horizon_seconds) and self.horizon_seconds >= 0):
            raise ValueError(f"forecast horizon_seconds must be ≥ 0, got {self.horizon_seconds!r}")
        if not 4 <= self.min_history <= self.history:
            raise ValueError(f"forecast min_history must be ≥ 4 and ≤ history ({self.history}), got {self.min_history!r}")


@dataclass(frozen=True)
class RateHistory:
    """The last observed rates per stream: (seconds since start, arrivals per second), oldest first."""

    limit: int = 60
    points: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)

    def add(self, at_seconds: float, rates: Mapping[str, float]) -> RateHistory:
        points = dict(self.points)
        for stream, rate in rates.items():
            if math.isfinite(rate) and rate >= 0:
                points[stream] = (*points.get(stream, ()), (float(at_seconds), float(rate)))[-self.limit:]
        return replace(self, points=points)

    def restart(self, streams: frozenset[str] | set[str]) -> RateHistory:
        """Forget the points of ``streams`` (their rate stepped: a trend fitted across a step is no trend)."""
        if not streams:
            return self
        return replace(self, points={s: p for s, p in self.points.items() if s not in streams})


@dataclass(frozen=True)
class Forecast:
    rate: float
    """Arrivals per second expected at the horizon."""
    method: str
    """``holt`` or ``last`` (too little history)."""


def forecast(points: tuple[tuple[float, float], ...], horizon_seconds: float, min_history: int = 10) -> Forecast | None:
    """The rate ``horizon_seconds`` after the last point (None: no point at all).

    Holt's model counts in observations, so the horizon is converted with the
    median spacing of the points; its forecast is linear in the steps
    ahead, level + h × trend, which also gives fractional steps.
    """
    if not points:
        return None
    times = np.array([t for t, _ in points], dtype=float)
    rates = np.array([r for _, r in points], dtype=float)
    if len(points) < min_history or np.ptp(rates) == 0:
        return Forecast(float(rates[-1]), "last")
    from statsmodels.tsa.holtwinters import Holt

    spacing = float(np.median(np.diff(times)))
    steps = horizon_seconds / spacing if spacing > 0 else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter of the parameter fit on short, noisy series
        fit = Holt(rates, initialization_method="estimated").fit(use_brute=False)
    value = float(fit.level[-1] + steps * fit.trend[-1])
    return Forecast(max(value, 0.0), "holt")
