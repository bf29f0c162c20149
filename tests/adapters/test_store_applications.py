"""The applications table and agent-registered queries on a real SQLite store (revision 0008)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from armd.adapters.store import applications as apps
from armd.adapters.store.errors import RecordRejected
from armd.adapters.store.sql import SqlStore
from armd.control.ports import QueryRow
from support.store import store  # noqa: F401 - the fixture

T0 = datetime(2026, 11, 24, 6, 0, tzinfo=timezone.utc)


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


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/armd.db"
    else:
        url = request.getfixturevalue("postgres_database")
    store = SqlStore.open(url)
    store.upgrade()
    yield store
    store.close()


def test_the_fleet_key_moves_exactly_when_the_governed_set_does(any_store):
    """The daemon reads the specs again only when the key moves (PostgreSQL folds the set into digests server-side)."""
    store = any_store
    apps.register_application(store, "shop", "h", 1, "apply", T0)
    apps.register_queries(store, "shop", [apps.AgentQueryRow("q1", {"plan": {}})], T0)
    first = apps.fleet_key(store)
    assert apps.fleet_key(store) == first
    apps.seen(store, "shop", T0 + timedelta(seconds=1))  # reporting is not a change of the set
    assert apps.fleet_key(store) == first
    apps.register_queries(store, "shop", [apps.AgentQueryRow("q2", {"plan": {}})], T0)
    second = apps.fleet_key(store)
    assert second != first
    store.record_admissions([("q2", "active", "fits")], [], T0)  # q2 waits for admission no more
    third = apps.fleet_key(store)
    assert third != second
    apps.register_application(store, "shop", "h", 2, "apply", T0 + timedelta(seconds=5))  # restarted
    assert apps.fleet_key(store) != third
    apps.stopped(store, "shop", T0 + timedelta(seconds=6))
    assert apps.fleet_key(store) not in (first, second, third)
