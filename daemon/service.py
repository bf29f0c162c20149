"""Running armd as a service: wiring, the scheduler and the signals.

This is the one place that picks concrete implementations for the ports
(the SQL store, the synthetic source and its simulated applier, the alert
sink) and hands them to the controller. APScheduler runs the controller's
steps as interval jobs on a single worker thread, so steps never overlap
and a slow step makes the next run of its job be skipped and logged instead
of stacking up. SIGTERM and SIGINT let the step in progress finish, then the
daemon stops; SIGHUP reloads the configuration, keeping the old one (and
alerting) when the new one is invalid.
"""

from __future__ import annotations

import signal
import threading
import time
from datetime import datetime
from typing import Any, Callable, Mapping

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from armd.adapters.store import SqlStore, StoreError
from armd.adapters.synthetic import Schedule, SyntheticSource, WindowTap

from .config import Config, ConfigError, load_config
from .controller import Controller, utcnow
from .ports import EventRecord, QuerySettings


class SimulatedApplier:
    """Applies settings to the synthetic source's simulated windows (no Spark involved)."""

    name = "simulated"

    def __init__(self, source: SyntheticSource) -> None:
        self.source = source

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        for node_id, size in new.windows.items():
            self.source.set_window(query, node_id, size)
        return "direct"


class LogAlerts:
    """Alert sink that writes each alert as a log event (the hooks of the operations issue add more)."""

    def __init__(self, log: Any) -> None:
        self.log = log

    def alert(self, event: EventRecord) -> None:
        self.log.warning("alert", kind=event.kind, severity=event.severity, query=event.query, message=event.message)


def synthetic_parts(config: Config) -> tuple[dict[str, Schedule], dict[str, float], dict[str, list[WindowTap]]]:
    """Schedules, element sizes and window taps of the synthetic source for ``config``."""
    plan = config.plan
    schedules = {
        name: Schedule(
            s.rate_per_second,
            tuple((step.at_seconds, step.rate_per_second) for step in s.steps),
            tuple((b.at_seconds, b.duration_seconds, b.factor) for b in s.bursts),
        )
        for name, s in config.source.streams.items()
    }
    taps: dict[str, list[WindowTap]] = {}
    for query in plan.queries:
        for node_id in plan.query_nodes(query):
            node = plan.nodes[node_id]
            source = plan.nodes[node.inputs[0]] if node.op == "window" and node.inputs else None
            if source is not None and source.op == "source" and node.w is not None:
                taps.setdefault(query, []).append(WindowTap(source.stream, node_id, node.w))
    sizes = {name: s.size for name, s in plan.streams.items()}
    return schedules, sizes, taps


def synthetic_source(config: Config, start: datetime) -> SyntheticSource:
    schedules, sizes, taps = synthetic_parts(config)
    return SyntheticSource(schedules, config.source.seed, config.model.time_unit_seconds, start, sizes, taps)


def open_store(config: Config, log: Any) -> SqlStore:
    """Connect with retries (each logged) and refuse an outdated schema; raises ``StoreError``."""

    def retrying(attempt: int, delay: float, message: str) -> None:
        log.warning("store_connect_retry", attempt=attempt, retry_in_seconds=round(delay, 3), error=message)

    store = SqlStore.open(
        config.store.url,
        retries=config.store.connect_retries,
        backoff_seconds=config.store.connect_backoff_seconds,
        on_retry=retrying,
    )
    try:
        store.require_current_schema()
    except StoreError:
        store.close()
        raise
    return store


class Service:
    """One daemon run: ``run()`` blocks until SIGTERM/SIGINT (or ``stop``)."""

    def __init__(self, config: Config, log: Any, environ: Mapping[str, str] | None = None) -> None:
        self.config, self.log, self.environ = config, log, environ
        self.stop = threading.Event()
        self.scheduler: BackgroundScheduler | None = None
        self.controller: Controller | None = None
        self.store: SqlStore | None = None

    def run(self, every_tick: Callable[[], None] | None = None, tick_seconds: float = 2.0) -> None:
        config = self.config
        self._install_signals()
        self.store = open_store(config, self.log)
        start = utcnow()
        self.source = source = synthetic_source(config, start)
        self.controller = Controller(config, self.store, source, SimulatedApplier(source), LogAlerts(self.log), self.log)
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )
        scheduler.add_listener(self._job_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR)
        schedule = config.schedule
        jobs = [
            ("observe", self.controller.observe, schedule.observe_seconds),
            ("decide", self.controller.decide, schedule.observe_seconds),
            ("apply", self.controller.apply, schedule.apply_seconds),
            ("housekeeping", self.controller.housekeeping, schedule.housekeeping_seconds),
        ]
        for job_id, step, seconds in jobs:
            scheduler.add_job(self._timed(job_id, step, seconds), "interval", seconds=seconds, id=job_id, next_run_time=start)
        self.scheduler = scheduler
        self.controller.note("daemon_started", f"armd started with {config.path}: store {config.redact(config.store.url)}, policy {config.policy.name}, "
                             f"{len(config.plan.queries)} queries{', dry run' if config.guardrails.dry_run else ''}")
        scheduler.start()
        try:
            while not self.stop.wait(tick_seconds if every_tick else 0.5):
                if every_tick:
                    every_tick()
        finally:
            self.log.info("stopping")
            scheduler.shutdown(wait=True)
            counters = dict(self.controller.counters)
            summary = ", ".join(f"{k} {v}" for k, v in sorted(counters.items())) or "nothing done"
            self.controller.note("daemon_stopped", f"armd stopped: {summary}", counters)
            self.controller.flush(force=True)
            source.close()
            self.store.close()

    def _timed(self, job_id: str, step: Callable[[], None], interval: float) -> Callable[[], None]:
        def run() -> None:
            if self.stop.is_set():
                return
            started = time.perf_counter()
            step()
            took = time.perf_counter() - started
            if took > interval:
                self.log.warning("cycle_slow", job=job_id, seconds=round(took, 3), interval_seconds=interval)

        return run

    def _job_event(self, event: JobExecutionEvent) -> None:
        if event.code == EVENT_JOB_ERROR:
            self.log.error("job_failed", job=event.job_id, error=repr(event.exception))
        else:
            self.log.warning("job_skipped", job=event.job_id, reason="previous run still in progress")

    def _install_signals(self) -> None:
        def stop(signum: int, _frame: Any) -> None:
            self.log.info("signal_received", signal=signal.Signals(signum).name)
            self.stop.set()

        def hangup(_signum: int, _frame: Any) -> None:
            if self.scheduler is not None:
                self.scheduler.add_job(self.reload, id="reload", replace_existing=True)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, hangup)

    def reload(self) -> None:
        """Re-read the configuration file; an invalid one keeps the old configuration and alerts."""
        assert self.controller is not None
        try:
            config = load_config(self.config.path, self.environ)
        except ConfigError as exc:
            self.controller.reject_reload(str(exc))
            return
        if config.store.url != self.config.store.url:
            self.controller.reject_reload("store.url cannot change on reload; restart armd to use another store")
            return
        if config.source.seed != self.config.source.seed or config.model != self.config.model:
            self.controller.reject_reload("source.seed and [model] cannot change on reload; restart armd to change them")
            return
        self.source.update(*synthetic_parts(config))
        self.config = config
        self.controller.reload(config)
