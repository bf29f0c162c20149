"""bench/fleet_cluster.py leaves no submitted application running when it stops early."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import fleet_cluster  # noqa: E402


def test_applications_still_running_when_the_benchmark_stops_are_stopped_with_their_children():
    """A failed application, a timeout or a SIGTERM ends the block early: the others (and what they started, e.g. a
    Python worker) must not go on holding the cluster's cores."""
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    with pytest.raises(SystemExit), fleet_cluster.stopped_on_exit({}) as procs:
        procs["app"] = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
        procs["done"] = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
        procs["done"].wait(30)
        raise SystemExit(143)  # what the benchmark's SIGTERM handler raises
    assert procs["app"].wait(10) == -15
    deadline = time.monotonic() + 10
    while (left := subprocess.run(["pgrep", "-g", str(procs["app"].pid)], capture_output=True, text=True).stdout.strip()):
        assert time.monotonic() < deadline, f"the application's child is still running: {left}"
        time.sleep(0.1)
