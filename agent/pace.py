"""When an application's next round runs: every ``poll_seconds``, and at once when the daemon writes desired settings.

Why: polling alone makes every decision wait up to a poll interval before
the application starts migrating. On PostgreSQL the daemon notifies each
write of ``desired_settings`` (``adapters/store/listen.py``) and the
round runs as soon as it is heard; on SQLite, or while listening fails,
the poll interval paces the rounds as before.
"""

from __future__ import annotations

import threading
from typing import Any

from armd.adapters.store.listen import DesiredListener, listen_desired


class Pacer:
    def __init__(self, poll_seconds: float, stopped: threading.Event) -> None:
        self.poll_seconds, self.stopped = float(poll_seconds), stopped
        self.wake = threading.Event()
        self.listener: DesiredListener | None = None

    def listen(self, store: Any, log: Any) -> None:
        """Wake on the store's notifications, where it has them."""
        if self.listener is None:
            self.listener = listen_desired(store, self.wake.set, log)

    def next(self) -> bool:
        """Wait for the next round; False once stopped."""
        self.wake.wait(self.poll_seconds)
        self.wake.clear()
        return not self.stopped.is_set()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
