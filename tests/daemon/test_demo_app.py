"""``make run``'s wiring: ``armd run`` starts the demo application (``[[apps]]``) beside itself, decides for it, stops it.

The daemon is a real ``armd run`` on SQLite; the application is the real
``examples/demo_app.py`` on local Spark in a process of its own, started by
the daemon with the store's URL in ``ARMD_STORE``, running one of its queries (``--only``:
a test's share of this machine's Spark). The configuration is
config/armd.toml's, compressed: a bound small enough that the first
decisions must cut the queries' windows, and a short decision interval.
The test checks the whole path: the application registers its query, the daemon admits them and writes desired settings for them, the
agent inside the application puts a change into force by GenMig, and
SIGTERM to the daemon stops both, the application marked ``stopped``,
without a traceback.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest
from sqlalchemy import select
from support import REPO
from support.daemon import ARMD, HEARTBEAT, env, log_events

from armd.adapters.store import applications as apps
from armd.adapters.store import models as m
from armd.adapters.store.sql import SqlStore

pytest.importorskip("pyspark")

QUERIES = {"clicks_per_key"}
"""The demo's windowed count alone (``--only``): one query keeps the test's Spark work small; the wiring is the same."""

CONFIG = """
[store]
url = "sqlite:///{db}"

[model]
time_unit_seconds = 1
profile = "spark"

[bounds]
memory_bytes = 60000
cpu = 1e9
reserve = 0.1

[guardrails]
cooldown_seconds = 0
max_step = 1

[schedule]
observe_seconds = 1
decide_seconds = 2
apply_seconds = 1

""" + HEARTBEAT + """
[[apps]]
name = "demo"
command = ["python", "{app}", "--only", "clicks_per_key", "--trigger-seconds", "1", "--burst-factor", "1"]
stop_seconds = 30
"""


def wait_for(what: str, ok: Callable[[], bool], seconds: float, tmp_path: Path, process: subprocess.Popen) -> None:
    """Until ``ok()``; a timeout, or the daemon or the application ending first, fails with the tail of both logs."""
    deadline = time.monotonic() + seconds
    while not ok():
        daemon = (tmp_path / "daemon.log").read_text()
        ended = "daemon ended" if process.poll() is not None else "application ended" if '"app_exited"' in daemon else None
        if ended or time.monotonic() > deadline:
            app = (tmp_path / "demo.log").read_text() if (tmp_path / "demo.log").exists() else ""
            raise AssertionError(f"{ended or f'timed out after {seconds:g} s'} waiting for {what}\n"
                                 f"daemon:\n{daemon[-2000:]}\napplication:\n{app[-3000:]}")
        time.sleep(0.5)


def migrations(store: SqlStore) -> list[tuple[str, str, str]]:
    return store.transact(lambda s: [(r.query, r.state, (r.details or {}).get("strategy")) for r in s.scalars(select(m.Migration))])


def test_armd_run_starts_the_demo_application_decides_for_it_and_stops_it(tmp_path: Path):
    db = tmp_path / "armd.db"
    config = tmp_path / "armd.toml"
    config.write_text(CONFIG.format(db=db, app=REPO / "examples" / "demo_app.py"))
    store = SqlStore.open(f"sqlite:///{db}")
    store.upgrade()
    with (tmp_path / "daemon.log").open("w") as log:
        process = subprocess.Popen([*ARMD, "run", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=log,
                                   text=True, env=env())
    try:
        wait_for("the application's query admitted", lambda: {
            q for q, spec in apps.queries_of(store, "demo").items() if spec["status"] == "active"} == QUERIES, 240,
            tmp_path, process)
        (row,) = apps.applications(store)
        assert (row.app, row.status) == ("demo", "running")
        specs = apps.queries_of(store, "demo")
        assert all(specs[q]["plan_source"] == "derived" for q in QUERIES)  # derived from the application's DataFrames
        # Decided by the daemon for the application's queries, and put into force there by GenMig.
        wait_for("a GenMig migration inside the application", lambda: any(
            q in QUERIES and strategy == "genmig" for q, _state, strategy in migrations(store)), 120, tmp_path, process)
        desired = store.desired_settings()
        assert QUERIES & set(desired), desired
        decided = {q: d.plan_version for q, d in desired.items() if q in QUERIES}
        assert max(decided.values()) >= 1
        actual = store.actual_states()
        assert any(actual[q].phase == "migrating" or actual[q].plan_version >= 1 for q in decided)
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=90)
    err = (tmp_path / "daemon.log").read_text()
    events = log_events(err)
    kinds = [e.get("event") for e in events]
    assert process.returncode == 0, err[-3000:]
    assert "app_started" in kinds and "app_stopped" in kinds and "app_exited" not in kinds, kinds
    assert "Traceback" not in err
    # The application stopped by itself on SIGTERM: its agent marked it stopped and its queries removed.
    assert [(a.app, a.status) for a in apps.applications(store)] == [("demo", "stopped")]
    assert {spec["status"] for spec in apps.queries_of(store, "demo").values()} == {"removed"}
    log = (tmp_path / "demo.log").read_text()
    assert "1 queries started under armd" in log and "Traceback" not in log, log[-3000:]
    assert (tmp_path / "armd-output" / "clicks_per_key.jsonl").stat().st_size > 0  # the application's own sink wrote
    store.close()
