"""Simulated ``armd.agent`` applications: the agent's own store code, with generated progress instead of Spark's.

Why: the daemon governs many applications at once; this machine runs few
Spark drivers. A simulated application registers like an agent
(``agent/report.py``: ``Reporter``, ``query_spec``), reports each round
what its queries' streams received (rates the caller sets: a burst is a
higher rate), and applies the desired settings of its queries with the
reconciler and coordinator the agent uses (``control/reconciler.py``),
through an applier that puts settings into force at once and remembers
them. Used by ``bench/fleet.py --simulated-agents`` and by the daemon's
fleet test (tests/daemon/test_fleet.py).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from armd.adapters.store.sql import SqlStore
from armd.agent.admission import AdmissionGate
from armd.agent.agent import KeywordLog
from armd.agent.loop import AppStore
from armd.agent.pace import Pacer
from armd.agent.plan import PlanInfo
from armd.agent.report import Reporter, query_spec
from armd.agent.settings import Range
from armd.control.coordinator import ApplyPorts, Coordinator
from armd.control.ports import ActualState, EventRecord, Observation, QueryMetrics, QuerySettings, StreamStats
from armd.control.reconciler import Reconciler


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class SimQuery:
    """A windowed count over one stream of its own: window ``low``–``high`` seconds, elements of ``size`` bytes."""

    name: str
    stream: str
    rate_per_second: float
    low: float = 1.0
    high: float = 60.0
    size: int = 100
    groups: int = 10

    def plan(self, unit: float) -> PlanInfo:
        node = f"{self.name}.w"
        doc = {"streams": {self.stream: {"d": 1.0 / (self.rate_per_second * unit), "g": 1, "size": self.size}},
               "queries": {self.name: {"op": "aggregate", "groups": self.groups, "inputs": [
                   {"op": "window", "id": node, "w": self.high / unit, "inputs": [{"op": "source", "stream": self.stream}]}]}}}
        return PlanInfo(doc, "file:simulated", {"w": node})


class InstantApplier:
    """Puts settings into force at once (a simulated application has no Spark query to migrate)."""

    name = "simulated"

    def __init__(self) -> None:
        self.settings: dict[str, QuerySettings] = {}

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        self.settings[query] = new
        return "direct"


class SimulatedApp:
    def __init__(self, store: SqlStore, app: str, queries: list[SimQuery], *, unit: float = 0.001, mode: str = "apply",
                 poll_seconds: float = 1.0, clock: Callable[[], datetime] = utc_now, log: Any = None,
                 on_report: Callable[[str, datetime], None] | None = None, listen: bool = False) -> None:
        self.store, self.app, self.queries, self.unit, self.mode = store, app, {q.name: q for q in queries}, unit, mode
        self.poll_seconds, self.clock, self.on_report = poll_seconds, clock, on_report
        self.log = log or KeywordLog(f"armd.agent.{app}")
        self.reporter = Reporter(store, app, mode)
        self.applier = InstantApplier()
        self.running: set[str] = set()
        self.view = AppStore(store, lambda: set(self.running))
        ports = ApplyPorts(self.view, self.applier, self._record, self._emit, clock, self.log)
        self.coordinator = Coordinator(ports, memory_bound=float("inf"))
        self.reconciler = Reconciler(ports, self.coordinator)
        self.gate = AdmissionGate(store, app, self.log, self._launch)
        self._stop = threading.Event()
        self.pacer = Pacer(poll_seconds, self._stop)
        self.listen = listen
        """LISTEN for desired settings on PostgreSQL (one connection per application), as the agent does."""
        self._thread: threading.Thread | None = None
        self._last = time.monotonic()
        self.errors = 0

    def register(self, on_reject: str = "start") -> None:
        """Register the application and its queries; each starts as the admission gate allows (agent/admission.py)."""
        at = self.clock()
        self.reporter.register(at, host="simulated", pid=0)
        for q in self.queries.values():
            settings = QuerySettings(1.0, 1.0, {f"{q.name}.w": q.high / self.unit}, None, 1.0)
            self.reporter.add_query(q.name, query_spec(q.plan(self.unit), self.mode, {"w": Range(q.low, q.high)}, {}, settings,
                                                       self.unit), 1.0, {}, at)
        for q in self.queries:
            self.gate.hold(q, on_reject)

    def _launch(self, name: str, minimum: bool) -> None:
        q = self.queries[name]
        window = q.low if minimum else q.high
        settings = QuerySettings(0.0 if minimum else 1.0, 1.0, {f"{name}.w": window / self.unit}, None, 0.0 if minimum else 1.0)
        self.applier.settings[name] = settings
        self.running.add(name)
        self.coordinator.report(ActualState(name, 0, settings, "steady", at=self.clock()))

    def observation(self, at: datetime, seconds: float) -> Observation:
        """What the queries' streams received in the last ``seconds`` at their current rates."""
        streams, queries = [], []
        for q in (self.queries[name] for name in sorted(self.running)):
            rows = max(1, int(round(q.rate_per_second * seconds)))
            streams.append(StreamStats(q.stream, rows, seconds, rows / seconds, seconds / self.unit / rows, None, 1.0))
            queries.append(QueryMetrics(q.name, q.groups))  # no state bytes: a made-up figure would steer the feedback
        return Observation(at, streams, queries)

    def round(self) -> None:
        now = time.monotonic()
        seconds, self._last = max(1e-3, now - self._last), now
        at = self.clock()
        self.reporter.report(at, self.observation(at, seconds))
        if self.on_report is not None:
            self.on_report(self.app, at)
        if self.pacer.read_desired():  # as the agent's loop reads them (agent/pace.py)
            self.view.forget_desired()
        self.gate.round()
        if self.mode == "apply":
            self.reconciler.tick()
            self.coordinator.advance()

    def start(self) -> "SimulatedApp":
        if self.listen:
            self.pacer.listen(self.store, self.log)
        self._thread = threading.Thread(target=self._run, name=f"sim-{self.app}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while self.pacer.next():
            try:
                self.round()
            except Exception as exc:  # noqa: BLE001 - as the agent: the next round tries again
                self.errors += 1
                self.log.warning("agent_round_failed", app=self.app, error=f"{type(exc).__name__}: {exc}")

    def silence(self) -> None:
        """Stop reporting without saying so (a killed application): the daemon marks it gone after its timeout."""
        self.pacer.stop()
        if self._thread is not None:
            self._thread.join(10)

    def stop(self) -> None:
        self.silence()
        self.reporter.stopped(self.clock())

    def window(self, query: str) -> float:
        """The window in force, seconds."""
        return self.applier.settings[query].windows[f"{query}.w"] * self.unit

    def _record(self, kind: str, write: Callable[[], Any]) -> None:
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - as the agent: logged, the next round writes anew
            self.log.warning("store_write_failed", app=self.app, record=kind, error=str(exc))

    def _emit(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
              **_fields: Any) -> None:
        self.log.info(kind, app=self.app, query=query, message=message)
        event = EventRecord(self.clock(), kind, severity, message, query=query, details={**(details or {}), "app": self.app})
        self._record("event", lambda: self.store.record_event(event))

