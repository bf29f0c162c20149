"""``bench/agent_round.py``: the CPU of one idle round of the agent's own thread (``agent/loop.py``), in µs.

Why: an ``armd.agent`` application pays for the agent's thread every
``poll_seconds`` whether or not anything happens; an idle round (no new
progress, nothing decided, a query still waiting for a verdict nobody gives,
as in ``bench/fleet.py --overhead-only``) should cost next to nothing. This
runs ``AgentLoop.round`` itself — the very reporter, admission gate, scoped
store view, reconciler and coordinator the ``Agent`` wires, on a real SQLite
store — with a statistics source that reports no progress (no Spark), and
times it with ``time.thread_time``. Rounds are driven one simulated second
apart, so whatever a round does only every few seconds shows in the mean.
``--listening`` pretends the PostgreSQL listener listens (SQLite cannot
notify), to show what a round costs where desired settings are read on
notification only.

Prints ``{"us_per_idle_round": median over repeats, "repeats": [...], "rounds": n, "queries": q, "desired_reads": n,
"store": "sqlite", "listening": bool}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from armd.adapters.store.sql import SqlStore
from armd.agent.admission import AdmissionGate
from armd.agent.agent import KeywordLog
from armd.agent.loop import AgentLoop, AppStore
from armd.agent.report import Reporter
from armd.control.coordinator import ApplyPorts, Coordinator
from armd.control.ports import ActualState, DesiredSettings, Observation, QuerySettings
from armd.control.reconciler import Reconciler


class Idle:
    """A statistics source with nothing to say: no batch completed since the last round."""

    def observe(self, at: datetime) -> Observation:
        return Observation(at, [])


class Applier:
    name = "none"

    def apply(self, query: str, old: Any, new: Any) -> str:
        raise AssertionError("an idle round applies nothing")


def agent(store: SqlStore, app: str, queries: list[str], at: datetime) -> SimpleNamespace:
    """The parts of an ``Agent`` its loop uses, wired as ``Agent.__init__`` wires them."""
    log = KeywordLog("armd.bench.agent_round")
    started: set[str] = set()
    view = AppStore(store, lambda: set(started))
    ports = ApplyPorts(view, Applier(), lambda kind, write: write(), lambda *a, **k: None, lambda: at, log)
    coordinator = Coordinator(ports, memory_bound=float("inf"))
    ns = SimpleNamespace(app=app, mode="apply", store=store, log=log, poll_seconds=1.0, stats=Idle(), view=view,
                         coordinator=coordinator, reconciler=Reconciler(ports, coordinator), reporter=Reporter(store, app, "apply"),
                         _emit=lambda *a, **k: None)
    ns.reporter.register(at, host="bench", pid=0)
    settings = QuerySettings(1.0, 1.0, {"w": 60_000.0}, None, 1.0)
    for name in queries:
        ns.reporter.add_query(name, {"mode": "apply"}, 1.0, {}, at)
    ns.gate = AdmissionGate(store, app, log, lambda name, minimum: started.add(name))
    for name in queries:
        ns.gate.hold(name, "start")  # started at once; its verdict never comes (no daemon)
        coordinator.report(ActualState(name, 1, settings, "steady", at=at))
    store.write_desired([DesiredSettings(name, 1, settings) for name in queries])  # in force already: nothing to do
    return ns


def run(rounds: int, queries: int, repeats: int, listening: bool) -> dict[str, Any]:
    times, reads = [], 0
    with tempfile.TemporaryDirectory(prefix="armd-agent-round-") as tmp:
        store = SqlStore.open(f"sqlite:///{Path(tmp) / 'store.db'}")
        store.upgrade()  # the daemon's armd db upgrade
        for repeat in range(repeats):
            at = datetime(2026, 1, 1, tzinfo=timezone.utc)
            ns = agent(store, f"app{repeat}", [f"app{repeat}_q{i}" for i in range(queries)], at)
            loop = AgentLoop(ns)
            if listening:
                loop.pacer.listener = SimpleNamespace(listening=threading.Event(), close=lambda: None)
                loop.pacer.listener.listening.set()
            for _ in range(3):  # warm: first reads, first verdict read
                at += timedelta(seconds=1)
                loop.round(at)
            began = time.thread_time()
            for _ in range(rounds):
                at += timedelta(seconds=1)
                loop.round(at)
            times.append((time.thread_time() - began) / rounds * 1e6)
            reads = ns.view.desired_reads
    return {"us_per_idle_round": round(statistics.median(times), 1), "repeats": [round(t, 1) for t in times],
            "rounds": rounds, "queries": queries, "desired_reads": reads, "store": "sqlite", "listening": listening}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--queries", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--listening", action="store_true")
    parser.add_argument("--json", action="store_true", help="print JSON only (the default output anyway)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.rounds, args.queries, args.repeats, args.listening)))


if __name__ == "__main__":
    main()
