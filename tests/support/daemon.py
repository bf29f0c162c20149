"""``armd`` for tests: a compressed-schedule configuration, running it for a while, its JSON log events.

``armd run`` always gets a process of its own (signals, exit status, its log lines, its Spark). The commands that
prepare or read and then end (``IN_PROCESS``) run in the test's process through ``armd.daemon.cli.main``, the
command line's own code, with the same environment and their output captured: as a process each paid an interpreter
and armd start-up (about 1.5 s of CPU here) for milliseconds of work, some twenty times in the suite.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Callable
from unittest import mock

from support import REPO

ROOT = REPO
ARMD = [sys.executable, "-m", "armd.daemon.cli"]

HEARTBEAT = """
[source.streams.heartbeat]
rate_per_second = 1

[plan.streams.heartbeat]
rate = 0.001
size = 16

[plan.queries.heartbeat]
op = "aggregate"
inputs = [{{ op = "window", c = 10, inputs = [{{ op = "source", stream = "heartbeat" }}] }}]
"""
"""For ``str.format`` templates of a daemon that governs agent applications only: the plan must still hold a query
(the plan format's rule, as in config/armd.toml), so a tiny simulated one with no QoS range, for which nothing is
decided."""

CONFIG = """
[store]
url = "sqlite:///{db}"
connect_retries = 2
connect_backoff_seconds = 0.1

[bounds]
memory_bytes = 150000
cpu = 100

[guardrails]
dry_run = {dry_run}

[schedule]
observe_seconds = 0.2
decide_seconds = 2
apply_seconds = 0.2
housekeeping_seconds = 1

[source]
seed = 3
[source.streams.clicks]
rate_per_second = 50
bursts = [ {{ at_seconds = 3, duration_seconds = 60, factor = 20 }} ]

[[alerts]]
kind = "webhook"
url = "http://127.0.0.1:9/hook"
secret = "${{ARMD_TEST_HOOK_SECRET}}"

[plan]
file = "{plan}"

[queries.clicks_per_view]
window = [1000, 60000]

[queries.clicks_per_second]
granularity = [10000, 1000]
"""

TABLES = ("streams", "queries", "plan_nodes", "observations", "estimates", "decisions", "migrations", "events")


def write_config(tmp_path: Path, dry_run: bool = False, db: Path | None = None) -> Path:
    db = db or tmp_path / "armd.db"
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(db=db, dry_run=str(dry_run).lower(), plan=ROOT / "config/plans/example.json"))
    return path


def env() -> dict[str, str]:
    return {**os.environ, "ARMD_TEST_HOOK_SECRET": "hook-secret-0451"}


IN_PROCESS = frozenset({"check-config", "db", "status", "explain", "history"})
"""First words of the commands ``armd`` runs in this process."""


def armd(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``armd ARGS`` as the user runs it: exit status, stdout and stderr (``check``: exit status 0 asserted)."""
    if args and args[0] in IN_PROCESS:
        result = _in_process(args)
    else:
        result = subprocess.run([*ARMD, *args], capture_output=True, text=True, env=env(), timeout=120)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def _in_process(args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """What ``python -m armd.daemon.cli ARGS`` would give, from ``main`` in this process: an uncaught exception is
    exit status 1 with its traceback on stderr, as the interpreter would make it."""
    from armd.daemon.cli import main

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env()), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except Exception:  # noqa: BLE001 - reported as the process would report it
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess([*ARMD, *args], code, out.getvalue(), err.getvalue())


def start(config: Path) -> tuple[subprocess.Popen, list[str]]:
    """``armd run`` in the background, returned once it has logged ``daemon_started`` (with the lines so far)."""
    process = subprocess.Popen([*ARMD, "run", "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    lines = []
    while not any('"daemon_started"' in line for line in lines):
        line = process.stderr.readline()
        assert line, f"armd run ended before starting: {''.join(lines)}"
        lines.append(line)
    return process, lines


def run_for(config: Path, seconds: float, stop: int = signal.SIGTERM) -> tuple[subprocess.CompletedProcess, float]:
    """``armd run`` for ``seconds``, then ``stop``: the completed run (stderr with the start-up lines) and how long it
    took to stop."""
    return run_until(config, lambda: False, at_most=seconds, stop=stop)


def run_until(config: Path, done: Callable[[], bool], at_most: float, at_least: float = 0.0,
              stop: int = signal.SIGTERM, every: float = 2.0) -> tuple[subprocess.CompletedProcess, float]:
    """Like ``run_for``, but stopped as soon as ``done()`` holds (checked every ``every`` s after ``at_least`` s),
    and after ``at_most`` s at the latest: a run as long as the behaviour under test needs, not a fixed guess
    that must cover the slowest machine. The test asserts on what the run did either way."""
    process, lines = start(config)
    began = time.monotonic()
    while True:
        elapsed = time.monotonic() - began
        if elapsed >= at_most or (elapsed >= at_least and done()):
            break
        assert process.poll() is None, process.communicate()[1]
        time.sleep(min(every, max(0.0, at_most - elapsed)))
    assert process.poll() is None, process.communicate()[1]
    asked = time.monotonic()
    process.send_signal(stop)
    out, err = process.communicate(timeout=30)
    return subprocess.CompletedProcess(process.args, process.returncode, out, "".join(lines) + err), time.monotonic() - asked


def log_events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
