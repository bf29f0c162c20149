"""Input that used to be accepted and then broke later: each is now one line on stderr and exit status 2.

The configuration keys' bounds are cases of ``MISTAKES`` (``support.config_cases.LIMITS``); here are the
command line's own arguments and the files the configuration names (plans, calibrations).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.config_cases import MINIMAL

CLI = [sys.executable, "-m", "armd.daemon.cli"]

PLAN = {"streams": {"A": {"d": 10, "size": 64}},
        "queries": {"q": {"op": "aggregate", "inputs": [{"op": "source", "stream": "A"}]}}}


def one_line_exit_2(*args: str, cwd: Path) -> str:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 2, done
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "armd.toml"
    path.write_text(MINIMAL)
    return path


@pytest.mark.parametrize("args, words", [
    (["history", "--since", "99999999d"], "at most 36500d"),
    (["report", "--since", "99999999999999999999999d"], "at most 36500d"),
    (["calibrate", "--since", "99999999d"], "at most 36500d"),
    (["history", "--limit", "99999999999999999999"], "expected a whole number in [1, 1000000]"),
    (["history", "--limit", "0"], "expected a whole number in [1, 1000000], got 0"),
    (["history", "--limit", "many"], "expected a whole number in [1, 1000000], got 'many'"),
    (["history", "--since", "soon"], "invalid duration 'soon'"),
])
def test_out_of_range_arguments_are_one_line(args, words, config, tmp_path):
    err = one_line_exit_2(*args, "--config", str(config), cwd=tmp_path)
    assert words in err
    assert not (tmp_path / "armd.db").exists()


def test_a_binary_plan_file_is_one_line(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_bytes(b"\xff\xfe\x00\x81binary")
    assert "not UTF-8 text" in one_line_exit_2("estimate", str(plan), cwd=tmp_path)


def test_a_binary_plan_file_named_by_the_configuration_is_one_line(tmp_path):
    (tmp_path / "plan.json").write_bytes(b"\xff\xfe\x00\x81binary")
    path = tmp_path / "armd.toml"
    path.write_text("[bounds]\nmemory_bytes = 1e6\ncpu = 100\n[plan]\nfile = 'plan.json'\n")
    assert "plan.file: cannot read plan file" in one_line_exit_2("check-config", str(path), cwd=tmp_path)


DUPLICATE_QUERY = ('{"streams": {"A": {"d": 10, "size": 64}}, "queries": {'
                   '"q": {"op": "source", "stream": "A"}, "q": {"op": "aggregate", "inputs": [{"op": "source", "stream": "A"}]}}}')


def test_a_query_given_twice_in_a_json_plan_is_refused(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(DUPLICATE_QUERY)
    assert "key 'q' given twice" in one_line_exit_2("estimate", str(plan), cwd=tmp_path)
    path = tmp_path / "armd.toml"
    path.write_text("[bounds]\nmemory_bytes = 1e6\ncpu = 100\n[plan]\nfile = 'plan.json'\n")
    err = one_line_exit_2("check-config", str(path), cwd=tmp_path)
    assert "plan.file" in err and "key 'q' given twice" in err


@pytest.mark.parametrize("plan, words", [
    ({**PLAN, "streams": {"A": {"d": 1e-300, "size": 64}}}, "d must be > 0 and at least 1e-06"),
    ({**PLAN, "queries": {"q" * 201: PLAN["queries"]["q"]}}, "at most 200 characters"),
])
def test_plan_values_the_daemon_cannot_use_are_refused(plan, words, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert words in one_line_exit_2("estimate", str(path), cwd=tmp_path)


CALIBRATION = {"constants": {}, "learned": [], "bytes_per_row": 64.0, "residual_seconds": 0.0, "samples": 3}


@pytest.mark.parametrize("change, words", [
    ({"bytes_per_row": -64}, "bytes_per_row must be null or a number in [1e-06, 1e+12], got -64"),
    ({"bytes_per_row": "64"}, "bytes_per_row must be null or a number"),
    ({"learned": ["C_X"]}, "learned names unknown constants ['C_X']"),
    ({"residual_seconds": -1}, "residual_seconds must be a finite number ≥ 0"),
    ({"samples": -2}, "samples must be a whole number ≥ 0"),
    ({"constants": []}, "stored calibration is malformed"),
])
def test_a_bad_calibration_file_is_one_line_in_check_config(change, words, tmp_path):
    (tmp_path / "calibration.json").write_text(json.dumps({**CALIBRATION, **change}))
    path = tmp_path / "armd.toml"
    path.write_text(MINIMAL + "\n[model]\ncalibration = 'calibration.json'\n")
    err = one_line_exit_2("check-config", str(path), cwd=tmp_path)
    assert "model.calibration" in err and words in err
