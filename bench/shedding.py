"""Window reduction against load shedding on local Spark (paper 001 §5.3, Figs 9–11).

Two query shapes run over the same replayed input (the ``armd-synthetic``
source in simulated event time, one trigger interval of event time per
micro-batch): a two-way stream-stream join (``range_join``, range R = the
window) and a windowed count per key (``windowed_count``, sliding by one
second). Each shape runs once at its full window without dropping (the
*oracle*), then with the window reduced and with load shedding (armd's
``rand() >= p`` filter before the window, ``builders.shed``), each at the
setting the cost model's ``spark`` profile predicts to save 25 %, 50 % and
75 % of the memory (shedding: the rate p; the aggregation's window: as far
as its range allows).

Per run it measures, on Spark:

* ``memory_saving``: 1 − the run's steady state (Spark's ``memoryUsedBytes``
  averaged over the batches after the windows filled) / the oracle's;
* ``results_kept``: join, the share of the oracle's result rows (identified
  by both sides' event time, key and value) the run produced; aggregation,
  Σ count / Σ oracle count over the oracle's (window start, key) groups of
  the window starts the run emitted
  (the share of the oracle's input its results reflect);

and from the cost model, ``cpu_saving`` (1 − the run's CPU estimate / the
oracle's; CPU cannot be measured reliably on a shared machine). Results kept
at equal memory saving (25, 50, 75 %) and at equal CPU saving are
interpolated linearly along each method's measured points (the oracle is the
point (0, 1)); ``null`` where a method does not reach that saving.
``reduction_over_shedding_results`` is window reduction's results kept over
shedding's at 50 % memory saving for the join (target ≥ 1.5; paper: about
one half against one quarter).

    .venv/bin/python bench/shedding.py --json

``reduction_vs_shedding(spark=None, listener=None)`` returns the same dict
(``bench/control.py`` imports it).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from armd.adapters.spark.listener import ProgressListener
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.spark.measure import Run, sources
from armd.adapters.spark.session import build_session
from armd.adapters.spark.sinks import MemorySink
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan

BUILDERS = "armd.adapters.spark.builders:"
SAVINGS = (0.25, 0.5, 0.75)
KEYS = 5
TARGET = 1.5


@dataclass(frozen=True)
class Shape:
    name: str
    builder: str
    rates: dict[str, float]
    window: float
    """Full window (the join's range), seconds."""
    min_window: float
    """The smallest window the query's QoS allows, seconds."""
    trigger: float = 1.0
    delay: float = 0.0
    seconds: float = 16.0

    @property
    def warmup(self) -> float:
        return self.window + self.delay + 2 * self.trigger + 2

    def plan(self, window: float, drop: float) -> dict[str, Any]:
        """The shape as a plan document in milliseconds (one byte per element); a drop is a select of 1 − p."""
        ms = 1000.0
        streams = {name: {"d": ms / rate, "g": 1, "size": 1} for name, rate in self.rates.items()}
        constants = {"aggregate_size": 1, "watermark_delay": self.delay * ms, "trigger_interval": self.trigger * ms}

        def windowed(stream: str) -> dict:
            source: dict = {"op": "source", "stream": stream}
            if drop > 0:
                source = {"op": "select", "sel": 1.0 - drop, "inputs": [source]}
            return {"op": "window", "w": window * ms, "inputs": [source]}

        if self.builder == "range_join":
            query = {"op": "join", "sel": 1 / KEYS, "inputs": [windowed(s) for s in sorted(self.rates)]}
        else:
            (stream,) = self.rates
            query = {"op": "aggregate", "groups": KEYS, "inputs": [
                {"op": "granularity", "g": 1 * ms, "inputs": [windowed(stream)]}]}
        return {"streams": streams, "constants": constants, "queries": {"q": query}}

    def model(self, window: float, drop: float) -> tuple[float, float]:
        total = estimate(parse_plan(self.plan(window, drop)), "spark").total
        return total.memory, total.cpu

    def params(self, start: float, window: float, drop: float) -> QueryParams:
        extra = {"sources": sources(self.rates, start=start, seconds=self.seconds, batch_seconds=self.trigger, keys=KEYS),
                 "delay_seconds": self.delay}
        return QueryParams(windows={"w": window}, slides={"w": 1.0}, extra=extra, drop_rate=drop)


SHAPES = (
    # the range well above the trigger interval, as in the paper's setting, where state follows the window
    Shape("two-way join", "range_join", {"a": 20.0, "b": 20.0}, window=6.0, min_window=0.05, seconds=15.0),
    Shape("windowed count", "windowed_count", {"clicks": 40.0}, window=4.0, min_window=1.0, seconds=13.0),
)


def _solve(saving: Callable[[float], float], target: float, low: float, high: float) -> float | None:
    """The x in [low, high] with saving(x) = target, by bisection (saving rises with x); None when out of reach."""
    if saving(high) < target:
        return None
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if saving(middle) < target else (low, middle)
    return high


def settings(shape: Shape) -> list[dict[str, Any]]:
    """The runs of a shape: the oracle, then per target memory saving the reduced window and the drop rate."""
    full_memory, _ = shape.model(shape.window, 0.0)
    runs: list[dict[str, Any]] = [{"method": "oracle", "window": shape.window, "drop_rate": 0.0, "target_saving": 0.0}]
    for target in SAVINGS:
        # window reduction: saving grows as the window shrinks, x = full − window
        x = _solve(lambda x: 1 - shape.model(shape.window - x, 0.0)[0] / full_memory, target, 0.0,
                   shape.window - shape.min_window)
        if x is not None:
            runs.append({"method": "window reduction", "window": round(shape.window - x, 3), "drop_rate": 0.0,
                         "target_saving": target})
        p = _solve(lambda p: 1 - shape.model(shape.window, p)[0] / full_memory, target, 0.0, 0.99)
        if p is not None:
            runs.append({"method": "load shedding", "window": shape.window, "drop_rate": round(p, 4), "target_saving": target})
        else:  # the model sees no saving this large from shedding: run it at p = target anyway, to measure
            runs.append({"method": "load shedding", "window": shape.window, "drop_rate": target, "target_saving": target,
                         "model_unreachable": True})
    return runs


def _run(spark: Any, listener: ProgressListener, shape: Shape, params: QueryParams, name: str) -> tuple[Run, list[dict]]:
    sink = MemorySink()
    root = tempfile.mkdtemp(prefix="armd-shedding-")
    manager = QueryManager(spark, root)
    manager.register(ManagedSpec(name, BUILDERS + shape.builder, sink, params))
    began = time.monotonic()
    query = manager.start(name)
    try:
        query.processAllAvailable()
        listener.wait_for_run(query, 30)
        records = [r for r in listener.records() if r.run_id == str(query.runId)]
    finally:
        manager.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    return Run(records, time.monotonic() - began), sink.rows(name)


def _join_keys(rows: list[dict]) -> set[tuple]:
    return {(r["lt"], r["lk"], r["lv"], r["rt"], r["rk"], r["rv"]) for r in rows}


def _group_counts(rows: list[dict]) -> dict[tuple, int]:
    """Count per (window start, key): a reduced window covers the first part of the oracle's window of that start."""
    return {(r["window"]["start"], r["key"]): int(r["n"]) for r in rows}


def results_kept(shape: Shape, oracle: list[dict], rows: list[dict]) -> float:
    if shape.builder == "range_join":
        expected = _join_keys(oracle)
        return len(_join_keys(rows) & expected) / len(expected) if expected else math.nan
    full, got = _group_counts(oracle), _group_counts(rows)
    starts = {start for start, _ in got}
    groups = [g for g in full if g[0] in starts]
    total = sum(full[g] for g in groups)
    return sum(min(got.get(g, 0), full[g]) for g in groups) / total if total else math.nan


def _at(points: list[tuple[float, float]], saving: float) -> float | None:
    """Results kept at ``saving``, linear between a method's measured (saving, kept) points; None beyond them."""
    points = sorted([(0.0, 1.0), *points])
    xs, ys = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    if saving > xs.max() + 1e-9:
        return None
    return round(float(np.interp(saving, xs, ys)), 4)


def measure_shape(spark: Any, listener: ProgressListener, shape: Shape, start: float) -> dict[str, Any]:
    runs = settings(shape)
    full_memory, full_cpu = shape.model(shape.window, 0.0)
    measured, oracle_rows, oracle_bytes = [], None, None
    for i, run in enumerate(runs):
        name = f"shed_{shape.builder}_{i}"
        result, rows = _run(spark, listener, shape, shape.params(start, run["window"], run["drop_rate"]), name)
        state_rows, state_bytes = result.steady(shape.warmup, shape.trigger)
        if run["method"] == "oracle":
            oracle_rows, oracle_bytes = rows, state_bytes
        memory, cpu = shape.model(run["window"], run["drop_rate"])
        measured.append({
            **run,
            "memory_saving": round(1 - state_bytes / oracle_bytes, 4) if oracle_bytes else None,
            "predicted_memory_saving": round(1 - memory / full_memory, 4),
            "cpu_saving": round(1 - cpu / full_cpu, 4),
            "results_kept": round(results_kept(shape, oracle_rows or [], rows), 4),
            "results": len(rows), "state_rows": round(state_rows, 1), "state_bytes": round(state_bytes),
            "wall_seconds": round(result.wall_seconds, 1),
        })
    by_method = {m: [r for r in measured if r["method"] == m] for m in ("window reduction", "load shedding")}
    curves = {}
    for kind, key in (("memory", "memory_saving"), ("cpu", "cpu_saving")):
        curves[f"at_equal_{kind}_saving"] = [
            {"saving": s, **{method.replace(" ", "_"): _at([(r[key], r["results_kept"]) for r in rs], s)
                             for method, rs in by_method.items()}}
            for s in SAVINGS
        ]
    return {"shape": shape.name, "runs": measured, **curves}


def reduction_vs_shedding(spark: Any = None, listener: ProgressListener | None = None,
                          shapes: tuple[Shape, ...] = SHAPES) -> dict[str, Any]:
    """Run the experiment (on the given session, else a new local one) and return its JSON-able result."""
    if spark is None:
        spark = build_session()
    if listener is None:
        listener = ProgressListener().attach(spark)
    start = math.floor(time.time()) - 100_000
    began = time.monotonic()
    out = [measure_shape(spark, listener, shape, start) for shape in shapes]
    ratio = None
    join = next((s for s in out if s["shape"] == "two-way join"), None)
    if join is not None:
        half = next(p for p in join["at_equal_memory_saving"] if p["saving"] == 0.5)
        if half["window_reduction"] is not None and half["load_shedding"]:
            ratio = round(half["window_reduction"] / half["load_shedding"], 3)
    return {
        "shapes": out,
        "reduction_over_shedding_results": ratio,
        "targets": {"reduction_over_shedding_results_ge_1.5": ratio is not None and ratio >= TARGET},
        "wall_seconds": round(time.monotonic() - began, 1),
        "spark_version": spark.version,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args(argv)
    result = reduction_vs_shedding()
    if args.json:
        print(json.dumps(result))
    else:
        for shape in result["shapes"]:
            print(shape["shape"])
            for r in shape["runs"]:
                print(f"  {r['method']:<17} w={r['window']:<6g} p={r['drop_rate']:<7g} memory saved {r['memory_saving']:.0%} "
                      f"(model {r['predicted_memory_saving']:.0%}), cpu saved {r['cpu_saving']:.0%} (model), "
                      f"results kept {r['results_kept']:.0%}")
        print(f"window reduction / shedding, results kept at 50 % memory saving (join): {result['reduction_over_shedding_results']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
