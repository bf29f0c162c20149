"""Statistics of agent-managed queries, read back from the store: the daemon's ``StatsSource`` without a Spark session.

Why: an ``armd.agent`` application reports its queries' progress into the
store (``observations`` and ``batches``, through ``record_observation``),
and the daemon that decides for them runs elsewhere, with no Spark session
of its own. ``AgentStats.observe`` gathers what the applications reported
since its last call, for the queries registered by an application that is
still there (``queries.app`` set, not ``removed``) and the streams of their
plans, into one ``Observation``:

* a stream reported several times in the interval (each application
  reports every round) counts once, its rows and seconds added, so the rate
  and the mean inter-arrival time ``d`` (in the daemon's time unit) are
  those of the whole interval;
* a query's state and selectivities are its latest report's;
* every batch is passed on, once.

Rows are picked by id and a short look-back on their time (``lookback_seconds``):
with several applications writing at once, a row may commit after a row
with a larger id was read, so ids already passed on are remembered for the
look-back rather than read by a high-water mark.

The caller must not record the observation again (its rows are in the store
already).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from armd.control.ports import BatchProgress, Observation, QueryMetrics, StreamStats

from . import models as m
from .sql import SqlStore

LOOKBACK_SECONDS = 3.0
"""Rows are read again this far back: enough for a late commit or a little clock skew between hosts; short, since
every observation reads the whole look-back (a thousand queries reporting each second write ~2000 rows/s)."""
MAX_GAP = timedelta(seconds=60)
"""After a longer pause (the fleet was empty) reading starts this far back, not at the last read."""


class AgentStats:
    def __init__(self, store: SqlStore, time_unit_seconds: float, since: datetime, *,
                 lookback_seconds: float = LOOKBACK_SECONDS,
                 wanted: Callable[[], tuple[Collection[str], Collection[str]]] | None = None) -> None:
        if not time_unit_seconds > 0:
            raise ValueError(f"time_unit_seconds must be > 0, got {time_unit_seconds!r}")
        self.store, self.time_unit_seconds = store, float(time_unit_seconds)
        self.lookback = timedelta(seconds=float(lookback_seconds))
        self._last = since.astimezone(timezone.utc)
        self._seen: dict[tuple[str, int], datetime] = {}
        self.wanted = wanted
        """(queries, streams) to pass on, when the caller knows them (the daemon's fleet); else read each time."""
        self.lags: list[float] = []
        """Per row read by the last ``observe``: seconds from the application's report to this read."""

    def observe(self, at: datetime) -> Observation:
        at = at.astimezone(timezone.utc)
        low = max(self._last, at - MAX_GAP) - self.lookback  # after a long pause (no fleet), not the whole past
        known = None if self.wanted is None else tuple(set(x) for x in self.wanted())
        observations, batches, queries, streams = self.store.transact(lambda s: self._read(s, low, at, known))
        self._last = max(self._last, at)
        self._seen = {k: t for k, t in self._seen.items() if t >= low}
        fresh_obs = [r for r in observations if self._new("o", r.id, r.at)]
        self.lags = [(at - _aware(r.at)).total_seconds() for r in fresh_obs]
        fresh_batches = [b for b in batches if self._new("b", b.id, b.at)]
        return Observation(at, self._streams(fresh_obs, streams), self._queries(fresh_obs, queries),
                           [self._batch(b) for b in fresh_batches if b.query in queries])

    def close(self) -> None:
        pass

    # --- reading ---

    @staticmethod
    def _read(session: Session, low: datetime, at: datetime,
              known: tuple[set[str], ...] | None) -> tuple[list[Any], list[Any], set[str], set[str]]:
        queries, streams = known if known is not None else _registered(session)
        # Plain rows, not ORM objects: a thousand queries put thousands of rows in each look-back.
        o, b = m.ObservationRow.__table__.c, m.BatchRow.__table__.c
        observations = list(session.execute(select(m.ObservationRow.__table__).where(o.at > low, o.at <= at).order_by(o.at, o.id)))
        batches = list(session.execute(select(m.BatchRow.__table__).where(b.at > low, b.at <= at).order_by(b.at, b.id)))
        return observations, batches, queries, streams

    def _new(self, kind: str, row_id: int, at: datetime) -> bool:
        if (kind, row_id) in self._seen:
            return False
        self._seen[(kind, row_id)] = at
        return True

    # --- combining ---

    def _streams(self, rows: list[Any], wanted: set[str]) -> list[StreamStats]:
        totals: dict[str, list[Any]] = {}
        for r in rows:
            if r.stream in wanted and r.rows is not None and r.interval_seconds:
                totals.setdefault(r.stream, []).append(r)
        out = []
        for stream, reports in sorted(totals.items()):
            n, seconds = sum(int(r.rows) for r in reports), sum(float(r.interval_seconds) for r in reports)
            d = seconds / self.time_unit_seconds / n if n else math.inf
            latest = reports[-1]
            out.append(StreamStats(stream, n, seconds, n / seconds, d, latest.l, latest.g))
        return out

    @staticmethod
    def _queries(rows: list[Any], wanted: set[str]) -> list[QueryMetrics]:
        latest = {r.query: r for r in rows if r.query in wanted}
        out = []
        for q, r in sorted(latest.items()):
            measured = r.measured_inputs or {}
            groups = {n: (float(m[0]), float(m[1])) for n, m in (measured.get("group_models") or {}).items()}
            out.append(QueryMetrics(q, r.state_rows, r.state_bytes, dict(r.selectivities or {}), dict(r.pair_selectivities or {}),
                                    groups, {n: float(v) for n, v in (measured.get("bytes_per_row") or {}).items()}))
        return out

    @staticmethod
    def _batch(b: Any) -> BatchProgress:
        return BatchProgress(b.query, b.run_id, int(b.batch_id), b.at, int(b.input_rows), int(b.batch_ms),
                             dict(b.durations_ms or {}), b.event_min, b.event_max, b.watermark, int(b.state_rows),
                             int(b.state_bytes), int(b.rows_dropped_by_watermark), list(b.operators or []), b.plan_version)


def _registered(session: Session) -> tuple[set[str], set[str]]:
    """The agent queries not removed and the streams of their plans."""
    queries, streams = set(), set()
    for name, spec in session.execute(select(m.Query.name, m.Query.spec)
                                      .where(m.Query.app.is_not(None), m.Query.status != "removed")):
        queries.add(name)
        streams |= set((((spec or {}).get("plan") or {}).get("streams") or {}))
    return queries, streams


def _aware(at: datetime) -> datetime:
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at
