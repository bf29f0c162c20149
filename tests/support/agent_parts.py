"""An ``Agent``'s loop parts, wired as ``Agent.__init__`` wires them, around a real store and no Spark (the agent's
round and loop tests)."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from armd.agent.admission import AdmissionGate
from armd.agent.loop import AppStore
from armd.agent.report import Reporter
from armd.control.coordinator import ApplyPorts, Coordinator
from armd.control.ports import ActualState, DesiredSettings, Observation, QuerySettings
from armd.control.reconciler import Reconciler

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SETTINGS = QuerySettings(1.0, 1.0, {"w": 60_000.0}, None, 1.0)
SMALLER = QuerySettings(0.5, 1.0, {"w": 30_000.0}, None, 0.5)


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __getattr__(self, level):
        return lambda event, **fields: self.lines.append((event, fields))

    def of(self, event: str) -> list[dict]:
        return [f for e, f in self.lines if e == event]


class Applier:
    name = "instant"

    def __init__(self) -> None:
        self.applied: list[tuple[str, QuerySettings]] = []

    def apply(self, query, old, new):
        self.applied.append((query, new))
        return "direct"


class Idle:
    def observe(self, at):
        return Observation(at, [])


def agent(store, mode="apply"):
    """An ``Agent``'s loop parts (as ``Agent.__init__`` wires them) around one started query ``q``."""
    log, started = Log(), set()
    view = AppStore(store, lambda: set(started))
    applier = Applier()
    ports = ApplyPorts(view, applier, lambda kind, write: write(), lambda *a, **k: log.info(a[0], message=a[2]), lambda: T0, log)
    coordinator = Coordinator(ports, memory_bound=float("inf"))
    ns = SimpleNamespace(app="shop", mode=mode, store=store, log=log, poll_seconds=1.0, stats=Idle(), view=view,
                         clock=lambda: datetime.now(timezone.utc),
                         coordinator=coordinator, reconciler=Reconciler(ports, coordinator),
                         reporter=Reporter(store, "shop", mode), applier=applier,
                         _emit=lambda kind, severity, message, *a, **k: log.info(kind, message=message))
    ns.reporter.register(T0, host="test", pid=1)
    ns.reporter.add_query("q", {"mode": mode}, 1.0, {}, T0)
    ns.gate = AdmissionGate(store, "shop", log, lambda name, minimum: started.add(name))
    ns.gate.hold("q", "start")
    coordinator.report(ActualState("q", 1, SETTINGS, "steady", at=T0))
    store.write_desired([DesiredSettings("q", 1, SETTINGS)])
    return ns
