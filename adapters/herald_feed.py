"""Heralds written to the metadata store reach running operators at their next batch (paper 002 §II, issue 19).

A herald can come through the store's ``heralds`` table instead of inside
the stream: ``armd herald add``, or any program's SQL ``INSERT``. A running
query does not restart for it. ``StoreHeralds`` polls the table for one
stream (at most every ``poll_seconds``, the time passed in by the caller, so
the core never reads a clock) and hands each batch the new heralds with the
position in the batch they apply from — the "beside the batch" form that
``Partitioner.feed(rows, heralds)`` takes:

* a count herald covers the stream's first N tuples from ``starts_at``
  (``armd herald add`` sets it to the time of writing: "the next N"), in
  event time;
* a seconds herald covers the tuples whose event time lies in
  ``[starts_at, starts_at + seconds)``.

Each applies from the first tuple at or after ``starts_at`` and waits for
a later batch if none has come yet. A herald is a promise that lets
operators skip work; missing one costs only time, applying one to tuples it
does not describe breaks results. So the feed errs towards missing: a count
herald read only after a batch went past its start is dropped (how many of
its tuples went by is unknown), and so are the count heralds already in the
table when the feed starts; seconds heralds are placed whenever their span
is not over.

Each poll reads only the rows with an id above the last one read (SQL
filters them), and a row SQL wrote that is no herald is skipped, logged
once and kept in ``skipped``: it does not hold back the stream's other
heralds. Fixing such a row in place does not bring it back (its id was
read); delete it and insert a corrected one.

``HeraldedSelect`` is the single-process host's operator wired to it: a
multi-modal select over batches of rows, configured by the heralds that
have reached the store since it started.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

import structlog

from armd.migrations.heralds import Herald, HeraldConflict, MultiModalSelect, Partition, Partitioner
from armd.migrations.heralds.column import HeraldColumn
from armd.migrations.heralds.predicates import Atom
from armd.adapters.herald_files import HeraldFiles
from armd.adapters.store.errors import StoreError
from armd.migrations.heralds.record import HeraldRecord, InvalidHerald

Row = tuple[Any, ...]
log = structlog.get_logger("armd.heralds")


def epoch_seconds(at: datetime) -> float:
    """A store time in the stream's timestamp units when those are seconds since the epoch (the default)."""
    return at.timestamp()


class StoreHeralds:
    """New heralds of ``stream`` in the store, placed into each batch.

    ``read(stream, since=id, invalid=callback)`` returns the stream's heralds with an id above ``since``,
    oldest first, handing rows that are no herald to ``invalid`` (``SqlStore.heralds``);
    ``ts_index`` is the row index of the event time, ``to_ts`` turns a store
    time into it. Batches must come in timestamp order.
    """

    def __init__(
        self,
        read: Callable[..., Sequence[HeraldRecord]],
        stream: str,
        *,
        ts_index: int,
        to_ts: Callable[[datetime], float] = epoch_seconds,
        poll_seconds: float = 0.0,
    ) -> None:
        self.read = read
        self.stream = stream
        self.ts_index = ts_index
        self.to_ts = to_ts
        self.poll_seconds = poll_seconds
        self.last_id = 0
        self.last_poll = -math.inf
        self.seen_until = -math.inf
        """The last event time of the batches already placed: a herald starting at or before it began earlier."""
        self.pending: list[tuple[float, HeraldRecord]] = []
        """Heralds read whose start no batch has reached yet: (start in stream time, record)."""
        self.applied = 0
        self.missed = 0
        """Count heralds that started in a batch already gone: how many of their tuples went by is unknown."""
        self.error: str | None = None
        """Why the last read failed (the store unavailable), or None."""
        self.skipped: dict[int, str] = {}
        """Rows of the table that are no herald, by id: the one-line reason each was skipped for."""
        for record in self._read():  # what was there before: only the seconds heralds can still be placed
            self.last_id = max(self.last_id, record.id or 0)
            if record.seconds is not None:
                self.pending.append((self.to_ts(record.starts_at), record))
        self.last_id = max([self.last_id, *self.skipped])

    def poll(self, now: float) -> list[HeraldRecord]:
        """Read the store if ``poll_seconds`` have passed since the last read; the records not seen before."""
        if now - self.last_poll < self.poll_seconds:
            return []
        self.last_poll = now
        since = self.last_id
        fresh = [r for r in self._read() if (r.id or 0) > since]
        self.last_id = max([since, *(r.id or 0 for r in fresh), *self.skipped])
        return fresh

    def _read(self) -> Sequence[HeraldRecord]:
        """The stream's heralds; a failed read is no herald (the query goes on without), its reason in ``error``."""
        try:
            records = self.read(self.stream, since=self.last_id, invalid=self._skip)
        except (InvalidHerald, StoreError, OSError) as exc:  # OSError: a side stream's directory (herald_files)
            self.error = str(exc)
            return []
        self.error = None
        return records

    def _skip(self, id: int, reason: str) -> None:
        """A row that is no herald: skipped for good (the next read starts after it), said once."""
        if id not in self.skipped:
            self.skipped[id] = reason
            log.warning("herald_row_skipped", stream=self.stream, row=id, reason=reason)

    def marks(self, rows: Sequence[Row], now: float) -> list[tuple[int, Herald]]:
        """The heralds that apply within this batch, as ``(position, herald)`` in position order.

        A herald starts at its ``starts_at`` (in event time): a count herald
        covers the first N tuples from there, a seconds herald the tuples
        until its span ends. One whose start this batch has not reached
        waits; a seconds herald whose span is over is dropped; a count
        herald that started in an earlier batch is dropped too (``missed``).
        """
        self.pending += [(self.to_ts(r.starts_at), r) for r in self.poll(now)]
        if not rows:
            return []
        ts = self.ts_index
        first, last = rows[0][ts], rows[-1][ts]
        if not self.pending:  # a batch without heralds goes by all the same: a count herald starting in it is missed
            self.seen_until = last
            return []
        out: list[tuple[int, Herald]] = []
        waiting = []
        for start, record in self.pending:
            if start > last:
                waiting.append((start, record))
            elif record.seconds is not None:
                if start + record.seconds > first:
                    out.append((bisect_left(rows, start, key=lambda r: r[ts]), record.to_herald(ts=start)))
            elif start > self.seen_until:
                out.append((bisect_left(rows, start, key=lambda r: r[ts]), record.to_herald()))
            else:
                self.missed += 1
        self.pending = waiting
        self.seen_until = last
        out.sort(key=lambda mark: mark[0])
        self.applied += len(out)
        return out


    def timed(self, now: float, horizon: float = -math.inf) -> list[Herald]:
        """For engines that place heralds by event time alone (Spark, where a batch has no order): every
        seconds herald read so far whose span ends after ``horizon`` (e.g. the query's watermark).
        Count heralds cannot be placed without an order and are counted as ``missed``."""
        for record in self.poll(now):
            if record.seconds is None:
                self.missed += 1
            else:
                self.pending.append((self.to_ts(record.starts_at), record))
        self.pending = [(start, r) for start, r in self.pending if start + (r.seconds or 0.0) > horizon]
        return [r.to_herald(ts=start) for start, r in self.pending]


class HeraldFeeds:
    """Several feeds of one stream's heralds as one: the store's and side streams' (``herald_files``)."""

    def __init__(self, *feeds: StoreHeralds) -> None:
        self.feeds = feeds

    def marks(self, rows: Sequence[Row], now: float) -> list[tuple[int, Herald]]:
        return sorted((mark for feed in self.feeds for mark in feed.marks(rows, now)), key=lambda mark: mark[0])

    def timed(self, now: float, horizon: float = -math.inf) -> list[Herald]:
        return [herald for feed in self.feeds for herald in feed.timed(now, horizon)]

    @property
    def missed(self) -> int:
        return sum(feed.missed for feed in self.feeds)

    @property
    def applied(self) -> int:
        return sum(feed.applied for feed in self.feeds)

    @property
    def error(self) -> str | None:
        return next((feed.error for feed in self.feeds if feed.error), None)


def stream_heralds(stream: str, *, ts_index: int, store: Callable[..., Sequence[HeraldRecord]] | None = None,
                   side: str | None = None, to_ts: Callable[[datetime], float] = epoch_seconds,
                   poll_seconds: float = 0.0) -> HeraldFeeds:
    """Every feed of ``stream``'s heralds a query reads: the store's table (``store``: ``SqlStore.heralds``) and
    the side stream's directory (``side``: ``[managed.NAME] herald_sources``), each placed the same way."""
    reads = ([store] if store is not None else []) + ([HeraldFiles(side).read] if side is not None else [])
    return HeraldFeeds(*(StoreHeralds(read, stream, ts_index=ts_index, to_ts=to_ts, poll_seconds=poll_seconds)
                         for read in reads))


class HeraldedSelect:
    """σ_P over batches of rows, skipping or passing whole partitions by the heralds that reach the store
    and, when ``column`` names one, the heralds the rows carry in that column (``[managed.NAME] heralds``)."""

    def __init__(self, predicate: Sequence[Atom], position: Mapping[str, int], heralds: StoreHeralds | HeraldFeeds | None, *,
                 ts: str = "ts", column: str | None = None) -> None:
        self.partitioner = Partitioner(position, ts=ts)
        self.select = MultiModalSelect(predicate, position)
        self.heralds = heralds
        self.column = None if column is None else HeraldColumn(position[column], ts_index=position[ts])
        self.refused: list[str] = []

    def process(self, rows: Sequence[Row], now: float) -> list[Row]:
        """One batch in timestamp order; the rows that satisfy the predicate, in order.

        A store herald that contradicts one in force (``HeraldConflict``) is refused, not applied, and
        the query goes on: ``refused`` keeps the one-line reasons (a column's cells that are no herald
        are in ``column.refused``)."""
        marks = self.heralds.marks(rows, now) if self.heralds is not None else []
        if self.column is not None:
            marks = sorted(marks + self.column.split(rows), key=lambda mark: mark[0])
        parts: list[Partition] = []
        closed: list[int] = []
        start = 0
        partitioner = self.partitioner
        for at, herald in marks:
            if at > start:
                parts += partitioner.feed(rows[start:at], [])
                closed += partitioner.closed
                start = at
            try:
                partitioner.feed((), [(0, herald)])
            except HeraldConflict as exc:
                self.refused.append(str(exc))
            closed += partitioner.closed
        parts += partitioner.feed(rows[start:], [])
        closed += partitioner.closed
        out: list[Row] = []
        for part in parts:
            kept = self.select.process(part)
            if kept is not None:
                out.extend(kept.rows)
        self.select.release(closed)
        return out

    @property
    def skip_counts(self) -> tuple[int, int]:
        """(input tuples the heralds let it skip or pass unevaluated, all input tuples) so far (``herald_meter``)."""
        return self.select.skip_counts
