"""The agent's own threads: report progress and say the application is alive; put desired settings into force.

Why threads: the user's code blocks in ``await_termination`` (or does
its own work); reporting and reconciling must go on beside it at a short,
fixed interval (``Agent(poll_seconds=...)``), and at once when the daemon
writes desired settings on PostgreSQL (``pace.py``). Why two: applying a
change blocks on Spark for seconds (a GenMig migration starts a run, places
T_split, stops runs between batches), and while one thread did both the
application went silent exactly then — the s40 fleet run's `shop` reported
nothing for 9 s of a burst while its migrations started, so the daemon
decided on state 9 s old (4 MB "measured" while the runs held 9 MB). So:

- the *reporting* thread, every ``poll_seconds`` on a fixed cadence,
  touches ``applications.last_seen_at`` (the daemon marks silent
  applications gone) and turns the progress Spark reported since its last
  report into one ``Observation`` (``SparkStats``, as in the daemon) in
  ``observations`` and ``batches``;
- the *applying* thread, paced by ``Pacer`` (the poll interval, and the
  daemon's notifications), runs the admission gate and, in ``apply`` mode,
  the reconciler (new desired versions of this application's queries) and
  the coordinator (running migrations advance); a recommendation (every
  version in ``recommend`` mode; a ``recommend_only`` row, e.g. for a
  query declared with ``mode="recommend"``) is logged and recorded as a
  ``recommendation`` event, nothing else.

``round`` does both, one after the other, for callers that step the agent
themselves (its tests, ``bench/agent_round.py``).

A round with nothing new is cheap: the desired settings are read at most
once a round (the reconciler's read serves ``recommend`` too) and, on
PostgreSQL, only when the daemon notified a write (``pace.py``); the
admission verdict of a query already running is read every few rounds
(``admission.py``). ``last_seen_at`` is still written every report: the
daemon's gone timeout may be as short as ``check-config`` allows.

A round or report that fails is logged and the next one tries again; the
user's queries never stop because the store is away.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable

from armd.adapters.store.scoped import ScopedStore
from armd.control.ports import DesiredSettings

from .pace import Pacer


class AppStore(ScopedStore):
    """The store as this application's reconciler sees it: desired and actual rows of its own queries only.

    The desired rows read are kept until ``forget_desired`` (the loop calls it when a round must read them,
    ``Pacer.read_desired``), so one round reads them once — for the reconciler and for ``recommend`` alike — and a
    round with nothing new reads them not at all. A query started since the last read (the set of own queries
    changed) reads them anew.
    """

    def __init__(self, store: Any, queries: Callable[[], set[str] | frozenset[str]]) -> None:
        super().__init__(store, queries)
        self._desired: tuple[frozenset[str], dict[str, DesiredSettings]] | None = None
        self.desired_reads = 0

    def desired_settings(self) -> dict[str, DesiredSettings]:
        mine = frozenset(self._queries())
        if self._desired is not None and self._desired[0] == mine:
            return dict(self._desired[1])
        rows = super().desired_settings()
        self.desired_reads += 1
        self._desired = (mine, rows)
        return dict(rows)

    def forget_desired(self) -> None:
        self._desired = None

    def current_settings(self) -> dict[str, Any]:
        return {}  # the agent starts its queries itself, with the settings in force (Agent._initial)


class AgentLoop:
    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.stopped = threading.Event()
        self.pacer = Pacer(agent.poll_seconds, self.stopped)
        self.reporting = Pacer(agent.poll_seconds, self.stopped)
        """The reporting thread's cadence: the poll interval alone (it does not listen)."""
        self._threads: list[threading.Thread] = []
        self._recommended: dict[str, int] = {}
        self._counting = threading.Lock()
        self.rounds = 0
        """Rounds of the applying side (``apply``)."""
        self.reports = 0
        self.errors = 0
        self.cpu_seconds = 0.0
        """CPU time both threads spent in rounds and reports: what the agent itself takes of the driver (``bench/fleet.py``)."""

    def start(self) -> None:
        if not self._threads:
            self.pacer.listen(self.agent.store, self.agent.log)
            self._threads = [threading.Thread(target=self._run, name=f"armd-agent-{self.agent.app}", daemon=True),
                             threading.Thread(target=self._report_run, name=f"armd-agent-{self.agent.app}-report", daemon=True)]
            for thread in self._threads:
                thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.pacer.stop()
        self.reporting.stop()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._threads = []

    def _run(self) -> None:
        while self.pacer.next():
            self._counted("agent_round_failed", self.apply)

    def _report_run(self) -> None:
        """``report`` every ``poll_seconds``, whatever the applying thread is blocked on."""
        while self.reporting.next():
            self._counted("agent_report_failed", self.report)

    def _counted(self, failure: str, step: Callable[[datetime], None]) -> None:
        began = time.thread_time()
        failed = False
        try:
            step(self.agent.clock())
        except Exception as exc:  # noqa: BLE001 - the next round or report tries again
            failed = True
            self.agent.log.warning(failure, app=self.agent.app, error=f"{type(exc).__name__}: {exc}")
        with self._counting:
            self.errors += failed
            self.cpu_seconds += time.thread_time() - began

    def round(self, at: datetime) -> None:
        """One report and one round of the applying side, one after the other (see the module docstring)."""
        self.report(at)
        self.apply(at)

    def apply(self, at: datetime) -> None:
        """The applying side: admission verdicts, then desired settings put into force (or recommended)."""
        agent = self.agent
        if self.pacer.read_desired():
            agent.view.forget_desired()
        agent.gate.round()
        if agent.mode == "apply":  # recommend_only rows (a query in recommend mode, a dry run) are never applied
            agent.reconciler.tick()
            agent.coordinator.advance()
        self.recommend()
        self.rounds += 1

    def report(self, at: datetime) -> None:
        agent = self.agent
        agent.reporter.report(at, agent.stats.observe(at))
        self.reports += 1

    def recommend(self) -> None:
        """Each new recommendation (every desired version in ``recommend`` mode, ``recommend_only`` rows otherwise) is
        said once, applied never."""
        agent = self.agent
        for query, wanted in agent.view.desired_settings().items():
            if agent.mode == "apply" and not wanted.recommend_only:
                continue
            actual = agent.coordinator.actual.get(query)
            if wanted.plan_version <= max(self._recommended.get(query, 0), actual.plan_version if actual else 0):
                continue
            self._recommended[query] = wanted.plan_version
            settings = wanted.settings
            agent._emit("recommendation", "info",
                        f"armd recommends plan version {wanted.plan_version} for {query!r} (windows "
                        f"{dict(settings.windows)}, granularity {settings.granularity}); {query!r} is in recommend "
                        f"mode and application {agent.app!r} applies nothing", query,
                        {"plan_version": wanted.plan_version, "settings": settings.as_json()}, alert=False)
