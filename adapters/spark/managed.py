"""Managed queries: Spark queries armd starts, stops and restarts with the settings it decides.

A user hands armd a *builder*, ``"module:function"``, called as
``builder(spark, params) -> DataFrame`` (a streaming DataFrame). ``params``
(``QueryParams``) carry the settings in force — window sizes and slides in
seconds per plan node, the query's granularity, a join order — so the same
builder yields the query at any setting. armd adds the sink
(``foreachBatch`` through a ``BatchWriter``), a checkpoint directory of its
own for every run, and the Spark query name ``NAME@VERSION`` by which the
listener maps progress back to the armd query.

``NaiveRestartApplier`` is the simplest way to put new settings into force:
stop the query and start it again on a fresh checkpoint. It is LOSSY (see
its docstring); it exists as the baseline that GenMig must beat.
"""

from __future__ import annotations

import importlib
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from armd.control.errors import PermanentError
from armd.control.ports import EventRecord, QuerySettings

from .sinks import BatchSink, BatchWriter, Keep

Builder = Callable[[SparkSession, "QueryParams"], DataFrame]
OUTPUT_MODES = ("append", "update", "complete")
TRIGGER_KINDS = ("processingTime", "once", "availableNow", "continuous")
NAME_SEPARATOR = "@"
STOP_GRACE_SECONDS = 10.0
"""How long a stop waits for the micro-batch in progress to finish before interrupting it."""
START_ATTEMPTS = 3
"""Starts of one run that fail while Spark initialises its sources (see ``QueryManager.start``)."""
START_WAIT_SECONDS = 120.0
"""How long a start waits for Spark to initialise the run's sources."""
INITIALISING = ("Starting new streaming query.", "Initializing StreamExecution", "Initializing sources")
"""``StreamingQuery.status`` messages before a run's sources are ready."""
TRANSIENT_START_ERRORS = ("Python worker failed to connect back",)
"""Start-up failures of a loaded machine: Spark gives a Python data source's worker 10 s to connect back."""


class StartError(RuntimeError):
    """A run failed while Spark initialised its sources, every attempt; nothing of it reached the sink."""


@dataclass(frozen=True)
class QueryParams:
    """The settings a builder builds its query with; all times in seconds."""

    windows: Mapping[str, float] = field(default_factory=dict)
    """Window size per window node id."""
    slides: Mapping[str, float] = field(default_factory=dict)
    """Slide per window node id (Spark's slide is the model's granularity); see ``slide``."""
    granularity: float | None = None
    """The query's granularity (the slide of windows without their own entry in ``slides``)."""
    join_order: tuple[str, ...] | None = None
    """Order in which a multi-way join combines its inputs (stream or node names)."""
    version: int = 0
    """Plan version: 0 for the first run, +1 for every restart with new settings."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the builder needs (fixed per query)."""
    drop_rate: float = 0.0
    """Load shedding: the share of each source's rows dropped at random before any window (see ``builders.shed``)."""

    def node(self, name: str) -> str:
        """The plan node id that the builder's node ``name`` stands for: ``extra["nodes"][name]``, else ``name``.

        Plan node ids are unique across the whole plan, so two queries built
        by the same builder map its node names to their own ids.
        """
        return str((self.extra.get("nodes") or {}).get(name, name))

    def window(self, node: str, default: float) -> float:
        """The window size of the builder's node ``node`` (looked up by its plan node id)."""
        return float(self.windows.get(self.node(node), default))

    def slide(self, node: str, default: float) -> float:
        """The node's slide: its own entry, else the query's granularity, else ``default``."""
        if self.node(node) in self.slides:
            return float(self.slides[self.node(node)])
        return float(self.granularity) if self.granularity is not None else float(default)

    def with_settings(self, settings: QuerySettings, time_unit_seconds: float) -> "QueryParams":
        """These params with the window sizes, granularity and drop rate of ``settings`` (model units → seconds)."""
        windows = {**self.windows, **{node: float(w) * time_unit_seconds for node, w in settings.windows.items()}}
        granularity = self.granularity if settings.granularity is None else float(settings.granularity) * time_unit_seconds
        return replace(self, windows=windows, granularity=granularity, drop_rate=float(settings.drop_rate))

    def as_json(self) -> dict[str, Any]:
        return {
            "windows": dict(self.windows), "slides": dict(self.slides), "granularity": self.granularity,
            "join_order": list(self.join_order) if self.join_order else None, "version": self.version,
            "extra": dict(self.extra), "drop_rate": self.drop_rate,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "QueryParams":
        """Read ``as_json`` back (e.g. from a stored migration); raises ``ValueError`` naming what is wrong."""
        try:
            return cls(windows={k: float(v) for k, v in (doc.get("windows") or {}).items()},
                       slides={k: float(v) for k, v in (doc.get("slides") or {}).items()},
                       granularity=None if doc.get("granularity") is None else float(doc["granularity"]),
                       join_order=tuple(doc["join_order"]) if doc.get("join_order") else None,
                       version=int(doc.get("version", 0)), extra=dict(doc.get("extra") or {}),
                       drop_rate=float(doc.get("drop_rate", 0.0)))
        except (AttributeError, TypeError, ValueError) as exc:
            raise ValueError(f"stored query parameters are malformed ({exc}): {doc!r}") from None


@dataclass(frozen=True)
class ManagedSpec:
    """How to run one managed query."""

    name: str
    builder: "str | Builder"
    """``"module:function"`` (or the function), called as ``function(spark, params) -> DataFrame``."""
    sink: BatchSink
    params: QueryParams = field(default_factory=QueryParams)
    """Initial settings."""
    output_mode: str = "append"
    trigger: Mapping[str, Any] | None = None
    """Keyword arguments of ``DataStreamWriter.trigger``, e.g. ``{"processingTime": "1 second"}``; None: as fast as possible."""
    streams: tuple[str, ...] = ()
    """Stream name of each source in Spark's order; only needed for sources other than ``armd-synthetic``."""
    instrument: bool = True
    """Insert armd's measurements into the query's plan (``instrument.py``); users write no ``observe()``."""

    def __post_init__(self) -> None:
        if not self.name or NAME_SEPARATOR in self.name:
            raise ValueError(f"managed query name must be non-empty and contain no {NAME_SEPARATOR!r}, got {self.name!r}")
        if self.output_mode not in OUTPUT_MODES:
            raise ValueError(f"query {self.name!r}: output_mode must be one of {', '.join(OUTPUT_MODES)}, got {self.output_mode!r}")
        unknown = sorted(set(self.trigger or {}) - set(TRIGGER_KINDS))
        if unknown:
            raise ValueError(f"query {self.name!r}: unknown trigger {unknown}; allowed: {', '.join(TRIGGER_KINDS)}")
        load_builder(self.builder)


class UnknownQuery(PermanentError, LookupError):
    """No managed query of that name: retrying cannot help until the configuration registers it."""


def load_builder(ref: "str | Builder") -> Builder:
    """The function named by ``"module:function"`` (or the function itself); raises ``LookupError`` saying what is wrong.

    ``armd.agent`` passes the user's own function: in an application the builder need not be importable by name.
    """
    if callable(ref):
        return ref
    module_name, sep, attr = str(ref).partition(":")
    if not sep or not module_name or not attr:
        raise LookupError(f"builder must be 'module:function' (e.g. 'myjobs.clicks:build'), got {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"builder {ref!r}: cannot import module {module_name!r}: {exc}") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise LookupError(f"builder {ref!r}: module {module_name!r} has no attribute {attr!r}")
    if not callable(target):
        raise LookupError(f"builder {ref!r}: {attr!r} is not callable")
    return target


def spark_query_name(name: str, version: int) -> str:
    return f"{name}{NAME_SEPARATOR}{version}"


def armd_query_name(spark_name: str | None) -> str | None:
    """The armd query a Spark query name ``NAME@VERSION`` belongs to (None for unmanaged queries)."""
    if not spark_name or NAME_SEPARATOR not in spark_name:
        return None
    name, _, version = spark_name.rpartition(NAME_SEPARATOR)
    return name if version.isdigit() else None


class ManagedQuery:
    """A registered query and its current run."""

    def __init__(self, spec: ManagedSpec) -> None:
        self.spec = spec
        self.params = spec.params
        self.query: StreamingQuery | None = None
        self.writer: BatchWriter | None = None
        self.checkpoint: Path | None = None
        self.runs = 0
        self.instrumented: Any = None
        """The ``Instrumented`` of the current run's plan (None when not instrumented)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        return self.query is not None and self.query.isActive

    @property
    def spark_name(self) -> str:
        return spark_query_name(self.name, self.params.version)


@dataclass
class Run:
    """One run of a managed query that is no longer its current one (see ``QueryManager.hand_over``)."""

    query: StreamingQuery
    writer: BatchWriter
    checkpoint: Path
    params: QueryParams


def remote(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (its queries run in a server, not in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _start_failure(query: StreamingQuery, timeout: float) -> str | None:
    """The run's error if it stopped before Spark had initialised its sources (within ``timeout``), else None."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status.get("message") in INITIALISING and time.monotonic() < deadline:
        time.sleep(0.05)
    if query.isActive:
        return None
    error = query.exception()
    return None if error is None else str(error)


class QueryManager:
    """Starts, stops and restarts managed queries; every run on its own checkpoint under ``checkpoint_root``."""

    def __init__(self, spark: SparkSession, checkpoint_root: str | Path, *, keep_checkpoints: bool = False) -> None:
        self.spark = spark
        self.checkpoint_root = Path(checkpoint_root)
        self.keep_checkpoints = keep_checkpoints
        self._queries: dict[str, ManagedQuery] = {}
        self._lock = threading.RLock()
        self._failed_at_start: set[str] = set()

    def register(self, spec: ManagedSpec) -> ManagedQuery:
        with self._lock:
            if spec.name in self._queries:
                raise ValueError(f"query {spec.name!r} is already registered")
            managed = self._queries[spec.name] = ManagedQuery(spec)
            return managed

    def unregister(self, name: str) -> None:
        with self._lock:
            self.stop(name)
            del self._queries[name]

    def get(self, name: str) -> ManagedQuery:
        with self._lock:
            try:
                return self._queries[name]
            except KeyError:
                known = ", ".join(sorted(self._queries)) or "none"
                raise UnknownQuery(f"no managed query {name!r}; registered: {known}") from None

    def stateful(self, name: str) -> tuple[str, ...]:
        """Labels of the query's stateful operators in Spark's ``stateOperators`` order (empty when unknown)."""
        managed = self._queries.get(name)
        instrumented = managed.instrumented if managed is not None else None
        return tuple(instrumented.stateful) if instrumented is not None and instrumented.error is None else ()

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._queries)

    def start(self, name: str, params: QueryParams | None = None, keep: Keep | None = None,
              checkpoint: Path | None = None) -> StreamingQuery:
        """Build the query with ``params`` (default: its current ones) and start it on a fresh checkpoint.

        ``keep`` filters every batch before the sink from the first one on (see
        ``BatchWriter``). With ``checkpoint`` the run continues an earlier run
        of the same plan from that checkpoint (its state and source offsets).
        """
        with self._lock:
            managed = self.get(name)
            if managed.running:
                raise RuntimeError(f"query {name!r} is already running (Spark query {managed.spark_name})")
            if params is not None:
                managed.params = params
            spec = managed.spec
            df = load_builder(spec.builder)(self.spark, managed.params)
            if not getattr(df, "isStreaming", False):
                raise TypeError(f"builder {spec.builder!r} of query {name!r} must return a streaming DataFrame")
            if spec.instrument:
                from .instrument import instrument

                managed.instrumented = instrument(df)
                df = managed.instrumented.frame
            if checkpoint is None:
                checkpoint = self.checkpoint_root / name / f"v{managed.params.version:04d}-{uuid.uuid4().hex[:8]}"
            elif not (checkpoint / "offsets").is_dir():
                raise FileNotFoundError(f"query {name!r}: cannot resume from {checkpoint}: it is not a Spark checkpoint "
                                        "(no offsets directory); it was deleted or never written")
            if remote(self.spark):  # the foreachBatch function runs in the server's Python: its filter goes by files
                from .shared_writer import SharedBatchWriter

                board = self.checkpoint_root / name / "writers" / f"v{managed.params.version:04d}-{uuid.uuid4().hex[:8]}"
                writer: BatchWriter = SharedBatchWriter(spec.sink, name, managed.params.version, board, keep)
            else:
                writer = spec.sink.writer(name, managed.params.version, keep)
            stream = (
                df.writeStream.queryName(managed.spark_name)
                .outputMode(spec.output_mode)
                .foreachBatch(writer)
            )
            if spec.trigger:
                stream = stream.trigger(**spec.trigger)
            managed.query, checkpoint = self._start(name, stream, checkpoint, fresh=not (checkpoint / "offsets").is_dir())
            managed.writer, managed.checkpoint = writer, checkpoint
            managed.runs += 1
            return managed.query

    def _start(self, name: str, stream: Any, checkpoint: Path, *, fresh: bool) -> tuple[StreamingQuery, Path]:
        """Start ``stream`` and wait until Spark has initialised its sources; retry a transient failure there.

        On a loaded machine the worker a Python data source needs at start-up
        may not connect back within Spark's fixed 10 s, and the run fails
        before its first batch: nothing reached the sink, so starting it
        again is safe (on a fresh checkpoint unless it resumes one). Such
        runs are remembered (``failed_at_start``) so that termination hooks
        leave them to this method; after ``START_ATTEMPTS`` it raises
        ``StartError``. Returns the run and the checkpoint it runs on.
        """
        for attempt in range(1, START_ATTEMPTS + 1):
            query = stream.option("checkpointLocation", str(checkpoint)).start()
            error = _start_failure(query, START_WAIT_SECONDS)
            if error is None:
                return query, checkpoint
            self._failed_at_start.add(str(query.runId))
            if attempt == START_ATTEMPTS or not any(text in error for text in TRANSIENT_START_ERRORS):
                raise StartError(f"query {name!r} failed while Spark initialised its sources "
                                 f"(attempt {attempt} of {START_ATTEMPTS}): {error.splitlines()[0]}")
            import structlog

            structlog.get_logger("armd.spark").warning("query_start_retried", query=name, attempt=attempt,
                                                       error=error.splitlines()[0])
            if fresh:
                shutil.rmtree(checkpoint, ignore_errors=True)
                checkpoint = checkpoint.with_name(f"{checkpoint.name.rsplit('-', 1)[0]}-{uuid.uuid4().hex[:8]}")
        raise AssertionError("unreachable")

    def failed_at_start(self, run_id: str) -> bool:
        """Whether the run failed while ``start`` waited for it (``start`` retried it or raised; hooks ignore it)."""
        with self._lock:  # held by a start in progress: its verdict on the run is known once this returns
            return run_id in self._failed_at_start

    def stop(self, name: str, grace_seconds: float = STOP_GRACE_SECONDS, *, keep_checkpoint: bool = False) -> None:
        """Stop the current run (if any) between two micro-batches; its checkpoint is deleted unless ``keep_checkpoints``.

        ``StreamingQuery.stop`` interrupts a batch in progress (Spark then
        logs the aborted write as an error), so the stop waits up to
        ``grace_seconds`` until no batch runs or the running one has
        finished (when batches run back to back, the next one is then still
        planning, before anything is written).
        """
        with self._lock:
            managed = self.get(name)
            query = managed.query
            if query is not None:
                stop_between_batches(query, grace_seconds)
                managed.query = None
            if managed.checkpoint is not None and not (self.keep_checkpoints or keep_checkpoint):
                shutil.rmtree(managed.checkpoint, ignore_errors=True)

    def hand_over(self, name: str) -> "Run":
        """Detach the current run from the managed query (it keeps running) so that a new run can start beside it."""
        with self._lock:
            managed = self.get(name)
            if not managed.running:
                raise RuntimeError(f"query {name!r} has no running run to hand over")
            run = Run(managed.query, managed.writer, managed.checkpoint, managed.params)  # type: ignore[arg-type]
            managed.query = None
            managed.checkpoint = None
            return run

    def take_back(self, name: str, run: "Run") -> None:
        """Make a handed-over run the current one again (when its successor could not start)."""
        with self._lock:
            managed = self.get(name)
            managed.query, managed.writer, managed.checkpoint, managed.params = run.query, run.writer, run.checkpoint, run.params

    def end_run(self, run: "Run", grace_seconds: float = STOP_GRACE_SECONDS, *, keep_checkpoint: bool = False) -> None:
        """Stop a handed-over run between batches and drop its checkpoint (unless ``keep_checkpoint(s)``)."""
        if run.query.isActive:
            stop_between_batches(run.query, grace_seconds)
        if not (self.keep_checkpoints or keep_checkpoint):
            shutil.rmtree(run.checkpoint, ignore_errors=True)

    def restart(self, name: str, params: QueryParams) -> StreamingQuery:
        """Stop, then start with ``params`` as the next plan version on a fresh checkpoint (state is lost)."""
        with self._lock:
            managed = self.get(name)
            self.stop(name)
            return self.start(name, replace(params, version=managed.params.version + 1))

    def stop_all(self) -> None:
        with self._lock:
            for name in list(self._queries):
                self.stop(name)


def stop_between_batches(query: StreamingQuery, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """Stop ``query`` once no batch runs or the running one has finished (waiting at most ``grace_seconds``)."""
    running = _last_batch(query)
    deadline = time.monotonic() + grace_seconds
    while query.isActive and query.status.get("isTriggerActive") and _last_batch(query) == running and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def _last_batch(query: StreamingQuery) -> int | None:
    progress = query.lastProgress
    return None if progress is None else int(progress.get("batchId", -1))


class NaiveRestartApplier:
    """Applies new settings by stopping the query and restarting it on a fresh checkpoint. LOSSY.

    A plain ``control.ports.Applier``: it finishes within ``apply`` and holds
    no extra state (the old state is dropped), so it offers neither
    ``LiveApplier`` nor ``ResumableApplier``. A query it does not know raises
    ``UnknownQuery`` (a ``PermanentError``).

    What is lost: the new run starts from the source's *latest* offsets (or
    its configured starting offsets) with empty state. Window contents of the
    old run that had not been emitted are dropped, windows that straddle the
    restart are emitted with only part of their elements, and elements that
    arrive while the query is down are not seen (or seen twice, depending on
    the source's starting position). Every apply is logged as
    ``naive_restart`` with ``lossy=True`` and reported as an ``EventRecord``
    through ``on_event``. This is the baseline the GenMig migration beats;
    use it only when losing results around a change is acceptable.
    """

    name = "naive-restart"
    strategy = "naive-restart"

    def __init__(
        self,
        manager: QueryManager,
        time_unit_seconds: float,
        *,
        on_event: Callable[[EventRecord], None] | None = None,
        log: Any = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not time_unit_seconds > 0:
            raise ValueError(f"time_unit_seconds must be > 0, got {time_unit_seconds!r}")
        self.manager = manager
        self.time_unit_seconds = float(time_unit_seconds)
        self.on_event = on_event
        if log is None:
            import structlog

            log = structlog.get_logger("armd.spark")
        self.log = log
        self.clock = clock or (lambda: datetime.now(timezone.utc))

    def announce(self) -> None:
        """Say, once at start, that this applier was chosen and loses results (each use says it again)."""
        message = ('[spark] migration = "naive-restart": every change of settings restarts its query on a fresh '
                   "checkpoint and loses the results of windows open across it; GenMig is exact")
        self.log.warning("naive_restart_configured", migration=self.strategy, lossy=True)
        if self.on_event is not None:
            self.on_event(EventRecord(self.clock(), "naive_restart_configured", "warning", message, details={"lossy": True}))

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        managed = self.manager.get(query)
        before = managed.params
        params = before.with_settings(new, self.time_unit_seconds)
        if managed.running and replace(params, version=before.version) == before:
            self.log.info("settings_unchanged", query=query, migration=self.strategy)
            return self.strategy
        was_running = managed.running
        old_checkpoint = managed.checkpoint
        if not (was_running or managed.runs):
            self.manager.start(query, params)
            self.log.info("query_started", query=query, plan_version=managed.params.version,
                          windows=dict(managed.params.windows), granularity=managed.params.granularity)
            return self.strategy
        self.manager.restart(query, params)
        after = managed.params
        details = {
            "lossy": True,
            "old_params": before.as_json(),
            "new_params": after.as_json(),
            "was_running": was_running,
            "old_checkpoint": str(old_checkpoint) if old_checkpoint else None,
            "new_checkpoint": str(managed.checkpoint),
        }
        self.log.warning("naive_restart", query=query, migration=self.strategy, lossy=True,
                         plan_version=after.version, windows=dict(after.windows), granularity=after.granularity)
        if self.on_event is not None:
            self.on_event(EventRecord(
                self.clock(), "naive_restart", "warning",
                f"query {query!r} restarted with new settings on a fresh checkpoint (plan version {after.version}); "
                "lossy: state of the old run and results of windows open across the restart are lost",
                query=query, details=details,
            ))
        return self.strategy
