"""``armd history``, ``status`` and ``explain`` as people read them: a timeline of old → new settings, a dry run's
recommendations, durations and plan names instead of model units and generated ids, and pipes that close early."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from armd.daemon.cli import load_plan, main
from armd.daemon.cpu import busy_fractions
from armd.daemon.history import history_text, in_seconds, timeline
from armd.daemon.names import node_labels
from armd.daemon.render import Words
from support import REPO
from support.daemon import ARMD, armd, env, start, write_config


def cli(capsys, monkeypatch, *args: str) -> str:
    """The CLI in this process (one import of armd for the module's many calls), against the real store."""
    monkeypatch.setenv("ARMD_TEST_HOOK_SECRET", env()["ARMD_TEST_HOOK_SECRET"])
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _decision(id: str, minute: int, windows: dict[str, float] | None, *, dry_run: bool = False) -> dict:
    applied = {"fw": 1, "fg": 1, "windows": windows or {}, "granularity": None, "qos": 0.5}
    return {"id": id, "at": f"2026-11-24T05:{minute:02d}:00+00:00", "policy": "weighted-qos", "trigger": "rate",
            "feasible": True, "dry_run": dry_run, "applied": not dry_run, "weighted_qos": 0.5,
            "inputs": {"guardrails": {"cooldown": 30000.0}},
            "outputs": {"queries": {"q": {"applied": applied}, "other": {"applied": {**applied, "windows": {"o": 5.0}}}}}}


def test_the_timeline_shows_old_and_new_settings_newest_first():
    decisions = [_decision("c", 3, {"w": 2000.0}), _decision("b", 2, {"w": 2000.0}), _decision("a", 1, {"w": 1000.0})]
    events = [{"at": "2026-11-24T05:02:30+00:00", "severity": "warning", "kind": "bound_exceeded", "query": "q",
               "message": "over"}]
    entries = timeline(decisions, events, limit=10)
    assert [e.get("id", e.get("event")) for e in entries] == ["c", "bound_exceeded", "b", "a"]
    assert entries[2]["changes"] == [{"query": "q", "old": decisions[2]["outputs"]["queries"]["q"]["applied"],
                                      "new": decisions[1]["outputs"]["queries"]["q"]["applied"]}]
    assert entries[0]["changes"] == []  # the same settings again: nothing changed
    text = history_text(entries, Words(0.001, {"w": "views"}))
    assert "q: views 1s → views 2s" in text and "2026-11-24 05:02:00 UTC" in text


def test_entries_are_ordered_by_time_not_by_text():
    decisions = [_decision("a", 1, {"w": 1000.0})]
    events = [{"at": "2026-11-24T05:01:00.500000+00:00", "severity": "info", "kind": "later", "query": None, "message": "m"}]
    assert [e["kind"] for e in timeline(decisions, events, limit=5)] == ["event", "decision"]


def test_the_oldest_decision_fetched_is_only_the_baseline_when_more_than_the_limit():
    decisions = [_decision("b", 2, {"w": 2000.0}), _decision("a", 1, {"w": 1000.0})]
    assert [e["id"] for e in timeline(decisions, [], limit=1)] == ["b"]


def test_one_query_keeps_only_its_changes_and_events():
    decisions = [_decision("b", 2, {"w": 2000.0}), _decision("a", 1, {"w": 1000.0})]
    events = [{"at": "2026-11-24T05:02:30+00:00", "severity": "info", "kind": "x", "query": "other", "message": "m"}]
    entries = timeline(decisions, events, query="q", limit=10)
    # the oldest decision has no baseline: its settings are shown as new (old unknown)
    assert [e["kind"] for e in entries] == ["decision", "decision"]
    assert [[c["query"] for c in e["changes"]] for e in entries] == [["q"], ["q"]] and entries[1]["changes"][0]["old"] is None


def test_cooldown_is_shown_in_configured_seconds():
    row = in_seconds(_decision("a", 1, None), 0.001)
    assert row["inputs"]["guardrails"]["cooldown"] == pytest.approx(30.0)


def test_generated_window_ids_are_shown_by_their_stream():
    labels = node_labels(load_plan(REPO / "config/plans/example.json"))
    assert labels["clicks_per_view.1"] == "views" and labels["clicks_10s"] == "clicks_10s"
    assert labels["big_orders.0.0"] == "orders"


def test_busy_fraction_is_batch_time_over_wall_time():
    t0 = datetime(2026, 11, 24, tzinfo=timezone.utc)
    batches = [{"query": "q", "at": t0 + timedelta(seconds=s), "batch_ms": 500} for s in (1, 2, 3, 4, 5)]
    # 5 batches of 0.5 s over 4 s between the first and last plus the first one's 0.5 s
    assert busy_fractions([*batches, {"query": "lonely", "at": t0, "batch_ms": 10}]) == {"q": pytest.approx(2.5 / 4.5)}


SCRAPED: dict[str, str] = {}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> Path:
    """A dry run of the daemon on the synthetic source, its metrics scraped while it ran (``SCRAPED``)."""
    tmp_path = tmp_path_factory.mktemp("dry")
    config = write_config(tmp_path, dry_run=True)
    config.write_text(config.read_text() + "\n[metrics]\nenabled = true\nport = 0\n")
    armd("db", "upgrade", "--config", str(config))
    process, lines = start(config)
    drain = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    drain.start()
    port = next(json.loads(line)["port"] for line in lines if '"metrics_listening"' in line)
    time.sleep(5.0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        SCRAPED["metrics"] = response.read().decode()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0, "".join(lines)
    drain.join(10)
    return config


def test_history_of_a_dry_run_recommends_and_tells_old_from_new(dry_run, capsys, monkeypatch):
    text = cli(capsys, monkeypatch, "history", "--config", str(dry_run), "--since", "1h30m")
    assert "recommended (dry run)" in text and " → " in text and "model time" not in text
    assert "clicks_per_view.1" not in text and "views" in text
    data = json.loads(cli(capsys, monkeypatch, "history", "--config", str(dry_run), "--json", "--query", "clicks_per_view"))
    changes = [c for e in data["timeline"] if e["kind"] == "decision" for c in e["changes"]]
    assert changes and all(c["query"] == "clicks_per_view" for c in changes)
    assert all(d["inputs"]["guardrails"]["cooldown"] == 30.0 for d in data["decisions"])


def test_history_of_an_unknown_query_is_one_line(dry_run, capsys, monkeypatch):
    monkeypatch.setenv("ARMD_TEST_HOOK_SECRET", "x")
    assert main(["history", "--config", str(dry_run), "--query", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no query 'nope'" in err and "clicks_per_view" in err


def test_status_and_explain_show_the_recommendation(dry_run, capsys, monkeypatch):
    status = json.loads(cli(capsys, monkeypatch, "status", "--config", str(dry_run), "--json"))
    recommended = {q["name"]: q["recommended"] for q in status["queries"]}
    assert recommended["clicks_per_view"]["windows"]
    text = cli(capsys, monkeypatch, "status", "--config", str(dry_run))
    assert "recommended" in text and "KiB" in text and "kB" not in text
    explained = cli(capsys, monkeypatch, "explain", "clicks_per_view", "--config", str(dry_run))
    assert "recommended (dry run, not applied): clicks_10s" in explained
    assert "nothing was applied" not in explained and "model time" not in explained and "UTC" in explained


def test_a_dry_run_s_recommendations_are_metrics(dry_run):
    metrics = SCRAPED["metrics"]
    windows = [line for line in metrics.splitlines() if line.startswith("armd_query_recommended_window_seconds{")]
    assert any('query="clicks_per_view"' in line and 'node="views"' in line for line in windows), metrics
    assert not any("clicks_per_view.1" in line for line in windows)
    assert 'armd_query_recommended_qos_ratio{query="clicks_per_view"}' in metrics


def test_a_removed_query_leaves_status(dry_run, tmp_path, capsys, monkeypatch):
    config = tmp_path / "armd.toml"
    config.write_text(dry_run.read_text().replace(str(dry_run.parent / "armd.db"), str(tmp_path / "armd.db")))
    shutil.copy(dry_run.parent / "armd.db", tmp_path / "armd.db")
    with sqlite3.connect(tmp_path / "armd.db") as db:
        db.execute("UPDATE queries SET status = 'removed' WHERE name = 'big_orders'")
    names = [q["name"] for q in json.loads(cli(capsys, monkeypatch, "status", "--config", str(config), "--json"))["queries"]]
    assert "big_orders" not in names and "clicks_per_view" in names


def test_a_closed_pipe_is_no_traceback(dry_run):
    shell = subprocess.run(["bash", "-c", f"{' '.join(ARMD)} history --json --limit 1000 --config {dry_run} | head -1"],
                           capture_output=True, text=True, env=env(), timeout=120)
    assert shell.stdout == "{\n" and "Traceback" not in shell.stderr and shell.stderr == "", shell.stderr
    # a reader that is gone before armd writes a byte
    process = subprocess.Popen([*ARMD, "history", "--json", "--config", str(dry_run)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env())
    process.stdout.close()
    err = process.communicate(timeout=120)[1].decode()
    assert "Traceback" not in err and err == "" and process.returncode == 1, err


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("armd 0.")
