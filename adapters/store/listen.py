"""PostgreSQL ``LISTEN/NOTIFY`` for desired settings: an application hears of a decision at once instead of at its next poll.

Why: an ``armd.agent`` application reads ``desired_settings`` every
``poll_seconds``; a migration forced by a burst should not wait for that.
``SqlStore.write_desired`` sends ``pg_notify(CHANNEL, queries)`` in the
transaction that writes the rows (delivered at its commit, never before
the rows can be read). ``listen_desired`` keeps one connection of its own
``LISTEN``ing on a thread and calls ``on_notify`` for each notification —
and once after each (re)connection, for anything missed while it was away.
SQLite has no notifications: ``listen_desired`` returns ``None`` and the
application polls.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from sqlalchemy.engine import URL

CHANNEL = "armd_desired_settings"
RETRY_SECONDS = 1.0
WAIT_SECONDS = 0.5
"""How long one wait for notifications lasts before the thread looks whether it should stop."""


class DesiredListener:
    def __init__(self, conninfo: str, on_notify: Callable[[], None], log: Any) -> None:
        self.conninfo, self.on_notify, self.log = conninfo, on_notify, log
        self.listening = threading.Event()
        self.notified = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="armd-listen-desired", daemon=True)

    def start(self) -> "DesiredListener":
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        import psycopg

        said = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    said = False
                    self.on_notify()  # what was written while nobody listened
                    while not self._stop.is_set():
                        for _notification in conn.notifies(timeout=WAIT_SECONDS):
                            self.notified += 1
                            self.on_notify()
            except Exception as exc:  # noqa: BLE001 - the application polls meanwhile; listening is tried again
                self.listening.clear()
                if not said:
                    self.log.warning("listen_failed", channel=CHANNEL, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                                     message="desired settings are polled until listening works again")
                    said = True
                self._stop.wait(RETRY_SECONDS)


def conninfo(url: URL) -> str | None:
    """A libpq URI for a PostgreSQL SQLAlchemy URL; ``None`` for any other database."""
    if url.get_backend_name() != "postgresql":
        return None
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def listen_desired(store: Any, on_notify: Callable[[], None], log: Any) -> DesiredListener | None:
    """A started listener on ``store``'s database, or ``None`` when the store cannot notify (SQLite)."""
    info = conninfo(store.engine_url)
    return None if info is None else DesiredListener(info, on_notify, log).start()
