"""Running armd as a service: wiring, the scheduler and the signals.

The service opens the store, takes its lease and starts the parts
``daemon/wiring.py`` picks for the ports (the synthetic source and its
simulated applier, or local Spark running the ``[managed.*]`` queries; the
alert dispatcher with the hooks of ``[[alerts]]``; the applying side), with
the Prometheus metrics when ``[metrics]`` enables them. It speaks systemd's notify protocol (``READY=1`` once the jobs run,
``WATCHDOG=1`` while they make progress, ``STOPPING=1`` at the stop), which
does nothing outside systemd. APScheduler runs the controller's
steps as interval jobs on a single worker thread, so steps never overlap
and a slow step makes the next run of its job be skipped and logged instead
of stacking up. SIGHUP reloads the configuration, keeping the old one (and
alerting) when the new one is invalid.

One store, one active daemon: before anything else the daemon takes the
store's lease (``adapters/store/lease.py``) and renews it on a worker of its
own, so a long step cannot let it lapse. A second daemon exits with status 2
naming the holder, or with ``--standby`` waits and takes over when the lease
lapses; a daemon that finds its lease taken stops and exits with status 2.

SIGTERM and SIGINT stop the daemon within ``STOP_SECONDS`` whatever the
store does: the outbox stops starting store calls, the step in progress
(whose store calls are bounded by ``store.call_timeout_seconds``) gets the
time left, the backlog gets a bounded last try in a thread of its own, and
the stop line says how many records could not be written
(``records_unwritten``) — recorded too when the store answers.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any, Callable, Mapping

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from armd.adapters.alerts import AlertDispatcher, build_hooks
from armd.adapters.store import SqlStore, StoreError
from armd.adapters.herald_meter import HeraldMeter, MeteredSource
from armd.adapters.store.agent_stats import AgentStats
from armd.adapters.store.lease import Holding

from . import early_stop
from .agent_feed import AgentFeed
from .apps import Applications
from .config import Config, ConfigError, load_config
from .controller import Controller, utcnow
from .lease import Lease, LeaseHeld
from .metrics import Metrics, NoMetrics
from .notify import Notifier
from .wiring import (SimulatedApplier, agent_stats, apply_side, join_orders, retry_policy, spark_runtime, start_unmanaged,
                     synthetic_parts, synthetic_source)
from armd.control.ports import Applier, EventRecord, StatsSource
from armd.control.reconciler import Reconciler

ALERTS_CLOSE_SECONDS = 2.0
"""At the stop, queued alerts get this long to be delivered; hooks still hanging then are abandoned."""
STOP_SECONDS = 7.0
"""From SIGTERM to the end of ``Service.run``: within the 10 s armd promises (systemd allows 30 s), with room for the
interpreter to exit. A step blocked in a store call is waited for up to the call timeout; with a timeout over 5 s the
stop can take that much longer."""
FINAL_WRITE_SECONDS = 1.5
"""Of the stop's time, what the last writes (the stop event, releasing the lease) and the alerts keep for themselves."""
OUTAGE_ALERT_CALLS = 6
"""An outage is alerted once records have waited this many call timeouts (30 s with the default of 5 s)."""


class StartError(Exception):
    """The daemon cannot start for a reason the operator must fix (e.g. the metrics port is taken)."""


def open_store(config: Config, log: Any, *, must_exist: bool = False) -> SqlStore:
    """Connect with retries (each logged) and refuse an outdated schema; raises ``StoreError``.

    ``must_exist``: a SQLite file that is not there is an error, not created (the read commands).
    """

    def retrying(attempt: int, delay: float, message: str) -> None:
        log.warning("store_connect_retry", attempt=attempt, retry_in_seconds=round(delay, 3), error=message)

    store = SqlStore.open(
        config.store.url,
        retries=config.store.connect_retries,
        backoff_seconds=config.store.connect_backoff_seconds,
        on_retry=retrying,
        call_timeout_seconds=config.store.call_timeout_seconds,
        must_exist=must_exist,
    )
    try:
        store.require_current_schema()
    except StoreError:
        store.close()
        raise
    return store


def health_window(config: Config) -> float:
    """How long after the last control cycle ``/healthz`` still says healthy: three observation intervals, plus 30 s
    for a slow step (a store call waiting out its timeout, a Spark batch) — past that the cycle is stuck."""
    return 3 * config.schedule.observe_seconds + 30.0


def cycle_status(controller: Controller) -> str:
    """The one line systemd shows under ``systemctl status armd`` after each cycle."""
    counters = controller.counters
    running = len(controller.running)
    return (f"{running} quer{'y' if running == 1 else 'ies'} running, {counters['observations']} observations, "
            f"{counters['decisions']} decisions; last cycle {utcnow().strftime('%H:%M:%S')} UTC")


class Service:
    """One daemon run: ``run()`` blocks until SIGTERM/SIGINT (or ``stop``)."""

    def __init__(self, config: Config, log: Any, environ: Mapping[str, str] | None = None, *, standby: bool = False) -> None:
        self.config, self.log, self.environ, self.standby = config, log, environ, standby
        self.lease: Lease | None = None
        self.lease_lost: Holding | None = None
        """Set when another daemon took the lease while this one ran: the run ends and raises ``LeaseHeld``."""
        self._stop_asked: float | None = None
        self._signal: str | None = None
        """The stop signal received (logged by the main loop, not by the handler)."""
        self._step = threading.Lock()
        """Held while a step runs, so the stop knows when the step in progress has finished."""
        self.stop = threading.Event()
        self.scheduler: BackgroundScheduler | None = None
        self.controller: Controller | None = None
        self.reconciler: Reconciler | None = None
        self.store: SqlStore | None = None
        self.notifier = Notifier(environ)
        self.spark: Any = None
        """The Spark runtime (``armd.adapters.spark.runtime.SparkRuntime``) with ``source.kind = "spark"``."""
        self._progress = time.monotonic()
        self.feed: AgentFeed | None = None
        """Reads the ``armd.agent`` applications' reports on a thread of its own (``daemon/agent_feed.py``)."""

    def run(self, every_tick: Callable[[], None] | None = None, tick_seconds: float = 2.0) -> None:
        config = self.config
        self._install_signals()
        if self.stop.is_set():
            self.log.info("daemon_stopped", message=f"armd stopped by {self._signal} before it started; nothing was started")
            return
        self.metrics: Metrics | NoMetrics = (Metrics(config.model.time_unit_seconds, stale_after_seconds=health_window(config))
                                             if config.metrics.enabled else NoMetrics())
        if isinstance(self.metrics, Metrics):
            try:
                port = self.metrics.serve(config.metrics.port, config.metrics.address)
            except OSError as exc:
                raise StartError(f"{config.path}: metrics.port: cannot listen on {config.metrics.address}:{config.metrics.port}: "
                                 f"{exc.strerror or exc}; choose a free port or set metrics.enabled = false") from None
            self.log.info("metrics_listening", address=config.metrics.address, port=port)
        try:
            self.store = open_store(config, self.log)
        except BaseException:
            self.metrics.close()
            raise
        try:
            self.lease = Lease(self.store, config.store.lease_seconds, self.log)
            leased = self.lease.take(self.standby, self.stop)
        except BaseException as exc:
            self.store.close()
            self.metrics.close()
            if isinstance(exc, LeaseHeld):
                raise StartError(str(exc)) from None
            raise
        if not leased:  # stopped while waiting in standby
            self.log.info("daemon_stopped", message="armd stopped in standby, it never held the store's lease")
            self.store.close()
            self.metrics.close()
            return
        start = utcnow()
        self.alerts = AlertDispatcher(build_hooks(config.alerts, self.log), self.log, dedup_seconds=config.alerting.dedup_seconds,
                                      queue_size=config.alerting.queue_size, metrics=self.metrics)
        source: StatsSource
        applier: Applier
        if config.source.kind == "spark":
            self.log.info("spark_starting", master=config.spark.master, queries=len(config.managed), synthetic_origin=start.isoformat())
            with self.notifier.extending(f"starting Spark ({config.spark.master})"):  # a JVM start may outlast TimeoutStartSec
                self.spark = spark_runtime(config, start, self.log, lambda e: self.controller and self.controller.report(e),
                                           lambda q, error: self.controller and self.controller.query_terminated(q, error),
                                           lambda m: self.reconciler and self.reconciler.coordinator.transition(m))
            source, applier = self.spark.stats, self.spark.applier
            self._install_signals()  # creating the SparkContext replaced the SIGINT handler with PySpark's
        else:
            self.source = source = synthetic_source(config, start)
            applier = SimulatedApplier(self.source)
        orders = join_orders(config)
        # Herald operators of governed queries register here; their skip fractions join each observation.
        self.heralds = HeraldMeter()
        source = MeteredSource(source, self.heralds)
        self.controller = Controller(config, self.store, source, applier, self.alerts, self.log, metrics=self.metrics,
                                     join_orders=orders, agents=agent_stats(config, self.store, start,
                                                                            lambda: self.controller and self.controller.fleet))
        self._watch_outbox(self.controller)
        agents, controller = self.controller.agents, self.controller
        if isinstance(agents, AgentStats):  # the fleet's reports are read beside the cycle, not in it
            self.feed = AgentFeed(agents, self.metrics, self.log, utcnow, active=lambda: bool(controller.fleet.queries),
                                  redact=config.redact).start()
        if self.spark is not None and config.unmanaged:
            start_unmanaged(config, self.spark, self.controller.emit)
        self.reconciler = apply_side(self.controller, applier, orders)
        self.reconciler.restore()  # a migration the last run left open goes on; every other query starts with its settings
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1), "lease": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )
        scheduler.add_listener(self._job_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR)
        schedule = config.schedule
        jobs = [
            ("cycle", self.controller.tick, schedule.observe_seconds),
            ("reconcile", self.reconciler.tick, schedule.apply_seconds),
            ("advance_migrations", self.reconciler.coordinator.advance, schedule.apply_seconds),
            ("housekeeping", self.controller.housekeeping, schedule.housekeeping_seconds),
            ("applications", self.controller.applications_gone, max(1.0, config.store.application_timeout_seconds / 4)),
        ]
        for job_id, step, seconds in jobs:
            scheduler.add_job(self._timed(job_id, step, seconds), "interval", seconds=seconds, id=job_id, next_run_time=start)
        renew_every = self.lease.renew_every
        scheduler.add_job(self._renew_lease, "interval", seconds=renew_every, id="lease", executor="lease",
                          next_run_time=start + timedelta(seconds=renew_every))
        self.scheduler = scheduler
        self.controller.note("daemon_started", f"armd started with {config.path}: store {config.redact(config.store.url)}, policy {config.policy.name}, "
                             f"{len(config.plan.queries)} queries{', dry run' if config.guardrails.dry_run else ''}; "
                             f"the store's lease is held as {self.lease.holder}")
        scheduler.start()
        self.apps = Applications(config.apps, config.path.parent, {
            "ARMD_STORE": config.store.url, "ARMD_CONFIG": str(config.path.resolve()),
            "ARMD_TIME_UNIT_SECONDS": repr(config.model.time_unit_seconds)}, self.controller.emit, self.log,
            environ=self.environ)
        self.apps.start()  # once the lease is held: a daemon in standby starts none
        if config.apps:
            scheduler.add_job(self.apps.watch, "interval", seconds=1.0, id="apps", executor="lease")
        self.notifier.ready(f"running {len(config.plan.queries)} queries, policy {config.policy.name}")
        try:
            self._wait(every_tick, tick_seconds)
        finally:
            self._stop(scheduler, source)
        if self.lease_lost is not None:
            raise StartError(f"stopped: the store's lease was taken by {self.lease_lost.describe()}; "
                            "only one daemon runs the loop on a store")

    # --- the stop ---------------------------------------------------------------------------------

    def _stop(self, scheduler: BackgroundScheduler, source: StatsSource) -> None:
        """Stop within ``STOP_SECONDS`` of the signal in any store state; say (and record) what could not be written."""
        assert self.controller is not None and self.store is not None
        controller, store, outbox = self.controller, self.store, self.controller.outbox
        asked = self._stop_asked if self._stop_asked is not None else time.monotonic()
        deadline = asked + STOP_SECONDS
        outbox.hold()  # the step in progress starts no new store call
        self.apps.terminate()  # the applications stop their queries meanwhile; waited for at the end
        self.log.info("stopping")
        self.notifier.stopping()
        scheduler.shutdown(wait=False)
        if self.feed is not None:
            self.feed.stop(timeout=0.0)  # a read in progress ends on its own; nothing waits for it
        if self._step.acquire(timeout=max(0.0, deadline - FINAL_WRITE_SECONDS - time.monotonic())):
            self._step.release()
        else:
            self.log.warning("step_still_running", message="the step in progress did not finish in time; stopping without it")
        _bounded(lambda: controller.flush(force=True), deadline - FINAL_WRITE_SECONDS)
        unwritten, rejected = len(outbox), sum(outbox.rejected_count.values())
        at = utcnow()
        counters = dict(controller.counters + self.reconciler.counters) if self.reconciler else dict(controller.counters)
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counters.items())) or "nothing done"
        details = {**counters, "records_written": sum(outbox.written.values()), "records_unwritten": unwritten,
                   "records_rejected": rejected}
        records: list[EventRecord] = []
        if unwritten:
            waiting = dict(Counter(kind for kind, _write, _at in list(outbox.backlog)))  # a copy: an abandoned flush may still run
            lost = EventRecord(at, "records_unwritten", "error",
                               f"armd stopped with {unwritten} records it could not write to the metadata store "
                               f"({', '.join(f'{k} {v}' for k, v in sorted(waiting.items()))}); they are lost", None,
                               {"records_unwritten": unwritten, "kinds": waiting})
            self.log.error(lost.kind, message=lost.message, records_unwritten=unwritten, kinds=waiting)
            self.alerts.alert(lost)
            records.append(lost)
        stopped = EventRecord(at, "daemon_stopped", "info", self.config.redact(f"armd stopped: {summary}"), None, details)
        records.append(stopped)
        self.log.info("daemon_stopped", message=stopped.message, records_unwritten=unwritten, records_rejected=rejected,
                      records_queued=dict(outbox.queued), records_written=dict(outbox.written))

        def last_writes() -> None:  # directly, not behind the backlog: a table that is gone must not hide the count
            for record in records:
                store.record_event(record)
            if self.lease_lost is None and self.lease is not None:
                self.lease.release()

        _bounded(last_writes, deadline - ALERTS_CLOSE_SECONDS / 4)
        self.alerts.close(min(ALERTS_CLOSE_SECONDS, max(0.1, deadline - time.monotonic())))
        self.metrics.close()
        source.close()
        if self.spark is not None:
            self.spark.close(stop_session=True)
        store.close()
        self.apps.wait()

    # --- the lease --------------------------------------------------------------------------------

    def _renew_lease(self) -> None:
        """The lease job: a lease someone else holds now stops this daemon (``lease_lost``)."""
        assert self.lease is not None and self.controller is not None
        if self.stop.is_set() or (held := self.lease.renew()) is None:
            return
        self.lease_lost = held
        taker = held.describe() if held.holder else "nobody (the lease row is gone)"
        self.controller.report(EventRecord(utcnow(), "lease_lost", "error", f"the store's lease is held by {taker}: this daemon "
                                           "stops deciding and exits", None, {"holder": held.holder, "ours": self.lease.holder}))
        self.controller.outbox.hold()
        self.stop.set()

    # --- the outbox's reports ---------------------------------------------------------------------

    def _watch_outbox(self, controller: Controller) -> None:
        """Rejected records and long outages become events (logged, recorded, alerted) through the controller."""
        outbox = controller.outbox
        outbox.outage_alert_seconds = OUTAGE_ALERT_CALLS * self.config.store.call_timeout_seconds

        def rejected(record: Any) -> None:
            controller.report(EventRecord(controller.clock(), "record_rejected", "error",
                                          f"the metadata store rejected a {record.kind} record, set aside so the others are "
                                          f"written: {record.error}", None,
                                          {"kind": record.kind, "error_type": record.error_type,
                                           "records_rejected": sum(outbox.rejected_count.values())}))

        def outage(waited: float, waiting: int, error: str) -> None:
            controller.report(EventRecord(controller.clock(), "store_unavailable", "error",
                                          f"the metadata store has been unavailable for {waited:.0f} s; {waiting} records wait "
                                          f"in memory: {error}", None, {"waited_seconds": round(waited, 3), "records_waiting": waiting}))

        def lost(waiting: int, error: str) -> None:
            # Recorded once a store is back (never, into this one), but logged and alerted now.
            controller.report(EventRecord(controller.clock(), "store_lost", "error", error, None,
                                          {"records_waiting": waiting}))

        outbox.on_rejected, outbox.on_outage, outbox.on_lost = rejected, outage, lost

    def _wait(self, every_tick: Callable[[], None] | None, tick_seconds: float) -> None:
        """Until the stop: redraw the live status and keep systemd's watchdog fed while the jobs make progress."""
        watchdog = self.notifier.watchdog_seconds
        wait = min(tick_seconds if every_tick else 0.5, watchdog or math.inf)
        # Steps that have not finished for this long mean the scheduler is stuck: let the watchdog restart armd.
        stalled_after = 2 * watchdog + self.config.schedule.observe_seconds if watchdog else math.inf
        next_tick = next_ping = time.monotonic()
        while True:
            now = time.monotonic()
            if watchdog and now >= next_ping and now - self._progress < stalled_after:
                self.notifier.watchdog()
                next_ping = now + watchdog
            if every_tick and now >= next_tick:
                every_tick()
                next_tick = now + tick_seconds
            if self.stop.wait(wait):
                if self._signal is not None:
                    self.log.info("signal_received", signal=self._signal)
                return

    def _timed(self, job_id: str, step: Callable[[], None], interval: float) -> Callable[[], None]:
        def run() -> None:
            if self.stop.is_set():
                return
            started = time.perf_counter()
            with self._step:
                step()
            took = time.perf_counter() - started
            self._progress = time.monotonic()
            if job_id == "cycle":
                self.metrics.cycle_done()
                if self.notifier.enabled and self.controller is not None:
                    self.notifier.status(cycle_status(self.controller))
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
            # No logging here: the handler runs on the main thread, maybe inside a log write that holds the log's lock.
            self._signal = signal.Signals(signum).name
            if self._stop_asked is None:
                self._stop_asked = time.monotonic()
            if self.controller is not None:
                self.controller.outbox.hold()  # the step in progress starts no new store call
            self.stop.set()

        def hangup(_signum: int, _frame: Any) -> None:
            if self.scheduler is not None:
                self.scheduler.add_job(self.reload, id="reload", replace_existing=True)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, hangup)
        early = early_stop.pending()
        if early is not None and self._signal is None:
            stop(early, None)

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
        if self.spark is not None:
            old = self.config
            if (config.source, config.spark, config.managed, config.plan_doc) != (old.source, old.spark, old.managed, old.plan_doc):
                self.controller.reject_reload("with source.kind = \"spark\", [source], [spark], [managed.*] and the plan cannot change "
                                              "on reload; restart armd to change them")
                return
        else:
            self.source.update(*synthetic_parts(config))
        self.config = config
        self.alerts.configure(build_hooks(config.alerts, self.log), config.alerting.dedup_seconds)
        self.controller.reload(config)
        assert self.reconciler is not None
        self.reconciler.reconfigure(config.bounds.memory, retry_policy(config), config.redact)


def _bounded(work: Callable[[], Any], deadline: float) -> bool:
    """Run ``work`` in a thread of its own until ``deadline`` (``time.monotonic``); False when it had not finished.

    A store call blocked past the stop's deadline is abandoned (the thread is a daemon), so the process can exit.
    """
    done = threading.Event()

    def run() -> None:
        try:
            work()
        except Exception:  # noqa: BLE001 - at the stop, a store that fails is counted by what stays unwritten
            pass
        finally:
            done.set()

    threading.Thread(target=run, name="armd-stop", daemon=True).start()
    return done.wait(max(0.0, deadline - time.monotonic()))

