"""Statistics from running Spark queries: a progress listener and the ``StatsSource`` built on it.

``ProgressListener`` is a ``StreamingQueryListener`` that keeps every
progress event of the session (input rows per source, event-time
min/max/watermark, batch durations, per state operator numRowsTotal,
memoryUsedBytes, numRowsDroppedByWatermark and custom metrics, observed
metrics) as a ``ProgressRecord`` in a bounded, thread-safe buffer with a
sequence number, so several readers (the stats source, the store recorder)
each consume what is new to them. Spark calls listeners asynchronously on
its listener bus, so a record may arrive shortly after a batch finished;
``wait_for`` lets tests wait for it instead of sleeping.

``SparkStats`` implements the daemon's ``StatsSource`` port from those
records. It only translates Spark's progress into counts; the estimators
that turn counts into the model's inputs are pure and live with the cost
model (``armd.costmodel.measured``, where the formulas are). Per observation
interval (the records since the previous call):

* d per source stream (``ArrivalPool``): every batch contributes
  (rows_i, T_i) per source, rows_i its input rows and T_i the event time it
  covered: end − start offset for ``armd-synthetic`` (offsets are event
  time), otherwise (one source per query) the advance of the batch's max
  event time over the previous batch's. Pooled over batches and queries
  reading the stream: ``d = ΣT / Σrows`` (in model time units, ÷
  ``time_unit_seconds``); ``inf`` when T > 0 but no row arrived. A stream
  without any batch in the interval is left out (nothing was learnt about it).
  Each stream's report carries the newest event time its batches reached
  (``event_end``: the batches' max event time, which Spark reports for a
  query with a watermark), so a daemon combining several applications'
  reports can tell a reader that fell behind (``StreamFrontier``).
* state of a query: Σ numRowsTotal and Σ memoryUsedBytes over the state
  operators of the latest progress of each of its running runs (state
  persists between batches; while a query migrates by GenMig, both plans
  hold state).
* selectivities (``observed.py`` counts them, ``SelectivityCounts``
  estimates): filter out/in; join out·T / ((l1 + l2)·left·right) when the
  validity sum was given; summed over the interval's batches, leaving out a
  join's batches from the first l1 + l2 seconds of event time of each run
  (``WarmUp``: its state is still filling, so fewer results than in steady
  state). Group counts (max per batch of the approximate distinct keys) are
  in ``SparkStats.groups``.
* pairwise key-match selectivities of a JISC join (``jisc_join`` with
  ``observe_as``): per pair of its streams a and b, pairs·T /
  ((l_a + l_b)·n_a·n_b) over the interval, n the tuples it processed per
  stream and pairs those of an a and a b tuple with equal keys less than
  the window apart (``pair_selectivity``); warm-up as for joins.

A query that terminates with an exception calls the termination hooks
(``add_termination_hook``); the daemon connects its ``query_terminated``
event there.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence

from pyspark.sql.streaming import StreamingQueryListener

from armd.control.ports import BatchProgress, Observation, QueryMetrics, StreamStats
from armd.costmodel.inputs import Smoothed, fit_group_model, per_row
from armd.costmodel.measured import ArrivalPool, SelectivityCounts, WarmUp

from .managed import NAME_SEPARATOR, armd_query_name
from .observed import parse_observation_name
from .sketches import GroupSketches
from .source import offset_seconds, offset_stream


def _utc(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


@dataclass(frozen=True)
class StateOperator:
    name: str
    rows_total: int
    rows_updated: int
    memory_bytes: int
    rows_dropped_by_watermark: int
    custom: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceProgress:
    description: str
    start_offset: str | None
    end_offset: str | None
    rows: int

    @property
    def stream(self) -> str | None:
        """The stream an ``armd-synthetic`` source reads (None for other sources)."""
        return offset_stream(self.end_offset)

    @property
    def event_seconds(self) -> float | None:
        """Event time this batch covered, from event-time offsets (None for other sources)."""
        start, end = offset_seconds(self.start_offset), offset_seconds(self.end_offset)
        if start is None or end is None:  # a query's first batch has no start offset in its progress
            return None
        return max(0.0, end - start)


@dataclass(frozen=True)
class ProgressRecord:
    """One progress event of one micro-batch."""

    seq: int
    query: str | None
    """The armd query (None for queries armd does not manage)."""
    spark_name: str | None
    run_id: str
    batch_id: int
    at: datetime
    input_rows: int
    batch_ms: int
    durations_ms: Mapping[str, int]
    event_min: datetime | None
    event_max: datetime | None
    watermark: datetime | None
    state_operators: Sequence[StateOperator]
    sources: Sequence[SourceProgress]
    observed: Mapping[str, Mapping[str, Any]]
    raw: Mapping[str, Any]

    @property
    def last_executed_batch(self) -> int:
        """The newest batch this record's run had executed: idle progress (no ``addBatch``) carries the next one's id."""
        return self.batch_id if "addBatch" in self.durations_ms else self.batch_id - 1

    @property
    def state_rows(self) -> int:
        return sum(op.rows_total for op in self.state_operators)

    @property
    def state_bytes(self) -> int:
        return sum(op.memory_bytes for op in self.state_operators)

    def as_batch(self) -> BatchProgress:
        """The record as the store keeps it (only for records of armd queries)."""
        assert self.query is not None, "only progress of managed queries is recorded"
        version = (self.spark_name or "").rpartition(NAME_SEPARATOR)[2]
        return BatchProgress(
            self.query, self.run_id, self.batch_id, self.at, self.input_rows, self.batch_ms, dict(self.durations_ms),
            self.event_min, self.event_max, self.watermark, self.state_rows, self.state_bytes,
            sum(op.rows_dropped_by_watermark for op in self.state_operators),
            tuple({"name": op.name, "rows_total": op.rows_total, "rows_updated": op.rows_updated, "memory_bytes": op.memory_bytes,
                   "rows_dropped_by_watermark": op.rows_dropped_by_watermark, "custom": dict(op.custom)}
                  for op in self.state_operators),
            int(version) if version.isdigit() else None,
        )

    @classmethod
    def from_json(cls, seq: int, doc: Mapping[str, Any]) -> "ProgressRecord":
        event = doc.get("eventTime") or {}
        return cls(
            seq=seq,
            query=armd_query_name(doc.get("name")),
            spark_name=doc.get("name"),
            run_id=str(doc.get("runId")),
            batch_id=int(doc.get("batchId", -1)),
            at=_utc(doc.get("timestamp")) or datetime.now(timezone.utc),
            input_rows=int(doc.get("numInputRows") or 0),
            batch_ms=int(doc.get("batchDuration") or 0),
            durations_ms=dict(doc.get("durationMs") or {}),
            event_min=_utc(event.get("min")),
            event_max=_utc(event.get("max")),
            watermark=_utc(event.get("watermark")),
            state_operators=tuple(
                StateOperator(
                    str(op.get("operatorName", "")), int(op.get("numRowsTotal") or 0), int(op.get("numRowsUpdated") or 0),
                    int(op.get("memoryUsedBytes") or 0), int(op.get("numRowsDroppedByWatermark") or 0),
                    dict(op.get("customMetrics") or {}),
                )
                for op in doc.get("stateOperators") or ()
            ),
            sources=tuple(
                SourceProgress(str(s.get("description", "")), _offset_text(s.get("startOffset")),
                               _offset_text(s.get("endOffset")), int(s.get("numInputRows") or 0))
                for s in doc.get("sources") or ()
            ),
            observed={str(k): dict(v or {}) for k, v in (doc.get("observedMetrics") or {}).items()},
            raw=doc,
        )


def _offset_text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class TerminatedQuery:
    query: str | None
    spark_name: str | None
    id: str
    run_id: str
    exception: str | None
    error_class: str | None
    at: datetime


TerminationHook = Callable[[TerminatedQuery], None]


class _JsonBridge:
    """The JVM's listener calls, passed on with only the fields ``ProgressListener`` reads (a py4j callback object)."""

    def __init__(self, listener: "ProgressListener") -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - Spark's names
        self.listener.onQueryStarted(SimpleNamespace(runId=jevent.runId().toString(), name=jevent.name()))

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        self.listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=jevent.progress().json())))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        exception, error_class = jevent.exception(), jevent.errorClassOnException()
        self.listener.onQueryTerminated(SimpleNamespace(
            id=jevent.id().toString(), runId=jevent.runId().toString(),
            exception=exception.get() if exception.isDefined() else None,
            errorClassOnException=error_class.get() if error_class.isDefined() else None))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


class ProgressListener(StreamingQueryListener):
    """Keeps every progress event in a bounded buffer; calls hooks when a query fails."""

    def __init__(self, capacity: int = 100_000) -> None:
        super().__init__()
        self._records: deque[ProgressRecord] = deque(maxlen=capacity)
        self._latest: dict[str, ProgressRecord] = {}
        self._runs: dict[str, dict[str, ProgressRecord]] = {}
        """Per query, the newest progress of each of its runs that has not terminated (two while it migrates)."""
        self._names: dict[str, str | None] = {}
        self._seq = 0
        self._cond = threading.Condition()
        self._hooks: list[tuple[TerminationHook, bool]] = []
        self.terminated: list[TerminatedQuery] = []
        self.errors = 0
        """Exceptions raised inside the callbacks (Spark would swallow them)."""

    # --- wiring ---

    @property
    def _jlistener(self) -> Any:
        """What ``spark.streams.addListener`` registers in the JVM (classic Spark; Connect does not use it).

        PySpark's own bridge rebuilds every event as Python objects field by field, some 60 py4j round trips per
        progress event (each state operator's and source's metrics, and every observed metric as a pickled Row), and
        this listener reads only the progress JSON; ``_JsonBridge`` asks for that alone (``bench/fleet.py``'s driver
        CPU: docs/cluster.md)."""
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            try:
                self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_JsonBridge(self))  # type: ignore[union-attr]
            except Exception:  # a PySpark whose JVM lacks the wrapper class: its own (slower) bridge
                return StreamingQueryListener._jlistener.fget(self)  # type: ignore[attr-defined]
        return self._jlistenerobj

    def attach(self, spark: Any) -> "ProgressListener":
        spark.streams.addListener(self)
        return self

    def detach(self, spark: Any) -> None:
        spark.streams.removeListener(self)

    def add_termination_hook(self, hook: TerminationHook, *, errors_only: bool = True) -> None:
        """Call ``hook`` when a query terminates (by default only when it failed with an exception)."""
        self._hooks.append((hook, errors_only))

    # --- Spark's callbacks (on Spark's listener thread) ---

    def onQueryStarted(self, event: Any) -> None:
        with self._cond:
            self._names[str(event.runId)] = event.name

    def onQueryProgress(self, event: Any) -> None:
        try:
            doc = json.loads(event.progress.json)
            with self._cond:
                self._seq += 1
                record = ProgressRecord.from_json(self._seq, doc)
                self._records.append(record)
                if record.query is not None:
                    self._latest[record.query] = record
                    self._runs.setdefault(record.query, {})[record.run_id] = record
                self._cond.notify_all()
        except Exception:  # a listener must never break Spark's bus
            self.errors += 1

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        with self._cond:
            spark_name = self._names.pop(str(event.runId), None)
            query = armd_query_name(spark_name)
            latest = self._latest.get(query) if query else None
            if latest is not None and latest.run_id == str(event.runId):
                del self._latest[query]  # type: ignore[arg-type]
            self._runs.get(query or "", {}).pop(str(event.runId), None)
            info = TerminatedQuery(query, spark_name, str(event.id), str(event.runId), event.exception,
                                   getattr(event, "errorClassOnException", None), datetime.now(timezone.utc))
            self.terminated.append(info)
            self._cond.notify_all()
        for hook, errors_only in list(self._hooks):
            if errors_only and not info.exception:
                continue
            try:
                hook(info)
            except Exception:
                self.errors += 1

    # --- readers ---

    @property
    def last_seq(self) -> int:
        with self._cond:
            return self._seq

    def since(self, seq: int) -> list[ProgressRecord]:
        """Records with a sequence number > ``seq``, oldest first (those evicted from the buffer are gone)."""
        with self._cond:
            return [r for r in self._records if r.seq > seq]

    def records(self, query: str | None = None) -> list[ProgressRecord]:
        with self._cond:
            return [r for r in self._records if query is None or r.query == query]

    def latest(self, query: str) -> ProgressRecord | None:
        """The newest progress of the query's current run (None before its first batch or after it stopped)."""
        with self._cond:
            return self._latest.get(query)

    def held(self, query: str) -> tuple[int, int] | None:
        """State rows and bytes the query holds: summed over its running runs (both plans while it migrates)."""
        with self._cond:
            runs = list(self._runs.get(query, {}).values())
        if not runs:
            return None
        return sum(r.state_rows for r in runs), sum(r.state_bytes for r in runs)

    def latest_of_run(self, run_id: str) -> ProgressRecord | None:
        """The newest progress of one run (a query may have two while it migrates)."""
        with self._cond:
            return next((r for r in reversed(self._records) if r.run_id == run_id and r.batch_id >= 0), None)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
        """Wait until ``predicate()`` holds (checked whenever a record or termination arrives)."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def wait_for_run(self, query: Any, timeout: float = 30.0) -> bool:
        """Wait until every batch that the ``StreamingQuery`` run reports as executed has arrived here.

        Idle progress (no batch ran) carries the *next* batch id, so only
        progress with an ``addBatch`` duration counts.
        """
        run_id = str(query.runId)
        done = [p["batchId"] for p in query.recentProgress if "addBatch" in (p["durationMs"] or {})]
        if not done:
            return True
        last = max(done)
        return self.wait_for(lambda: any(r.run_id == run_id and r.batch_id >= last for r in self._records), timeout)

    def wait_for_batch(self, query: str, batch_id: int, timeout: float = 30.0) -> bool:
        """Wait until the progress of the armd query's batch ``batch_id`` (or a later one) has arrived."""
        return self.wait_for(lambda: any(r.query == query and r.batch_id >= batch_id for r in self._records), timeout)


class SparkStats:
    """The ``StatsSource`` port over a ``ProgressListener``; see the module docstring for the formulas."""

    def __init__(
        self,
        listener: ProgressListener,
        time_unit_seconds: float,
        *,
        streams: Mapping[str, Sequence[str]] | None = None,
        queries: Iterable[str] | None = None,
        stateful: Callable[[str], Sequence[str]] | None = None,
        smoothing: float = 0.3,
        nodes: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        if not time_unit_seconds > 0:
            raise ValueError(f"time_unit_seconds must be > 0, got {time_unit_seconds!r}")
        self.listener = listener
        self.time_unit_seconds = float(time_unit_seconds)
        self.streams = {q: tuple(s) for q, s in (streams or {}).items()}
        """armd query → stream name per source position (only for sources other than armd-synthetic)."""
        self.queries = set(queries) if queries is not None else None
        """armd queries to report (None: every managed query that reported progress)."""
        self._seq = listener.last_seq
        self._last_max: dict[str, datetime] = {}
        self._warm_up = WarmUp()
        self.groups: dict[str, dict[str, int]] = {}
        """armd query → plan node → max distinct keys per batch in the last interval."""
        self.stateful = stateful or (lambda query: ())
        """armd query → labels of its stateful operators in the order of ``stateOperators`` (``Instrumented.stateful``)."""
        self.join_validity: dict[str, dict[str, float]] = {}
        """armd query → join node → l1 + l2 in seconds, for joins whose observations do not carry it (auto-inserted)."""
        self._sketches = GroupSketches()
        self._latest_run: dict[tuple[str, str], str] = {}
        self._smoothed = Smoothed(smoothing)
        self.group_models: dict[str, dict[str, tuple[float, float]]] = {}
        """armd query → aggregation node → smoothed (base, growth) of its groups in a window of w seconds."""
        self.bytes_per_row: dict[str, dict[str, float]] = {}
        """armd query → stateful node → smoothed bytes per state row."""
        self.nodes = {q: dict(m) for q, m in (nodes or {}).items()}
        """armd query → observation label → plan node id (``node_id``)."""

    def observe(self, at: datetime) -> Observation:
        records = self.listener.since(self._seq)
        if records:
            self._seq = records[-1].seq
        arrivals = ArrivalPool()
        counts: dict[str, SelectivityCounts] = {}
        self.groups = {}
        state_samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        batches = []
        for r in records:
            if r.query is None or (self.queries is not None and r.query not in self.queries):
                continue
            batches.append(r.as_batch())
            span = 0.0
            for i, source in enumerate(r.sources):
                stream, seconds = self._source(r, i, source)
                if stream is None or seconds is None:
                    continue
                arrivals.add(stream, source.rows, seconds, r.event_max and r.event_max.timestamp())
                span = max(span, seconds)
            if r.event_max is not None:
                self._last_max[r.run_id] = max(r.event_max, self._last_max.get(r.run_id, r.event_max))
            observed = [(parsed, metrics) for parsed, metrics in
                        ((parse_observation_name(name), metrics) for name, metrics in r.observed.items()) if parsed is not None]
            filling = max((p.param for p, _ in observed if p.kind in ("join", "pairs") and p.param is not None), default=0.0)
            warm = self._warm_up.is_warm(r.run_id, r.event_min, filling)
            query_counts = counts.setdefault(r.query, SelectivityCounts())
            if warm:
                query_counts.add_warm_batch(span)
            labels = self.stateful(r.query)
            for i, op in enumerate(r.state_operators):
                label = labels[i] if i < len(labels) else f"{i}:{op.name}"
                state_samples.setdefault((r.query, label), []).append((float(op.memory_bytes), float(op.rows_total)))
            for parsed, metrics in observed:
                if parsed.kind in ("join", "pairs") and not warm:
                    continue
                if parsed.kind == "pairs":
                    query_counts.add_pairs({name: float(value or 0) for name, value in metrics.items()}, parsed.param)
                elif parsed.kind == "filter":
                    query_counts.add_filter(parsed.node, parsed.role, float(metrics.get("rows") or 0))
                elif parsed.kind == "join":
                    validity = parsed.param if parsed.param is not None else self.join_validity.get(r.query, {}).get(parsed.node)
                    query_counts.add_join(parsed.node, parsed.role, float(metrics.get("rows") or 0),
                                          validity if parsed.role == "out" else None)
                elif parsed.kind == "groups":
                    if metrics.get("groups") is not None:
                        node_groups = self.groups.setdefault(r.query, {})
                        node_groups[parsed.node] = max(node_groups.get(parsed.node, 0), int(metrics["groups"]))
                    if metrics.get("sketch") is not None:
                        self._sketches.add(r.run_id, parsed.node, span, metrics["sketch"])
                        self._latest_run[(r.query, parsed.node)] = r.run_id
        self._measured_inputs(state_samples)
        stream_stats = tuple(StreamStats(a.stream, a.rows, a.seconds, a.rate_per_second, a.d,
                                         event_end=None if a.end is None else datetime.fromtimestamp(a.end, timezone.utc))
                             for a in arrivals.estimates(self.time_unit_seconds))
        names = sorted(self.queries) if self.queries is not None else sorted(
            {r.query for r in self.listener.records() if r.query is not None}
        )
        metrics = []
        for name in names:
            held = self.listener.held(name)
            query_counts = counts.get(name, SelectivityCounts())
            sel, pairs = query_counts.selectivities(), query_counts.pair_selectivities()
            if held is None and not sel and not pairs and not query_counts.warm_batches:
                continue
            metrics.append(QueryMetrics(
                name,
                state_rows=held[0] if held else None,
                state_bytes=held[1] if held else None,
                selectivities=self._by_node(name, sel),
                pair_selectivities=pairs,
                group_models=self._by_node(name, self.group_models.get(name, {})),
                bytes_per_row=self._by_node(name, self.bytes_per_row.get(name, {})),
            ))
        return Observation(at, stream_stats, tuple(metrics), tuple(batches))

    def node_id(self, query: str, label: str) -> str:
        """The plan node a measurement of ``query`` labelled ``label`` belongs to: the one mapping of labels to ids.

        Labels are what an observation is named by: armd's own (``f1``,
        ``agg1``: ``instrument.py``) or a builder's (``params.node(name)``,
        already a plan node id when the daemon gave the builder its map).
        ``[managed.NAME] nodes`` maps them; a derived plan's map holds every
        label of the instrumented query (``Derivation.nodes``), so its
        measurements arrive under ``QUERY.LABEL``. A label the map does not
        name stays as it is (a plan file without that node ignores it).
        """
        return self.nodes.get(query, {}).get(label, label)

    def _by_node(self, query: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return {self.node_id(query, label): value for label, value in values.items()}

    def _measured_inputs(self, state_samples: Mapping[tuple[str, str], list[tuple[float, float]]]) -> None:
        """Fold the interval into the smoothed group models and bytes per row (``costmodel/inputs.py``)."""
        for (query, node), samples in state_samples.items():
            value = self._smoothed.update(f"bytes:{query}:{node}", per_row(samples))
            if value is not None:
                self.bytes_per_row.setdefault(query, {})[node] = value
        for (query, node), run in self._latest_run.items():
            model = self._smoothed.model(f"groups:{query}:{node}", fit_group_model(self._sketches.points(run, node)))
            if model is not None:
                self.group_models.setdefault(query, {})[node] = (model.base, model.growth)
        self._latest_run.clear()

    def _source(self, r: ProgressRecord, i: int, source: SourceProgress) -> tuple[str | None, float | None]:
        stream = source.stream
        if stream is None:
            names = self.streams.get(r.query or "", ())
            stream = names[i] if i < len(names) else None
        seconds = source.event_seconds
        if seconds is None and (len(r.sources) == 1 or source.stream is not None) and r.event_max is not None:
            previous = self._last_max.get(r.run_id, r.event_min)
            seconds = max(0.0, (r.event_max - previous).total_seconds()) if previous is not None else 0.0
        return stream, seconds

    def close(self) -> None:
        pass
