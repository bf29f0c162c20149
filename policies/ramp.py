"""Is a stream's rate rising? A trend test on the counts behind it (issue 21, item 3; paper 001 §4.4).

Why a trend test and not the level tests of ``policies.triggers``: a ramp
moves the smoothed rate along with it, so the level test fires only once
the rate is well past the one decided on (on the plant's ramp ×4 over two
minutes, 24 s in), and by then a cut under GenMig can no longer stay under
the bound: its old plan keeps the whole old window of the rising rate until
it drains. The slope of the counts is significant earlier (~15–20 s in),
while the rate is still near the one the settings were decided on.

The test: the least-squares slope of the observed rates over the last
``window_seconds`` against time; under "constant rate" a rate observed over
Δt seconds has the variance of a Poisson count, λ/Δt, with λ the mean
rate, so the slope's standard error is √(Σ (λ/Δt_i) (t_i − t̄)²) / Σ (t_i − t̄)².
A rise is significant when the one-sided p-value is under ``significance``.
Smoothing does not enter (the raw counts of each observation), and a
stream whose rate stepped has its history restarted by the cycle, so a
burst is a step (``policies.triggers``), not a trend.

Pure: the points come in; no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
from scipy.stats import norm

MIN_POINTS = 10
"""Fewer observations in the window: no trend test."""


@dataclass(frozen=True)
class Trend:
    slope: float
    """Arrivals per second, per second."""
    z: float
    p: float
    """One-sided p-value of "no rise"."""
    level: float = math.nan
    """The fitted line's rate at the last observation (arrivals per second): where the ramp is now."""

    def ahead(self, seconds: float) -> float:
        """The rate the fitted line reaches ``seconds`` after the last observation."""
        return self.level + self.slope * seconds


def trend(points: tuple[tuple[float, float], ...], window_seconds: float, intervals: float = 1.0) -> Trend | None:
    """The slope of the rates observed in the last ``window_seconds`` and its test (None: too few points or no arrivals).

    ``points``: (seconds, arrivals per second), oldest first; ``intervals``: the seconds each rate was counted over.
    """
    if not points:
        return None
    last = points[-1][0]
    recent = [(t, r) for t, r in points if t > last - window_seconds]
    if len(recent) < MIN_POINTS:
        return None
    t = np.array([p[0] for p in recent], dtype=float)
    r = np.array([p[1] for p in recent], dtype=float)
    mean = float(r.mean())
    centred = t - t.mean()
    sxx = float(centred @ centred)
    if mean <= 0 or sxx <= 0:
        return None
    slope = float(centred @ (r - mean)) / sxx
    se = math.sqrt(mean / intervals * sxx) / sxx
    z = slope / se
    return Trend(slope, z, float(norm.sf(z)), mean + slope * float(t[-1] - t.mean()))


def rising(history: Mapping[str, tuple[tuple[float, float], ...]], window_seconds: float, significance: float,
           intervals: float = 1.0) -> dict[str, Trend]:
    """The streams whose rate rises significantly over the last ``window_seconds``, with their test."""
    out = {}
    for stream, points in history.items():
        found = trend(points, window_seconds, intervals)
        if found is not None and found.slope > 0 and found.p < significance:
            out[stream] = found
    return out
