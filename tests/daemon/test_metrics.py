"""The Prometheus endpoint: the documented series, served on 127.0.0.1 only."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Iterator

from support import REPO
import pytest

from armd.daemon.metrics import Metrics
from armd.control.ports import EstimateRow

DOCUMENTED = (
    'armd_query_estimated_memory_bytes{query="q1"} 1200.0',
    'armd_query_estimated_cpu{query="q1"} 0.5',
    'armd_query_measured_memory_bytes{query="q1"} 900.0',
    'armd_query_qos_fraction{query="q1"} 0.75',
    "armd_estimated_memory_bytes 1500.0",
    "armd_estimated_cpu 0.7",
    "armd_measured_memory_bytes 1000.0",
    "armd_memory_bound_bytes 250000.0",
    "armd_cpu_bound 10.0",
    'armd_decision_duration_seconds_bucket{le="0.005"} 1.0',
    "armd_decision_duration_seconds_count 2.0",
    'armd_migrations_total{outcome="done"} 2.0',
    'armd_migrations_total{outcome="failed"} 1.0',
    'armd_alerts_total{kind="bound_exceeded",outcome="sent"} 1.0',
)


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    m = Metrics()
    yield m
    m.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def test_the_endpoint_serves_the_documented_series(metrics: Metrics) -> None:
    port = metrics.serve(0)
    metrics.bounds(250000, 10)
    metrics.estimates([EstimateRow("q1", 1200, 0.5), EstimateRow(None, 1500, 0.7)])
    metrics.measured({"q1": 900, "q2": 100})
    metrics.qos("q1", 0.75)
    metrics.decision(0.004)
    metrics.decision(0.2)
    for outcome in ("started", "done", "started", "done", "started", "failed"):
        metrics.migration(outcome)
    metrics.alert("bound_exceeded", "sent")
    text = scrape(port)
    for line in DOCUMENTED:
        assert line in text.splitlines(), line
    docs = (REPO / "docs" / "operations.md").read_text()
    for line in DOCUMENTED:
        assert line.split("{")[0].split(" ")[0].removesuffix("_bucket").removesuffix("_count") in docs


def test_it_listens_on_127_0_0_1_only(metrics: Metrics) -> None:
    port = metrics.serve(0)
    assert metrics.server.socket.getsockname() == ("127.0.0.1", port)
    # What the kernel says is listening on that port: the loopback address and nothing else.
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:
                listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, little-endian hex


def test_two_instances_keep_separate_registries() -> None:
    a, b = Metrics(), Metrics()
    a.qos("q1", 0.5)
    assert a.registry.get_sample_value("armd_query_qos_fraction", {"query": "q1"}) == 0.5
    assert b.registry.get_sample_value("armd_query_qos_fraction", {"query": "q1"}) is None
