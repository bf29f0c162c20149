"""A round with nothing to do is cheap, and loses nothing: desired settings read once a round at most (on notification
only where notifications are heard), running queries' verdicts read every few rounds, ``last_seen_at`` still written every round.
Real SQLite store, no Spark."""

from __future__ import annotations

import threading
from datetime import timedelta, timezone
from types import SimpleNamespace

from support.store import store  # noqa: F401 - the fixture

from support.agent_parts import SETTINGS, SMALLER, T0, agent

from armd.adapters.store import applications as apps
from armd.adapters.store.sql import SqlStore
from armd.agent.admission import WATCH_EVERY
from armd.agent.loop import AgentLoop
from armd.agent.pace import DESIRED_EVERY, Pacer
from armd.agent.report import Reporter
from armd.control.ports import DesiredSettings, Observation


def listening(loop: AgentLoop) -> None:
    """As if the PostgreSQL listener listened (SQLite cannot notify)."""
    loop.pacer.listener = SimpleNamespace(listening=threading.Event(), close=lambda: None)
    loop.pacer.listener.listening.set()


def test_a_round_reads_the_desired_settings_once_for_the_reconciler_and_recommend(store):
    ns = agent(store)
    loop = AgentLoop(ns)
    for i in range(3):
        loop.round(T0 + timedelta(seconds=i + 1))
    assert ns.view.desired_reads == 3  # SQLite: one read a round, shared by tick() and recommend()
    store.write_desired([DesiredSettings("q", 2, SMALLER)])
    loop.round(T0 + timedelta(seconds=4))
    assert ns.applier.applied == [("q", SMALLER)]


def test_where_notifications_are_heard_desired_settings_are_read_on_notification_or_every_nth_round(store):
    ns = agent(store)
    loop = AgentLoop(ns)
    listening(loop)
    loop.round(T0)  # the first round reads (nothing read yet)
    reads = ns.view.desired_reads
    for i in range(DESIRED_EVERY - 2):
        loop.round(T0 + timedelta(seconds=i + 1))
    assert ns.view.desired_reads == reads  # nothing heard: nothing read
    store.write_desired([DesiredSettings("q", 2, SMALLER)])
    loop.pacer._notified()  # what the listener calls on the daemon's NOTIFY
    loop.round(T0 + timedelta(seconds=DESIRED_EVERY))
    assert ns.view.desired_reads == reads + 1 and ns.applier.applied == [("q", SMALLER)]
    store.write_desired([DesiredSettings("q", 3, SETTINGS)])  # written without a notification: the safety net reads it
    for i in range(DESIRED_EVERY):
        loop.round(T0 + timedelta(seconds=DESIRED_EVERY + 1 + i))
    assert ns.view.desired_reads == reads + 2 and ns.applier.applied[-1] == ("q", SETTINGS)


def test_a_listener_that_stopped_listening_means_every_round_reads():
    pacer = Pacer(1.0, threading.Event())
    pacer.listener = SimpleNamespace(listening=threading.Event(), close=lambda: None)
    assert all(pacer.read_desired() for _ in range(5))
    pacer.listener.listening.set()
    assert [pacer.read_desired() for _ in range(DESIRED_EVERY)] == [False] * (DESIRED_EVERY - 1) + [True]


def test_a_running_query_s_rejection_is_read_every_few_rounds_and_said_once(store):
    ns = agent(store)
    loop = AgentLoop(ns)
    loop.round(T0)
    store.set_query_status("q", "rejected", T0, "no room at its QoS minimum")
    for i in range(WATCH_EVERY - 1):
        loop.round(T0 + timedelta(seconds=i + 1))
    assert ns.log.of("query_rejected") == []  # not read yet
    for i in range(WATCH_EVERY * 2):
        loop.round(T0 + timedelta(seconds=WATCH_EVERY + i))
    (said,) = ns.log.of("query_rejected")
    assert "no room at its QoS minimum" in said["message"] and "runs anyway" in said["message"]
    assert not ns.gate.watched


def test_a_waiting_query_is_asked_every_round_and_its_readmission_is_said(store):
    ns = agent(store)
    ns.reporter.add_query("w", {"mode": "apply"}, 1.0, {}, T0)
    launched = []
    ns.gate.launch = lambda name, minimum: launched.append(name)
    ns.gate.hold("w", "wait")
    store.set_query_status("w", "rejected", T0, "full")
    AgentLoop(ns).round(T0)
    assert len(ns.log.of("query_rejected")) == 1 and launched == []
    store.set_query_status("w", "active", T0, "room freed")
    AgentLoop(ns).round(T0 + timedelta(seconds=1))  # the very next round
    assert launched == ["w"] and len(ns.log.of("query_readmitted")) == 1


def test_a_round_without_progress_still_says_the_application_is_alive(store):
    """``last_seen_at`` is written every round, progress or not: the daemon's gone timeout may be as short as
    ``check-config`` allows, and the write is a small share of a round."""
    reporter = Reporter(store, "shop", "apply")
    reporter.register(T0, host="test", pid=1)
    (row,) = [a for a in apps.applications(store) if a.app == "shop"]
    for s in (1, 2):
        reporter.report(T0 + timedelta(seconds=s), Observation(T0 + timedelta(seconds=s), []))
        (row,) = [a for a in apps.applications(store) if a.app == "shop"]
        assert row.last_seen_at.astimezone(timezone.utc) == T0 + timedelta(seconds=s)


def test_on_postgresql_a_round_reads_desired_settings_when_the_daemon_s_write_is_heard(postgres_database):
    store = SqlStore.open(postgres_database)
    store.upgrade()
    ns = agent(store)
    loop = AgentLoop(ns)
    loop.pacer.listen(store, ns.log)
    try:
        assert loop.pacer.listener is not None and loop.pacer.listener.listening.wait(10)
        assert loop.pacer.wake.wait(5)  # the listener's call on connecting
        loop.pacer.wake.clear()
        loop.round(T0)  # reads: nothing read yet, and that call
        reads = ns.view.desired_reads
        for i in range(3):
            loop.round(T0 + timedelta(seconds=i + 1))
        assert ns.view.desired_reads == reads
        store.write_desired([DesiredSettings("q", 2, SMALLER)])
        assert loop.pacer.wake.wait(5)  # the daemon's NOTIFY, at the commit
        loop.round(T0 + timedelta(seconds=4))
        assert ns.view.desired_reads == reads + 1 and ns.applier.applied == [("q", SMALLER)]
    finally:
        loop.stop()
        store.close()
