"""Prometheus metrics of the daemon, served on 127.0.0.1 only.

Operators graph and alert on what the controller sees — estimated and
measured memory and CPU, QoS, how long decisions take, migrations and
alerts — without reading the store. The controller and the alert dispatcher
push values into ``Metrics``; ``NoMetrics`` stands in when the endpoint is
off, so neither needs to know. Each ``Metrics`` has its own
``CollectorRegistry`` (never the process-wide default), so several can exist
side by side, as they do in the tests. The series are listed in
docs/operations.md.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .config import METRICS_ADDRESS

DECISION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class NoMetrics:
    """Accepts every update and keeps nothing (metrics disabled)."""

    def __getattr__(self, _name: str) -> Any:
        return lambda *args, **kwargs: None


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        q = ["query"]
        self.query_memory = Gauge("armd_query_estimated_memory_bytes", "Estimated memory of a query's settings in force, bytes", q, registry=r)
        self.query_cpu = Gauge("armd_query_estimated_cpu", "Estimated processing cost of a query, cost units per model time unit", q, registry=r)
        self.query_measured = Gauge("armd_query_measured_memory_bytes", "Measured state of a query, bytes", q, registry=r)
        self.query_qos = Gauge("armd_query_qos_fraction", "QoS fraction of a query's settings in force, 0..1", q, registry=r)
        self.total_memory = Gauge("armd_estimated_memory_bytes", "Estimated memory of all queries (shared subplans once), bytes", registry=r)
        self.total_cpu = Gauge("armd_estimated_cpu", "Estimated processing cost of all queries, cost units per model time unit", registry=r)
        self.total_measured = Gauge("armd_measured_memory_bytes", "Measured state of all queries, bytes", registry=r)
        self.memory_bound = Gauge("armd_memory_bound_bytes", "The memory bound, bytes", registry=r)
        self.cpu_bound = Gauge("armd_cpu_bound", "The CPU bound, cost units per model time unit", registry=r)
        self.decision_seconds = Histogram("armd_decision_duration_seconds", "Time a decision took (policy and guardrails), seconds",
                                          buckets=DECISION_BUCKETS, registry=r)
        self.migrations = Counter("armd_migrations", "Migrations by outcome: started, done, failed", ["outcome"], registry=r)
        self.alerts = Counter("armd_alerts", "Alerts by event kind and outcome: queued, sent, failed (per hook), suppressed, dropped",
                              ["kind", "outcome"], registry=r)
        # A dry run's recommendations (what armd would apply), in seconds and as a ratio like the rest.
        self.recommended_window = Gauge("armd_query_recommended_window_seconds", "A dry run's recommended window size "
                                        "of a query's window node (named as armd shows it), seconds", ["query", "node"], registry=r)
        self.recommended_granularity = Gauge("armd_query_recommended_granularity_seconds", "A dry run's recommended "
                                             "granularity of a query, seconds", q, registry=r)
        self.recommended_qos = Gauge("armd_query_recommended_qos_ratio", "QoS fraction of a dry run's recommended settings, 0..1",
                                     q, registry=r)
        self.server: Any = None

    # --- updates from the controller and the dispatcher -------------------------------------

    def bounds(self, memory: float, cpu: float) -> None:
        self.memory_bound.set(memory)
        self.cpu_bound.set(cpu)

    def estimates(self, rows: Iterable[Any]) -> None:
        """``EstimateRow``s of the settings in force; the row with ``query`` None is the total."""
        for row in rows:
            if row.query is None:
                self.total_memory.set(row.memory_bytes)
                self.total_cpu.set(row.cpu)
            else:
                self.query_memory.labels(row.query).set(row.memory_bytes)
                self.query_cpu.labels(row.query).set(row.cpu)

    def measured(self, state_bytes: Mapping[str, float]) -> None:
        for query, value in state_bytes.items():
            self.query_measured.labels(query).set(value)
        self.total_measured.set(sum(state_bytes.values()))

    def qos(self, query: str, fraction: float) -> None:
        self.query_qos.labels(query).set(fraction)

    def recommended(self, query: str, windows: Mapping[str, float], granularity: float | None, qos: float) -> None:
        """A dry run's recommendation for ``query``: window seconds per node name, granularity seconds, QoS fraction."""
        for node, seconds in windows.items():
            self.recommended_window.labels(query, node).set(seconds)
        if granularity is not None:
            self.recommended_granularity.labels(query).set(granularity)
        self.recommended_qos.labels(query).set(qos)

    def decision(self, seconds: float) -> None:
        self.decision_seconds.observe(seconds)

    def migration(self, outcome: str) -> None:
        self.migrations.labels(outcome).inc()

    def alert(self, kind: str, outcome: str) -> None:
        self.alerts.labels(kind, outcome).inc()

    # --- the endpoint ---------------------------------------------------------------------------

    def serve(self, port: int) -> int:
        """Serve ``/metrics`` on 127.0.0.1:``port`` in a background thread; returns the port (useful with 0)."""
        self.server, _thread = start_http_server(port, addr=METRICS_ADDRESS, registry=self.registry)
        return int(self.server.server_port)

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
