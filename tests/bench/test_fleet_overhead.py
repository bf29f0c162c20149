"""bench/fleet's agent-overhead pairs: steady batches only, and both applications' streams started together."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from types import SimpleNamespace

from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import fleet_app  # noqa: E402
import fleet_cluster  # noqa: E402

from armd.adapters.spark.listener import ProgressListener  # noqa: E402


def progress(listener: ProgressListener, run: str, batch: int, rows: int, ms: int) -> None:
    doc = {"name": "q@0", "runId": run, "batchId": batch, "timestamp": "2026-01-01T00:00:00.000Z", "numInputRows": rows,
           "batchDuration": ms, "durationMs": {"addBatch": ms - 10, "queryPlanning": 10}}
    listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=json.dumps(doc))))


def test_each_runs_first_batch_is_left_out_of_the_steady_figures_and_idle_progress_counts_nowhere():
    listener = ProgressListener()
    for run, batch, rows, ms in [("a", 0, 100, 60_000), ("a", 1, 0, 5), ("a", 2, 400, 2_000), ("b", 0, 50, 9_000),
                                 ("a", 3, 200, 1_000), ("b", 1, 300, 3_000)]:
        progress(listener, run, batch, rows, ms)
    figures = fleet_app.throughput(listener, ["q"])["q"]
    assert (figures["rows"], figures["batch_seconds"]) == (1050, 75.0)
    assert (figures["steady_rows"], figures["steady_batch_seconds"]) == (900, 6.0)
    assert figures["phase_seconds"] == {"addBatch": 74.95, "queryPlanning": 0.05}


def test_the_barrier_opens_once_every_application_is_ready(tmp_path):
    script = ("import sys, time; sys.path.insert(0, sys.argv[1]); import fleet_app; "
              "fleet_app.warm_up = lambda spark: None; "  # no Spark here: the barrier's timing is what is tested
              "time.sleep(float(sys.argv[4])); fleet_app.barrier(None, sys.argv[2], sys.argv[3], 30); print(time.time())")
    procs = {name: subprocess.Popen([sys.executable, "-c", script, str(REPO / "bench"), str(tmp_path), name, delay],
                                    stdout=subprocess.PIPE, text=True) for name, delay in (("x", "0"), ("y", "1.5"))}
    began = time.time()
    fleet_cluster.open_barrier(tmp_path, procs, 30)
    went = {name: float(proc.communicate(timeout=30)[0]) for name, proc in procs.items()}
    assert time.time() - began >= 1.5  # it waited for the late one
    assert abs(went["x"] - went["y"]) < 1.0  # and both went on together
