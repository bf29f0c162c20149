"""The Prometheus endpoint and /healthz: the documented series, over real HTTP on loopback addresses."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Iterator

from support import REPO
import pytest

import json
import socket
import urllib.error

from armd.daemon.metrics import Metrics, armd_version
from armd.control.ports import EstimateRow, QuerySettings

IN_FORCE = QuerySettings(0.5, 0.25, {"clicks_10s": 10000.0}, 1000.0, 0.75)
RECOMMENDED = QuerySettings(1.0, 0.25, {"clicks_10s": 20000.0}, 1000.0, 0.9)

DOCUMENTED = (
    'armd_query_estimated_memory_bytes{query="q1"} 1200.0',
    'armd_query_estimated_cpu{query="q1"} 0.5',
    'armd_query_measured_memory_bytes{query="q1"} 900.0',
    'armd_query_qos_ratio{query="q1"} 0.75',
    'armd_query_window_ratio{query="q1"} 0.5',
    'armd_query_granularity_ratio{query="q1"} 0.25',
    'armd_query_window_seconds{node="clicks_10s",query="q1"} 10.0',
    'armd_query_granularity_seconds{query="q1"} 1.0',
    'armd_query_recommended_qos_ratio{query="q1"} 0.9',
    'armd_query_recommended_window_seconds{node="clicks_10s",query="q1"} 20.0',
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
    m = Metrics(0.001)  # the plan's time unit: milliseconds
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
    metrics.settings("q1", IN_FORCE)
    metrics.recommend("q1", RECOMMENDED)
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
    assert f'armd_build_info{{python="' in text and f'version="{armd_version()}"' in text
    assert "process_resident_memory_bytes " in text and "process_cpu_seconds_total " in text and "python_info{" in text
    assert [n for n in re.findall(r"^# TYPE (armd_\w+) gauge", text, re.M) if "fraction" in n] == []  # fractions are _ratio


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
    assert a.registry.get_sample_value("armd_query_qos_ratio", {"query": "q1"}) == 0.5
    assert b.registry.get_sample_value("armd_query_qos_ratio", {"query": "q1"}) is None


def test_a_removed_query_leaves_no_series(metrics: Metrics) -> None:
    port = metrics.serve(0)
    for query in ("q1", "q2"):
        metrics.estimates([EstimateRow(query, 1.0, 1.0)])
        metrics.measured({query: 5.0})
        metrics.settings(query, IN_FORCE)
        metrics.recommend(query, RECOMMENDED)
    metrics.forget("q2")
    metrics.forget("never-seen")  # nothing to remove: no error
    text = scrape(port)
    assert 'query="q2"' not in text and text.count('query="q1"') >= 10


def test_a_query_whose_window_nodes_change_loses_the_old_node_series(metrics: Metrics) -> None:
    metrics.settings("q1", IN_FORCE)
    metrics.settings("q1", QuerySettings(0.5, 0.25, {"other": 5000.0}, None, 0.5))
    get = metrics.registry.get_sample_value
    assert get("armd_query_window_seconds", {"query": "q1", "node": "clicks_10s"}) is None
    assert get("armd_query_window_seconds", {"query": "q1", "node": "other"}) == 5.0


def health(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_healthz_is_503_before_the_first_cycle_200_while_cycles_are_recent_and_503_once_stale() -> None:
    now = [100.0]
    metrics = Metrics(stale_after_seconds=33.0, clock=lambda: now[0])
    port = metrics.serve(0)
    try:
        assert health(port) == (503, {"status": "starting", "last_cycle_age_seconds": None, "stale_after_seconds": 33.0})
        metrics.cycle_done()
        now[0] += 33.0
        assert health(port)[0] == 200 and health(port)[1]["status"] == "ok"
        assert metrics.registry.get_sample_value("armd_last_cycle_age_seconds") == 33.0
        now[0] += 0.5
        assert health(port) == (503, {"status": "stale", "last_cycle_age_seconds": 33.5, "stale_after_seconds": 33.0})
        metrics.cycle_done()
        assert health(port)[0] == 200
    finally:
        metrics.close()


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1) to listen on")
def test_it_listens_on_a_configured_ipv6_address() -> None:
    metrics = Metrics()
    port = metrics.serve(0, "::1")
    try:
        with urllib.request.urlopen(f"http://[::1]:{port}/metrics", timeout=5) as response:
            assert "armd_build_info" in response.read().decode()
    finally:
        metrics.close()
