"""A built-in synthetic statistics source: Poisson streams on a rate schedule.

It lets the daemon run end to end without Spark, and stays as a simulator
afterwards. Each stream has a base rate, steps that replace the rate from a
moment on, and bursts that multiply it for a while. Arrivals are drawn per
whole second from a generator seeded by (seed, stream, second), so the same
seed gives the same arrivals at the same offsets from the start however
often and at whatever intervals the source is observed — the offset *is*
event time, which is what makes runs replayable.

Measured state is simulated honestly from those arrivals: a query's state is
the elements its applied windows hold now (arrivals of the window's source
stream within the window), times the stream's element size. A query that
sheds load (an applied drop rate p) holds only the arrivals it kept: each
arrival carries a uniform mark drawn with it, and a query keeps the arrivals
whose mark is at least p, so the same arrivals are dropped at every
observation, as a seeded ``rand() >= p`` filter does on Spark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Mapping, Sequence

import numpy as np

from armd.control.ports import Observation, QueryMetrics, StreamStats

_CACHE_SECONDS = 4096
"""Per-second arrival draws kept per stream (enough for windows of about an hour)."""


@dataclass(frozen=True)
class Schedule:
    """Rate of one stream over time (seconds since the source started)."""

    rate_per_second: float
    steps: Sequence[tuple[float, float]] = ()
    """(at_seconds, rate_per_second): the base rate from that moment on."""
    bursts: Sequence[tuple[float, float, float]] = ()
    """(at_seconds, duration_seconds, factor): the rate times ``factor`` while it lasts."""

    def rate_at(self, t: float) -> float:
        rate = self.rate_per_second
        for at, value in sorted(self.steps):
            if t >= at:
                rate = value
        for at, duration, factor in self.bursts:
            if at <= t < at + duration:
                rate *= factor
        return rate

    def expected(self, start: float, end: float) -> float:
        """∫ rate dt over [start, end): the rate is piecewise constant between breakpoints."""
        points = {start, end}
        for at, _ in self.steps:
            points.add(at)
        for at, duration, _ in self.bursts:
            points.update((at, at + duration))
        cuts = sorted(p for p in points if start <= p <= end)
        return sum(self.rate_at(a) * (b - a) for a, b in zip(cuts, cuts[1:]))


@dataclass(frozen=True)
class WindowTap:
    """One window of a query over a source stream, whose contents count as the query's state."""

    stream: str
    window_node: str
    default_size: float
    """Window size in model time units before any setting is applied."""


class SyntheticSource:
    """Poisson arrivals per stream, observed as statistics; implements ``StatsSource``."""

    def __init__(
        self,
        schedules: Mapping[str, Schedule],
        seed: int,
        time_unit_seconds: float,
        start: datetime,
        element_bytes: Mapping[str, float] | None = None,
        taps: Mapping[str, Sequence[WindowTap]] | None = None,
    ) -> None:
        self.schedules = dict(schedules)
        self.seed = int(seed)
        self.time_unit_seconds = float(time_unit_seconds)
        self.start = start
        self.element_bytes = dict(element_bytes or {})
        self.taps = {q: tuple(t) for q, t in (taps or {}).items()}
        self.window_sizes: dict[tuple[str, str], float] = {}
        self.drop_rates: dict[str, float] = {}
        self._index = {name: i for i, name in enumerate(sorted(self.schedules))}
        self._draws: dict[tuple[str, int], np.ndarray] = {}
        self._last = 0.0

    def update(
        self, schedules: Mapping[str, Schedule], element_bytes: Mapping[str, float], taps: Mapping[str, Sequence[WindowTap]]
    ) -> None:
        """New schedules and taps (a reloaded configuration); arrivals already drawn stay as they were."""
        self.schedules = dict(schedules)
        self.element_bytes = dict(element_bytes)
        self.taps = {q: tuple(t) for q, t in taps.items()}
        self._index = {name: i for i, name in enumerate(sorted(self.schedules))}

    def seconds(self, at: datetime) -> float:
        return (at - self.start).total_seconds()

    def arrivals(self, stream: str, start: float, end: float, drop: float = 0.0) -> np.ndarray:
        """Arrival times in [start, end) (seconds since the source started), ascending; with ``drop``,
        only those a query dropping at that rate keeps."""
        if end <= start:
            return np.empty(0)
        parts = [self._second(stream, k) for k in range(max(0, math.floor(start)), math.ceil(end))]
        times, marks = np.concatenate(parts, axis=1) if parts else np.empty((2, 0))
        kept = (times >= start) & (times < end)
        if drop > 0:
            kept &= marks >= drop
        return times[kept]

    def _second(self, stream: str, k: int) -> np.ndarray:
        """The arrivals of one second: their times and their drop marks, a (2, count) array."""
        key = (stream, k)
        draw = self._draws.get(key)
        if draw is None:
            rng = np.random.default_rng([self.seed, self._index[stream], k])
            count = rng.poisson(self.schedules[stream].expected(k, k + 1))
            times = k + np.sort(rng.random(count))
            draw = np.stack((times, rng.random(count)))  # marks drawn after the times: the times stay as they were
            self._draws[key] = draw
            if len(self._draws) > _CACHE_SECONDS * max(1, len(self.schedules)):
                for old in [key for key in self._draws if key[1] < k - _CACHE_SECONDS]:
                    del self._draws[old]
        return draw

    def set_window(self, query: str, window_node: str, size: float) -> None:
        """Record an applied window size (model time units); the simulated state follows it."""
        self.window_sizes[(query, window_node)] = float(size)

    def set_drop_rate(self, query: str, rate: float) -> None:
        """Record an applied drop rate; the query's simulated state holds only the arrivals it keeps."""
        self.drop_rates[query] = float(rate)

    def observe(self, at: datetime) -> Observation:
        now = self.seconds(at)
        begin, self._last = self._last, max(self._last, now)
        interval = max(now - begin, 0.0)
        streams = []
        for name in sorted(self.schedules):
            rows = len(self.arrivals(name, begin, now))
            rate = rows / interval if interval > 0 else 0.0
            d = 1.0 / (rate * self.time_unit_seconds) if rate > 0 else math.inf
            streams.append(StreamStats(name, rows, interval, rate, d))
        queries = [self._state(query, taps, now) for query, taps in self.taps.items()]
        return Observation(at, tuple(streams), tuple(queries))

    def _state(self, query: str, taps: Sequence[WindowTap], now: float) -> QueryMetrics:
        rows, size = 0, 0.0
        for tap in taps:
            window = self.window_sizes.get((query, tap.window_node), tap.default_size) * self.time_unit_seconds
            held = len(self.arrivals(tap.stream, max(0.0, now - window), now, self.drop_rates.get(query, 0.0)))
            rows += held
            size += held * self.element_bytes.get(tap.stream, 0.0)
        return QueryMetrics(query, state_rows=rows, state_bytes=int(size))

    def close(self) -> None:
        self._draws.clear()
