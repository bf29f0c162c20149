"""The outbox: every record the control loop writes goes through here, in order, and none is lost to an outage.

Why: the loop must keep its pace while the metadata store is down, and a
record written late (a migration's update after its creation) must still
land after the record it refers to. So a write is queued as a closure with
its kind, the queue is drained in order, and a ``TemporaryError`` (the store
is unavailable) stops the drain until the next try, at most every
``retry_seconds``. The clock is passed in: the outbox reads none.
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import datetime
from typing import Any, Callable

from .errors import TemporaryError

RETRY_SECONDS = 1.0
"""While the store is down, writing the backlog is tried again at most this often, so the steps keep their pace."""
LIMIT = 100_000
"""Records kept while the store is down; past this the oldest go, and the outbox says so."""


class Outbox:
    def __init__(self, clock: Callable[[], datetime], log: Any, *, retry_seconds: float = RETRY_SECONDS, limit: int = LIMIT) -> None:
        self.clock, self.log = clock, log
        self.retry_seconds, self.limit = retry_seconds, limit
        self.backlog: deque[tuple[str, Callable[[], Any]]] = deque()
        self.down = False
        self.tried = clock()
        self.errors = 0
        """Store errors seen (each failed drain counts once)."""
        self.dropped = 0
        """Records given up because the backlog was full."""
        self._lock = threading.RLock()  # the Spark adapter's listener thread records too

    def put(self, kind: str, write: Callable[[], Any]) -> None:
        """Queue ``write`` and try to drain (unless the store is down and was tried less than ``retry_seconds`` ago)."""
        with self._lock:
            self.backlog.append((kind, write))
            if len(self.backlog) > self.limit:
                dropped = self.backlog.popleft()
                self.dropped += 1
                self.log.error("backlog_full", dropped=dropped[0], limit=self.limit)
            self._drain(False)

    def flush(self, force: bool = False) -> bool:
        """Write the backlog (while the store is down, at most every ``retry_seconds`` unless forced); True when it is empty."""
        with self._lock:
            return self._drain(force)

    def __len__(self) -> int:
        return len(self.backlog)

    def _drain(self, force: bool) -> bool:
        if self.down and not force and (self.clock() - self.tried).total_seconds() < self.retry_seconds:
            return False
        self.tried = self.clock()
        while self.backlog:
            kind, write = self.backlog[0]
            try:
                write()
            except TemporaryError as exc:
                self.errors += 1
                if not self.down:
                    self.down = True
                    self.log.error("store_unavailable", step=kind, error=str(exc), backlog=len(self.backlog))
                return False
            self.backlog.popleft()
        if self.down:
            self.down = False
            self.log.info("store_available_again")
        return True
