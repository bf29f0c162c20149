"""The daemon's statistics of agent-managed queries, read back from a real SQLite store as the agents reported them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from armd.adapters.store import applications as apps
from armd.adapters.store.agent_stats import AgentStats
from armd.adapters.store.sql import SqlStore
from armd.control.ports import BatchProgress, Observation, QueryMetrics, StreamStats

T0 = datetime(2026, 11, 24, 6, 0, tzinfo=timezone.utc)
UNIT = 0.001


@pytest.fixture
def store(tmp_path):
    store = SqlStore.open(f"sqlite:///{tmp_path}/armd.db")
    store.upgrade()
    apps.register_application(store, "shop", "h", 1, "apply", T0)
    apps.register_queries(store, "shop", [apps.AgentQueryRow("clicks_q", {"plan": {"streams": {"clicks": {}}}})], T0)
    yield store
    store.close()


def report(store, at, rows, state_bytes, batch_id):
    """One round of an agent (its SparkStats observation), beside a stream and a query of the daemon's own."""
    store.record_observation(Observation(
        at, [StreamStats("clicks", rows, 1.0, float(rows), 1000.0 / rows), StreamStats("daemon_stream", 5, 1.0, 5.0, 200.0)],
        [QueryMetrics("clicks_q", 10, state_bytes, {"clicks_q.w": 1.0}), QueryMetrics("daemon_q", 1, 1)],
        [BatchProgress("clicks_q", "run-1", batch_id, at, rows, 40, plan_version=0)]))


def test_what_agents_reported_since_the_last_look_comes_back_once_and_combined(store):
    stats = AgentStats(store, UNIT, T0)
    report(store, T0 + timedelta(seconds=1), 10, 100, 0)
    report(store, T0 + timedelta(seconds=2), 30, 300, 1)
    got = stats.observe(T0 + timedelta(seconds=2))
    (clicks,) = got.streams  # the daemon's own stream is not an agent's
    assert (clicks.stream, clicks.rows, clicks.interval_seconds, clicks.rate_per_second) == ("clicks", 40, 2.0, 20.0)
    assert clicks.d == pytest.approx(2.0 / UNIT / 40)  # 50 ms between arrivals, in the daemon's unit
    assert [(q.query, q.state_bytes, dict(q.selectivities)) for q in got.queries] == [("clicks_q", 300, {"clicks_q.w": 1.0})]
    assert [b.batch_id for b in got.batches] == [0, 1]
    again = stats.observe(T0 + timedelta(seconds=3))
    assert (again.streams, again.queries, again.batches) == ([], [], [])


def test_a_stream_rate_comes_from_the_applications_at_its_front_not_from_one_that_fell_behind(store):
    """Two applications read ``clicks``; ``ads`` is 16 s behind ``shop`` in event time, still before a ×4 burst that
    ``shop`` already reads. Mixed, the rate would be neither; taken in turns, it would jump between them."""
    apps.register_application(store, "ads", "h", 2, "apply", T0)
    apps.register_queries(store, "ads", [apps.AgentQueryRow("ads_q", {"plan": {"streams": {"clicks": {}}}})], T0)
    stats = AgentStats(store, UNIT, T0)
    front = T0 + timedelta(seconds=60)

    def read(at, rows, end):
        store.record_observation(Observation(at, [StreamStats("clicks", rows, 4.0, rows / 4.0, 4000.0 / rows, event_end=end)],
                                             [], []))

    read(T0 + timedelta(seconds=1), 640, front)  # shop: 160/s
    read(T0 + timedelta(seconds=1.5), 160, front - timedelta(seconds=16))  # ads: 40/s, the past
    (clicks,) = stats.observe(T0 + timedelta(seconds=2)).streams
    assert (clicks.rows, clicks.rate_per_second, clicks.event_end) == (640, 160.0, front)
    read(T0 + timedelta(seconds=2.5), 160, front - timedelta(seconds=12))  # only ads reported in this look
    assert stats.observe(T0 + timedelta(seconds=3)).streams == []  # nothing new is known of the stream
    read(T0 + timedelta(seconds=3.5), 640, front + timedelta(seconds=4))  # shop
    read(T0 + timedelta(seconds=3.6), 600, front + timedelta(seconds=4))  # ads caught up
    (clicks,) = stats.observe(T0 + timedelta(seconds=4)).streams
    assert (clicks.rows, clicks.interval_seconds) == (1240, 8.0)


def test_a_report_that_commits_late_is_still_read_and_a_removed_application_is_not(store):
    stats = AgentStats(store, UNIT, T0)
    report(store, T0 + timedelta(seconds=2), 10, 100, 0)
    stats.observe(T0 + timedelta(seconds=2))
    report(store, T0 + timedelta(seconds=1.5), 20, 200, 1)  # written after the look, stamped before it (another host's clock)
    late = stats.observe(T0 + timedelta(seconds=3))
    assert [b.batch_id for b in late.batches] == [1] and late.streams[0].rows == 20
    apps.stopped(store, "shop", T0 + timedelta(seconds=3))
    report(store, T0 + timedelta(seconds=4), 10, 100, 2)
    gone = stats.observe(T0 + timedelta(seconds=5))
    assert (gone.streams, gone.queries, gone.batches) == ([], [], [])


def test_measured_groups_and_bytes_per_row_come_back_for_the_daemons_model(store):
    """Without them the daemon models an agent's aggregation as one group at the plan's bytes per row."""
    stats = AgentStats(store, UNIT, T0)
    at = T0 + timedelta(seconds=1)
    store.record_observation(Observation(at, [StreamStats("clicks", 10, 1.0, 10.0, 100.0)], [
        QueryMetrics("clicks_q", 10, 100, {}, {}, {"clicks_q.agg1": (12.0, 30.5)}, {"clicks_q.agg1": 88.0})], []))
    (query,) = stats.observe(at).queries
    assert dict(query.group_models) == {"clicks_q.agg1": (12.0, 30.5)} and dict(query.bytes_per_row) == {"clicks_q.agg1": 88.0}


def test_a_row_committed_after_a_larger_id_was_read_comes_back_once_and_a_rolled_back_id_is_not_waited_for(postgres_database):
    """Two applications' rounds commit out of id order (PostgreSQL assigns ids at insert): reading from the largest id
    seen would skip the slow one. An id that never commits (its insert rolled back) is given up after the look-back."""
    from sqlalchemy import create_engine

    from armd.adapters.store import models as m

    store = SqlStore.open(postgres_database)
    store.upgrade()
    apps.register_application(store, "shop", "h", 1, "apply", T0)
    apps.register_queries(store, "shop", [apps.AgentQueryRow("clicks_q", {"plan": {"streams": {"clicks": {}}}})], T0)
    engine = create_engine(postgres_database)
    row = {"stream": "clicks", "rows": 10, "interval_seconds": 1.0, "rate_per_second": 10.0, "d": 100.0}
    try:
        stats = AgentStats(store, UNIT, T0, lookback_seconds=3.0)
        report(store, T0 + timedelta(seconds=1), 10, 100, 0)
        assert stats.observe(T0 + timedelta(seconds=1)).streams[0].rows == 10
        slow, rolled_back = engine.connect(), engine.connect()
        slow.execute(m.ObservationRow.__table__.insert(), {**row, "at": T0 + timedelta(seconds=1.5), "rows": 7})
        rolled_back.execute(m.ObservationRow.__table__.insert(), {**row, "at": T0 + timedelta(seconds=1.5), "rows": 1000})
        report(store, T0 + timedelta(seconds=2), 20, 200, 1)  # committed first, with the largest id
        assert stats.observe(T0 + timedelta(seconds=2)).streams[0].rows == 20
        slow.commit()
        rolled_back.rollback()
        assert stats.observe(T0 + timedelta(seconds=3)).streams[0].rows == 7  # the late commit, once
        report(store, T0 + timedelta(seconds=4), 30, 300, 2)
        assert stats.observe(T0 + timedelta(seconds=4)).streams[0].rows == 30
        assert stats.observe(T0 + timedelta(seconds=9)).streams == []  # the hole is given up: nothing comes twice
        report(store, T0 + timedelta(seconds=10), 40, 400, 3)
        later = stats.observe(T0 + timedelta(seconds=10))
        assert later.streams[0].rows == 40 and [b.batch_id for b in later.batches] == [3]
        assert all(c.missing == {} for c in stats._cursors.values())
        slow.close()
        rolled_back.close()
    finally:
        engine.dispose()
        store.close()


def test_reads_of_a_feed_are_taken_by_the_next_observation_combined_with_their_lags(store):
    """The daemon's agent feed reads on a thread of its own; the cycle takes what it read since its last look."""
    stats = AgentStats(store, UNIT, T0)
    stats.fed = True
    report(store, T0 + timedelta(seconds=1), 10, 100, 0)
    first = stats.read(T0 + timedelta(seconds=1.25))
    report(store, T0 + timedelta(seconds=2), 30, 300, 1)
    second = stats.read(T0 + timedelta(seconds=2))
    assert len(first) == len(second) == 2  # the agent's stream and query rows, not the daemon's own
    assert all(0.25 <= lag < 1.25 for lag in first) and all(0.0 <= lag < 1.0 for lag in second)  # the read's time counts
    got = stats.observe(T0 + timedelta(seconds=2.5))
    (clicks,) = got.streams
    assert (clicks.rows, clicks.interval_seconds) == (40, 2.0)
    assert [(q.query, q.state_bytes) for q in got.queries] == [("clicks_q", 300)] and [b.batch_id for b in got.batches] == [0, 1]
    assert stats.lags == [] and sorted(stats.taken) == pytest.approx([0.5, 0.5, 1.5, 1.5])  # fed: the feed reports the lags
    again = stats.observe(T0 + timedelta(seconds=3))
    assert (again.streams, again.queries, again.batches, stats.taken) == ([], [], [], [])
