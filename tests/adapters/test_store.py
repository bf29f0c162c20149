"""Contract tests of the SQL metadata store, on SQLite and on real PostgreSQL.

Every test runs against both databases through the ``store_url`` fixture
(tests/conftest.py); what a person would check with plain SQL (the views)
is checked with plain SQL.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from support.netproxy import Proxy

from armd.adapters.store import SchemaOutdated, SqlStore, StoreError, StoreUnavailable, redact_url
from armd.control.ports import (
    ActualState,
    BatchProgress,
    DecisionRecord,
    DesiredSettings,
    EstimateRow,
    EventRecord,
    NodeRow,
    Observation,
    QueryMetrics,
    QueryRow,
    QuerySettings,
    StreamRow,
    StreamStats,
)

T0 = datetime(2025, 11, 22, 12, 0, tzinfo=timezone.utc)
TABLES = {"streams", "queries", "plan_nodes", "observations", "batches", "estimates", "decisions", "migrations", "events",
          "leases", "desired_settings", "actual_states", "heralds"}
VIEWS = {"query_overview", "recent_decisions", "open_migrations", "recent_alerts"}


def upgrade(url: str) -> None:
    """Bring the database at ``url`` to the head revision, closing the connection (a leaked one warns later, elsewhere)."""
    store = SqlStore.open(url, retries=0)
    try:
        store.upgrade()
    finally:
        store.close()


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    store = SqlStore.open(store_url, retries=0)
    store.upgrade()
    yield store
    store.close()


def plain_sql(url: str, sql: str, **params: Any) -> list[dict[str, Any]]:
    """Run ``sql`` the way a person would, outside armd's models."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(text(sql), params)]
    finally:
        engine.dispose()


def config(*queries: str) -> tuple[list[StreamRow], list[QueryRow], list[NodeRow]]:
    streams = [StreamRow("A", size_bytes=64, g=1, configured_d=10), StreamRow("B", size_bytes=32, g=1, configured_d=20)]
    rows = [
        QueryRow(q, spec={"op": "window", "id": f"{q}_w", "w": 100}, qos={"window": [10, 100], "windows": {}, "granularity": None}, weight=1.0)
        for q in queries
    ]
    nodes = [n for q in queries for n in (NodeRow(q, f"{q}_src", "source", [], {"stream": "A"}), NodeRow(q, f"{q}_w", "window", [f"{q}_src"], {"w": 100}))]
    return streams, rows, nodes


def settings(qos: float = 0.75) -> QuerySettings:
    return QuerySettings(fw=0.5, fg=0.25, windows={"q1_w": 55.0}, granularity=2.0, qos=qos)


def decision(at: datetime, **changes: Any) -> DecisionRecord:
    values: dict[str, Any] = dict(
        at=at, policy="weighted-qos", trigger="startup", feasible=True, dry_run=False, applied=True,
        weighted_qos=0.8, reason="fits the budget", estimated_memory_bytes=1e6, estimated_cpu=2.5, duration_ms=3.2,
        inputs={"bounds": {"memory_bytes": 2e6}, "d": {"A": math.inf}}, outputs={"q1": {"fw": 0.5}},
    )
    values.update(changes)
    return DecisionRecord(**values)


# ------------------------------------------------------------------ schema


def test_upgrade_from_empty_to_head(store_url: str) -> None:
    store = SqlStore.open(store_url, retries=0)
    try:
        assert store.schema_revision() is None
        store.upgrade()
        assert store.schema_revision() == SqlStore.head_revision()
        store.upgrade()  # nothing to do the second time
        store.require_current_schema()
    finally:
        store.close()
    engine = create_engine(store_url)
    try:
        found = inspect(engine)
        assert TABLES <= set(found.get_table_names())
        assert VIEWS <= set(found.get_view_names())
    finally:
        engine.dispose()


def test_upgrading_from_0005_gives_stored_decisions_their_trigger_code(store_url: str) -> None:
    from alembic import command

    store = SqlStore.open(store_url, retries=0)
    try:
        def to_0005(session: Any) -> None:
            config = SqlStore._alembic_config()
            config.attributes["connection"] = session.connection()
            command.upgrade(config, "0005")

        store._call(to_0005)
        engine = create_engine(store_url)
        try:
            with engine.begin() as conn:
                for trigger in ("periodic", "join order of 'q1' changed", "something new"):
                    conn.execute(text("INSERT INTO decisions (at, policy, trigger, feasible, dry_run, applied, weighted_qos, reason, "
                                      "estimated_memory_bytes, estimated_cpu, duration_ms, inputs, outputs) VALUES (:at, 'p', :t, "
                                      "true, false, true, 1, 'r', 1, 1, 1, '{}', '{}')"), {"at": T0, "t": trigger})
        finally:
            engine.dispose()
        store.upgrade()
    finally:
        store.close()
    assert plain_sql(store_url, "SELECT trigger_code FROM decisions ORDER BY id") == [
        {"trigger_code": "periodic"}, {"trigger_code": "join_order_proposed"}, {"trigger_code": "other"}]


def test_require_current_schema_names_the_upgrade_command(store_url: str) -> None:
    store = SqlStore.open(store_url, retries=0)
    try:
        with pytest.raises(SchemaOutdated) as caught:
            store.require_current_schema()
        with pytest.raises(SchemaOutdated, match="run `armd db upgrade --config FILE`"):
            store.status()  # a missing table is a schema problem, not a driver traceback
    finally:
        store.close()
    message = str(caught.value)
    assert "run `armd db upgrade --config FILE`" in message
    assert SqlStore.head_revision() in message and "none" in message
    assert isinstance(caught.value, StoreError)


# ------------------------------------------------------------ configuration


def test_sync_config_upserts_and_marks_removed_queries(store: SqlStore, store_url: str) -> None:
    store.sync_config(*config("q1", "q2"), at=T0)
    q1 = store.query("q1")
    assert q1 is not None and q1["status"] == "pending" and q1["created_at"] == T0.isoformat()
    assert [n["node_id"] for n in q1["plan_nodes"]] == ["q1_src", "q1_w"]
    assert q1["plan_nodes"][1] == {"node_id": "q1_w", "op": "window", "inputs": ["q1_src"], "params": {"w": 100}}

    store.set_query_status("q1", "active", T0)
    streams, queries, nodes = config("q1")
    queries = [QueryRow("q1", spec={"op": "window", "w": 200}, qos=queries[0].qos, weight=3.0)]
    nodes = [NodeRow("q1", "q1_src", "source", [], {"stream": "B"})]
    later = T0 + timedelta(minutes=5)
    store.sync_config(streams[:1], queries, nodes, at=later)

    q1 = store.query("q1")
    assert q1 is not None
    assert (q1["status"], q1["weight"], q1["spec"]) == ("active", 3.0, {"op": "window", "w": 200})
    assert q1["created_at"] == T0.isoformat() and q1["updated_at"] == later.isoformat()
    assert q1["plan_nodes"] == [{"node_id": "q1_src", "op": "source", "inputs": [], "params": {"stream": "B"}}]
    q2 = store.query("q2")
    assert q2 is not None and q2["status"] == "removed" and q2["status_reason"]
    assert store.query("nope") is None
    assert [r["name"] for r in plain_sql(store_url, "SELECT name FROM streams")] == ["A"]

    store.set_query_settings("q2", settings(), later)
    store.sync_config(*config("q1", "q2"), at=later)  # q2 comes back as a new query, without settings
    q2 = store.query("q2")
    assert q2 is not None and q2["status"] == "pending"
    assert plain_sql(store_url, "SELECT name FROM queries WHERE settings IS NULL ORDER BY name") == [{"name": "q1"}, {"name": "q2"}]


def test_sync_config_refuses_nodes_of_unknown_queries(store: SqlStore) -> None:
    streams, queries, nodes = config("q1")
    with pytest.raises(ValueError, match="q9"):
        store.sync_config(streams, queries, nodes + [NodeRow("q9", "x", "source", [], {})], at=T0)


def test_query_status_and_settings_round_trip(store: SqlStore) -> None:
    store.sync_config(*config("q1", "q2"), at=T0)
    assert store.current_settings() == {}
    store.set_query_settings("q1", settings(), T0)
    store.set_query_status("q1", "active", T0)
    store.set_query_status("q2", "rejected", T0, reason="does not fit the memory bound")
    assert store.current_settings() == {"q1": settings()}
    no_knob = QuerySettings(fw=1.0, fg=0.0, windows={}, granularity=None, qos=1.0)
    store.set_query_settings("q2", no_knob, T0)
    assert store.current_settings() == {"q1": settings(), "q2": no_knob}
    q2 = store.query("q2")
    assert q2 is not None and (q2["status"], q2["status_reason"]) == ("rejected", "does not fit the memory bound")

    with pytest.raises(ValueError, match="pending, active, rejected, failed, removed"):
        store.set_query_status("q1", "running", T0)
    with pytest.raises(KeyError, match="q9"):
        store.set_query_settings("q9", settings(), T0)
    with pytest.raises(ValueError, match="naive"):
        store.set_query_status("q1", "active", T0.replace(tzinfo=None))

    store.sync_config(*config("q2"), at=T0)  # removed queries have no settings in force
    assert set(store.current_settings()) == {"q2"}


# ------------------------------------------------------------------ history


def test_desired_settings_are_upserted_per_query_and_read_back(store: SqlStore, store_url: str) -> None:
    assert store.desired_settings() == {}
    first = DesiredSettings("q1", 1, settings(), join_order=["A", ["B", "C"]], may_start=False, decision_id="7", at=T0)
    other = DesiredSettings("q2", 3, settings(0.5), recommend_only=True, at=T0)
    store.write_desired([first, other])
    assert store.desired_settings() == {"q1": first, "q2": other}
    newer = DesiredSettings("q1", 2, settings(0.9), at=T0 + timedelta(seconds=5))
    store.write_desired([newer])  # q2 keeps its row
    assert store.desired_settings() == {"q1": newer, "q2": other}
    assert plain_sql(store_url, "SELECT query, plan_version FROM desired_settings ORDER BY query") == [
        {"query": "q1", "plan_version": 2}, {"query": "q2", "plan_version": 3}]


def test_actual_states_are_upserted_per_query_and_read_back(store: SqlStore, store_url: str) -> None:
    assert store.actual_states() == {}
    steady = ActualState("q1", 2, settings(), "steady", join_order=["A", "B"], at=T0)
    waiting = ActualState("q2", 0, None, "retrying", target_version=1, attempts=3, error="cluster busy",
                          retry_at=T0 + timedelta(seconds=8), at=T0)
    store.write_actual(steady)
    store.write_actual(waiting)
    assert store.actual_states() == {"q1": steady, "q2": waiting}
    migrating = ActualState("q1", 3, settings(0.6), "migrating", migration_state="draining", target_version=3,
                            extra_state_bytes=1234.5, at=T0 + timedelta(seconds=9))
    store.write_actual(migrating)
    assert store.actual_states()["q1"] == migrating
    assert plain_sql(store_url, "SELECT query, phase, attempts FROM actual_states ORDER BY query") == [
        {"query": "q1", "phase": "migrating", "attempts": 0}, {"query": "q2", "phase": "retrying", "attempts": 3}]
    with pytest.raises(ValueError, match="steady, migrating, retrying, failed"):
        store.write_actual(ActualState("q1", 3, None, "sleeping"))


def test_records_show_in_query_overview(store: SqlStore, store_url: str) -> None:
    store.sync_config(*config("q1", "q2"), at=T0)
    store.set_query_settings("q1", settings(), T0)
    store.set_query_status("q1", "active", T0)
    store.record_observation(
        Observation(
            at=T0,
            streams=[StreamStats("A", rows=0, interval_seconds=10, rate_per_second=0, d=math.inf), StreamStats("B", 50, 10, 5, 2.0, l=1.0, g=1.0)],
            queries=[QueryMetrics("q1", state_rows=100, state_bytes=6400, selectivities={"q1_w": 0.5},
                                  pair_selectivities={"a,b": 0.2})],
        )
    )
    store.record_observation(Observation(at=T0 + timedelta(seconds=10), streams=[], queries=[QueryMetrics("q1", state_rows=120, state_bytes=7680)]))
    decision_id = store.record_decision(decision(T0))
    store.record_estimates(T0, [EstimateRow("q1", 5000.0, 1.5), EstimateRow("q2", 100.0, 0.1), EstimateRow(None, 5100.0, 1.6)], decision_id)
    store.record_estimates(T0 + timedelta(seconds=1), [EstimateRow("q1", 6000.0, 1.7)])

    rows = {r["name"]: r for r in plain_sql(store_url, "SELECT * FROM query_overview")}
    assert set(rows) == {"q1", "q2"}
    q1 = rows["q1"]
    assert (q1["status"], q1["estimated_memory_bytes"], q1["estimated_cpu"]) == ("active", 6000.0, 1.7)
    assert (q1["measured_state_bytes"], q1["measured_state_rows"]) == (7680, 120)
    assert q1["qos_fraction"] == 0.75
    assert rows["q2"]["measured_state_bytes"] is None and rows["q2"]["estimated_memory_bytes"] == 100.0

    [stream_a] = plain_sql(store_url, "SELECT last_d, last_rate_per_second FROM streams WHERE name = 'A'")
    assert stream_a == {"last_d": math.inf, "last_rate_per_second": 0}
    [nulls] = plain_sql(store_url, "SELECT count(*) AS n FROM observations WHERE stream IS NOT NULL AND selectivities IS NULL")
    assert nulls["n"] == 2
    pairs = [r["pair_selectivities"] for r in plain_sql(store_url, "SELECT pair_selectivities FROM observations "
                                                                    "WHERE query = 'q1' ORDER BY at")]
    assert [json.loads(p) if isinstance(p, str) else p for p in pairs] == [{"a,b": 0.2}, None]
    [linked] = plain_sql(store_url, "SELECT count(*) AS n FROM estimates WHERE decision_id = :id", id=decision_id)
    assert linked["n"] == 3


def test_recent_decisions_view_holds_the_last_hour(store: SqlStore, store_url: str) -> None:
    now = datetime.now(timezone.utc)
    recent = store.record_decision(decision(now))
    store.record_decision(decision(now - timedelta(hours=2), policy="paper-bisection"))
    rows = plain_sql(store_url, "SELECT id, policy FROM recent_decisions")
    assert rows == [{"id": recent, "policy": "weighted-qos"}]


def test_migrations_and_alerts_views(store: SqlStore, store_url: str) -> None:
    now = datetime.now(timezone.utc)
    running = store.record_migration("q1", "genmig", "parallel", now, split_time=now + timedelta(seconds=30), details={"old": 1})
    done = store.record_migration("q2", "jisc", "started", now)
    store.update_migration(running, "old_plan_draining", now, details={"new": 2})
    store.update_migration(done, "finished", now + timedelta(seconds=5), finished=True, lost=0, duplicated=0, differing=0)

    [open_row] = plain_sql(store_url, "SELECT id, query, state FROM open_migrations")
    assert open_row == {"id": running, "query": "q1", "state": "old_plan_draining"}
    status = store.status()
    assert [(m["id"], m["details"]) for m in status["migrations"]] == [(running, {"old": 1, "new": 2})]
    assert status["migrations"][0]["split_time"] == (now + timedelta(seconds=30)).isoformat()
    # What a restarted daemon reads back to resume: the unfinished ones with their whole details.
    assert [(m["id"], m["query"], m["state"], m["details"]) for m in store.open_migrations()] == [
        (running, "q1", "old_plan_draining", {"old": 1, "new": 2})]
    with pytest.raises(KeyError):
        store.update_migration(999_999, "finished", now)

    store.record_event(EventRecord(now, "query_failed", "error", "q1 stopped", query="q1", details={"attempt": 2}))
    store.record_event(EventRecord(now, "decision", "info", "nothing to change"))
    store.record_event(EventRecord(now - timedelta(days=2), "query_rejected", "warning", "old", query="q1"))
    alerts = plain_sql(store_url, "SELECT kind, query FROM recent_alerts")
    assert alerts == [{"kind": "query_failed", "query": "q1"}]
    with pytest.raises(ValueError, match="info, warning, error"):
        store.record_event(EventRecord(now, "x", "fatal", "bad severity"))


def test_series_gives_the_time_series_of_the_plots_oldest_first(store: SqlStore) -> None:
    store.sync_config(*config("q1", "q2"), at=T0)
    for i, (b1, b2) in enumerate([(100, 200), (150, 250), (300, 50)]):
        at = T0 + timedelta(seconds=10 * i)
        store.record_observation(Observation(at, [StreamStats("A", 5, 10, 0.5, 2.0)], [QueryMetrics("q1", 1, b1), QueryMetrics("q2", 1, b2)]))
        store.record_estimates(at, [EstimateRow("q1", 120.0 + i, 1.0), EstimateRow(None, 400.0 + i, 2.0)])
    decision_id = store.record_decision(decision(T0 + timedelta(seconds=5), trigger="rate of A moved 40%"))
    store.record_estimates(T0 + timedelta(seconds=5), [EstimateRow(None, 1.0, 1.0)], decision_id)  # a decision's: not in force
    migration = store.record_migration("q1", "direct", "running", T0 + timedelta(seconds=6), details={"new": {"qos": 0.6}})
    store.update_migration(migration, "done", T0 + timedelta(seconds=7), finished=True)

    series = store.series()
    assert [(r["query"], r["state_bytes"]) for r in series["observations"]] == [
        ("q1", 100), ("q2", 200), ("q1", 150), ("q2", 250), ("q1", 300), ("q2", 50)]
    assert [r["at"] for r in series["observations"]][::2] == [T0, T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)]
    assert [(r["query"], r["memory_bytes"]) for r in series["estimates"]] == [
        ("q1", 120.0), (None, 400.0), ("q1", 121.0), (None, 401.0), ("q1", 122.0), (None, 402.0)]
    [d] = series["decisions"]
    assert (d["id"], d["at"], d["trigger"], d["bounds"]) == (decision_id, T0 + timedelta(seconds=5), "rate of A moved 40%", {"memory_bytes": 2e6})
    [mg] = series["migrations"]
    assert (mg["query"], mg["state"], mg["qos"], mg["finished_at"]) == ("q1", "done", 0.6, T0 + timedelta(seconds=7))

    later = store.series(since=T0 + timedelta(seconds=10))
    assert len(later["observations"]) == 4 and len(later["estimates"]) == 4
    assert later["decisions"] == [] and later["migrations"] == []


def test_prune_deletes_only_older_observations(store: SqlStore, store_url: str) -> None:
    for minutes in (0, 10, 20):
        store.record_observation(Observation(at=T0 + timedelta(minutes=minutes), streams=[StreamStats("A", 1, 1, 1, 1)], queries=[QueryMetrics("q1", 1, 1)]))
    assert store.prune(T0 + timedelta(minutes=10))["observations"] == 2
    remaining = plain_sql(store_url, "SELECT count(*) AS n FROM observations")
    assert remaining == [{"n": 4}]
    assert store.prune(T0)["observations"] == 0


def test_retention_covers_every_growing_table_and_keeps_the_latest_decision_and_open_migrations(store: SqlStore, store_url: str) -> None:
    def decision(at: datetime, trigger: str) -> int:
        return store.record_decision(DecisionRecord(at, "weighted-qos", trigger, True, False, True, 0.8, "fits", 1e6, 2.5, 3.0, {}, {}))

    old, new = T0, T0 + timedelta(days=10)
    first, second, latest = decision(old, "periodic"), decision(old, "rate of 1 stream(s) moved past the threshold: A=2"), \
        decision(old + timedelta(hours=1), "bounds changed")
    store.record_estimates(old, [EstimateRow("q1", 10.0, 1.0)], decision_id=first)
    store.record_estimates(new, [EstimateRow("q1", 20.0, 2.0)], decision_id=second)  # a young estimate of an old decision
    store.record_event(EventRecord(old, "query_rejected", "warning", "old"))
    store.record_event(EventRecord(new, "query_rejected", "warning", "new"))
    done = store.record_migration("q1", "genmig", "running", old)
    store.update_migration(done, "done", old, finished=True)
    store.record_migration("q1", "genmig", "running", old)  # still open: kept however old
    assert plain_sql(store_url, "SELECT trigger_code FROM decisions ORDER BY id") == [
        {"trigger_code": "periodic"}, {"trigger_code": "rate_drift"}, {"trigger_code": "bounds_changed"}]

    removed = store.prune(new - timedelta(days=1), history_older_than=new - timedelta(days=1))
    assert removed == {"observations": 0, "batches": 0, "estimates": 1, "events": 1, "migrations": 1, "decisions": 2}
    assert plain_sql(store_url, "SELECT id FROM decisions") == [{"id": latest}]
    assert plain_sql(store_url, "SELECT memory_bytes, decision_id FROM estimates") == [{"memory_bytes": 20.0, "decision_id": None}]
    assert [r["message"] for r in plain_sql(store_url, "SELECT message FROM events")] == ["new"]
    assert plain_sql(store_url, "SELECT state FROM migrations") == [{"state": "running"}]


def test_the_cli_lookups_have_indexes(store: SqlStore, store_url: str) -> None:
    engine = create_engine(store_url)
    try:
        indexes = {name: [i["column_names"] for i in inspect(engine).get_indexes(name)] for name in ("estimates", "decisions")}
    finally:
        engine.dispose()
    assert ["decision_id"] in indexes["estimates"] and ["trigger_code"] in indexes["decisions"]


def test_engine_batches_are_recorded_and_pruned(store: SqlStore, store_url: str) -> None:
    operators = [{"name": "stateStoreSave", "rows_total": 40, "rows_updated": 3, "memory_bytes": 9000,
                  "rows_dropped_by_watermark": 1, "custom": {"numRemovedStateRows": 2}}]
    batches = [
        BatchProgress("q1", "run-a", batch, T0 + timedelta(seconds=batch), input_rows=10 * batch, batch_ms=120,
                      durations_ms={"addBatch": 80, "triggerExecution": 120}, event_min=T0, event_max=T0 + timedelta(seconds=batch),
                      watermark=T0 if batch else None, state_rows=40, state_bytes=9000, rows_dropped_by_watermark=1,
                      operators=operators, plan_version=3)
        for batch in (0, 1)
    ]
    store.record_observation(Observation(at=T0 + timedelta(seconds=2), streams=[], batches=batches))
    rows = plain_sql(store_url, "SELECT query, run_id, plan_version, batch_id, input_rows, batch_ms, state_rows, state_bytes, "
                                "rows_dropped_by_watermark, durations_ms, operators, watermark FROM batches ORDER BY batch_id")
    assert [(r["query"], r["run_id"], r["plan_version"], r["batch_id"], r["input_rows"]) for r in rows] == [
        ("q1", "run-a", 3, 0, 0), ("q1", "run-a", 3, 1, 10)]
    assert (rows[1]["state_rows"], rows[1]["state_bytes"], rows[1]["rows_dropped_by_watermark"]) == (40, 9000, 1)
    as_json = [json.loads(v) if isinstance(v, str) else v for v in (rows[1]["durations_ms"], rows[1]["operators"])]
    assert as_json == [{"addBatch": 80, "triggerExecution": 120}, operators]
    assert rows[0]["watermark"] is None and rows[1]["watermark"] is not None
    assert store.prune(T0 + timedelta(seconds=1))["batches"] == 1
    assert plain_sql(store_url, "SELECT batch_id FROM batches") == [{"batch_id": 1}]


# -------------------------------------------------------------------- reads


def test_status_decisions_and_events_are_plain_json(store: SqlStore) -> None:
    empty = store.status()
    assert empty == {
        "queries": [],
        "total": {"estimated_memory_bytes": None, "estimated_cpu": None, "estimated_at": None, "measured_state_bytes": None},
        "last_decision": None,
        "migrations": [],
    }
    assert store.last_decision() is None and store.decisions() == [] and store.events() == []

    store.sync_config(*config("q1", "q2"), at=T0)
    store.set_query_settings("q1", settings(), T0)
    store.record_observation(Observation(at=T0, streams=[], queries=[QueryMetrics("q1", 10, 640), QueryMetrics("q2", 1, 64)]))
    first = store.record_decision(decision(T0))
    second = store.record_decision(decision(T0 + timedelta(minutes=1), feasible=False, applied=False, reason="over budget"))
    store.record_estimates(T0 + timedelta(minutes=1), [EstimateRow("q1", 10.0, 1.0), EstimateRow(None, 12.0, 1.5)], second)
    store.record_event(EventRecord(T0, "query_rejected", "warning", "q2 does not fit", query="q2"))
    store.record_event(EventRecord(T0 + timedelta(minutes=2), "config_reloaded", "info", "ok"))

    status = store.status()
    json.dumps(status, allow_nan=False)
    assert [q["name"] for q in status["queries"]] == ["q1", "q2"]
    q1 = status["queries"][0]
    assert set(q1) == {
        "name", "status", "status_reason", "weight", "settings", "qos_fraction", "estimated_memory_bytes",
        "estimated_cpu", "measured_state_bytes", "measured_state_rows", "settings_changed_at",
    }
    assert q1["settings"] == settings().as_json() and q1["settings_changed_at"] == T0.isoformat()
    assert (q1["estimated_memory_bytes"], q1["measured_state_bytes"]) == (10.0, 640)
    assert status["total"] == {
        "estimated_memory_bytes": 12.0, "estimated_cpu": 1.5,
        "estimated_at": (T0 + timedelta(minutes=1)).isoformat(), "measured_state_bytes": 704,
    }
    assert status["last_decision"]["id"] == second and status["last_decision"] == store.last_decision()

    decisions = store.decisions()
    json.dumps(decisions, allow_nan=False)
    assert [d["id"] for d in decisions] == [second, first]
    assert decisions[1]["inputs"] == {"bounds": {"memory_bytes": 2e6}, "d": {"A": None}}  # inf has no JSON spelling
    assert decisions[0]["at"] == (T0 + timedelta(minutes=1)).isoformat() and decisions[0]["feasible"] is False
    assert [d["id"] for d in store.decisions(since=T0 + timedelta(seconds=30))] == [second]
    assert [d["id"] for d in store.decisions(limit=1)] == [second]

    events = store.events()
    assert [e["kind"] for e in events] == ["config_reloaded", "query_rejected"]
    assert set(events[0]) == {"id", "at", "kind", "severity", "query", "message", "details"}
    assert [e["kind"] for e in store.events(since=T0 + timedelta(minutes=1))] == ["config_reloaded"]
    assert [e["kind"] for e in store.events(query="q2")] == ["query_rejected"]


# ----------------------------------------------------------- availability


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_postgres_raises_store_unavailable_after_retries() -> None:
    url = f"postgresql+psycopg://armd:s3cret-pw@127.0.0.1:{closed_port()}/armd"
    retries: list[tuple[int, float, str]] = []
    with pytest.raises(StoreUnavailable) as caught:
        SqlStore.open(url, retries=3, backoff_seconds=0.01, on_retry=lambda *args: retries.append(args))
    message = str(caught.value)
    assert [(attempt, delay) for attempt, delay, _ in retries] == [(1, 0.01), (2, 0.02), (3, 0.04)]
    assert "s3cret-pw" not in message and all("s3cret-pw" not in m for _, _, m in retries)
    assert "armd:***@127.0.0.1" in message and "4 attempts" in message
    assert "\n" not in message and caught.value.__cause__ is None
    with pytest.raises(StoreUnavailable, match="gave up after 1 attempt"):
        SqlStore.open(url.replace("+psycopg", ""), retries=0)  # the bare scheme uses psycopg 3 too


def test_bad_urls_are_store_errors() -> None:
    with pytest.raises(StoreError, match="not a database URL"):
        SqlStore.open("armd.db")
    with pytest.raises(StoreError, match="sqlite or postgresql"):
        SqlStore.open("mysql://u:pw@localhost/db")


def test_redact_url() -> None:
    assert redact_url("postgresql+psycopg://u:p%40ss@h:5432/db") == "postgresql+psycopg://u:***@h:5432/db"
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"


def test_losing_the_database_later_raises_store_unavailable(store_url: str, tmp_path: Path) -> None:
    if store_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'gone' / 'armd.db'}"
        (tmp_path / "gone").mkdir()
        store = SqlStore.open(url, retries=0)
        store.upgrade()
        store.close()  # drop pooled connections so the next call must open the file again
        shutil.rmtree(tmp_path / "gone")
    else:
        real = make_url(store_url)
        proxy = Proxy((real.host or "127.0.0.1", real.port or 5432))
        store = SqlStore.open(real.set(port=proxy.port).render_as_string(hide_password=False), retries=0)
        store.upgrade()
        proxy.cut()
    try:
        with pytest.raises(StoreUnavailable, match="unavailable|was deleted") as caught:
            store.record_event(EventRecord(T0, "x", "info", "lost"))
        password = make_url(store_url).password
        assert not password or f":{password}@" not in str(caught.value)
        with pytest.raises(StoreUnavailable):
            store.status()
    finally:
        store.close()


# ------------------------------------------------------ failures, classified


def test_a_number_out_of_range_is_a_rejected_record_and_the_store_goes_on(store: SqlStore) -> None:
    from armd.adapters.store import RecordRejected
    from armd.control.errors import PermanentError

    huge = Observation(T0, (StreamStats("A", 2**64, 1.0, 1.0, 1.0),))
    with pytest.raises(RecordRejected) as caught:
        store.record_observation(huge)
    assert isinstance(caught.value, PermanentError) and "rejected the record" in str(caught.value)
    store.record_observation(Observation(T0, (StreamStats("A", 5, 1.0, 5.0, 200.0),)))  # the next one is taken


def test_a_renamed_table_is_unavailable_until_it_is_back(store: SqlStore, store_url: str) -> None:
    from armd.adapters.store import TableMissing

    engine = create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE events RENAME TO events_away"))
        with pytest.raises(TableMissing) as caught:
            store.record_event(EventRecord(T0, "x", "info", "while away"))
        assert isinstance(caught.value, StoreUnavailable) and isinstance(caught.value, SchemaOutdated)
        with engine.begin() as conn:
            conn.execute(text("ALTER TABLE events_away RENAME TO events"))
        store.record_event(EventRecord(T0, "x", "info", "back"))
    finally:
        engine.dispose()


def test_a_lock_held_past_the_call_timeout_is_unavailable_within_it(store_url: str) -> None:
    import time

    upgrade(store_url)
    store = SqlStore.open(store_url, retries=0, call_timeout_seconds=0.5)
    engine = create_engine(store_url)
    try:
        with engine.connect() as conn:
            if store_url.startswith("sqlite"):
                conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock on the file
            else:
                conn.execute(text("LOCK TABLE events IN ACCESS EXCLUSIVE MODE"))
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                store.record_event(EventRecord(T0, "x", "info", "blocked"))
            assert time.monotonic() - started < 2.0
            conn.rollback()
        store.record_event(EventRecord(T0, "x", "info", "free again"))
    finally:
        engine.dispose()
        store.close()


# ------------------------------------------------------------------ lease


def test_the_lease_goes_to_one_holder_until_it_lapses_or_is_released(store: SqlStore, store_url: str) -> None:
    first = store.acquire_lease("h1:1:a", T0, 15)
    assert first.ours and first.expires_at == T0 + timedelta(seconds=15)
    second = store.acquire_lease("h2:2:b", T0 + timedelta(seconds=5), 15)
    assert not second.ours and second.holder == "h1:1:a" and (second.host, second.pid) == ("h1", "1")
    assert "armd on h1 (pid 1) until" in second.describe()
    assert store.renew_lease("h1:1:a", T0 + timedelta(seconds=10), 15).expires_at == T0 + timedelta(seconds=25)
    assert not store.acquire_lease("h2:2:b", T0 + timedelta(seconds=20), 15).ours  # renewed: still h1's
    taken = store.acquire_lease("h2:2:b", T0 + timedelta(seconds=26), 15)  # lapsed
    assert taken.ours and taken.acquired_at == T0 + timedelta(seconds=26)
    lost = store.renew_lease("h1:1:a", T0 + timedelta(seconds=27), 15)
    assert not lost.ours and lost.holder == "h2:2:b"
    assert not store.release_lease("h1:1:a") and store.release_lease("h2:2:b")
    assert store.acquire_lease("h1:1:a", T0 + timedelta(seconds=28), 15).ours
    assert plain_sql(store_url, "SELECT name, holder FROM leases") == [{"name": "control-loop", "holder": "h1:1:a"}]


def test_racing_daemons_get_the_lease_once(store_url: str) -> None:
    import threading

    upgrade(store_url)
    stores = [SqlStore.open(store_url, retries=0) for _ in range(4)]
    results: list[bool] = []
    gate = threading.Barrier(len(stores))

    def take(i: int) -> None:
        gate.wait()
        results.append(stores[i].acquire_lease(f"h{i}:{i}:x", T0, 15).ours)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert sorted(results) == [False, False, False, True]
