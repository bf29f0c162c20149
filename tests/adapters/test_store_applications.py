"""The applications table and agent-registered queries on a real SQLite store (revision 0008)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from armd.adapters.store import applications as apps
from armd.adapters.store.errors import RecordRejected
from armd.adapters.store.sql import SqlStore
from armd.control.ports import QueryRow

T0 = datetime(2026, 11, 24, 6, 0, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path):
    store = SqlStore.open(f"sqlite:///{tmp_path}/armd.db")
    store.upgrade()
    yield store
    store.close()


def test_applications_register_their_queries_and_the_configuration_sync_leaves_them_alone(store):
    apps.register_application(store, "shop", "host-a", 41, "apply", T0)
    apps.register_queries(store, "shop", [apps.AgentQueryRow("clicks", {"plan": None}, weight=2.0)], T0)
    store.sync_config([], [QueryRow("configured", {}, {}, 1.0)], [], T0)  # the daemon's own queries
    assert apps.queries_of(store, "shop") == {"clicks": {"plan": None, "status": "pending", "status_reason": None}}
    assert store.query("configured")["status"] == "pending"
    with pytest.raises(RecordRejected, match="already registered by application 'shop'"):
        apps.register_queries(store, "other", [apps.AgentQueryRow("clicks", {})], T0)
    with pytest.raises(RecordRejected, match="already registered by the daemon's configuration"):
        apps.register_queries(store, "shop", [apps.AgentQueryRow("configured", {})], T0)
    with pytest.raises(ValueError, match="mode must be one of apply, recommend"):
        apps.register_application(store, "x", "h", 1, "dry", T0)


def test_silent_applications_are_marked_gone_and_their_queries_leave(store):
    for app in ("alive", "silent"):
        apps.register_application(store, app, "h", 1, "apply", T0)
        apps.register_queries(store, app, [apps.AgentQueryRow(f"{app}_q", {})], T0)
    apps.seen(store, "alive", T0 + timedelta(seconds=50))
    assert apps.mark_gone(store, 30, T0 + timedelta(seconds=60)) == ["silent"]
    assert {a.app: a.status for a in apps.applications(store)} == {"alive": "running", "silent": "gone"}
    assert apps.queries_of(store, "silent")["silent_q"]["status"] == "removed"
    assert apps.queries_of(store, "alive")["alive_q"]["status"] == "pending"
    # It comes back: registered again, its query counts again.
    apps.register_application(store, "silent", "h", 2, "apply", T0 + timedelta(seconds=70))
    apps.register_queries(store, "silent", [apps.AgentQueryRow("silent_q", {})], T0 + timedelta(seconds=70))
    assert apps.queries_of(store, "silent")["silent_q"]["status"] == "pending"


def test_the_revision_goes_down_and_up_again(store):
    from alembic import command

    config = SqlStore._alembic_config()
    with store._engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0007")
    assert store.schema_revision() == "0007"
    store.upgrade()
    assert store.schema_revision() == SqlStore.head_revision()
