"""When an application's next round runs: every ``poll_seconds``, and at once when the daemon writes desired settings.

Why: polling alone makes every decision wait up to a poll interval before
the application starts migrating. On PostgreSQL the daemon notifies each
write of ``desired_settings`` (``adapters/store/listen.py``) and the
round runs as soon as it is heard; on SQLite, or while listening fails,
the poll interval paces the rounds as before.

The poll rounds keep a fixed cadence (one every ``poll_seconds`` from the
first, not ``poll_seconds`` after the last one ended): the application
reports every ``poll_seconds`` however long a round takes, as the daemon's
statistics expect. A round that overran is followed at once; one that ran
past a whole interval starts the cadence again from now (no burst of rounds
to catch up). A notified round comes in between and leaves the cadence as it
is.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from armd.adapters.store.listen import DesiredListener, listen_desired


class Pacer:
    def __init__(self, poll_seconds: float, stopped: threading.Event,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.poll_seconds, self.stopped, self.clock = float(poll_seconds), stopped, clock
        self.wake = threading.Event()
        self.listener: DesiredListener | None = None
        self._due: float | None = None
        """When the next poll round is due (``clock`` seconds); ``None`` before the first wait."""

    def listen(self, store: Any, log: Any) -> None:
        """Wake on the store's notifications, where it has them."""
        if self.listener is None:
            self.listener = listen_desired(store, self.wake.set, log)

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
