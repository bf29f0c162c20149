"""When an application's next round runs: every ``poll_seconds``, and at once when the daemon writes desired settings.

Why: polling alone makes every decision wait up to a poll interval before
the application starts migrating. On PostgreSQL the daemon notifies each
write of ``desired_settings`` (``adapters/store/listen.py``) and the
round runs as soon as it is heard; on SQLite, or while listening fails,
the poll interval paces the rounds as before.

The poll rounds keep a fixed cadence (one every ``poll_seconds`` from the
first, not ``poll_seconds`` after the last one ended). The agent's
reporting thread has a pacer of its own that does not listen
(``loop.py``), so the application reports every ``poll_seconds`` however
long a round of the applying thread takes, as the daemon's statistics
expect. A round that overran is followed at once; one that ran
past a whole interval starts the cadence again from now (no burst of rounds
to catch up). A notified round comes in between and leaves the cadence as it
is.

The pacer also says whether a round must read ``desired_settings``
(``read_desired``): with nothing decided, reading them every second is most
of what an idle round costs (a transaction and a query per round, for
rows that have not changed). On PostgreSQL, while the listener listens, a
round reads them only when a notification was heard since the last read
(the listener also notifies once after each (re)connection, for what it
missed) — and every ``DESIRED_EVERY``-th round regardless, as a safety
net: a row written without a notification (by hand, by an older daemon) or
a notification lost on a connection that died without a word (until TCP
notices) then waits at most ``DESIRED_EVERY`` poll intervals (10 s at the
default ``poll_seconds`` of 1 s) instead of forever, at a tenth of the
reads. On SQLite, or while listening fails, every round reads them.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from armd.adapters.store.listen import DesiredListener, listen_desired

DESIRED_EVERY = 10
"""While notifications are heard, every this many rounds read the desired settings even unnotified (module docstring)."""


class Pacer:
    def __init__(self, poll_seconds: float, stopped: threading.Event,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.poll_seconds, self.stopped, self.clock = float(poll_seconds), stopped, clock
        self.wake = threading.Event()
        self.listener: DesiredListener | None = None
        self._due: float | None = None
        """When the next poll round is due (``clock`` seconds); ``None`` before the first wait."""
        self._news = False
        """A notification came since the desired settings were last read."""
        self._unread = 0
        """Rounds since the desired settings were last read."""

    def listen(self, store: Any, log: Any) -> None:
        """Wake on the store's notifications, where it has them."""
        if self.listener is None:
            self.listener = listen_desired(store, self._notified, log)

    def _notified(self) -> None:
        self._news = True
        self.wake.set()

    def read_desired(self) -> bool:
        """Whether this round reads the desired settings (see the module docstring); called once per round, before the
        read, so a notification heard during the read makes the next round read again."""
        self._unread += 1
        listening = self.listener is not None and self.listener.listening.is_set()
        if listening and not self._news and self._unread < DESIRED_EVERY:
            return False
        self._news, self._unread = False, 0
        return True

    def next(self) -> bool:
        """Wait for the next round; False once stopped."""
        now = self.clock()
        if self._due is None:
            self._due = now + self.poll_seconds
        self.wake.wait(max(0.0, self._due - now))
        self.wake.clear()
        now = self.clock()
        if now >= self._due:  # the poll round (not a notified one): the next is one interval on
            self._due += self.poll_seconds
            if self._due <= now:
                self._due = now + self.poll_seconds
        return not self.stopped.is_set()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
