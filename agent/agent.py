"""``Agent``: a user's own Spark application put under armd, with the store as the only thing it shares.

Why: teams run their streaming jobs as their own applications (their
sources, their ``foreachBatch`` sinks); armd cannot launch those. The agent
lives in the application instead. The user declares what armd may change
(``@agent.query(name, windows=..., slides=...)``) and keeps writing the
query; the agent

* registers the application and its queries in the store (``applications``,
  ``queries.app``; the cost-model plan derived from the DataFrame by
  ``adapters/spark/derive``, else the plan file given),
* reports every progress event of its queries as the daemon's own Spark
  statistics do (``SparkStats`` → ``record_observation``),
* polls ``desired_settings`` and puts new versions into force with GenMig
  inside the application, through the very reconciler and coordinator the
  daemon uses (``control/reconciler.py``), which write ``actual_states`` and
  the migrations — on its own threads, one reporting and one applying (``loop.py``). With ``replay=True``,
  where every source of a query can replay (the synthetic source, files),
  the new run replays its window and the old one stops within seconds
  (GenMig's module docstring; not the default: docs/cluster.md says why).

``mode="recommend"`` applies nothing: new desired versions are only logged
and recorded as ``recommendation`` events.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from armd.adapters.spark.genmig import DEFAULT_TIMEOUT_SECONDS, GenMigApplier
from armd.adapters.spark.listener import ProgressListener, SparkStats
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.store.sql import SqlStore
from armd.control.coordinator import ApplyPorts, Coordinator
from armd.control.ports import ActualState, EventRecord, QuerySettings
from armd.control.reconciler import Reconciler

from .loop import AgentLoop, AppStore
from .admission import AdmissionGate, check_on_reject
from .plan import describe
from .report import Reporter, query_spec
from .settings import AgentError, Range, Settings, seconds
from .sink import UserSink, read_sink

MODES = ("apply", "recommend")
GENMIG_HINTS = ("reference_point", "span_windows", "emits")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class KeywordLog:
    """structlog's call shape (``log.info(event, **fields)``) on the standard ``logging`` module, one line per event."""

    def __init__(self, name: str = "armd.agent") -> None:
        self._log = logging.getLogger(name)

    def _line(self, level: int, event: str, fields: Mapping[str, Any]) -> None:
        self._log.log(level, "%s %s", event, " ".join(f"{k}={v!r}" for k, v in fields.items()))

    def debug(self, event: str, **fields: Any) -> None:
        self._line(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._line(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._line(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._line(logging.ERROR, event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        self._line(logging.ERROR, event, fields)


@dataclass
class AgentQuery:
    """One ``@agent.query`` declaration."""

    name: str
    function: Callable[[Any, Settings], Any]
    windows: dict[str, Range]
    slides: dict[str, Range]
    weight: float = 1.0
    qos: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    streams: tuple[str, ...] = ()
    initial: dict[str, float] = field(default_factory=dict)
    """Builder node → initial window (seconds); default: the range's max."""
    initial_slide: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    mode: str | None = None
    """``recommend`` for this query alone (the application's mode otherwise)."""

    def builder(self) -> Callable[[Any, QueryParams], Any]:
        """``builder(spark, params)`` as ``QueryManager`` and GenMig call it, carrying the function's GenMig hints."""
        function, windows, slides = self.function, self.windows, self.slides

        def build(spark: Any, params: QueryParams) -> Any:
            return function(spark, Settings(spark, params, windows, slides))

        for hint in GENMIG_HINTS:
            if hasattr(function, hint):
                setattr(build, hint, getattr(function, hint))
        build.__name__ = getattr(function, "__name__", self.name)
        return build


class Agent:
    """armd inside a user's Spark application (see the module docstring and docs/agent.md)."""

    def __init__(self, spark: Any, store: str | SqlStore, app: str, mode: str = "apply", *,
                 checkpoint_root: str | Path | None = None, poll_seconds: float = 1.0,
                 time_unit_seconds: float = 0.001, plan: str | Path | None = None,
                 migration_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                 listener: ProgressListener | None = None, log: Any = None, on_reject: str = "start",
                 instrument: bool = True, replay: bool = False, clock: Callable[[], datetime] = utc_now) -> None:
        if mode not in MODES:
            raise AgentError(f"Agent(mode={mode!r}): mode must be one of {', '.join(MODES)}")
        if not app or not isinstance(app, str):
            raise AgentError(f"Agent(app={app!r}): give the application a non-empty name (unique in the store)")
        if not poll_seconds > 0:
            raise AgentError(f"Agent(poll_seconds={poll_seconds!r}): must be > 0")
        self.spark, self.app, self.mode, self.clock = spark, app, mode, clock
        self.instrument = bool(instrument)
        """armd's probes in each query's plan (``adapters/spark/instrument.py``); False: none (no selectivities or group
        counts measured: the plan's own figures stand)."""
        self.on_reject = check_on_reject(on_reject, f"Agent(app={app!r})")
        self.time_unit_seconds, self.poll_seconds = float(time_unit_seconds), float(poll_seconds)
        self.plan_file = Path(plan) if plan is not None else None
        self.log = log or KeywordLog()
        self.store = store if isinstance(store, SqlStore) else SqlStore.open(str(store))
        self.store.require_current_schema()
        self.reporter = Reporter(self.store, app, mode)
        self.reporter.register(clock())
        self._own_listener = listener is None
        self.listener = listener or ProgressListener().attach(spark)
        root = checkpoint_root or tempfile.mkdtemp(prefix=f"armd-agent-{app}-")
        self.manager = QueryManager(spark, root)
        self.applier = GenMigApplier(self.manager, self.listener, self.time_unit_seconds, log=self.log,
                                     timeout_seconds=migration_timeout_seconds, replay=replay,
                                     on_transition=lambda m: self.coordinator.transition(m))
        self.declared: dict[str, AgentQuery] = {}
        self.started: dict[str, AgentQuery] = {}
        self.queries: dict[str, Any] = {}
        """The Spark query each started query was started as."""
        self._pending: dict[str, tuple[Any, ...]] = {}
        self.gate = AdmissionGate(self.store, app, self.log, self._launch)
        self.view = AppStore(self.store, lambda: set(self.started))
        ports = ApplyPorts(self.view, self.applier, self._record, self._emit, clock, self.log)
        self.coordinator = Coordinator(ports, memory_bound=float("inf"))
        self.reconciler = Reconciler(ports, self.coordinator)
        self.stats = SparkStats(self.listener, self.time_unit_seconds, queries=(), stateful=self.manager.stateful)
        self.loop = AgentLoop(self)
        self._failed: list[str] = []
        self.listener.add_termination_hook(self._terminated)
        self.log.info("agent_registered", app=app, mode=mode, store=self.store.url_redacted)

    # --- declaring and starting ---

    def query(self, name: str, *, windows: Mapping[str, tuple[Any, Any]] | None = None,
              slides: Mapping[str, tuple[Any, Any]] | None = None, weight: float = 1.0, qos: Mapping[str, Any] | None = None,
              sources: Mapping[str, Mapping[str, Any]] | None = None, streams: Sequence[str] = (),
              initial: Mapping[str, Any] | None = None, initial_slide: Any = None,
              extra: Mapping[str, Any] | None = None, mode: str | None = None) -> Callable[[Callable[[Any, Settings], Any]], Callable[[Any, Settings], Any]]:
        """Declare a query armd governs: ``windows``/``slides`` give (min, max) per window node; returns a decorator."""
        if not name or "@" in name:
            raise AgentError(f"@agent.query({name!r}): a query name is non-empty and has no '@'")
        if name in self.declared:
            raise AgentError(f"@agent.query({name!r}): already declared in this application")
        ranges = {n: Range.parse(v, f"query {name!r}: windows[{n!r}]") for n, v in (windows or {}).items()}
        slide_ranges = {n: Range.parse(v, f"query {name!r}: slides[{n!r}]") for n, v in (slides or {}).items()}
        unknown = sorted(set(slide_ranges) - set(ranges))
        if unknown:
            raise AgentError(f"query {name!r}: slides for {unknown} but no window of that name; windows: {sorted(ranges)}")
        if not weight > 0:
            raise AgentError(f"query {name!r}: weight must be > 0, got {weight!r}")
        if mode is not None and mode not in MODES:
            raise AgentError(f"query {name!r}: mode={mode!r}; allowed: {', '.join(MODES)} (or leave it out for the application's)")
        start = {n: seconds(v, f"query {name!r}: initial[{n!r}]") for n, v in (initial or {}).items()}
        for node, value in start.items():
            if node not in ranges or not ranges[node].low <= value <= ranges[node].high:
                raise AgentError(f"query {name!r}: initial window {node!r} = {value:g} s lies outside its declared range")

        def register(function: Callable[[Any, Settings], Any]) -> Callable[[Any, Settings], Any]:
            self.declared[name] = AgentQuery(
                name, function, ranges, slide_ranges, float(weight), dict(qos or {}), dict(sources or {}), tuple(streams),
                {n: start.get(n, r.high) for n, r in ranges.items()},
                None if initial_slide is None else seconds(initial_slide, f"query {name!r}: initial_slide"), dict(extra or {}),
                mode)
            return function

        return register

    def start(self, name: str, sink: Callable[[Any], Any], on_reject: str | None = None) -> Any:
        """Register the query in the store and start it with the settings in force; returns the Spark query, or ``None``
        while it waits for armd's admission verdict (``on_reject``, default the agent's: agent/admission.py)."""
        if name not in self.declared:
            raise AgentError(f"agent.start({name!r}): no such query; declared: {', '.join(sorted(self.declared)) or 'none'}")
        if name in self.started or name in self._pending:
            raise AgentError(f"agent.start({name!r}): already started")
        on_reject = check_on_reject(self.on_reject if on_reject is None else on_reject, f"agent.start({name!r})")
        declared = self.declared[name]
        writer = read_sink(name, sink)
        params, in_force, version = self._initial(declared)
        builder = declared.builder()
        plan = describe(self.spark, builder, declared, params, self.time_unit_seconds, self.plan_file, self.log)
        params = plan.apply(params)
        self.stats.nodes[name] = dict(plan.nodes)  # measurements by label → the plan's node ids
        settings = in_force or self._settings(declared, params)
        self.reporter.add_query(name, query_spec(plan, declared.mode or self.mode, declared.windows, declared.slides, settings,
                                                 self.time_unit_seconds), declared.weight, declared.qos, self.clock())
        self._pending[name] = (declared, writer, builder, params, settings, version)
        self.gate.hold(name, on_reject)
        self.loop.start()
        return self.queries.get(name)

    def _launch(self, name: str, minimum: bool) -> None:
        """Start a registered query: at the settings armd wants by now (or at its QoS minimum when rejected)."""
        declared, writer, builder, params, settings, version = self._pending.pop(name)
        wanted = self.store.desired_settings().get(name)
        if minimum:
            settings = self._minimum(declared, params)
        elif wanted is not None and self.mode == "apply" and not wanted.recommend_only and wanted.plan_version > version:
            settings, version = wanted.settings, wanted.plan_version
        params = params.with_settings(settings, self.time_unit_seconds)
        self.manager.register(ManagedSpec(name, builder, UserSink(writer.function), params,
                                          output_mode=writer.output_mode or "append", trigger=writer.trigger_args,
                                          streams=declared.streams, instrument=self.instrument))
        self.started[name] = declared
        self.stats.queries = set(self.started)  # type: ignore[assignment]
        if declared.streams:
            self.stats.streams[name] = declared.streams
        if self._resumed(name):
            self.queries[name] = self.manager.get(name).query
            return
        self.queries[name] = self.manager.start(name)
        self.coordinator.report(ActualState(name, version, settings, "steady", at=self.clock()))
        self.log.info("query_started", app=self.app, query=name, plan_version=version, windows=dict(settings.windows),
                      granularity=settings.granularity, mode=self.mode, at_minimum=minimum)
        instrumented = self.manager.get(name).instrumented
        if instrumented is not None and instrumented.error is not None:  # e.g. over Spark Connect: no JVM to rewrite with
            self.log.warning("query_not_instrumented", app=self.app, query=name, reason=instrumented.error,
                             hint="it runs unmeasured: no measured selectivities or group counts, the plan's figures stand")

    def _resumed(self, name: str) -> bool:
        """Go on with the migration the application's last run left open (it died, or stopped, mid-way), if any.

        Both runs continue from their checkpoints, each on its side of the stored T_split, so the migration ends
        exactly as if the application had not stopped. One that cannot go on (checkpoints gone, no live state) is
        closed as failed by the coordinator; the query then starts with the settings in force and the next
        reconcile migrates it again."""
        if self.mode != "apply" or not any(row["query"] == name for row in self.view.open_migrations()):
            return False
        actual = self.view.store.actual_states().get(name)
        if actual is not None:
            self.coordinator.actual[name] = actual
        return name in self.coordinator.resume()

    def _minimum(self, declared: AgentQuery, params: QueryParams) -> QuerySettings:
        """The QoS minimum: every window at the low end of its range, the coarsest slide allowed."""
        unit = self.time_unit_seconds
        windows = {params.node(n): r.low / unit for n, r in declared.windows.items()}
        granularity = max((r.high for r in declared.slides.values()), default=None)
        return QuerySettings(0.0, 0.0, windows, None if granularity is None else granularity / unit, 0.0)

    def _initial(self, declared: AgentQuery) -> tuple[QueryParams, QuerySettings | None, int]:
        """Initial params; the settings in force and their version when the store has them (a restarted application)."""
        nodes = {n: f"{declared.name}.{n}" for n in declared.windows}
        windows = {nodes[n]: w for n, w in declared.initial.items()}
        slides = [r.low if declared.initial_slide is None else declared.initial_slide for r in declared.slides.values()]
        params = QueryParams(windows=windows, granularity=min(slides) if slides else None,
                             extra={**declared.extra, "nodes": nodes, "sources": dict(declared.sources)})
        actual = self.view.store.actual_states().get(declared.name)
        if actual is not None and actual.settings is not None and actual.phase != "failed":
            return params, actual.settings, actual.plan_version
        return params, None, 0

    def _settings(self, declared: AgentQuery, params: QueryParams) -> QuerySettings:
        """``params`` as model settings (time unit), with fractions of the declared ranges."""
        unit = self.time_unit_seconds
        windows = {params.node(n): params.window(n, r.high) / unit for n, r in declared.windows.items()}
        fw = min((r.fraction(params.window(n, r.high)) for n, r in declared.windows.items()), default=1.0)
        granularity = None if params.granularity is None else params.granularity / unit
        fg = min((1.0 - r.fraction(params.granularity or r.low) for r in declared.slides.values()), default=1.0)
        return QuerySettings(fw, fg, windows, granularity, fw)

    # --- running ---

    def await_termination(self, timeout: float | None = None) -> bool:
        """Block until ``stop()`` (True) or ``timeout`` seconds (False); raises ``AgentError`` when a query failed."""
        stopped = self.loop.stopped.wait(timeout)
        if self._failed:
            raise AgentError(self._failed[0])
        return stopped

    def stop(self) -> None:
        """Stop the agent's threads, every run of every query (migrations too), and tell the store the application left."""
        self.loop.stop()
        migrating = set(self.applier.migrations)
        self.applier.close()  # an open migration's runs stop with their checkpoints: the next start resumes it
        for name in list(self.started):
            self.manager.stop(name, keep_checkpoint=name in migrating)
        try:
            self.loop.report(self.clock())
            self.reporter.stopped(self.clock())
        except Exception as exc:  # noqa: BLE001 - stopping must finish; the daemon's timeout marks the application gone
            self.log.warning("agent_stop_unrecorded", app=self.app, error=str(exc))
        if self._own_listener:
            self.listener.detach(self.spark)
        self.log.info("agent_stopped", app=self.app)

    def _terminated(self, event: Any) -> None:
        if event.query in self.started and not self.manager.failed_at_start(event.run_id):
            self._failed.append(f"query {event.query!r} failed: {event.exception or event.error_class}")
            self.loop.stopped.set()

    # --- the ports' plumbing ---

    def _record(self, kind: str, write: Callable[[], Any]) -> None:
        """Store writes run at once on the agent's thread; one that fails is logged (the next report writes anew)."""
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - a store hiccup must not stop the application
            self.log.warning("store_write_failed", app=self.app, record=kind, error=str(exc))

    def _emit(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
              *, alert: bool = True, **fields: Any) -> None:
        getattr(self.log, "error" if severity == "error" else severity if severity == "warning" else "info")(
            kind, app=self.app, query=query, message=message, **fields)
        event = EventRecord(self.clock(), kind, severity, message, query=query, details={**(details or {}), "app": self.app})
        self._record("event", lambda: self.store.record_event(event))
