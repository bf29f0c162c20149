"""`armd estimate` end to end: the real console script on real plan files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from support import REPO
import pytest

from armd.daemon.cli import main

ROOT = REPO
EXAMPLES = sorted((ROOT / "config" / "plans").glob("*.json")) + sorted((ROOT / "config" / "plans").glob("*.toml"))


def run_cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_plan(tmp_path: Path, doc: object, name: str = "plan.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


ISSUE_SHAPE = {
    "streams": {"A": {"d": 10, "g": 1, "size": 64}, "B": {"d": 20, "g": 1, "size": 32}},
    "constants": {"C_H": 1},
    "queries": {
        "q1": {
            "op": "join",
            "sel": 0.5,
            "kind": "nested",
            "inputs": [
                {"op": "window", "id": "wa", "w": 99, "inputs": [{"op": "source", "stream": "A"}]},
                {"op": "window", "w": 99, "inputs": [{"op": "source", "stream": "B"}]},
            ],
        },
        "q2": {"op": "aggregate", "inputs": [{"ref": "wa"}]},
    },
}


def test_console_script_prints_issue_json_shape(tmp_path: Path) -> None:
    """The installed `armd` script accepts the issue's JSON shape and prints the documented keys."""
    armd = shutil.which("armd", path=str(Path(sys.executable).parent))
    assert armd, "the armd console script is not installed in the venv"
    plan = write_plan(tmp_path, ISSUE_SHAPE)
    done = subprocess.run([armd, "estimate", str(plan), "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(done.stdout)
    assert set(doc) >= {"nodes", "queries", "total"}
    for node in doc["nodes"]:
        assert set(node) >= {"query", "id", "op", "d", "l", "g", "memory_bytes", "cpu"}
    assert set(doc["queries"]) == {"q1", "q2"}
    ids = [n["id"] for n in doc["nodes"]]
    assert "wa" in ids and len(ids) == len(set(ids))
    # Window over A: l = ⌊(99 + 1)/1⌋·1 = 100, d = 10; over B: l = 100, d = 20.
    # Nested join memory (9): (⌈100/10⌉ + 20/20)·64 + (⌈100/20⌉ + 10/40)·32 = 704 + 168 = 872.
    join = next(n for n in doc["nodes"] if n["id"] == "q1")
    assert join["memory_bytes"] == pytest.approx(872.0)
    shared = next(n for n in doc["nodes"] if n["id"] == "wa")
    assert shared["queries"] == ["q1", "q2"]
    assert doc["total"]["memory_bytes"] == pytest.approx(
        sum(n["memory_bytes"] for n in doc["nodes"])
    )


def test_empty_stream_is_written_as_inf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A granularity coarser than the elements' lifetime empties the stream: d is written "inf"."""
    doc = {
        "streams": {"A": {"d": 5, "size": 8}},
        "queries": {
            "q": {
                "op": "aggregate",
                "inputs": [
                    {"op": "granularity", "g": 100, "inputs": [
                        {"op": "window", "w": 49, "inputs": [{"op": "source", "stream": "A"}]}
                    ]}
                ],
            }
        },
    }
    code, out, _ = run_cli("estimate", str(write_plan(tmp_path, doc)), "--json", capsys=capsys)
    assert code == 0
    nodes = {n["op"]: n for n in json.loads(out)["nodes"]}
    assert nodes["granularity"]["d"] == "inf" and nodes["granularity"]["l"] == 0
    assert nodes["aggregate"]["memory_bytes"] == 0


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_shipped_examples_estimate(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli("estimate", str(example), capsys=capsys)
    assert code == 0, err
    assert "total" in out and "memory" in out


def test_toml_plan_matches_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = """
[streams.A]
d = 10
size = 64

[queries.q]
op = "window"
w = 50
inputs = [{ op = "source", stream = "A" }]
"""
    json_doc = {
        "streams": {"A": {"d": 10, "size": 64}},
        "queries": {"q": {"op": "window", "w": 50, "inputs": [{"op": "source", "stream": "A"}]}},
    }
    _, from_toml, _ = run_cli("estimate", str(write_plan(tmp_path, toml, "p.toml")), "--json", capsys=capsys)
    _, from_json, _ = run_cli("estimate", str(write_plan(tmp_path, json_doc)), "--json", capsys=capsys)
    assert json.loads(from_toml) == json.loads(from_json)


BAD = {
    "unknown operator": (
        {"streams": {"A": {"d": 1, "size": 1}}, "queries": {"q": {"op": "sort", "inputs": []}}},
        ["'q'", "unknown operator 'sort'", "allowed: source, window"],
    ),
    "negative window": (
        {"streams": {"A": {"d": 1, "size": 1}},
         "queries": {"q": {"op": "window", "w": -3, "inputs": [{"op": "source", "stream": "A"}]}}},
        ["'q' (window)", "w must be > 0", "-3"],
    ),
    "selectivity": (
        {"streams": {"A": {"d": 1, "size": 1}},
         "queries": {"q": {"op": "select", "sel": 0, "inputs": [{"op": "source", "stream": "A"}]}}},
        ["'q' (select)", "(0, 1]"],
    ),
    "cycle": (
        {"streams": {"A": {"d": 1, "size": 1}},
         "queries": {"q": {"op": "select", "id": "x", "sel": 1, "inputs": [
             {"op": "project", "id": "y", "inputs": [{"ref": "x"}]}]}}},
        ["cycle", "x → y → x", "acyclic"],
    ),
    "unknown stream": (
        {"streams": {"A": {"d": 1, "size": 1}}, "queries": {"q": {"op": "source", "stream": "Z"}}},
        ["'q' (source)", "unknown stream 'Z'", "declared streams: A"],
    ),
    "granularity mismatch": (
        {"streams": {"A": {"d": 1, "g": 1, "size": 1}, "B": {"d": 1, "g": 10, "size": 1}},
         "queries": {"q": {"op": "join", "sel": 1, "inputs": [
             {"op": "source", "stream": "A"}, {"op": "source", "stream": "B"}]}}},
        ["'q' (join)", "different granularities", "same g"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_plan_exits_2_with_one_line(case: str, tmp_path: Path) -> None:
    doc, fragments = BAD[case]
    plan = write_plan(tmp_path, doc)
    done = subprocess.run(
        [sys.executable, "-m", "armd.daemon.cli", "estimate", str(plan)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr


def test_unreadable_and_malformed_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli("estimate", str(tmp_path / "missing.json"), capsys=capsys)
    assert code == 2 and "cannot read plan" in err and "missing.json" in err
    code, _, err = run_cli("estimate", str(write_plan(tmp_path, "{not json")), capsys=capsys)
    assert code == 2 and "not valid JSON" in err
    code, _, err = run_cli("estimate", str(write_plan(tmp_path, "[1, 2]")), capsys=capsys)
    assert code == 2 and "must be an object" in err


# --- the daemon's commands on bad configurations -------------------------------------------------

from support.config_cases import MINIMAL, MISTAKES  # noqa: E402 - one table of mistakes for the loader and the CLI


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize("change, key, allowed", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_every_config_mistake_is_exit_2_naming_the_key(tmp_path, capsys, monkeypatch, command, change, key, allowed):
    monkeypatch.delenv("ARMD_DB_PASSWORD", raising=False)
    text = MINIMAL.replace(*change) if isinstance(change, tuple) else MINIMAL + "\n" + change + "\n"
    path = tmp_path / "armd.toml"
    path.write_text(text)
    args = [command, str(path)] if command == "check-config" else [command, "--config", str(path)]
    code, out, err = run_cli(*args, capsys=capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"armd: {path}: {key}: ") and allowed in err and err.count("\n") == 1


def test_check_config_accepts_the_examples(capsys):
    code, out, _ = run_cli("check-config", str(REPO / "config" / "armd.toml"), capsys=capsys)
    assert code == 0 and "ok — 1 queries" in out and "starts demo beside it ([[apps]])" in out  # make run's: the agent demo
    code, out, _ = run_cli("check-config", str(REPO / "config" / "armd-spark.toml"), capsys=capsys)
    assert code == 0 and "ok — 3 queries" in out  # the daemon running the same queries itself


def test_calibrate_fits_the_recorded_batches_and_the_configuration_reuses_the_result(tmp_path, capsys):
    from datetime import datetime, timedelta, timezone

    from armd.adapters.store import SqlStore
    from armd.daemon.config import load_config
    from armd.control.ports import BatchProgress, Observation, StreamStats

    plans = tmp_path / "plans"
    plans.mkdir()
    shutil.copy(ROOT / "config" / "plans" / "example.json", plans / "example.json")
    text = (ROOT / "config" / "armd-simulated.toml").read_text().replace("sqlite:///armd.db", f"sqlite:///{tmp_path / 'armd.db'}")
    config = tmp_path / "armd.toml"
    config.write_text(text)
    code, _, _ = run_cli("calibrate", "--config", str(config), capsys=capsys)  # no store yet
    assert code == 2
    store = SqlStore.open(f"sqlite:///{tmp_path / 'armd.db'}")
    store.upgrade()
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    code, _, err = run_cli("calibrate", "--config", str(config), capsys=capsys)
    assert code == 2 and "holds no two consecutive batches" in err
    batches = [
        BatchProgress(query, f"run-{query}", i, t0 + timedelta(seconds=i), input_rows=50, batch_ms=ms,
                      event_max=t0 + timedelta(seconds=i), state_rows=rows, state_bytes=rows * 300)
        for query, ms, rows in (("clicks_per_second", 40, 10), ("big_orders", 25, 4))
        for i in range(6)
    ]
    store.record_observation(Observation(t0, [StreamStats("clicks", 100, 2.0, 50.0, 20.0), StreamStats("orders", 40, 2.0, 20.0, 50.0)],
                                         batches=batches))
    store.close()
    code, out, _ = run_cli("calibrate", "--config", str(config), "--json", capsys=capsys)
    assert code == 0
    result = json.loads(out)
    assert result["file"] == str(tmp_path / "calibration.json") and result["samples"] == 10  # 5 spans per run
    assert result["bytes_per_row"] == pytest.approx(300.0) and result["learned"]
    assert json.loads((tmp_path / "calibration.json").read_text())["samples"] == 10
    config.write_text(text.replace('profile = "paper"', 'profile = "paper"\ncalibration = "calibration.json"'))
    calibrated = load_config(config)
    assert [spec.size for spec in calibrated.plan.streams.values()] == pytest.approx([300.0] * 3)
    assert calibrated.plan.constants.aggregate_size == pytest.approx(300.0)


def test_jisc_demo_changes_the_order_when_the_rates_cross_and_stays_exact(capsys):
    """The embedded demo: JISC on the single-process host, the join-order policy deciding from what it measures."""
    assert main(["jisc-demo", "--seconds", "120", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["results"] == report["oracle_results"] > 1000 and report["duplicates"] == 0 and report["closed"]
    (switch,) = report["switches"]  # views speed up and clicks slow down at 60 s: views join last from then on
    assert switch["at_s"] > 60 and switch["new_order"].endswith("views)") and report["final_order"] == switch["new_order"]
    assert set(switch["pair_selectivities"]) == {"carts,views", "clicks,views", "carts,clicks"}
    assert report["completions"] > 0  # the new lower join was completed key by key, on demand
    assert main(["jisc-demo"]) == 0
    text = capsys.readouterr().out
    assert "→" in text and text.rstrip().endswith("exact")


def test_jisc_demo_refuses_a_bad_duration(capsys):
    assert main(["jisc-demo", "--seconds", "0"]) == 2
    assert "--seconds must be in (0, 3600]" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["status", "explain per_second", "history", "report --out plots", "calibrate"])
def test_read_commands_find_the_store_beside_the_configuration_and_never_create_one(tmp_path, capsys, monkeypatch, command):
    config_dir, elsewhere = tmp_path / "etc", tmp_path / "elsewhere"
    config_dir.mkdir(), elsewhere.mkdir()
    config = config_dir / "armd.toml"
    config.write_text('[store]\nurl = "sqlite:///armd.db"\n' + MINIMAL)
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(*command.split(), "--config", str(config), capsys=capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"no metadata store at '{config_dir / 'armd.db'}'" in err
    assert list(elsewhere.iterdir()) == [] and not (config_dir / "armd.db").exists()


def test_db_upgrade_then_status_use_the_one_store_beside_the_configuration(tmp_path, capsys, monkeypatch):
    config = tmp_path / "armd.toml"
    config.write_text('[store]\nurl = "sqlite:///armd.db"\n' + MINIMAL)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    assert run_cli("db", "upgrade", "--config", str(config), capsys=capsys)[0] == 0
    monkeypatch.chdir(tmp_path / "b")
    code, out, _ = run_cli("status", "--config", str(config), "--json", capsys=capsys)
    assert code == 0 and "queries" in json.loads(out)
    assert (tmp_path / "armd.db").exists() and list((tmp_path / "a").iterdir()) == list((tmp_path / "b").iterdir()) == []
