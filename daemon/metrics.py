"""Prometheus metrics of the daemon and its health check, on one HTTP port.

Operators graph and alert on what the controller sees — estimated and
measured memory and CPU, QoS, the settings in force and those armd
recommends, how long decisions take, migrations and alerts — without reading
the store; a load balancer, systemd or a container runtime asks
``GET /healthz`` whether the control cycle still runs. The controller and
the alert dispatcher push values into ``Metrics``; ``NoMetrics`` stands in
when the endpoint is off, so neither needs to know. Each ``Metrics`` has its
own ``CollectorRegistry`` (never the process-wide default), so several can
exist side by side, as they do in the tests. Fractions end in ``_ratio``
(Prometheus' naming convention). The series are listed in
docs/operations.md.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from socketserver import ThreadingMixIn
from typing import Any, Callable, Iterable, Mapping
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, Info, PlatformCollector, ProcessCollector,
                               make_wsgi_app)

from armd.control.ports import QuerySettings

DECISION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LAG_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 5.0, 10.0, 30.0)
"""An agent's observation reaches the cycle within one observation interval plus the store's write and read."""


def armd_version() -> str:
    try:
        return version("armd")
    except PackageNotFoundError:
        return "unknown"


class NoMetrics:
    """Accepts every update and keeps nothing (metrics disabled)."""

    def __getattr__(self, _name: str) -> Any:
        return lambda *args, **kwargs: None


class _Settings:
    """The gauges of one kind of settings (in force, or recommended): QoS, window and granularity, per query."""

    def __init__(self, prefix: str, what: str, r: CollectorRegistry) -> None:
        q = ["query"]
        self.qos = Gauge(f"armd_query_{prefix}qos_ratio", f"QoS of a query's {what} settings, 0..1", q, registry=r)
        self.fw = Gauge(f"armd_query_{prefix}window_ratio", f"Window fraction of a query's {what} settings "
                        "(0: the QoS minimum, 1: the maximum)", q, registry=r)
        self.fg = Gauge(f"armd_query_{prefix}granularity_ratio", f"Granularity fraction of a query's {what} settings "
                        "(0: the QoS minimum, 1: the maximum)", q, registry=r)
        self.window = Gauge(f"armd_query_{prefix}window_seconds", f"Window size of a query's {what} settings, per window "
                            "node, seconds", ["query", "node"], registry=r)
        self.granularity = Gauge(f"armd_query_{prefix}granularity_seconds", f"Granularity of a query's {what} settings, "
                                 "seconds (absent: no granularity knob)", q, registry=r)
        self.nodes: dict[str, set[str]] = {}

    def set(self, query: str, settings: QuerySettings, unit_seconds: float, names: Mapping[str, str]) -> None:
        """``names``: plan node id → the name armd shows for it (a generated id is never a label people see)."""
        self.qos.labels(query).set(settings.qos)
        self.fw.labels(query).set(settings.fw)
        self.fg.labels(query).set(settings.fg)
        sizes = {names.get(node, node): size for node, size in settings.windows.items()}
        for gone in self.nodes.get(query, set()) - set(sizes):
            self.window.remove(query, gone)
        for node, size in sizes.items():
            self.window.labels(query, node).set(size * unit_seconds)
        self.nodes[query] = set(sizes)
        if settings.granularity is not None:
            self.granularity.labels(query).set(settings.granularity * unit_seconds)

    def forget(self, query: str) -> None:
        for gauge in (self.qos, self.fw, self.fg, self.granularity):
            _remove(gauge, query)
        for node in self.nodes.pop(query, set()):
            _remove(self.window, query, node)


def _remove(metric: Any, *labels: str) -> None:
    try:
        metric.remove(*labels)
    except KeyError:
        pass  # never set


class Metrics:
    def __init__(self, time_unit_seconds: float = 1.0, *, stale_after_seconds: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.unit = time_unit_seconds
        self.node_names: Mapping[str, str] = {}
        """Plan node id → the name armd shows for it (set by the controller with each configuration)."""
        self.stale_after_seconds = stale_after_seconds
        """``/healthz`` answers 503 once the last control cycle ended longer ago than this."""
        self.clock = clock
        self.last_cycle: float | None = None
        self.registry = r = CollectorRegistry()
        ProcessCollector(registry=r)  # process_cpu_seconds_total, process_resident_memory_bytes, open fds, start time
        PlatformCollector(registry=r)  # python_info
        Info("armd_build", "The armd build: version and Python", registry=r).info(
            {"version": armd_version(), "python": ".".join(map(str, sys.version_info[:3]))})
        q = ["query"]
        self.query_memory = Gauge("armd_query_estimated_memory_bytes", "Estimated memory of a query's settings in force, bytes", q, registry=r)
        self.query_cpu = Gauge("armd_query_estimated_cpu", "Estimated processing cost of a query, cost units per model time unit", q, registry=r)
        self.query_measured = Gauge("armd_query_measured_memory_bytes", "Measured state of a query, bytes", q, registry=r)
        self.in_force = _Settings("", "in force", r)
        self.recommended = _Settings("recommended_", "recommended (the last decision's; in a dry run, not applied)", r)
        self.total_memory = Gauge("armd_estimated_memory_bytes", "Estimated memory of all queries (shared subplans once), bytes", registry=r)
        self.total_cpu = Gauge("armd_estimated_cpu", "Estimated processing cost of all queries, cost units per model time unit", registry=r)
        self.total_measured = Gauge("armd_measured_memory_bytes", "Measured state of all queries, bytes", registry=r)
        self.memory_bound = Gauge("armd_memory_bound_bytes", "The memory bound, bytes", registry=r)
        self.cpu_bound = Gauge("armd_cpu_bound", "The CPU bound, cost units per model time unit", registry=r)
        self.cycle_age = Gauge("armd_last_cycle_age_seconds", "Seconds since the last control cycle ended (-1: none yet)",
                               registry=r)
        self.cycle_age.set_function(lambda: -1.0 if self.last_cycle is None else self.clock() - self.last_cycle)
        self.decision_seconds = Histogram("armd_decision_duration_seconds", "Time a decision took (policy and guardrails), seconds",
                                          buckets=DECISION_BUCKETS, registry=r)
        self.agent_lag = Histogram("armd_agent_observation_lag_seconds", "From an armd.agent application's report to the "
                                   "daemon having read it, seconds (one per observation row)", buckets=LAG_BUCKETS, registry=r)
        self.agent_taken_seconds = Histogram("armd_agent_observation_taken_seconds", "From an armd.agent application's report to the "
                                     "control cycle taking it into its statistics, seconds (one per observation row)",
                                     buckets=LAG_BUCKETS, registry=r)
        self.migrations = Counter("armd_migrations", "Migrations by outcome: started, done, failed", ["outcome"], registry=r)
        self.alerts = Counter("armd_alerts", "Alerts by event kind and outcome: queued, sent, failed (per hook), suppressed, dropped",
                              ["kind", "outcome"], registry=r)
        self.server: WSGIServer | None = None

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
        self.in_force.qos.labels(query).set(fraction)

    def settings(self, query: str, settings: QuerySettings) -> None:
        """The settings in force for ``query``."""
        self.in_force.set(query, settings, self.unit, self.node_names)

    def recommend(self, query: str, settings: QuerySettings) -> None:
        """The settings the last decision chose for ``query`` (applied or, in a dry run, only recommended)."""
        self.recommended.set(query, settings, self.unit, self.node_names)

    def forget(self, query: str) -> None:
        """A query left the configuration: its series go, so dashboards do not show it frozen at its last value."""
        for gauge in (self.query_memory, self.query_cpu, self.query_measured):
            _remove(gauge, query)
        self.in_force.forget(query)
        self.recommended.forget(query)

    def decision(self, seconds: float) -> None:
        self.decision_seconds.observe(seconds)

    def agent_lags(self, seconds: Iterable[float]) -> None:
        for lag in seconds:
            self.agent_lag.observe(lag)

    def agent_taken(self, seconds: Iterable[float]) -> None:
        for lag in seconds:
            self.agent_taken_seconds.observe(lag)

    def migration(self, outcome: str) -> None:
        self.migrations.labels(outcome).inc()

    def alert(self, kind: str, outcome: str) -> None:
        self.alerts.labels(kind, outcome).inc()

    def cycle_done(self) -> None:
        """A control cycle ended: ``/healthz`` is healthy for ``stale_after_seconds`` from now."""
        self.last_cycle = self.clock()

    # --- health ---------------------------------------------------------------------------------

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, the JSON body of ``/healthz``): healthy while the last cycle ended within ``stale_after_seconds``."""
        if self.last_cycle is None:
            return False, {"status": "starting", "last_cycle_age_seconds": None, "stale_after_seconds": self.stale_after_seconds}
        age = self.clock() - self.last_cycle
        healthy = age <= self.stale_after_seconds
        return healthy, {"status": "ok" if healthy else "stale", "last_cycle_age_seconds": round(age, 3),
                         "stale_after_seconds": self.stale_after_seconds}

    # --- the endpoint ---------------------------------------------------------------------------

    def serve(self, port: int, address: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` and ``/healthz`` on ``address``:``port`` in a background thread; returns the port (useful with 0)."""
        metrics_app = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/healthz":
                healthy, body = self.health()
                start_response("200 OK" if healthy else "503 Service Unavailable",
                               [("Content-Type", "application/json"), ("Cache-Control", "no-store")])
                return [json.dumps(body).encode()]
            return metrics_app(environ, start_response)

        host = address.strip("[]")
        self.server = make_server(host, port, app, server_class=_server_class(host), handler_class=_QuietHandler)
        threading.Thread(target=self.server.serve_forever, name="armd-metrics", daemon=True).start()
        return int(self.server.server_port)

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape that hangs must not hold up the stop


class _ThreadingServer6(_ThreadingServer):
    address_family = socket.AF_INET6


def _server_class(address: str) -> type[WSGIServer]:
    try:
        return _ThreadingServer6 if ipaddress.ip_address(address).version == 6 else _ThreadingServer
    except ValueError:  # a host name: use the family it resolves to first
        family = socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)[0][0]
        return _ThreadingServer6 if family == socket.AF_INET6 else _ThreadingServer


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # one line per scrape on stderr would drown the JSON logs
