"""The agent's two threads: reports go on every poll interval while the applying side is blocked on a change (starting a
migration's run takes seconds on Spark), and both stop with the loop. Real SQLite store, no Spark."""

from __future__ import annotations

import threading
import time

from support.agent_parts import SMALLER, agent
from support.polling import wait
from support.store import store  # noqa: F401 - the fixture

from armd.agent.loop import AgentLoop
from armd.control.ports import DesiredSettings, Observation


class Counting:
    """A statistics source counting its observations (each report takes one)."""

    def __init__(self) -> None:
        self.observed = 0

    def observe(self, at):
        self.observed += 1
        return Observation(at, [])


def test_reports_go_on_while_a_change_is_being_applied(store):
    ns = agent(store)
    ns.poll_seconds = 0.2
    ns.stats = Counting()
    release, applying = threading.Event(), threading.Event()
    apply = ns.applier.apply

    def blocked(query, old, new):  # a GenMig start: a run started, T_split placed, seconds on a loaded driver
        applying.set()
        release.wait(30)
        return apply(query, old, new)

    ns.applier.apply = blocked
    loop = AgentLoop(ns)
    loop.start()
    try:
        store.write_desired([DesiredSettings("q", 2, SMALLER)])
        wait(applying.is_set, 10, "the applying thread to take the change")
        before, rounds = ns.stats.observed, loop.rounds
        time.sleep(1.5)
        assert ns.stats.observed >= before + 4  # every 0.2 s while the change is applied
        assert loop.rounds == rounds  # the applying side is still in that round
        release.set()
        wait(lambda: ns.applier.applied == [("q", SMALLER)], 10, "the change applied")
        wait(lambda: loop.rounds > rounds, 10, "the applying side's next round")
    finally:
        release.set()
        loop.stop()
    assert loop.errors == 0 and loop.reports == ns.stats.observed and loop.cpu_seconds > 0
    stopped = ns.stats.observed
    time.sleep(0.5)
    assert ns.stats.observed == stopped  # both threads stopped
