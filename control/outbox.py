"""The outbox: every record the control loop writes goes through here, in order, and none is lost to an outage.

Why: the loop must keep its pace while the metadata store is down, and a
record written late (a migration's update after its creation) must still
land after the record it refers to. So a write is queued as a closure with
its kind and the queue is drained in order. What happens when a write fails
depends on what the store says about it (``errors.py``):

* a ``TemporaryError`` (the store is unavailable, a table is missing for a
  while) stops the drain; the record stays at the head and the drain is
  tried again at most every ``retry_seconds`` after the last failure ended.
  Once the oldest record has waited ``outage_alert_seconds``, ``on_outage``
  is told once per outage (the daemon raises ``store_unavailable``). A
  ``Lost`` error (the store's file was deleted or replaced) will not pass by
  itself, so ``on_lost`` is told at once, once;
* a ``PermanentError`` (the database will never accept this record: a number
  out of range, a broken constraint) sets the record aside — kept in
  ``rejected`` for inspection, logged with its kind, counted, and handed to
  ``on_rejected`` — and the drain goes on with the next record, so one poison
  record cannot block every later one;
* anything else is a surprise (a bug): treated as temporary
  ``SURPRISE_ATTEMPTS`` times, then set aside like a rejected record.

At the stop, ``hold()`` makes ``put`` only queue (a step still running must
not start new store calls), and the daemon drains what is left with a bounded
``flush``; ``len()`` is then what could not be written. Callbacks run after
the outbox's lock is released, so they may record through the outbox.
The clock is passed in: the outbox reads none.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from .errors import Lost, PermanentError, TemporaryError

RETRY_SECONDS = 1.0
"""While the store is down, writing the backlog is tried again at most this often, so the steps keep their pace."""
LIMIT = 100_000
"""Records kept while the store is down; past this the oldest go, and the outbox says so."""
OUTAGE_ALERT_SECONDS = 30.0
"""An outage is alerted once the oldest waiting record has waited this long."""
SURPRISE_ATTEMPTS = 3
"""A record whose write raises something the store did not classify is tried this often, then set aside."""
REJECTED_KEPT = 1000
"""Rejected records kept in memory for inspection (the count goes on past it)."""


@dataclass(frozen=True)
class RejectedRecord:
    """A record set aside: the store will never accept it."""

    kind: str
    """What it was (``observation``, ``event``, ``migration``, …)."""
    error: str
    """The store's reason, one line."""
    error_type: str
    at: datetime
    write: Callable[[], Any]
    """The write itself (its closure holds the record), for inspection."""


class Outbox:
    def __init__(self, clock: Callable[[], datetime], log: Any, *, retry_seconds: float = RETRY_SECONDS, limit: int = LIMIT,
                 outage_alert_seconds: float = OUTAGE_ALERT_SECONDS,
                 on_rejected: Callable[[RejectedRecord], None] | None = None,
                 on_outage: Callable[[float, int, str], None] | None = None,
                 on_lost: Callable[[int, str], None] | None = None) -> None:
        self.clock, self.log = clock, log
        self.retry_seconds, self.limit, self.outage_alert_seconds = retry_seconds, limit, outage_alert_seconds
        self.on_rejected = on_rejected
        """Called with every record set aside (the daemon raises ``record_rejected``)."""
        self.on_outage = on_outage
        self.on_lost = on_lost
        """``on_lost(records_waiting, error)``: the store's storage vanished (told once)."""
        self._lost_told = False
        """Called once per outage with (seconds waited, records waiting, last error) when it has lasted ``outage_alert_seconds``."""
        self.backlog: deque[tuple[str, Callable[[], Any], datetime]] = deque()
        self.down = False
        self.tried = clock()
        self._down_since = self.tried
        self._last_error = ""
        self.errors = 0
        """Store errors seen (each failed drain counts once)."""
        self.dropped = 0
        """Records given up because the backlog was full."""
        self.queued: Counter[str] = Counter()
        """Records put, per kind."""
        self.written: Counter[str] = Counter()
        """Records the store took, per kind."""
        self.rejected: deque[RejectedRecord] = deque(maxlen=REJECTED_KEPT)
        self.rejected_count: Counter[str] = Counter()
        """Records set aside, per kind."""
        self.held = False
        self._surprises = 0
        self._outage_alerted = False
        self._notices: list[Callable[[], None]] = []
        self._lock = threading.RLock()  # the Spark adapter's listener thread records too

    def put(self, kind: str, write: Callable[[], Any]) -> None:
        """Queue ``write`` and try to drain (unless held, or the store is down and failed less than ``retry_seconds`` ago)."""
        with self._lock:
            self.backlog.append((kind, write, self.clock()))
            self.queued[kind] += 1
            if len(self.backlog) > self.limit:
                dropped = self.backlog.popleft()
                self.dropped += 1
                self.log.error("backlog_full", dropped=dropped[0], limit=self.limit)
            if not self.held:
                self._drain(False)
        self._notify()

    def flush(self, force: bool = False) -> bool:
        """Write the backlog (while the store is down, at most every ``retry_seconds`` unless forced); True when it is empty."""
        with self._lock:
            empty = self._drain(force)
        self._notify()
        return empty

    def hold(self) -> None:
        """From now on ``put`` only queues, and a drain in progress stops after its current record; ``flush`` still drains."""
        self.held = True

    def __len__(self) -> int:
        return len(self.backlog)

    def _drain(self, force: bool) -> bool:
        if self.down and not force and (self.clock() - self.tried).total_seconds() < self.retry_seconds:
            self._outage_check(self._last_error)
            return False
        while self.backlog:
            kind, write, queued_at = self.backlog[0]
            try:
                write()
            except TemporaryError as exc:
                self._failed(kind, str(exc), queued_at)
                if isinstance(exc, Lost) and not self._lost_told:
                    self._lost_told = True
                    if self.on_lost is not None:
                        self._notices.append(lambda n=len(self.backlog), e=str(exc): self.on_lost(n, e))  # type: ignore[misc]
                return False
            except PermanentError as exc:
                self._set_aside(kind, write, exc)
            except Exception as exc:  # noqa: BLE001 - a surprise must not wedge the backlog forever
                self._surprises += 1
                if self._surprises < SURPRISE_ATTEMPTS:
                    self.log.error("record_write_failed", step=kind, error=repr(exc), attempt=self._surprises)
                    self._failed(kind, repr(exc), queued_at)
                    return False
                self._set_aside(kind, write, exc)
            else:
                self.backlog.popleft()
                self.written[kind] += 1
                self._surprises = 0
            if self.held and not force:
                return not self.backlog
        if self.down:
            self.down = False
            self.log.info("store_available_again", waited_seconds=round((self.clock() - self._down_since).total_seconds(), 3))
        return True

    def _failed(self, kind: str, error: str, queued_at: datetime) -> None:
        self.errors += 1
        self.tried = self.clock()  # the next try is ``retry_seconds`` after this one ended, however long it blocked
        self._last_error = error
        if not self.down:
            self.down, self._down_since, self._outage_alerted = True, queued_at, False
            self.log.error("store_unavailable", step=kind, error=error, backlog=len(self.backlog))
        self._outage_check(error)

    def _outage_check(self, error: str) -> None:
        """Tell ``on_outage`` once per outage, when the oldest waiting record has waited ``outage_alert_seconds``."""
        waited = (self.clock() - self._down_since).total_seconds()
        if not self._outage_alerted and waited >= self.outage_alert_seconds:
            self._outage_alerted = True
            if self.on_outage is not None:
                self._notices.append(lambda n=len(self.backlog): self.on_outage(waited, n, error))  # type: ignore[misc]

    def _set_aside(self, kind: str, write: Callable[[], Any], exc: Exception) -> None:
        self.backlog.popleft()
        self._surprises = 0
        record = RejectedRecord(kind, str(exc), type(exc).__name__, self.clock(), write)
        self.rejected.append(record)
        self.rejected_count[kind] += 1
        self.log.error("record_set_aside", step=kind, error=record.error, error_type=record.error_type,
                       rejected=sum(self.rejected_count.values()))
        if self.on_rejected is not None:
            self._notices.append(lambda: self.on_rejected(record))  # type: ignore[misc]

    def _notify(self) -> None:
        with self._lock:
            notices, self._notices = self._notices, []
        for notice in notices:
            notice()
