"""One ``armd run`` as systemd would see it, with everything an operator wires up.

The daemon runs as a subprocess on a real PostgreSQL database whose URL holds
a password, with ``NOTIFY_SOCKET`` pointing at a datagram socket the test
reads, ``WATCHDOG_USEC`` set, a signed webhook to an HTTP server of the test
and the metrics endpoint on. The bounds are tight on purpose, so the run
raises warnings and errors (a rejected query, the measured state over the
bound) that must reach the webhook. The tests then look at what each
receiver got, and plot the store the run filled.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from support import REPO
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from support.receiver import Receiver

ROOT = REPO
ARMD = [sys.executable, "-m", "armd.daemon.cli"]
HOOK_SECRET = "hook-secret-7731"
WATCHDOG_USEC = 300_000
QUERIES = {"clicks_per_view", "clicks_per_second", "big_orders"}

CONFIG = """
[store]
url = "{url}"
connect_retries = 2
connect_backoff_seconds = 0.1

[bounds]
memory_bytes = 10000
cpu = 100

[schedule]
observe_seconds = 0.2
decide_seconds = 2
apply_seconds = 0.2

[source]
seed = 3
[source.streams.clicks]
rate_per_second = 50
bursts = [ {{ at_seconds = 2, duration_seconds = 60, factor = 10 }} ]

[alerting]
dedup_seconds = 60

[metrics]
enabled = true
port = 0

[[alerts]]
kind = "webhook"
url = "{hook}/ok"
secret = "${{ARMD_TEST_HOOK_SECRET}}"
timeout_seconds = 2
retries = 1

[plan]
file = "{plan}"

[queries.clicks_per_view]
window = [1000, 60000]

[queries.clicks_per_second]
granularity = [10000, 1000]
"""


def read_lines(stream: Any, into: list[str]) -> None:
    for line in stream:
        into.append(line)


@pytest.fixture(scope="module")
def ops_run(tmp_path_factory: pytest.TempPathFactory, postgres_admin: Any) -> Any:
    tmp = tmp_path_factory.mktemp("ops")
    engine, server_url = postgres_admin
    name = f"armd_t_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    password = make_url(url).password
    assert password, "the test server's URL must hold a password for this test"
    receiver = Receiver()
    config = tmp / "armd.toml"
    config.write_text(CONFIG.format(url=url, hook=receiver.url, plan=ROOT / "config/plans/example.json"))
    env = {**os.environ, "ARMD_TEST_HOOK_SECRET": HOOK_SECRET}
    subprocess.run([*ARMD, "db", "upgrade", "--config", str(config)], check=True, capture_output=True, env=env, timeout=60)

    notify_path = str(tmp / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify_path)
    sock.settimeout(0.2)
    notices: list[tuple[float, str]] = []
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            try:
                message = sock.recv(4096).decode()
                notices.append((time.monotonic(), message))
            except socket.timeout:
                continue

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    run_env = {**env, "NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": str(WATCHDOG_USEC)}
    process = subprocess.Popen([*ARMD, "run", "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=run_env)
    lines: list[str] = []
    while not any('"daemon_started"' in line for line in lines):
        line = process.stderr.readline()
        assert line, f"armd run ended before starting: {''.join(lines)}"
        lines.append(line)
    started = time.monotonic()
    drain = threading.Thread(target=read_lines, args=(process.stderr, lines), daemon=True)
    drain.start()
    port = next(json.loads(line)["port"] for line in lines if '"metrics_listening"' in line)
    time.sleep(5.0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        metrics = response.read().decode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        health = (response.status, json.loads(response.read()))
    assert process.poll() is None, "".join(lines)
    terminated = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    drain.join(5)  # the drain thread alone reads stderr, to its end: a second reader would split lines
    out = process.stdout.read()
    time.sleep(0.3)
    done.set()
    listener.join()  # closing the socket under a recv in progress fails that recv (EBADF)
    sock.close()
    db = create_engine(url)
    with db.connect() as conn:
        events = [dict(r._mapping) for r in conn.execute(text("SELECT kind, severity, query, message, details FROM events ORDER BY id"))]
    db.dispose()
    yield {
        "tmp": tmp, "config": config, "url": url, "password": password, "returncode": process.returncode, "stdout": out,
        "stderr": "".join(lines), "notices": notices, "started": started, "terminated": terminated, "metrics": metrics, "health": health,
        "requests": list(receiver.requests), "events": events, "env": env,
    }
    receiver.close()
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def log_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_the_run_ends_cleanly(ops_run: Any) -> None:
    assert ops_run["returncode"] == 0, ops_run["stderr"]
    assert "Traceback" not in ops_run["stderr"]


def test_systemd_gets_ready_then_watchdog_pings_then_stopping_on_sigterm(ops_run: Any) -> None:
    notices = ops_run["notices"]
    kinds = [message.split("\n")[0] for _, message in notices]
    assert kinds[0] == "READY=1" and kinds[-1] == "STOPPING=1", kinds
    assert set(kinds[1:-1]) == {"WATCHDOG=1"} | {k for k in kinds if k.startswith("STATUS=")}
    statuses = [k for k in kinds if k.startswith("STATUS=")]
    assert len(statuses) >= 3 and all("running" in k and "decisions; last cycle" in k for k in statuses)  # one per cycle
    pings = [at for at, message in notices if message == "WATCHDOG=1"]
    assert len(pings) >= 20  # 5 s at one ping per 0.15 s
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    assert max(gaps) < WATCHDOG_USEC / 1e6, gaps  # every ping well within the watchdog's timeout
    stopping_at = notices[-1][0]
    assert stopping_at >= ops_run["terminated"]  # STOPPING came after SIGTERM, not before
    assert notices[0][0] < ops_run["started"] + 1.0


def test_the_metrics_endpoint_of_the_running_daemon_serves_every_query(ops_run: Any) -> None:
    text_ = ops_run["metrics"]
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text_.splitlines() if line and not line.startswith("#")}
    admitted = {q for q in QUERIES if f'armd_query_estimated_memory_bytes{{query="{q}"}}' in samples}
    assert admitted and admitted <= QUERIES
    for q in admitted:
        assert 0 <= samples[f'armd_query_qos_ratio{{query="{q}"}}'] <= 1
        assert 0 <= samples[f'armd_query_recommended_qos_ratio{{query="{q}"}}'] <= 1
        assert any(k.startswith(("armd_query_window_seconds{", "armd_query_granularity_seconds{")) and f'query="{q}"' in k
                   for k in samples), sorted(samples)  # a query has windows, a granularity or both
        assert samples[f'armd_query_measured_memory_bytes{{query="{q}"}}'] >= 0
    assert samples["armd_estimated_memory_bytes"] > 0 and samples["armd_memory_bound_bytes"] == 10000
    assert samples["armd_decision_duration_seconds_count"] >= 1
    assert samples['armd_migrations_total{outcome="started"}'] >= 1
    assert any(k.startswith("armd_alerts_total{") for k in samples)
    assert samples["process_resident_memory_bytes"] > 0 and any(k.startswith("armd_build_info{") for k in samples)
    assert ops_run["health"][0] == 200 and ops_run["health"][1]["status"] == "ok"


def test_warnings_and_errors_reach_the_webhook_signed_and_deduplicated(ops_run: Any) -> None:
    requests = ops_run["requests"]
    assert requests
    bodies = []
    for request in requests:
        expected = "sha256=" + hmac.new(HOOK_SECRET.encode(), request["body"], hashlib.sha256).hexdigest()
        assert hmac.compare_digest(request["headers"]["X-Armd-Signature"], expected)
        bodies.append(json.loads(request["body"]))
    # Warnings and errors; of the infos only a re-admission (a rejected query told it runs now that room has freed).
    assert {b["severity"] for b in bodies if not b["details"].get("readmitted")} <= {"warning", "error"}
    keys = [(b["kind"], b["query"]) for b in bodies]
    assert len(keys) == len(set(keys))  # within the 60 s window each kind and query is sent once
    raised = {(e["kind"], e["query"]) for e in ops_run["events"]
              if e["severity"] != "info" or (e.get("details") or {}).get("readmitted")}
    assert set(keys) == raised
    assert ("query_rejected", "big_orders") in keys and ("bound_exceeded", None) in keys


def test_migrations_are_events_with_the_migration_bound_in_the_log(ops_run: Any) -> None:
    kinds = [e["kind"] for e in ops_run["events"]]
    assert kinds.count("migration_started") >= 1 and kinds.count("migration_finished") == kinds.count("migration_started")
    logged = [line for line in log_lines(ops_run["stderr"]) if line["event"] in ("migration_started", "migration_finished")]
    assert logged and all(isinstance(line["migration"], str) and line["query"] in QUERIES for line in logged)
    started = {line["migration"] for line in logged if line["event"] == "migration_started"}
    assert started == {line["migration"] for line in logged if line["event"] == "migration_finished"}  # one id per migration
    assert all(line["policy"] == "weighted-qos" for line in log_lines(ops_run["stderr"]) if line["event"] == "decision_made")


def test_neither_the_database_password_nor_the_webhook_secret_appear_anywhere(ops_run: Any) -> None:
    for secret in (ops_run["password"], HOOK_SECRET):
        assert secret not in ops_run["stderr"] + ops_run["stdout"]
        assert secret not in json.dumps(ops_run["events"], default=str)
        assert secret not in ops_run["metrics"]
        assert all(secret.encode() not in r["body"] for r in ops_run["requests"])
    assert "***" in ops_run["stderr"]  # the store URL was logged, with the password hidden


def test_armd_report_plots_the_run(ops_run: Any) -> None:
    out = ops_run["tmp"] / "report"
    result = subprocess.run([*ARMD, "report", "--out", str(out), "--config", str(ops_run["config"]), "--since", "1h"],
                            capture_output=True, text=True, env=ops_run["env"], timeout=120)
    assert result.returncode == 0, result.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["cpu.png", "memory_per_query.png", "memory_total.png", "qos.png"]
    for name in files:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000, name
    assert sorted(result.stdout.split()) == sorted(str(out / f) for f in files)


def test_the_report_draws_the_stored_series(ops_run: Any, tmp_path: Path) -> None:
    from armd.adapters.store import SqlStore
    from armd.daemon.config import load_config
    from armd.daemon.report import write_report

    config = load_config(ops_run["config"], ops_run["env"])
    store = SqlStore.open(ops_run["url"], retries=0)
    try:
        drawn = write_report(store.series(), config.bounds, tmp_path)
    finally:
        store.close()
    db = create_engine(ops_run["url"])
    with db.connect() as conn:
        # each query's newest report counts at every later time, for 30 s (the report's STALE_SECONDS)
        newest: dict[str, tuple[Any, float]] = {}
        measured: dict[Any, float] = {}
        for at, query, value in conn.execute(text("SELECT at, query, state_bytes FROM observations "
                                                  "WHERE query IS NOT NULL AND state_bytes IS NOT NULL ORDER BY at")):
            newest[query] = (at, value)
            measured[at] = sum(v for t, v in newest.values() if (at - t).total_seconds() <= 30)
        estimated = [r[0] for r in conn.execute(text(
            "SELECT memory_bytes FROM estimates WHERE query IS NULL AND decision_id IS NULL ORDER BY at, id"))]
        decisions = [r[0] for r in conn.execute(text("SELECT at FROM decisions ORDER BY at"))]
        qos = {r[0]: r[1] for r in conn.execute(text("SELECT name, qos_fraction FROM queries WHERE qos_fraction IS NOT NULL"))}
    db.dispose()

    total = drawn["memory_total.png"]
    assert total["estimated"][1] == estimated and len(estimated) > 10
    assert total["measured"][1] == [measured[t] for t in sorted(measured)]
    assert set(total["memory bound"][1]) == {10000} and set(total["usable bound (bound − reserve)"][1]) == {9000}
    assert total["decisions"][0] == decisions and total["migrations"][0]
    per_query = drawn["memory_per_query.png"]
    assert {k.rsplit(" ", 1)[0] for k in per_query if k.endswith(" estimated")} == set(qos)
    assert {"estimated total", "CPU bound"} <= set(drawn["cpu.png"])
    # The QoS line of each query ends at the fraction its settings have in the store.
    assert {q: values[-1] for q, (_, values) in drawn["qos.png"].items() if q in QUERIES} == pytest.approx(qos)


@pytest.fixture
def structlog_restored() -> Any:
    import structlog

    yield
    structlog.reset_defaults()


def test_logs_are_json_lines_off_a_terminal_and_a_console_on_one(structlog_restored: Any) -> None:
    import io
    import pty

    from armd.daemon import logs

    def redact(text_: str) -> str:
        return text_.replace("pw-123", "***")

    buffer = io.StringIO()
    logs.configure(redact, stream=buffer)
    logs.logger().info("settings_applied", query="q1", migration=7, url="postgresql://a:pw-123@h/db")
    line = json.loads(buffer.getvalue())
    assert (line["event"], line["query"], line["migration"], line["url"]) == ("settings_applied", "q1", 7, "postgresql://a:***@h/db")

    master, slave = pty.openpty()
    with open(slave, "w", closefd=True) as terminal:
        logs.configure(redact, stream=terminal)
        logs.logger().info("settings_applied", query="q1", url="postgresql://a:pw-123@h/db")
        terminal.flush()
        shown = os.read(master, 4096).decode()
    os.close(master)
    assert "settings_applied" in shown and "query" in shown and "pw-123" not in shown
    assert not shown.lstrip().startswith("{")  # a console line for people, not JSON
