"""The agent feed reads the applications' reports on a thread of its own, beside the control cycle (real SQLite store)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import structlog

from armd.adapters.store import applications as apps
from armd.adapters.store.agent_stats import AgentStats
from armd.adapters.store.sql import SqlStore
from armd.control.ports import Observation, QueryMetrics, StreamStats
from armd.daemon.agent_feed import AgentFeed
from armd.daemon.metrics import Metrics

LAG = "armd_agent_observation_lag_seconds"


def now() -> datetime:
    return datetime.now(timezone.utc)


def wait_for(condition, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the feed did not read in time"
        time.sleep(0.02)


def test_the_feed_reads_reports_while_the_cycle_is_away_and_the_cycle_takes_them_once(tmp_path):
    store = SqlStore.open(f"sqlite:///{tmp_path}/armd.db")
    store.upgrade()
    start = now()
    apps.register_application(store, "shop", "h", 1, "apply", start)
    apps.register_queries(store, "shop", [apps.AgentQueryRow("clicks_q", {"plan": {"streams": {"clicks": {}}}})], start)
    stats, metrics = AgentStats(store, 0.001, start), Metrics(0.001)
    feed = AgentFeed(stats, metrics, structlog.get_logger(), now, every=0.05).start()
    try:
        for rows in (10, 30):
            store.record_observation(Observation(now(), [StreamStats("clicks", rows, 1.0, float(rows), 100.0)],
                                                 [QueryMetrics("clicks_q", 10, rows * 10)], []))
        wait_for(lambda: (metrics.registry.get_sample_value(f"{LAG}_count") or 0) >= 4)
        feed.stop()
        lag = metrics.registry.get_sample_value(f"{LAG}_sum") / 4
        assert 0 <= lag < 10  # seconds from each report to the feed having read it
        got = stats.observe(now())  # the cycle: no read of its own, what the feed read since its last look
        assert [(s.stream, s.rows) for s in got.streams] == [("clicks", 40)] and stats.lags == []
        assert [(q.query, q.state_bytes) for q in got.queries] == [("clicks_q", 300)] and len(stats.taken) == 4
        assert stats.observe(now()).streams == []
    finally:
        feed.stop()
        store.close()


def test_a_failed_read_is_said_once_and_the_rows_are_read_when_the_store_answers(tmp_path):
    store = SqlStore.open(f"sqlite:///{tmp_path}/armd.db")
    store.upgrade()
    start = now()
    stats = AgentStats(store, 0.001, start, wanted=lambda: (1 / 0, ()))  # a read that fails each time
    metrics = Metrics(0.001)
    feed = AgentFeed(stats, metrics, structlog.get_logger(), now, every=0.01)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            feed.read()
    assert [e["event"] for e in logs] == ["agent_feed_failed"] and "ZeroDivisionError" in logs[0]["error"]
    stats.wanted = lambda: ({"clicks_q"}, {"clicks"})
    store.record_observation(Observation(now(), [StreamStats("clicks", 5, 1.0, 5.0, 200.0)], [], []))
    with structlog.testing.capture_logs() as logs:
        feed.read()
    assert [e["event"] for e in logs] == ["agent_feed_recovered"] and feed.reads == 1
    assert metrics.registry.get_sample_value(f"{LAG}_count") == 1
    store.close()
