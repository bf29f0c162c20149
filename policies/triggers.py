"""When to decide again (paper 001 §3.2.2 and §4.1).

A decision costs a migration per changed query, so it must follow real
changes of the workload, not the noise of counting arrivals in short
intervals. Two ideas keep it so:

* Smoothing is a *time window* in seconds (like the Flink autoscaler's
  ``metrics.window``), not a weight per observation: an observation that
  covers ``Δt`` seconds gets the weight ``1 − exp(−Δt / window)``, so the
  same window means the same smoothing whatever the observation interval.
* A source rate triggers a decision only when its change is *significant
  given the counts behind it*. Per stream the smoothed rate and the decayed
  seconds of exposure behind it give a count; the recent count is compared
  with the counts behind the rate the last decision used by the exact
  conditional test of two Poisson rates (given both counts' sum, the recent
  count is binomial with the share of exposure time as its probability), at
  the configured significance, and the relative change must also exceed the
  threshold. Smoothed counts have a smaller variance than Poisson counts of
  the same mean, so the test errs on the side of not triggering.

Selectivities arrive as ratios without the counts behind them, so they are
smoothed over the same time window and trigger on the relative threshold
alone. Everything here is a pure value transformation: the caller passes in
measurements and keeps the returned tracker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from scipy.stats import binomtest, norm

STEP_HOUR_SECONDS = 3600.0
"""A step is tested every interval, so its level is the significance spread over an hour of intervals (Bonferroni):
at a steady rate, a false step happens with about that probability per hour, not per interval."""

EXACT_UP_TO = 10_000_000
"""Counts up to this many arrivals get the exact test; larger ones its normal approximation."""

MIN_ROWS = 1.0
"""A stream's rate is estimated once its decayed count reaches this many arrivals."""


def window_weight(seconds: float, window_seconds: float) -> float:
    """The weight of an observation covering ``seconds`` in a smoothing over ``window_seconds`` (0: no smoothing)."""
    if window_seconds <= 0:
        return 1.0
    return 1.0 - math.exp(-max(seconds, 0.0) / window_seconds)


def window_of_alpha(alpha: float, observe_seconds: float) -> float:
    """The time window equivalent to the old per-observation weight ``alpha`` at ``observe_seconds`` between observations."""
    if not 0 < alpha <= 1:
        raise ValueError(f"smoothing alpha must be in (0, 1], got {alpha!r}")
    return 0.0 if alpha == 1 else -observe_seconds / math.log(1.0 - alpha)


@dataclass(frozen=True)
class TriggerRules:
    """How measurements are smoothed and when a change of them makes a decision due."""

    window_seconds: float = 5.0
    """Smoothing time window in seconds, ≥ 0 (0: the last observation alone)."""
    threshold: float = 0.2
    """Minimum relative change of a smoothed value that makes a decision due, > 0."""
    significance: float = 0.001
    """A rate change must also be this unlikely under Poisson noise (p-value below it), in (0, 1]."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.window_seconds) and self.window_seconds >= 0):
            raise ValueError(f"smoothing window_seconds must be ≥ 0, got {self.window_seconds!r}")
        if not self.threshold > 0:
            raise ValueError(f"re-decision threshold must be > 0, got {self.threshold!r}")
        if not 0 < self.significance <= 1:
            raise ValueError(f"significance must be in (0, 1], got {self.significance!r}")


@dataclass(frozen=True)
class RateTracker:
    """Smoothed values (d, selectivities) and the values the last decision used; triggers on a relative threshold.

    With ``window_seconds`` set and the seconds an observation covers given,
    the smoothing is the time window's; otherwise (the adaptive JISC runner,
    old callers) every observation weighs ``alpha``.
    """

    alpha: float = 0.3
    """Weight of a new measurement when no time window applies, in (0, 1]."""
    threshold: float = 0.2
    """Relative change of a smoothed value that makes a new decision due, > 0."""
    smoothed: Mapping[str, float] = field(default_factory=dict)
    decided: Mapping[str, float] = field(default_factory=dict)
    window_seconds: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"smoothing alpha must be in (0, 1], got {self.alpha!r}")
        if not self.threshold > 0:
            raise ValueError(f"re-decision threshold must be > 0, got {self.threshold!r}")

    @classmethod
    def of(cls, rules: TriggerRules) -> RateTracker:
        return cls(threshold=rules.threshold, window_seconds=rules.window_seconds)

    def observe(self, measured: Mapping[str, float], seconds: float | None = None) -> RateTracker:
        """Fold one measurement per key, covering ``seconds``, into the smoothed values.

        A measurement that is not a positive finite number is ignored: a key
        without a measurement in an interval keeps its last estimate.
        """
        weight = self.alpha if self.window_seconds is None or seconds is None else window_weight(seconds, self.window_seconds)
        smoothed = dict(self.smoothed)
        for key, value in measured.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                continue
            previous = smoothed.get(key)
            smoothed[key] = value if previous is None else weight * value + (1 - weight) * previous
        return replace(self, smoothed=smoothed)

    def drifted(self) -> frozenset[str]:
        """Keys whose smoothed value moved more than the threshold since the last decision (or never decided)."""
        return frozenset(k for k, v in self.smoothed.items() if _moved(v, self.decided.get(k), self.threshold))

    def decide_with(self, keys: frozenset[str] | None = None) -> RateTracker:
        """Record that a decision used the current smoothed values (of ``keys``, or all)."""
        decided = dict(self.decided)
        decided.update({k: v for k, v in self.smoothed.items() if keys is None or k in keys})
        return replace(self, decided=decided)


@dataclass(frozen=True)
class Counts:
    """A stream's smoothed arrival rate and the decayed seconds of exposure behind it.

    The rate is smoothed over the time window (so a step of the true rate
    reaches the same share of its size after the same seconds, whatever the
    observation interval); ``rows`` = rate × exposure is the count the
    significance test weighs.
    """

    rate: float = 0.0
    """Arrivals per second."""
    seconds: float = 0.0

    @property
    def rows(self) -> float:
        return self.rate * self.seconds

    def add(self, rows: float, seconds: float, window_seconds: float) -> Counts:
        weight = window_weight(seconds, window_seconds)
        rate = rows / seconds if self.seconds <= 0 else (1 - weight) * self.rate + weight * rows / seconds
        return Counts(rate, self.seconds * (1 - weight) + seconds)


def rate_change_p(recent: Counts, reference: Counts) -> float:
    """Two-sided p-value of "both counts come from one Poisson rate" (exact test conditional on their sum)."""
    k, n = round(recent.rows), round(recent.rows) + round(reference.rows)
    exposure = recent.seconds + reference.seconds
    if n == 0 or recent.seconds <= 0 or reference.seconds <= 0:
        return 1.0
    share = recent.seconds / exposure
    if n > EXACT_UP_TO:  # the binomial is normal here to any precision a trigger needs; exact would be slow (or overflow)
        return float(2 * norm.sf(abs(k - n * share) / math.sqrt(n * share * (1 - share))))
    return float(binomtest(k, n, share).pvalue)


@dataclass(frozen=True)
class ArrivalTracker:
    """Per source stream: decayed arrival counts, the smoothed d they give, and the counts the last decision used."""

    rules: TriggerRules = TriggerRules()
    smoothed: Mapping[str, float] = field(default_factory=dict)
    """Smoothed d per stream, in model time units."""
    decided: Mapping[str, float] = field(default_factory=dict)
    """The d each stream had at the last decision."""
    counts: Mapping[str, Counts] = field(default_factory=dict)
    decided_counts: Mapping[str, Counts] = field(default_factory=dict)
    stepped: frozenset[str] = frozenset()
    """Streams whose latest interval was a step (``_step``): their estimate restarted there."""
    fell: frozenset[str] = frozenset()
    """The streams of ``stepped`` whose step was down: state of the faster rate drains from their windows."""

    @property
    def threshold(self) -> float:
        return self.rules.threshold

    def observe(self, arrivals: Mapping[str, tuple[int, float]], unit_seconds: float = 1.0) -> ArrivalTracker:
        """Fold one interval per stream, ``(rows, seconds)``, into the counts; d is in units of ``unit_seconds``.

        An interval without arrivals counts (it lowers the rate); until a
        stream's decayed count reaches ``MIN_ROWS`` its d keeps its last value.
        """
        counts, smoothed, stepped, fell = dict(self.counts), dict(self.smoothed), set(), set()
        for stream, (rows, seconds) in arrivals.items():
            if not (math.isfinite(seconds) and seconds > 0 and rows >= 0):
                continue
            step = self._step(stream, float(rows), float(seconds))
            if step:
                counts[stream] = Counts()  # a step: the counts before it describe a rate that no longer holds
                stepped.add(stream)
                if step < 0:
                    fell.add(stream)
            c = counts.get(stream, Counts()).add(float(rows), float(seconds), self.rules.window_seconds)
            counts[stream] = c
            if c.rows >= MIN_ROWS:
                smoothed[stream] = 1.0 / c.rate / unit_seconds
        return replace(self, counts=counts, smoothed=smoothed, stepped=frozenset(stepped), fell=frozenset(fell))

    def _step(self, stream: str, rows: float, seconds: float) -> int:
        """One interval alone is significantly and past the threshold off the current estimate: a step, up (1) or
        down (−1); 0 when it is none.

        Smoothing a step over the time window would make the first decisions after it use a rate
        between the old and the new one (a burst ×4 seen as ×1.5 a second in), each a migration;
        restarting the estimate from the interval decides once on the new rate. A ramp moves the
        estimate along with it, so its intervals are not steps. Only with the significance test on
        (below 1): without it a step cannot be told from noise.
        """
        reference = self.counts.get(stream) if stream in self.decided else None
        if self.rules.significance >= 1 or reference is None or reference.seconds <= 0 or reference.rate <= 0:
            return 0
        recent = Counts(rows / seconds, seconds)
        if (abs(recent.rate - reference.rate) > self.rules.threshold * reference.rate
                and rate_change_p(recent, reference) < self.rules.significance * min(1.0, seconds / STEP_HOUR_SECONDS)):
            return 1 if recent.rate > reference.rate else -1
        return 0

    def rate_test(self, stream: str) -> tuple[float, float]:
        """(relative change of d, p-value of the rate change) since the last decision, for one decided stream."""
        d, before = self.smoothed[stream], self.decided[stream]
        recent, reference = self.counts.get(stream), self.decided_counts.get(stream)
        p = 0.0 if recent is None or reference is None else rate_change_p(recent, reference)
        return abs(d - before) / before, p

    def drifted(self) -> frozenset[str]:
        """Streams never decided, and those whose d moved past the threshold by a change significant at the rules' level."""
        moved = set()
        for stream, d in self.smoothed.items():
            if not _moved(d, self.decided.get(stream), self.rules.threshold):
                continue
            if stream not in self.decided or self.rate_test(stream)[1] < self.rules.significance:
                moved.add(stream)
        return frozenset(moved)

    def decide_with(self, streams: frozenset[str] | None = None) -> ArrivalTracker:
        """Record that a decision used the current d and counts (of ``streams``, or all)."""
        decided, decided_counts = dict(self.decided), dict(self.decided_counts)
        for stream, d in self.smoothed.items():
            if streams is None or stream in streams:
                decided[stream] = d
                if stream in self.counts:
                    decided_counts[stream] = self.counts[stream]
        return replace(self, decided=decided, decided_counts=decided_counts)


def _moved(value: float, before: float | None, threshold: float) -> bool:
    return before is None or abs(value - before) > threshold * before


def decision_due(
    tracker: RateTracker | ArrivalTracker, queries_changed: bool = False, bounds_changed: bool = False
) -> str | None:
    """The reason a new decision is due, or None when the last one still stands."""
    if queries_changed:
        return "queries added or removed"
    if bounds_changed:
        return "bounds changed"
    drifted = tracker.drifted()
    if drifted:
        listed = ", ".join(sorted(drifted)[:5]) + (" …" if len(drifted) > 5 else "")
        how = "significantly past the threshold" if isinstance(tracker, ArrivalTracker) else "past the threshold"
        return f"rate of {len(drifted)} stream(s) moved {how}: {listed}"
    return None
