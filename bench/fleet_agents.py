"""``bench/fleet.py --simulated-agents AxQ``: the real daemon and PostgreSQL governing A simulated applications of Q queries.

Why: the daemon must keep up with many applications at once, more than this
machine can run Spark drivers for. The applications here are
``bench/simulated_agents.py``'s: the agent's own registration, reporting and
reconciling code, with generated progress; each reports every second. They
run as threads in a few worker processes (``--workers``), so their Python
does not share one interpreter lock with each other or the daemon.

What is measured, over ``--seconds`` once every query has been admitted and
the daemon has made its first decision over the whole fleet (the warm-up):

* ``observation_lag_p99_s``: the daemon's own histogram
  ``armd_agent_observation_lag_seconds`` (from an application's report —
  its progress timestamp — to the daemon's agent feed having read it, the
  read's own time included), scraped from its metrics endpoint at both
  ends of the window; the p99 is the upper edge of the bucket it falls in
  (never under-stated). Beside it ``observation_taken_p99_s``, to the
  control cycle taking the row into its statistics (the next cycle after
  the read, ``armd_agent_observation_taken_seconds``);
* ``decision_ms``: the 99th percentile of the decisions' own durations
  (``decision_made`` log lines in the window), with the median; the
  baseline is the same figure for the daemon's own query alone, measured
  before the applications register;
* ``store_rows_per_day``: rows added to the store's tables in the window,
  per day at that pace.

Beside them, to judge a figure: ``observation_rows_per_s`` (rows the daemon
read, against ``expected_rows_per_s`` when every application reports each
second), ``daemon_cpu_per_s`` and ``agents_cpu_per_s`` (CPU seconds per
second of the daemon's process and of the applications' processes), the
load average at both ends, the desired settings the decisions changed and
the daemon's warnings in the window (``cycle_slow``, ``job_skipped``: a cycle
longer than its interval).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.daemon import HEARTBEAT  # noqa: E402
APPS_PER_STORE = 5
SETTLE_LIMIT = 60.0
"""Longest wait, once every query is admitted, for the first decision over the whole fleet before measuring."""
LAG_TOP = 30.0
"""The daemon's last finite lag bucket (``daemon/metrics.py`` ``LAG_BUCKETS``): a p99 beyond it is reported as over it."""
"""Simulated applications sharing one store (its pool holds 15 connections): an application holds one per round."""
TABLES = ("observations", "batches", "estimates", "events", "decisions", "desired_settings", "actual_states", "migrations",
          "queries", "applications")

CONFIG = """
[store]
url = "{url}"
application_timeout_seconds = 60

[metrics]
enabled = true
port = {port}
address = "127.0.0.1"

[bounds]
memory_bytes = {memory}
cpu = 1e12

[guardrails]
cooldown_seconds = 0

[schedule]
observe_seconds = 1
decide_seconds = 10
apply_seconds = 1
housekeeping_seconds = 3600

""" + HEARTBEAT


def worker(url: str, apps: list[str], queries: int, rate: float, stop: Any, out: Any) -> None:
    """One process of simulated applications: register each (spread over two seconds), report each second until
    ``stop`` is set, stop, and put what it saw on ``out``."""
    sys.path.insert(0, str(REPO / "bench"))
    from simulated_agents import SimQuery, SimulatedApp

    from armd.adapters.store.sql import SqlStore

    stores = [SqlStore.open(url) for _ in range(0, len(apps), APPS_PER_STORE)]  # a pool of connections per few apps
    made = []
    for i, app in enumerate(apps):
        sim = SimulatedApp(stores[i // APPS_PER_STORE], app, [SimQuery(f"{app}_q{j}", f"{app}_s{j}", rate) for j in range(queries)], poll_seconds=1.0)
        sim.register()
        sim.start()
        made.append(sim)
        time.sleep(2.0 / max(1, len(apps)))
    stop.wait()
    for sim in made:
        sim.stop()
    out.put({"apps": len(made), "errors": sum(s.errors for s in made)})
    for store in stores:
        store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()  # a loaded machine answers late
    samples = {}
    for line in body.splitlines():
        if line.startswith(("armd_agent_observation_", "armd_decision_duration_seconds", "process_cpu_seconds_total")):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def lag_p99(before: dict[str, float], after: dict[str, float],
            prefix: str = "armd_agent_observation_lag_seconds") -> tuple[float | None, float | None, int]:
    """The upper edge of the bucket holding the 99th percentile of the lags observed between two scrapes; and the mean."""
    count = after.get(f"{prefix}_count", 0) - before.get(f"{prefix}_count", 0)
    if count <= 0:
        return None, None, 0
    mean = (after[f"{prefix}_sum"] - before.get(f"{prefix}_sum", 0)) / count
    buckets = []
    for name, value in after.items():
        match = re.fullmatch(rf'{prefix}_bucket\{{le="([^"]+)"\}}', name)
        if match:
            buckets.append((float(match[1]), value - before.get(name, 0)))
    for edge, cumulative in sorted(buckets):
        if cumulative >= 0.99 * count:
            return (None if edge == float("inf") else edge), mean, int(count)
    return None, mean, int(count)  # beyond the last finite bucket: said by ``observation_lag_p99_over_s``


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes have used so far, from ``/proc`` (0 where it cannot be read)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rows(engine: Any) -> int:
    with engine.connect() as conn:
        return sum(conn.execute(select(func.count()).select_from(text(t))).scalar_one() for t in TABLES)


def admitted(engine: Any) -> int:
    with engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM queries WHERE app IS NOT NULL AND status = 'active'")).scalar_one()


def server_url() -> str:
    url = os.environ.get("ARMD_TEST_POSTGRES_URL", "").strip()
    if url:
        return url
    return subprocess.run(["bash", str(REPO / "scripts" / "postgres-up")], check=True, capture_output=True, text=True).stdout.strip()


def run(agents: int, queries: int, seconds: float, workers: int, rate: float, warmup_limit: float,
        daemon_log: str | None = None) -> dict[str, Any]:
    from armd.adapters.store.sql import SqlStore

    admin = create_engine(server_url(), isolation_level="AUTOCOMMIT")
    name = f"armd_fleet_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin.url).set(database=name).render_as_string(hide_password=False)
    tmp = Path(tempfile.mkdtemp(prefix="armd-fleet-"))
    engine = create_engine(url)
    daemon = None
    procs: list[Any] = []
    try:
        store = SqlStore.open(url)
        store.upgrade()
        store.close()
        port = free_port()
        # Every query at its largest window (60 s of 10 elements/s, ~29 KB each) would not fit: the policy decides.
        memory = int(agents * queries * 15_000 + 1_000_000)
        (tmp / "armd.toml").write_text(CONFIG.format(url=url, port=port, memory=memory))
        daemon = subprocess.Popen([sys.executable, "-m", "armd.daemon.cli", "run", "--config", str(tmp / "armd.toml")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        decisions: list[tuple[float, float, int]] = []
        slow: list[float] = []

        events: list[tuple[float, str]] = []
        log = open(daemon_log, "w", buffering=1) if daemon_log else None  # line by line: readable while it runs

        def read_log() -> None:
            assert daemon is not None and daemon.stderr is not None
            for line in daemon.stderr:
                if log is not None:
                    log.write(line)
                if '"cycle_slow"' in line or '"job_skipped"' in line:
                    slow.append(time.time())
                if '"decision_made"' in line:
                    event = json.loads(line)
                    decisions.append((time.time(), float(event["duration_ms"]), int(event.get("changes") or 0)))
                elif '"level": "warning"' in line or '"fleet_changed"' in line:
                    try:
                        events.append((time.time(), str(json.loads(line).get("event"))))
                    except ValueError:
                        pass

        threading.Thread(target=read_log, daemon=True).start()
        deadline = time.time() + 60
        while True:
            try:
                scrape(port)
                break
            except OSError:
                if daemon.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"fleet: the daemon did not start (exit {daemon.poll()})")
                time.sleep(0.5)
        time.sleep(12)  # the daemon's own query alone: the baseline decisions
        baseline = [ms for _t, ms, _n in decisions]

        names = [f"app{i:03d}" for i in range(agents)]
        context = multiprocessing.get_context("spawn")
        out = context.Queue()
        started = time.time()
        stop = context.Event()
        procs += [context.Process(target=worker, args=(url, names[i::workers], queries, rate, stop, out))
                 for i in range(workers)]
        for p in procs:
            p.start()
        total = agents * queries
        while admitted(engine) < total and time.time() < started + warmup_limit:
            time.sleep(1.0)
        joined, all_in = admitted(engine), time.time()
        # Part of the warm-up: the daemon taking in the whole fleet (one reconfiguration over every query) and the first
        # decision over it; measuring starts two cycles after that decision (or after SETTLE_LIMIT seconds without one).
        while not any(t > all_in for t, _ms, _n in decisions) and time.time() < all_in + SETTLE_LIMIT:
            time.sleep(0.5)
        time.sleep(2)
        warmup = time.time() - started
        workers_pids = [p.pid for p in procs if p.pid is not None]
        load_before = os.getloadavg()[0]
        before, rows_before, t0, workers_before = scrape(port), rows(engine), time.time(), cpu_seconds(workers_pids)
        time.sleep(seconds)
        after, rows_after, t1, workers_after = scrape(port), rows(engine), time.time(), cpu_seconds(workers_pids)
        daemon_cpu = after.get("process_cpu_seconds_total", 0.0) - before.get("process_cpu_seconds_total", 0.0)
        p99, mean, observed = lag_p99(before, after)
        taken_p99, taken_mean, _taken = lag_p99(before, after, "armd_agent_observation_taken_seconds")
        window = [ms for t, ms, _n in decisions if t0 <= t <= t1]
        stop.set()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(30)
        return {
            "agents": agents, "queries": total,
            "observation_lag_p99_s": p99, "decision_ms": percentile(window, 0.99),
            **({"observation_lag_p99_over_s": LAG_TOP} if p99 is None and observed else {}),
            "store_rows_per_day": round((rows_after - rows_before) / (t1 - t0) * 86400),
            "observation_lag_mean_s": None if mean is None else round(mean, 3), "lag_rows": observed,
            # from the report to the control cycle taking the row into its statistics (at its next cycle)
            "observation_taken_p99_s": taken_p99, "observation_taken_mean_s": None if taken_mean is None else round(taken_mean, 3),
            # rows the daemon read per second, against every query's stream and query row each second
            "observation_rows_per_s": round(observed / (t1 - t0), 1), "expected_rows_per_s": 2 * total,
            "decision_ms_median": percentile(window, 0.5), "decisions": len(window),
            "desired_changes": sum(n for t, _ms, n in decisions if t0 <= t <= t1),
            "daemon_warnings": dict(Counter(kind for t, kind in events if t0 <= t <= t1)),
            "baseline_decision_ms": percentile(baseline, 0.99), "baseline_decisions": len(baseline),
            "admitted": joined, "warmup_s": round(warmup, 1), "seconds": round(t1 - t0, 1), "workers": workers,
            "agent_round_errors": sum(r["errors"] for r in results),
            "daemon_steps_slow_or_skipped": sum(1 for t in slow if t0 <= t <= t1),
            "load_average": os.getloadavg()[0], "load_average_at_start": load_before,
            # CPU used per second of the window: the daemon's whole process, and the simulated applications' processes
            "daemon_cpu_per_s": round(daemon_cpu / (t1 - t0), 3),
            "agents_cpu_per_s": round((workers_after - workers_before) / (t1 - t0), 3),
            "targets": {"observation_lag_p99_s": 2.0, "decision_ms": 1000.0},
        }
    finally:
        for p in procs:  # a run that failed half-way leaves no application reporting into a dropped database
            if p.is_alive():
                p.terminate()
                p.join(10)
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
        shutil.rmtree(tmp, ignore_errors=True)
