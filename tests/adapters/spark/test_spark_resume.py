"""A GenMig migration survives ``kill -9`` of the daemon: the restarted daemon resumes it from the store, exactly.

``armd run`` on local Spark with ``[spark] migration = "genmig"`` runs a
windowed count per key into a Parquet sink. A burst on its stream makes armd
cut the window, which starts a live migration; while it runs (the old and the
new run both write), the daemon and its Spark are killed with SIGKILL. The
same configuration is started again: it must resume the migration from the
stored record (both runs from their checkpoints, each with its side of
T_split) and finish it. Then every count in the sink is checked against the
source's own arrivals (``armd-synthetic`` rows are a pure function of the
stream's options, which the migration record holds): no window counted
wrong, none twice, none missing — before T_split from the old plan, from
T_split on from the new one.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.daemon import ARMD, armd, env, log_events

from armd.adapters.spark.source import Arrivals, SourceOptions

PLAN = {
    "streams": {"clicks": {"rate": 20, "g": 1, "size": 400}},
    "constants": {"aggregate_size": 400},
    "queries": {
        "per_key": {"op": "aggregate", "id": "pk_agg", "groups": 10, "inputs": [
            {"op": "granularity", "id": "pk_g", "g": 2, "inputs": [
                {"op": "window", "id": "pk_w", "w": 12, "inputs": [{"op": "source", "stream": "clicks"}]}]}]},
    },
}

# At the maximum window (12 s) the CPU estimate is 336 at the plan's rate and 1,610 during the burst (5×),
# over the bound: armd cuts the window.
CONFIG = """
[store]
url = "sqlite:///{tmp}/armd.db"
[model]
time_unit_seconds = 1
[bounds]
memory_bytes = 1e6
cpu = 1000
[guardrails]
cooldown_seconds = 0
[triggers]
alpha = 1
threshold = 0.5
[schedule]
observe_seconds = 2
decide_seconds = 600
apply_seconds = 1
[source]
kind = "spark"
seed = 5
[source.streams.clicks]
rate_per_second = 20
keys = 10
bursts = [ {{ at_seconds = 30, duration_seconds = 600, factor = 5 }} ]
[spark]
checkpoint_dir = "{tmp}/checkpoints"
migration = "genmig"
conf = {{ "spark.ui.enabled" = "false", "spark.sql.shuffle.partitions" = 2 }}
[managed.per_key]
builder = "armd.adapters.spark.builders:windowed_count"
nodes = {{ w = "pk_w", agg = "pk_agg" }}
trigger_seconds = 2
watermark_delay_seconds = 2
sink = {{ kind = "parquet", path = "{tmp}/out" }}
[plan]
file = "plan.json"
[queries.per_key]
window = [2, 12]
granularity = [2, 2]
"""


def start(config: Path, log: Path):
    """``armd run`` in the background, its stderr into ``log`` (a pipe nobody reads would fill and block it)."""
    with log.open("w") as stderr:
        process = subprocess.Popen([*ARMD, "run", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=stderr,
                                   env=env())
    wait_for("the daemon to start", lambda: '"daemon_started"' in log.read_text(), 120, process, log)
    return process


def rows(tmp: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp / "armd.db") as db:
        return db.execute(sql).fetchall()


def wait_for(what: str, check, timeout: float, process=None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if process is not None and process.poll() is not None:
            pytest.fail(f"armd run ended while waiting for {what}: {log.read_text()[-3000:] if log else ''}")
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (the JVM that PySpark starts, and its children)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def open_live_migration(tmp: Path):
    for id_, state, details in rows(tmp, "SELECT id, state, details FROM migrations WHERE strategy = 'genmig' ORDER BY id"):
        live = json.loads(details).get("live")
        if live and state in ("running", "draining"):  # both resume
            return id_, live
    return None


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-resume")
    (tmp / "plan.json").write_text(json.dumps(PLAN))
    config = tmp / "armd.toml"
    config.write_text(CONFIG.format(tmp=tmp))
    armd("db", "upgrade", "--config", str(config))

    first_log, second_log = tmp / "first.log", tmp / "second.log"
    first = start(config, first_log)
    try:
        # Killed while a migration has been open for 2 s (both runs write then), checked right before the kill: a
        # deeper cut may supersede a migration (docs/genmig.md), which then ends rolled back before the next begins,
        # and a deep cut's migration may be running for a few seconds only before it drains.
        opened: dict[int, float] = {}

        def open_for_2_seconds():
            found = open_live_migration(tmp)
            if found is None:
                return None
            return found if time.monotonic() - opened.setdefault(found[0], time.monotonic()) >= 2 else None

        wait_for("a GenMig migration open for 2 s", open_for_2_seconds, 150, first, first_log)
        spark_processes = descendants(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
    wait_for("the killed daemon's Spark to exit", lambda: not any(Path(f"/proc/{p}").exists() for p in spark_processes), 60)
    # The one the restart must resume is the one open when the daemon was killed.
    open_at_kill = open_live_migration(tmp)
    if open_at_kill is None:
        pytest.fail(f"no migration was open when the daemon was killed: {rows(tmp, 'SELECT id, state FROM migrations')}")
    migration_id, live = open_at_kill

    second = start(config, second_log)
    try:
        wait_for("the resumed migration to finish", lambda: rows(tmp, f"SELECT state FROM migrations WHERE id = {migration_id} "
                                                              "AND finished_at IS NOT NULL"), 150, second, second_log)
        time.sleep(6)  # the new plan alone, for a few more batches
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    finally:
        if second.poll() is None:
            second.kill()
    return {"tmp": tmp, "id": migration_id, "live": live, "first": first_log.read_text(), "second": second_log.read_text(),
            "returncode": second.returncode}


def test_the_restarted_daemon_resumes_and_finishes_the_migration(killed_and_resumed):
    run = killed_and_resumed
    assert run["returncode"] == 0, run["second"][-3000:]
    events = [e["event"] for e in log_events(run["second"])]
    assert "genmig_resumed" in events, events
    state, details = rows(run["tmp"], f"SELECT state, details FROM migrations WHERE id = {run['id']}")[0]
    assert state == "done", details
    history = [h[0] for h in json.loads(details)["live"]["history"]]
    assert history == ["running", "draining", "done"], history
    resumed = rows(run["tmp"], "SELECT message FROM events WHERE kind = 'migration_resumed' AND query = 'per_key'")
    assert resumed, rows(run["tmp"], "SELECT kind, message FROM events ORDER BY id")


def windows(tmp: Path, version: int) -> dict[tuple[int, int, int], list[int]]:
    """(window start µs, window end µs, key) → the counts plan version ``version`` wrote."""
    path = tmp / "out" / f"plan_version={version}"
    out: dict[tuple[int, int, int], list[int]] = {}
    for row in pq.read_table(path).to_pylist() if path.exists() else []:
        w = row["window"]
        start, end = (int(round(w[k].timestamp() * 1e6)) for k in ("start", "end"))
        out.setdefault((start, end, row["key"]), []).append(row["n"])
    return out


def truth(plan: dict, size_us: int, slide_us: int, low_us: int, high_us: int) -> Counter:
    """The exact count per (window start, end, key) of every window with low ≤ end < high (µs), from the arrivals.

    Spark's sliding windows start at multiples of the slide (from the epoch) and hold [start, start + size).
    """
    options = SourceOptions.parse({"stream": "clicks", **{k: str(v) for k, v in plan["extra"]["sources"]["clicks"].items()}})
    origin_us = int(round(options.start * 1e6))
    counts: Counter = Counter()
    from_ms = max(0, (low_us - size_us - origin_us) // 1000 - 1)
    for times, keys, _ in Arrivals(options).between(from_ms, (high_us - origin_us) // 1000 + 1):
        for t, key in zip(origin_us + np.round(times * 1e6).astype(np.int64), keys):
            window_start = (int(t) // slide_us) * slide_us
            while window_start > t - size_us:
                if low_us <= window_start + size_us < high_us:
                    counts[(window_start, window_start + size_us, int(key))] += 1
                window_start -= slide_us
    return counts


def shape(plan: dict) -> tuple[int, int]:
    """(window size, slide) of the plan's window node in µs (the builder caps the slide at the size)."""
    size = float(plan["windows"]["pk_w"])
    slide = float((plan.get("slides") or {}).get("pk_w") or plan.get("granularity") or 1.0)
    return int(round(size * 1e6)), int(round(min(size, slide) * 1e6))


def test_the_sink_holds_exactly_the_old_plan_before_the_split_and_the_new_one_after(killed_and_resumed):
    tmp, live = killed_and_resumed["tmp"], killed_and_resumed["live"]
    old_plan, new_plan = live["old_plan"], live["new_plan"]
    # Plan versions of runs dropped by a supersession are skipped, and those runs wrote nothing.
    assert old_plan["version"] == 0 and new_plan["version"] >= 1
    assert all(not windows(tmp, v) for v in range(1, new_plan["version"]))
    split = int(round(live["t_split"] * 1e6))
    report = {}
    for version, plan in ((0, old_plan), (new_plan["version"], new_plan)):
        size, slide = shape(plan)
        got = windows(tmp, version)
        assert got, f"plan version {version} wrote nothing"
        assert all(end - start == size for start, end, _ in got), (version, size)
        duplicated = {k: v for k, v in got.items() if len(v) > 1}
        assert not duplicated, (version, list(duplicated.items())[:5])
        # The old plan answers before T_split, the new one from it on.
        assert all((end < split) == (version == 0) for _, end, _ in got), version
        # The old run started mid-stream: its first windows are partial, but every window that starts after the
        # earliest one it wrote has ended is complete. The new run started more than a window before T_split.
        low = min(start for start, _, _ in got) + 2 * size if version == 0 else split
        high = split if version == 0 else max(end for _, end, _ in got) + 1
        want = truth(plan, size, slide, low, high)
        have = {k: v[0] for k, v in got.items() if low <= k[1] < high}
        report[version] = {"windows": len(want), "lost": sorted(set(want) - set(have))[:5],
                           "wrong": {k: (have[k], want.get(k, 0)) for k in have if have[k] != want.get(k, 0)}}
        assert len(want) > 10, (version, len(want))
    assert all(not r["lost"] and not r["wrong"] for r in report.values()), report
