"""The concrete parts the daemon plugs into the control layer's ports, chosen from the configuration.

The service (``daemon/service.py``) owns the process — store, lease,
scheduler, signals; this module answers only "which implementation": the
synthetic source and its simulated applier or local Spark running the
``[managed.*]`` queries (with the naive restart or GenMig applier), the JISC
join-order control files, and the applying side (reconciler and migration
coordinator) beside the controller in the daemon's process.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable

from armd.adapters.store.agent_stats import AgentStats
from armd.adapters.store.scoped import ScopedStore
from armd.adapters.synthetic import Schedule, SyntheticSource, WindowTap
from armd.control.coordinator import ApplyPorts, Coordinator
from armd.control.ports import Applier, EventRecord, QuerySettings
from armd.control.reconciler import Reconciler, RetryPolicy

from .config import Config
from .controller import Controller


class SimulatedApplier:
    """Applies settings to the synthetic source's simulated windows (no Spark involved).

    A plain ``control.ports.Applier``: it finishes within ``apply`` and holds
    nothing extra, so it is neither a ``LiveApplier`` nor a ``ResumableApplier``.
    """

    name = "simulated"

    def __init__(self, source: SyntheticSource) -> None:
        self.source = source

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        for node_id, size in new.windows.items():
            self.source.set_window(query, node_id, size)
        self.source.set_drop_rate(query, new.drop_rate)
        return "direct"


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


def spark_runtime(config: Config, start: datetime, log: Any, on_event: Callable[[EventRecord], None],
                  on_failure: Callable[[str, str], None], on_transition: Callable[[Any], None]) -> Any:
    """Local Spark with every ``[managed.*]`` query registered (not started: the first decision starts each)."""
    from armd.adapters.spark.managed import ManagedSpec, QueryParams
    from armd.adapters.spark.runtime import SparkRuntime
    from armd.adapters.spark.sinks import BatchSink, MemorySink, ParquetSink, SqlSink
    from armd.adapters.spark.source import schedule_json

    plan, spark = config.plan, config.spark
    schedules, _sizes, _taps = synthetic_parts(config)
    every_stream = ",".join(plan.streams)

    def options(stream: str) -> dict[str, Any]:
        return {"start": start.isoformat(), "schedule": json.dumps(schedule_json(schedules[stream])), "seed": config.source.seed,
                "all_streams": every_stream, "keys": config.source.streams[stream].keys, "starting_seconds": "latest"}

    def sink(query: str) -> BatchSink:
        s = config.managed[query].sink
        if s.kind == "parquet":
            return ParquetSink(s.path or f"armd-output/{query}")
        if s.kind == "sql":
            return SqlSink(s.url, s.table or query)
        return MemorySink()

    runtime = SparkRuntime.create(
        checkpoint_root=spark.checkpoint_dir, time_unit_seconds=config.model.time_unit_seconds, master=spark.master,
        app_name=spark.app_name, conf=spark.conf, state_store=spark.state_store, queries=list(plan.queries),
        streams={query: managed.streams for query, managed in config.managed.items() if managed.streams},
        on_event=on_event, on_terminated=lambda t: on_failure(t.query or t.spark_name or t.id, t.exception or t.error_class or "unknown error"),
        log=log, migration=spark.migration, on_transition=on_transition, migration_timeout_seconds=spark.migration_timeout_seconds,
        nodes={query: dict(managed.nodes) for query, managed in config.managed.items()},
    )
    for query, managed in config.managed.items():
        if query in config.unmanaged:  # its plan could not be derived: every stream offered, as when deriving
            streams = list(config.source.streams)
        else:
            streams = [plan.nodes[n].stream for n in plan.query_nodes(query) if plan.nodes[n].op == "source"]
        extra = {"sources": {stream: dict(managed.sources.get(stream) or options(stream)) for stream in dict.fromkeys(streams)},
                 "delay_seconds": managed.watermark_delay_seconds, "trigger_seconds": managed.trigger_seconds,
                 "nodes": dict(managed.nodes), **managed.params}
        if managed.join_order is not None:
            extra.update(join_control=managed.join_order.control, join_order=list(managed.join_order.order))
        # The plan's window sizes and granularity stand until a decision gives others (a query without QoS ranges keeps them).
        unit = config.model.time_unit_seconds
        nodes = [plan.nodes[n] for n in plan.query_nodes(query)] if query in plan.queries else []
        windows = {node.id: node.w * unit for node in nodes if node.op == "window" and node.w is not None}
        granularity = next((node.g * unit for node in nodes if node.op == "granularity" and node.g is not None), None)
        params = QueryParams(windows=windows, granularity=granularity, extra=extra)
        runtime.manager.register(ManagedSpec(query, managed.builder, sink(query), params, managed.output_mode,
                                             {"processingTime": f"{managed.trigger_seconds:g} seconds"}, managed.streams))
    return runtime


def start_unmanaged(config: Config, runtime: Any, emit: Callable[..., None]) -> None:
    """Start the queries whose plan could not be derived, with their initial settings, and say so (they stay as they are)."""
    for query, why in config.unmanaged.items():
        runtime.manager.start(query)
        emit("plan_derivation_failed", "warning", f"query {query!r} runs unmanaged with its initial settings: {why}", query,
             {"reason": why})


def join_orders(config: Config) -> Any:
    """The control files of the ``[managed.*]`` queries that JISC runs (``None`` when there are none)."""
    joins = {q: m.join_order for q, m in config.managed.items() if m.join_order is not None}
    if not joins:
        return None
    from armd.adapters.spark.jisc import ControlFiles

    return ControlFiles({q: (j.control, j.order, list(j.order)) for q, j in joins.items()})


def apply_side(controller: Controller, applier: Applier, orders: Any) -> Reconciler:
    """The applying half (reconciler and migration coordinator) beside the controller in the daemon's process.

    It talks to the deciding half only through the store (desired settings
    in, actual state out); it shares the controller's record queue so its
    rows land in order with the others, its events (logged, recorded,
    alerted alike) and the cost model's memory estimate for restaging.
    """
    config = controller.config
    own = ScopedStore(controller.store, lambda: set(controller.base.plan.queries))  # agent queries are their applications'
    ports = ApplyPorts(own, applier, controller.outbox.put, controller.emit, controller.clock, controller.log,
                       controller.metrics, config.redact, store_down=lambda: controller.outbox.down)
    coordinator = Coordinator(ports, memory_bound=config.bounds.memory, estimate=controller.estimate_memory)
    return Reconciler(ports, coordinator, retry_policy(config), orders)


def agent_stats(config: Config, store: Any, start: datetime, fleet: Callable[[], Any]) -> AgentStats | None:
    """The statistics of the fleet's queries, read back from the store (``None`` with ``store.agents = false``)."""
    if not config.store.agents:
        return None

    def wanted() -> tuple[frozenset[str], frozenset[str]]:
        taken = fleet()
        return (taken.names, taken.streams) if taken else (frozenset(), frozenset())

    return AgentStats(store, config.model.time_unit_seconds, start, wanted=wanted)


def retry_policy(config: Config) -> RetryPolicy:
    return RetryPolicy(config.apply.retry_initial_seconds, config.apply.retry_max_seconds, config.apply.max_attempts)
