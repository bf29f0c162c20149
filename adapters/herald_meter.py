"""The skip fractions herald operators measure, brought to the control cycle with the other statistics (issue 19).

Heralds save work only the running operators can see: how many input tuples
a select skipped or passed unevaluated, how much of a join's probe work fell
in pairs of partitions proven empty. The cost model prices that saving
(paper 002's equation 9, ``costmodel.heralds``) with a skip fraction per
plan node; the cycle smooths measured fractions like measured selectivities
and rebuilds the model when one moves (``control.cycle``). This module is
the path between the two.

``HeraldMeter`` holds the operators running for governed queries, each
under its query and plan node id (``register``). An operator is anything
with ``skip_counts`` — (work skipped, all work) so far: ``HeraldedSelect``,
``MultiModalSelect``, ``MultiModalBatchJoin``. ``take`` differences those
counters since the previous call, so each observation carries the fraction
of *its* interval, as Spark's counts do; a node that did no work in the
interval is left out (nothing was learnt about it, its smoothed value
stays). ``MeteredSource`` wraps the daemon's statistics source and adds the
fractions to each observation's ``QueryMetrics.herald_skips``.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from armd.control.ports import Observation, QueryMetrics, StatsSource


class Metered(Protocol):
    @property
    def skip_counts(self) -> tuple[int, int]: ...


class HeraldMeter:
    """Herald operators per (query, plan node), read as skip fractions per observation interval."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._operators: dict[tuple[str, str], Metered] = {}
        self._seen: dict[tuple[str, str], tuple[int, int]] = {}

    def register(self, query: str, node: str, operator: Metered) -> None:
        """Measure ``operator`` as plan node ``node`` of ``query`` from now on (replacing one registered there:
        a restarted query's new operator counts from zero)."""
        with self._lock:
            self._operators[(query, node)] = operator
            self._seen[(query, node)] = operator.skip_counts

    def unregister(self, query: str) -> None:
        """Stop measuring every operator of ``query`` (it stopped)."""
        with self._lock:
            for key in [k for k in self._operators if k[0] == query]:
                del self._operators[key], self._seen[key]

    def take(self) -> dict[str, dict[str, float]]:
        """Per query and node, the fraction of the work done since the previous call that heralds skipped."""
        out: dict[str, dict[str, float]] = {}
        with self._lock:
            for key, operator in self._operators.items():
                skipped, total = operator.skip_counts
                before_skipped, before_total = self._seen[key]
                self._seen[key] = (skipped, total)
                if total > before_total:
                    out.setdefault(key[0], {})[key[1]] = (skipped - before_skipped) / (total - before_total)
        return out


class MeteredSource:
    """A ``StatsSource``: ``source``'s observations with the meter's skip fractions in each query's metrics."""

    def __init__(self, source: StatsSource, meter: HeraldMeter) -> None:
        self.source = source
        self.meter = meter

    def observe(self, at: datetime) -> Observation:
        observation = self.source.observe(at)
        skips = self.meter.take()
        if not skips:
            return observation
        queries = [replace(q, herald_skips={**q.herald_skips, **skips.pop(q.query)}) if q.query in skips else q
                   for q in observation.queries]
        queries += [QueryMetrics(query, herald_skips=nodes) for query, nodes in sorted(skips.items())]
        return replace(observation, queries=tuple(queries))

    def close(self) -> None:
        self.source.close()

    def __getattr__(self, name: str):  # the wrapped source's own API (SyntheticSource.set_window, SparkStats.groups, …)
        if name == "source":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.source, name)
