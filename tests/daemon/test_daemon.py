"""The daemon end to end: ``armd run`` as a subprocess on a real SQLite file with the synthetic source.

These runs take a few seconds each: the schedule is compressed (observe every
0.2 s, decide at least every 2 s) and the rate burst starts 3 s in.
"""

from __future__ import annotations
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.daemon import TABLES, write_config, armd, env, start, run_for, log_events


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("run")
    config = write_config(tmp_path)
    upgraded = json.loads(armd("db", "upgrade", "--config", str(config), "--json").stdout)
    assert upgraded["before"] is None and upgraded["after"]
    again = json.loads(armd("db", "upgrade", "--config", str(config), "--json").stdout)
    assert again["before"] == again["after"] == upgraded["after"]
    result, stop_seconds = run_for(config, 9.0)
    return tmp_path, config, result, stop_seconds


def test_run_fills_every_table_and_stops_on_sigterm(finished_run):
    tmp_path, _, result, stop_seconds = finished_run
    assert result.returncode == 0, result.stderr
    assert stop_seconds < 10
    with sqlite3.connect(tmp_path / "armd.db") as db:
        counts = {table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in TABLES}
    assert all(counts.values()), counts
    events = [line["event"] for line in log_events(result.stderr)]
    assert events[0] == "daemon_started" and events[-1] == "daemon_stopped" and "signal_received" in events


def test_the_burst_leads_to_a_decision_that_brings_the_estimate_under_the_bound(finished_run):
    tmp_path, _, _, _ = finished_run
    with sqlite3.connect(tmp_path / "armd.db") as db:
        decisions = db.execute(
            "SELECT trigger, feasible, estimated_memory_bytes, weighted_qos FROM decisions ORDER BY id"
        ).fetchall()
        before = db.execute(
            "SELECT max(memory_bytes) FROM estimates WHERE query IS NULL AND decision_id IS NULL"
        ).fetchone()[0]
    rate_triggered = [d for d in decisions if d[0].startswith("rate of")]
    assert rate_triggered, decisions
    trigger, feasible, memory, qos = rate_triggered[-1]
    assert feasible and memory <= 150000
    assert before > 150000  # the settings in force did exceed the bound during the burst
    assert qos < decisions[0][3]


def test_the_store_is_consistent_after_the_stop(finished_run):
    tmp_path, _, _, _ = finished_run
    with sqlite3.connect(tmp_path / "armd.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        open_migrations = db.execute("SELECT count(*) FROM migrations WHERE finished_at IS NULL").fetchone()[0]
        settings = db.execute("SELECT name, settings FROM queries WHERE status = 'active'").fetchall()
    assert open_migrations == 0
    assert settings and all(json.loads(s)["windows"] is not None for _, s in settings)


def test_read_commands_show_the_run(finished_run):
    _, config, _, _ = finished_run
    status = json.loads(armd("status", "--config", str(config), "--json").stdout)
    assert {q["name"] for q in status["queries"]} == {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert status["last_decision"] is not None
    text = armd("status", "--config", str(config)).stdout
    assert "clicks_per_view" in text and "last decision" in text
    explained = json.loads(armd("explain", "clicks_per_view", "--config", str(config), "--json").stdout)
    assert explained["decision"]["considered"] and explained["decision"]["applied"]["windows"]
    assert "guardrail" in armd("explain", "clicks_per_view", "--config", str(config)).stdout
    history = json.loads(armd("history", "--config", str(config), "--json", "--limit", "3").stdout)
    assert 1 <= len(history["decisions"]) <= 3
    unknown = armd("explain", "nope", "--config", str(config), check=False)
    assert unknown.returncode == 2 and "clicks_per_view" in unknown.stderr


def test_secrets_never_reach_logs_events_or_status(finished_run):
    tmp_path, config, result, _ = finished_run
    secret = "hook-secret-0451"
    assert secret not in result.stderr + result.stdout
    with sqlite3.connect(tmp_path / "armd.db") as db:
        for table in TABLES:
            for row in db.execute(f"SELECT * FROM {table}"):
                assert secret not in repr(row), table
    assert secret not in armd("status", "--config", str(config), "--json").stdout
    assert secret not in armd("check-config", str(config), "--json").stdout


def test_sigint_stops_within_ten_seconds(tmp_path):
    config = write_config(tmp_path)
    armd("db", "upgrade", "--config", str(config))
    result, stop_seconds = run_for(config, 2.0, signal.SIGINT)
    assert result.returncode == 0, result.stderr
    assert stop_seconds < 10
    assert [line["event"] for line in log_events(result.stderr)][-1] == "daemon_stopped"


def test_dry_run_records_decisions_and_applies_nothing(tmp_path):
    config = write_config(tmp_path, dry_run=True)
    armd("db", "upgrade", "--config", str(config))
    result, _ = run_for(config, 2.5)
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(tmp_path / "armd.db") as db:
        decisions = db.execute("SELECT dry_run, applied FROM decisions").fetchall()
        assert decisions and all(dry and not applied for dry, applied in decisions)
        assert db.execute("SELECT count(*) FROM migrations").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM queries WHERE settings IS NOT NULL").fetchone()[0] == 0


def test_refuses_to_start_on_an_outdated_schema(tmp_path):
    config = write_config(tmp_path)
    result = armd("run", "--config", str(config), check=False)
    assert result.returncode == 2
    assert "armd db upgrade" in result.stderr and "Traceback" not in result.stderr


def test_a_store_that_is_down_at_start_is_retried_then_reported(tmp_path):
    config = write_config(tmp_path)
    text = config.read_text().replace(f"sqlite:///{tmp_path / 'armd.db'}", "postgresql+psycopg://armd:pw-0451@127.0.0.1:9/armd")
    config.write_text(text)
    result = armd("run", "--config", str(config), check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "pw-0451" not in result.stderr
    retries = [line for line in log_events(result.stderr) if line["event"] == "store_connect_retry"]
    assert len(retries) == 2
    assert "metadata store unavailable" in result.stderr


def test_sighup_with_a_bad_config_keeps_running_and_alerts(tmp_path):
    config = write_config(tmp_path)
    armd("db", "upgrade", "--config", str(config))
    process, lines = start(config)
    time.sleep(1.0)
    good = config.read_text()
    config.write_text(good.replace("memory_bytes = 150000", "memory_bytes = -1"))
    process.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    config.write_text(good.replace("memory_bytes = 150000", "memory_bytes = 300000"))
    process.send_signal(signal.SIGHUP)
    time.sleep(1.5)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    events = log_events("".join(lines) + err)
    failed = [e for e in events if e["event"] == "config_reload_failed"]
    assert failed and "bounds.memory_bytes" in failed[0]["message"]
    assert any(e["event"] == "config_reloaded" for e in events)
    with sqlite3.connect(tmp_path / "armd.db") as db:
        triggers = [t for (t,) in db.execute("SELECT trigger FROM decisions ORDER BY id")]
        kinds = [k for (k,) in db.execute("SELECT kind FROM events")]
    assert "bounds changed" in triggers and "config_reload_failed" in kinds


def test_the_store_going_away_mid_run_is_survived_without_losing_records(tmp_path, request):
    from support.netproxy import Proxy
    from sqlalchemy.engine import make_url

    real = make_url(request.getfixturevalue("postgres_database"))
    proxy = Proxy((real.host or "127.0.0.1", real.port or 5432))
    port = proxy.port
    config = write_config(tmp_path)
    through_proxy = real.set(port=port).render_as_string(hide_password=False)
    config.write_text(config.read_text().replace(f"sqlite:///{tmp_path / 'armd.db'}", through_proxy))
    armd("db", "upgrade", "--config", str(config))
    process, lines = start(config)
    time.sleep(2.0)
    proxy.cut()
    time.sleep(3.0)
    assert process.poll() is None
    proxy = Proxy((real.host or "127.0.0.1", real.port or 5432), port=port)
    time.sleep(3.0)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    proxy.cut()
    assert process.returncode == 0, err
    events = [line["event"] for line in log_events("".join(lines) + err)]
    assert events.count("store_unavailable") >= 1 and "store_available_again" in events
    assert "Traceback" not in err and real.password not in err
    from sqlalchemy import create_engine, text

    engine = create_engine(real.render_as_string(hide_password=False))
    with engine.connect() as db:
        times = [row[0] for row in db.execute(text("SELECT at FROM observations WHERE stream = 'clicks' ORDER BY at"))]
        kinds = [row[0] for row in db.execute(text("SELECT kind FROM events"))]
    engine.dispose()
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:])]
    assert len(times) > 20 and max(gaps) < 1.5, gaps  # the outage left no hole: its observations were written later
    assert kinds[0] == "daemon_started" and kinds[-1] == "daemon_stopped"


def test_a_sqlite_file_replaced_under_the_daemon_is_store_lost_and_nothing_goes_into_the_new_file(tmp_path):
    """(Deleted files are covered at the store, tests/adapters/test_sqlite_file.py; one daemon run is enough here.)"""
    import os

    from armd.adapters.store import SqlStore

    config = write_config(tmp_path)
    db = tmp_path / "armd.db"
    armd("db", "upgrade", "--config", str(config))
    fresh = SqlStore.open(f"sqlite:///{tmp_path / 'fresh.db'}")
    fresh.upgrade()
    fresh.close()
    process, lines = start(config)
    time.sleep(1.0)
    os.replace(tmp_path / "fresh.db", db)  # atomically: a restored backup, another store
    for journal in ("armd.db-wal", "armd.db-shm"):  # the old store's write-ahead log goes with it
        (tmp_path / journal).unlink(missing_ok=True)
    time.sleep(1.5)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    events = log_events("".join(lines) + err)
    lost = [e for e in events if e["event"] == "store_lost"]
    assert len(lost) == 1 and "was replaced by another file" in lost[0]["message"] and lost[0]["level"] == "error"
    assert any(e["event"] == "records_unwritten" for e in events), "records kept in memory are counted at the stop"
    assert "Traceback" not in err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM observations").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``signum`` (``SigCgt`` in ``/proc/PID/status``)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (signum - 1) & 1)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_while_armd_run_is_still_loading_ends_it_cleanly_without_starting_anything(tmp_path, stop):
    """The ``armd`` command loads for seconds before the service's handlers exist; a stop meanwhile (``systemctl
    stop`` right after start, a script's ``kill``) must end it with status 0, not 143 or a ``KeyboardInterrupt``."""
    config = write_config(tmp_path)
    process = subprocess.Popen([str(Path(sys.executable).parent / "armd"), "run", "--config", str(config)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    deadline = time.monotonic() + 30
    # Python handles SIGINT from its start; ``early_stop.catch`` takes SIGINT, then SIGTERM: SIGTERM caught means both.
    while not _catches(process.pid, signal.SIGTERM):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.005)
    process.send_signal(stop)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    stopped = [e for e in log_events(err) if e["event"] == "daemon_stopped"]
    assert stopped and "before it started" in stopped[0]["message"], err
    assert not (tmp_path / "armd.db").exists(), "nothing was started: not even the store was created"
