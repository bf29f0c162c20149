"""LISTEN/NOTIFY for desired settings on the real PostgreSQL; polling on SQLite.

An application that polls every 30 s must still put a decision into force
within a couple of seconds on PostgreSQL: ``write_desired`` notifies at its
commit and the application's round runs when it hears it.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime, timezone

import structlog
from support import REPO

from armd.adapters.store.listen import listen_desired
from armd.adapters.store.sql import SqlStore
from armd.control.ports import DesiredSettings, QuerySettings

sys.path.insert(0, str(REPO / "bench"))
from simulated_agents import SimQuery, SimulatedApp  # noqa: E402

LOG = structlog.get_logger()


def now() -> datetime:
    return datetime.now(timezone.utc)


def desired(query: str, version: int, window_ms: float) -> DesiredSettings:
    return DesiredSettings(query, version, QuerySettings(0.5, 1.0, {f"{query}.w": window_ms}, None, 0.5), at=now())


def test_sqlite_has_no_notifications_so_the_application_polls(tmp_path):
    store = SqlStore.open(f"sqlite:///{tmp_path / 'armd.db'}")
    assert listen_desired(store, lambda: None, LOG) is None
    store.close()


def test_a_desired_write_is_heard_at_its_commit(postgres_database):
    store = SqlStore.open(postgres_database)
    store.upgrade()
    heard = threading.Event()
    listener = listen_desired(store, heard.set, LOG)
    try:
        assert listener is not None and listener.listening.wait(10)
        heard.clear()  # the call made once connected (for what it might have missed)
        store.write_desired([desired("q", 1, 5000.0)])
        assert heard.wait(5)
        assert listener.notified == 1
    finally:
        listener.close()
        store.close()


def test_an_application_polling_every_30_s_applies_a_decision_within_seconds(postgres_database):
    store = SqlStore.open(postgres_database)
    store.upgrade()
    app = SimulatedApp(store, "shop", [SimQuery("orders", "orders", 100.0)], poll_seconds=30.0, listen=True)
    app.register()
    app.start()
    try:
        assert app.pacer.listener is not None and app.pacer.listener.listening.wait(10)
        time.sleep(0.5)  # the round run on connecting is over
        written = time.monotonic()
        store.write_desired([desired("orders", 1, 20000.0)])
        while app.window("orders") != 20 and time.monotonic() - written < 10:
            time.sleep(0.05)
        took = time.monotonic() - written
        assert app.window("orders") == 20 and took < 3, took
    finally:
        app.stop()
        store.close()
