"""One contract for every Store: the in-memory fake, SQLite and PostgreSQL give back what they were given.

The controller's tests run on ``support.fakes.MemoryStore``; the daemon runs
on ``SqlStore``. This suite runs the same port calls over all three, so the
fake cannot drift from the real stores. Methods a store does not implement
yet skip on it (``needs``).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest

from support.fakes import MemoryStore

from armd.adapters.store import SqlStore
from armd.migrations.heralds import Range
from armd.migrations.heralds.record import HeraldRecord
from armd.control.ports import (ActualState, DecisionRecord, DesiredSettings, EventRecord, NodeRow, Observation, QueryRow,
                                QuerySettings, StreamRow, StreamStats)

T0 = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryStore()
        return
    url = f"sqlite:///{tmp_path / 'armd.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_database")
    sql = SqlStore.open(url, retries=0)
    sql.upgrade()
    yield sql
    sql.close()


def configured(store: Any, *queries: str) -> None:
    streams = [StreamRow("A", 64, 1, 10)]
    rows = [QueryRow(q, {"op": "window", "id": f"{q}_w", "w": 100}, {"window": [10, 100], "windows": {}, "granularity": None}, 1.0)
            for q in queries]
    nodes = [NodeRow(q, f"{q}_w", "window", [], {"w": 100}) for q in queries]
    store.sync_config(streams, rows, nodes, T0)


def status_of(store: Any, query: str) -> str:
    return store.statuses[query] if isinstance(store, MemoryStore) else store.query(query)["status"]


def settings(qos: float) -> QuerySettings:
    return QuerySettings(fw=0.5, fg=0.25, windows={"q1_w": 55.0}, granularity=2.0, qos=qos, drop_rate=0.25)


def needs(store: Any, *methods: str) -> None:
    missing = [m for m in methods if not callable(getattr(store, m, None))]
    if missing:
        pytest.skip(f"{type(store).__name__} does not implement {', '.join(missing)} yet")


def test_settings_in_force_come_back(store) -> None:
    configured(store, "q1", "q2")
    assert store.current_settings() == {}
    store.set_query_settings("q1", settings(0.75), T0)
    store.set_query_settings("q1", settings(0.5), T0 + timedelta(seconds=1))
    assert store.current_settings() == {"q1": settings(0.5)}


def test_statuses_come_back(store) -> None:
    configured(store, "q1", "q2")
    store.set_query_status("q1", "active", T0, "fits")
    store.set_query_status("q2", "rejected", T0, "too big")
    assert (status_of(store, "q1"), status_of(store, "q2")) == ("active", "rejected")


def test_admission_verdicts_and_their_events_are_taken_together_and_an_unknown_query_refuses_them(store) -> None:
    configured(store, "q1", "q2")
    events = [EventRecord(T0, "query_admitted", "info", "fits", "q1"), EventRecord(T0, "query_rejected", "warning", "too big", "q2")]
    store.record_admissions([("q1", "active", "fits"), ("q2", "rejected", "too big")], events, T0)
    assert (status_of(store, "q1"), status_of(store, "q2")) == ("active", "rejected")
    if isinstance(store, SqlStore):
        assert [(e["kind"], e["query"]) for e in reversed(store.events())] == [("query_admitted", "q1"), ("query_rejected", "q2")]
        with pytest.raises(KeyError, match="no query q3"):
            store.record_admissions([("q1", "rejected", None), ("q3", "active", None)], [], T0)
        assert status_of(store, "q1") == "active"  # nothing of a refused batch is written


def test_open_migrations_list_the_unfinished_ones_oldest_first(store) -> None:
    configured(store, "q1", "q2")
    first = store.record_migration("q1", "genmig", "running", T0, details={"live": {"state": "running"}})
    second = store.record_migration("q2", "restart", "running", T0 + timedelta(seconds=1))
    assert first != second
    rows = store.open_migrations()
    assert [(r["id"], r["query"], r["strategy"], r["state"]) for r in rows] == [
        (first, "q1", "genmig", "running"), (second, "q2", "restart", "running")]
    assert rows[0]["details"]["live"] == {"state": "running"}
    store.update_migration(first, "draining", T0 + timedelta(seconds=2))
    store.update_migration(second, "done", T0 + timedelta(seconds=2), finished=True)
    assert [(r["id"], r["state"]) for r in store.open_migrations()] == [(first, "draining")]


def test_a_migration_is_updated_by_the_id_armd_gave_it(store) -> None:
    configured(store, "q1", "q2")
    store.record_migration("q1", "genmig", "running", T0, uid="m-1")
    other = store.record_migration("q2", "genmig", "running", T0, uid="m-2")
    store.update_migration("m-1", "draining", T0 + timedelta(seconds=1), details={"t_split": 5})
    store.update_migration("m-2", "done", T0 + timedelta(seconds=2), finished=True)
    rows = store.open_migrations()
    assert [(r["query"], r["state"]) for r in rows] == [("q1", "draining")] and rows[0]["details"]["t_split"] == 5
    assert other not in [r["id"] for r in rows]


def test_records_are_taken_and_ids_given(store) -> None:
    configured(store, "q1")
    store.record_observation(Observation(T0, (StreamStats("A", 0, 1.0, 0.0, math.inf),)))
    decision = DecisionRecord(T0, "weighted-qos", "startup", True, False, True, 0.8, "fits", 1e6, 2.5, 3.0, {}, {})
    event = EventRecord(T0, "daemon_started", "info", "started")
    ids = [store.record_decision(decision), store.record_event(event), store.record_event(event)]
    assert all(isinstance(i, int) for i in ids) and ids[1] != ids[2]
    store.record_estimates(T0, [], decision_id=ids[0])
    assert sum(store.prune(T0 - timedelta(days=1)).values()) == 0


def test_desired_settings_come_back(store) -> None:
    needs(store, "write_desired", "desired_settings")
    configured(store, "q1", "q2")
    rows = [DesiredSettings("q1", 1, settings(0.75), decision_id="d-1", at=T0), DesiredSettings("q2", 3, settings(0.5), may_start=False, at=T0)]
    store.write_desired(rows)
    store.write_desired([DesiredSettings("q1", 2, settings(0.6), at=T0)])
    desired = store.desired_settings()
    assert desired["q1"].plan_version == 2 and desired["q1"].settings == settings(0.6)
    assert desired["q2"].plan_version == 3 and desired["q2"].may_start is False


def test_actual_states_come_back(store) -> None:
    needs(store, "write_actual", "actual_states")
    configured(store, "q1")
    store.write_actual(ActualState("q1", 1, settings(0.75), "migrating", migration_state="running", target_version=2, at=T0))
    store.write_actual(ActualState("q1", 2, settings(0.6), "steady", at=T0))
    [(query, state)] = store.actual_states().items()
    assert query == "q1" and state.plan_version == 2 and state.phase == "steady" and state.settings == settings(0.6)


def test_heralds_come_back_with_ids_oldest_first(store) -> None:
    needs(store, "add_herald", "heralds")
    first = HeraldRecord("A", {"region": (25, 32), "temp": (None, 100.5)}, T0, count=5000, source="cli")
    second = HeraldRecord("B", {"k": (1, 1)}, T0 + timedelta(seconds=1), seconds=30.0)
    ids = [store.add_herald(first), store.add_herald(second)]
    assert ids[0] != ids[1]
    rows = store.heralds()
    assert rows == [first, second] and [r.id for r in rows] == ids
    assert store.heralds("B") == [second] and store.heralds("C") == []
    herald = rows[0].to_herald()
    assert herald.range("region") == Range(25, 32) and herald.range("temp") == Range.below(100.5, strict=False)
    assert rows[1].to_herald(ts=10.0).lifespan.value == 30.0
