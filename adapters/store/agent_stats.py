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
  those of the whole interval — of the reports at the stream's front only:
  a report that ends in event time behind the newest one is an application
  that fell behind, repeating the past (``StreamFrontier``; reports without
  an ``event_end`` always count);
* a query's state and selectivities are its latest report's;
* every batch is passed on, once.

Rows are read by id, from the lowest id not passed on yet (``IdCursor``), so
each observation reads what is new rather than a window of time again: with
several applications writing at once, a row may commit after a row with a
larger id was read, so an id missing below the largest one seen is waited
for (read again from there) for ``lookback_seconds``, then given up (an
insert that was rolled back leaves a hole for good).

Reading and combining are two calls: ``read`` (the daemon's agent feed,
``daemon/agent_feed.py``, on a thread of its own) reads the new rows into a
hand-over behind a lock and returns each row's lag; ``observe`` (the
control cycle) takes what was read since its last call and combines it.
Without a feed (``fed`` unset) ``observe`` reads first, as one call.

The caller must not record the observation again (its rows are in the store
already).
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Collection

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from armd.control.ports import BatchProgress, Observation, QueryMetrics, StreamStats
from armd.costmodel.measured import StreamFrontier

from . import models as m
from .sql import SqlStore

LOOKBACK_SECONDS = 3.0
"""How long an id missing below the largest id read is waited for: enough for a late commit."""
MAX_GAP = timedelta(seconds=60)
"""Rows stamped longer ago than this before the read are not read (the first read, and after a long pause)."""
MAX_MISSING = 100_000
"""Ids further under the largest one read are not waited for (a table that grew by that much between two reads)."""


class IdCursor:
    """Which ids of one table were passed on: every id up to ``floor``, and ``seen`` above it.

    ``missing`` holds the ids under the largest one seen that were not read yet, with the time they were first missed;
    the floor stays under the oldest of them until it is read or has been missed for longer than the look-back."""

    def __init__(self) -> None:
        self.floor: int | None = None
        """Ids up to here are done with; ``None`` before the first read."""
        self.seen: set[int] = set()
        self.missing: dict[int, datetime] = {}

    def fresh(self, ids: list[int], at: datetime, lookback: timedelta) -> list[bool]:
        """Which of ``ids`` (read above ``floor``) are new; then move the floor past what is done."""
        new = [i not in self.seen for i in ids]
        self.seen.update(ids)
        if not self.seen:
            return new
        high = max(self.seen)
        low = min(self.seen) - 1 if self.floor is None else max(self.floor, high - MAX_MISSING)
        for i in range(low + 1, high + 1):
            if i not in self.seen:
                self.missing.setdefault(i, at)
        self.missing = {i: t for i, t in self.missing.items() if i not in self.seen and at - t <= lookback}
        self.floor = min(self.missing) - 1 if self.missing else high
        self.seen = {i for i in self.seen if i > self.floor}
        return new


class AgentStats:
    def __init__(self, store: SqlStore, time_unit_seconds: float, since: datetime, *,
                 lookback_seconds: float = LOOKBACK_SECONDS,
                 wanted: Callable[[], tuple[Collection[str], Collection[str]]] | None = None) -> None:
        if not time_unit_seconds > 0:
            raise ValueError(f"time_unit_seconds must be > 0, got {time_unit_seconds!r}")
        self.store, self.time_unit_seconds = store, float(time_unit_seconds)
        self.lookback = timedelta(seconds=float(lookback_seconds))
        self._since = since.astimezone(timezone.utc)
        self._cursors = {"o": IdCursor(), "b": IdCursor()}
        self.wanted = wanted
        """(queries, streams) to pass on, when the caller knows them (the daemon's fleet); else read each time."""
        self.lags: list[float] = []
        """Per row read by the last ``observe`` (none when ``fed``): seconds from the application's report to its read."""
        self.taken: list[float] = []
        """Per row the last ``observe`` took: seconds from the application's report to the cycle taking it."""
        self.fed = False
        """Set when another thread calls ``read`` (``daemon/agent_feed.py``): ``observe`` then only takes what it read."""
        self.frontier = StreamFrontier()
        self._lock = threading.Lock()
        self._pending: list[tuple[list[Any], list[Any], set[str], set[str]]] = []

    def read(self, at: datetime) -> list[float]:
        """Read what the applications reported since the last read into the hand-over ``observe`` takes from; return,
        per observation row read, the seconds from the application's report to the end of this read.

        Safe to call from a thread of its own (the daemon's agent feed) while the cycle calls ``observe``."""
        at = at.astimezone(timezone.utc)
        started = time.perf_counter()
        low = max(self._since, at - MAX_GAP) - self.lookback
        known = None if self.wanted is None else tuple(set(x) for x in self.wanted())
        floors = {k: c.floor for k, c in self._cursors.items()}
        observations, batches, queries, streams = self.store.transact(lambda s: self._read(s, low, floors, known))
        fresh_obs = [r for r in self._fresh("o", observations, at) if r.query in queries or r.stream in streams]
        fresh_batches = [b for b in self._fresh("b", batches, at) if b.query in queries]
        with self._lock:
            self._pending.append((fresh_obs, fresh_batches, queries, streams))
        # the moment the daemon has them: ``at`` on the caller's clock, plus what reading took
        done = at + timedelta(seconds=time.perf_counter() - started)
        return [(done - _aware(r.at)).total_seconds() for r in fresh_obs]

    def observe(self, at: datetime) -> Observation:
        """What was read since the last call, combined into one observation (read first unless ``fed``: a feed reads)."""
        at = at.astimezone(timezone.utc)
        self.lags = [] if self.fed else self.read(at)
        with self._lock:
            pending, self._pending = self._pending, []
        rows = [r for chunk in pending for r in chunk[0]]
        batches = [b for chunk in pending for b in chunk[1]]
        queries = pending[-1][2] if pending else set()
        streams = pending[-1][3] if pending else set()
        self.taken = [(at - _aware(r.at)).total_seconds() for r in rows]
        return Observation(at, self._streams(rows, streams), self._queries(rows, queries),
                           [self._batch(b) for b in batches if b.query in queries])

    def close(self) -> None:
        pass

    # --- reading ---

    @staticmethod
    def _read(session: Session, low: datetime, floors: dict[str, int | None],
              known: tuple[set[str], ...] | None) -> tuple[list[Any], list[Any], set[str], set[str]]:
        queries, streams = known if known is not None else _registered(session)
        # Plain rows, not ORM objects: a thousand queries write two thousand rows a second.
        sqlite = session.connection().dialect.name == "sqlite"
        out = []
        for kind, table in (("o", m.ObservationRow.__table__), ("b", m.BatchRow.__table__)):
            wanted = select(table).where(table.c.at > low)  # committed is read, whatever the clock of its host said
            floor = floors[kind]
            # SQLite hands ids out again once the newest rows are gone (pruned); PostgreSQL's sequences never do
            if floor is not None and not (sqlite and (session.scalar(select(func.max(table.c.id))) or 0) < floor):
                wanted = wanted.where(table.c.id > floor)
            out.append(list(session.execute(wanted.order_by(table.c.at, table.c.id))))
        return out[0], out[1], queries, streams

    def _fresh(self, kind: str, rows: list[Any], at: datetime) -> list[Any]:
        new = self._cursors[kind].fresh([int(r.id) for r in rows], at, self.lookback)
        return [r for r, n in zip(rows, new) if n]

    # --- combining ---

    def _streams(self, rows: list[Any], wanted: set[str]) -> list[StreamStats]:
        reported = [r for r in rows if r.stream in wanted and r.rows is not None and r.interval_seconds]
        current = self.frontier.current([(r.stream, r.event_end and _aware(r.event_end).timestamp()) for r in reported])
        totals: dict[str, list[Any]] = {}
        for r, now in zip(reported, current):
            if now:
                totals.setdefault(r.stream, []).append(r)
        out = []
        for stream, reports in sorted(totals.items()):
            n, seconds = sum(int(r.rows) for r in reports), sum(float(r.interval_seconds) for r in reports)
            d = seconds / self.time_unit_seconds / n if n else math.inf
            latest = reports[-1]
            ends = [_aware(r.event_end) for r in reports if r.event_end is not None]
            out.append(StreamStats(stream, n, seconds, n / seconds, d, latest.l, latest.g, max(ends) if ends else None))
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
