"""The cost model's inputs estimated from what a running engine counted.

Why here: the cost model takes, per source stream, the mean inter-arrival
time d and, per filter and join, a selectivity. A running engine does not
report those; it reports counts — rows read per source over some event
time, rows into and out of a filter or a join, a JISC join's tuples and
key-matching pairs. Turning counts into the model's inputs is arithmetic
over the model's own formulas (a join's selectivity is formula 4 solved for
sel), independent of the engine that counted: Spark's progress events feed
these estimators today (``armd.adapters.spark.listener.SparkStats`` only
translates them), any other engine could. Pure: no clock, no IO, nothing
else of armd.

Per observation interval:

* ``ArrivalPool``: d per stream, pooled over every batch (and every query)
  that read the stream: d = Σ event time covered / Σ rows, ``inf`` when
  time passed but no row arrived; a stream whose batches covered no event
  time is left out (nothing was learnt about it).
* ``StreamFrontier``: which reports of a stream describe it *now* when its
  readers are at different positions (an application that fell behind
  reports the past).
* ``WarmUp``: a join's output reaches its steady rate only once both sides
  hold a full validity of elements, so a run's batches from its first
  l1 + l2 seconds of event time are left out of join selectivities.
* ``SelectivityCounts``: one query's counts over the interval's batches;
  filter selectivity out / in, join selectivity out·T / ((l1 + l2)·left·right)
  over the warm batches' event time T, and a JISC join's pairwise key-match
  selectivities ``pair_selectivity``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

__all__ = [
    "ArrivalPool", "SelectivityCounts", "StreamArrivals", "StreamFrontier", "WarmUp", "join_selectivity", "pair_selectivities",
    "pair_selectivity",
]


# --- arrivals -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamArrivals:
    """What one interval showed of one source stream."""

    stream: str
    rows: int
    """Elements that arrived."""
    seconds: float
    """Event time they covered (> 0)."""
    rate_per_second: float
    d: float
    """Mean inter-arrival time in model time units (``inf`` when nothing arrived)."""
    end: float | None = None
    """The newest event time (epoch seconds) the batches reached, when they said."""


class ArrivalPool:
    """Rows and covered event time per stream, summed over the batches of one interval."""

    def __init__(self) -> None:
        self._totals: dict[str, list[float]] = {}  # stream → [rows, seconds]
        self._ends: dict[str, float] = {}

    def add(self, stream: str, rows: float, seconds: float, end: float | None = None) -> None:
        """One batch's ``rows`` of ``stream``, the event time in seconds they covered and where it ended (epoch s)."""
        totals = self._totals.setdefault(stream, [0.0, 0.0])
        totals[0] += rows
        totals[1] += seconds
        if end is not None:
            self._ends[stream] = max(end, self._ends.get(stream, end))

    def estimates(self, time_unit_seconds: float) -> list[StreamArrivals]:
        """Per stream (sorted by name) that covered event time: rows, seconds, rate and d = seconds / rows."""
        out = []
        for stream in sorted(self._totals):
            rows, seconds = self._totals[stream]
            if seconds <= 0:
                continue
            d = seconds / rows / time_unit_seconds if rows > 0 else math.inf
            out.append(StreamArrivals(stream, int(rows), seconds, rows / seconds, d, self._ends.get(stream)))
        return out


class StreamFrontier:
    """Per stream, the newest event time any of its readers reported, and which reports describe the stream now.

    Several readers of one stream — applications, queries, a migration's
    runs — need not be at one position: an application that fell behind
    reports what the one ahead of it reported seconds ago. Pooled together,
    the rate before a step and the rate after it mix; taken in turns (each
    reader reports when its batch ends), the estimate jumps between them and
    every jump looks like a step of the stream (the fleet benchmark's views
    read 40/s and 160/s in alternate decisions while one application lagged
    16–33 s behind the other). The front reader is the one that says where
    the stream is; a reader behind it repeats the past.

    A report is *current* when it reaches the frontier (the newest end
    reported, this call's included): the reader at the front always counts,
    one behind it — even by part of a batch, which at a step of the rate is
    a batch of the old rate — counts again once it leads or ties. A report
    without an end (a source that says nothing of event time) always counts.
    """

    def __init__(self) -> None:
        self.front: dict[str, float] = {}
        """Stream → the newest event time (epoch seconds) reported."""

    def current(self, reports: list[tuple[str, float | None]]) -> list[bool]:
        """For (stream, end) reports read together: move each stream's frontier, then say which are current."""
        for stream, end in reports:
            if end is not None:
                self.front[stream] = max(end, self.front.get(stream, end))
        return [end is None or end >= self.front[stream] for stream, end in reports]


# --- warm-up ------------------------------------------------------------------------------------


class WarmUp:
    """When a run's join counts are in steady state: from its first event time + the filling time on.

    Keeps the first event time seen per run across intervals; a run id is
    never reused (a restart or a migration starts a new run).
    """

    def __init__(self) -> None:
        self._start: dict[str, datetime] = {}

    def is_warm(self, run: str, event_min: datetime | None, filling_seconds: float) -> bool:
        """Whether a batch of ``run`` whose oldest event is ``event_min`` counts (no event time: it does)."""
        if event_min is None:
            return True
        first = self._start.setdefault(run, event_min)
        return (event_min - first).total_seconds() >= filling_seconds


# --- selectivities ------------------------------------------------------------------------------


def join_selectivity(out: float, left: float, right: float, span: float, validity: float) -> float | None:
    """Formula 4 solved for sel: out·T / ((l1 + l2)·left·right), capped at 1; None without input or time."""
    if left > 0 and right > 0 and span > 0:
        return min(1.0, out * span / (validity * left * right))
    return None


def pair_selectivity(pairs: float, n_a: float, n_b: float, span: float, validity: float) -> float:
    """A pair's key-match selectivity from counts: formula 4 solved for sel, pairs·T / ((l_a + l_b)·n_a·n_b).

    ``pairs`` are the tuple pairs of streams a and b with equal keys less
    than the window apart, ``n_a``, ``n_b`` the tuples of each, all over an
    interval of ``span`` time units; ``validity`` is l_a + l_b. Capped at 1;
    no pair at all counts as half a pair, so the estimate stays positive.
    """
    return min(1.0, max(pairs, 0.5) * span / (validity * n_a * n_b))


def pair_selectivities(tuples: Mapping[str, float], validity: float | None, span: float) -> dict[str, float]:
    """"a,b" (names sorted) → key-match selectivity, from a JISC join's counts.

    ``tuples`` maps each stream name to its tuples and each "a,b" to the
    pairs of the two streams; a pair whose streams saw no tuple is left out,
    and so is everything without a validity or without event time.
    """
    out: dict[str, float] = {}
    if not validity or span <= 0:
        return out
    for name, pairs in tuples.items():
        a, comma, b = name.partition(",")
        if not comma:
            continue
        n_a, n_b = tuples.get(a, 0.0), tuples.get(b, 0.0)
        if n_a > 0 and n_b > 0:
            out[",".join(sorted((a, b)))] = pair_selectivity(pairs, n_a, n_b, span, validity)
    return out


@dataclass
class SelectivityCounts:
    """One query's counts over the batches of one interval, and the selectivities they give.

    Feed it every batch's filter counts; join and pair counts and the event
    time only of warm batches (``WarmUp``), since T must be the event time
    those counts cover.
    """

    span: float = 0.0
    """Event time covered by the warm batches, in seconds."""
    warm_batches: int = 0
    filters: dict[str, dict[str, float]] = field(default_factory=dict)
    """Filter node → ``in``/``out`` → rows."""
    joins: dict[str, dict[str, float]] = field(default_factory=dict)
    """Join node → ``left``/``right``/``out`` → rows."""
    validity: dict[str, float] = field(default_factory=dict)
    """Join node → l1 + l2 in seconds, when given."""
    tuples: dict[str, float] = field(default_factory=dict)
    """A JISC join's counts: stream → tuples, "a,b" → pairs."""
    pair_validity: float | None = None
    """The JISC join's l_a + l_b in seconds, when given."""

    def add_warm_batch(self, seconds: float) -> None:
        self.warm_batches += 1
        self.span += seconds

    def add_filter(self, node: str, role: str, rows: float) -> None:
        counts = self.filters.setdefault(node, {})
        counts[role] = counts.get(role, 0.0) + rows

    def add_join(self, node: str, role: str, rows: float, validity: float | None = None) -> None:
        counts = self.joins.setdefault(node, {})
        counts[role] = counts.get(role, 0.0) + rows
        if validity is not None:
            self.validity[node] = validity

    def add_pairs(self, counts: Mapping[str, float], validity: float | None = None) -> None:
        for name, value in counts.items():
            self.tuples[name] = self.tuples.get(name, 0.0) + value
        if validity is not None:
            self.pair_validity = validity

    def selectivities(self) -> dict[str, float]:
        """Node → selectivity: filters with rows in, joins with a validity, rows on both sides and event time."""
        out: dict[str, float] = {}
        for node, counts in self.filters.items():
            seen = counts.get("in", 0.0)
            if "out" in counts and seen > 0:
                out[node] = counts["out"] / seen
        for node, counts in self.joins.items():
            if "out" in counts and node in self.validity:
                sel = join_selectivity(counts["out"], counts.get("left", 0.0), counts.get("right", 0.0), self.span,
                                       self.validity[node])
                if sel is not None:
                    out[node] = sel
        return out

    def pair_selectivities(self) -> dict[str, float]:
        return pair_selectivities(self.tuples, self.pair_validity, self.span)
