"""How well the cost model predicts real Spark queries from derived plans and measured inputs alone.

No plan written by hand and no calibration file: for each case the plan is
*derived* from the query's analyzed Spark plan (``adapters/spark/derive.py``,
after armd inserted its measurements, ``instrument.py``), and every input
the model needs is *measured* by armd while a query runs: rates per source,
selectivities per filter and join, the group model n(w) per aggregation and
bytes per state row per stateful operator (``SparkStats``). The builders
write no ``observe()`` beyond what old ones did by hand.

Each shape runs at two settings (window, slide, delay, trigger) on local
Spark in simulated event time (every micro-batch covers one trigger
interval). The prediction for one setting uses the inputs measured in the
run of the *other* setting, as the daemon does when it evaluates a change
it has not made yet; so a group count measured at one window must hold at
another (the drifting-keys shape tests exactly that). Predicted rows are the
model's state (``estimate(plan, "spark")`` with one byte per row, so memory
counts rows), predicted bytes the rows of each stateful node times that
operator's measured bytes per row. Measured rows and bytes are Spark's
numRowsTotal and memoryUsedBytes averaged over the batches after the
windows have filled.

    .venv/bin/python bench/accuracy.py --json

prints {"plans": "derived", "inputs": "measured", "cases": [{"name", "predicted_rows", "measured_rows",
"rel_err_rows", "predicted_bytes", "measured_bytes", "rel_err_bytes", …}], "median_rel_err_rows",
"median_rel_err_bytes", "targets"}; relative errors are |measured − predicted| / measured.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from armd.adapters.spark.derive import RecordingParams, derive
from armd.adapters.spark.instrument import instrument
from armd.adapters.spark.listener import ProgressListener, SparkStats
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams, load_builder
from armd.adapters.spark.measure import Run, sources
from armd.adapters.spark.session import build_session
from armd.adapters.spark.sinks import MemorySink
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan

BUILDERS = "armd.adapters.spark.builders:"
KEYS = 5
UNIT = 0.001
"""The plans' time unit in seconds: milliseconds, since formula 7's window is w + 1 time unit (+1 s in seconds)."""


@dataclass(frozen=True)
class Case:
    shape: str
    builder: str
    rates: dict[str, float]
    """Elements per second per stream."""
    window: float
    """Window size (range of the joins), seconds."""
    slide: float | None
    delay: float
    trigger: float
    seconds: float
    """Event time the run covers."""
    extra: dict[str, Any]

    @property
    def name(self) -> str:
        slide = f" slide={self.slide:g}" if self.slide else ""
        return f"{self.shape} w={self.window:g}{slide} delay={self.delay:g} T={self.trigger:g}"

    @property
    def warmup(self) -> float:
        return self.window + self.delay + 2 * self.trigger + 2

    def params(self, start: float) -> QueryParams:
        extra = {"sources": sources(self.rates, start=start, seconds=self.seconds, batch_seconds=self.trigger, keys=KEYS),
                 "delay_seconds": self.delay, "trigger_seconds": self.trigger, **self.extra}
        slides = {"w": self.slide} if self.slide else {}
        return QueryParams(windows={"w": self.window}, slides=slides, extra=extra)


CASES = [
    Case("count per key", "windowed_count", {"clicks": 20.0}, 10, 2, 2, 1, 30, {}),
    Case("count per key", "windowed_count", {"clicks": 20.0}, 20, 4, 4, 2, 44, {}),
    Case("scalar avg", "granular_average", {"clicks": 20.0}, 10, 2, 2, 1, 30, {"threshold": 0.5}),
    Case("scalar avg", "granular_average", {"clicks": 20.0}, 30, 5, 0, 2, 48, {"threshold": 0.5}),
    Case("two-way join", "range_join", {"a": 10.0, "b": 10.0}, 2, None, 1, 1, 20, {}),
    Case("two-way join", "range_join", {"a": 10.0, "b": 10.0}, 5, None, 2, 2, 30, {}),
    Case("three-way join", "three_way_join", {"a": 10.0, "b": 10.0, "c": 10.0}, 2, None, 1, 1, 20, {}),
    Case("three-way join", "three_way_join", {"a": 10.0, "b": 10.0, "c": 10.0}, 4, None, 1, 2, 28, {}),
    # new: a filter before an aggregation whose keys drift (5 auctions alive, each for 10 s)
    Case("filter, drifting keys", "drifting_count", {"bids": 20.0}, 6, 2, 1, 1, 28, {"min_value": 0.5, "life_seconds": 10}),
    Case("filter, drifting keys", "drifting_count", {"bids": 20.0}, 16, 4, 2, 2, 40, {"min_value": 0.5, "life_seconds": 10}),
    # new: a union of two streams, counted per key
    Case("union", "union_count", {"a": 10.0, "b": 10.0}, 10, 2, 2, 1, 30, {}),
    Case("union", "union_count", {"a": 10.0, "b": 10.0}, 20, 5, 0, 2, 40, {}),
]


@dataclass
class Measured:
    """One run: its derived plan, what armd measured in it, and Spark's steady state."""

    case: Case
    document: dict[str, Any]
    rates: dict[str, float]
    selectivities: dict[str, float]
    group_models: dict[str, tuple[float, float]]
    bytes_per_row: dict[str, float]
    rows: float
    bytes: float
    batches: int
    wall_seconds: float


def run_case(spark: Any, listener: ProgressListener, case: Case, start: float, index: int) -> Measured:
    name = f"acc{index}"
    params = case.params(start)
    recording = RecordingParams(params.windows, params.slides, params.granularity, params.join_order, params.version,
                                params.extra)
    derivation = derive(instrument(load_builder(BUILDERS + case.builder)(spark, recording)).frame, name,
                        trigger_seconds=case.trigger, window_names=recording.asked, time_unit_seconds=UNIT)
    manager = QueryManager(spark, tempfile.mkdtemp(prefix="armd-accuracy-"))
    manager.register(ManagedSpec(name, BUILDERS + case.builder, MemorySink(), params))
    stats = SparkStats(listener, 1.0, queries=[name], stateful=manager.stateful)
    began = time.monotonic()
    try:
        query = manager.start(name)
        query.processAllAvailable()
        listener.wait_for_run(query, 60)
        records = [r for r in listener.records(name) if r.run_id == str(query.runId)]
        observation = stats.observe(datetime.now(timezone.utc))
    finally:
        manager.stop_all()
    wall = time.monotonic() - began
    rows, size = Run(records, wall).steady(case.warmup, case.trigger)
    (metrics,) = [m for m in observation.queries if m.query == name] or [None]
    return Measured(
        case, derivation.document, {s.stream: s.rate_per_second for s in observation.streams},
        dict(metrics.selectivities) if metrics else {}, dict(metrics.group_models) if metrics else {},
        dict(metrics.bytes_per_row) if metrics else {}, rows, size, len(records), round(wall, 1),
    )


def with_inputs(target: Measured, inputs: Measured) -> tuple[dict[str, Any], dict[str, float]]:
    """``target``'s derived plan with ``inputs``' measurements, sizes one byte per row; and bytes per row by node id."""
    doc = copy.deepcopy(target.document)
    query = next(iter(doc["queries"]))
    for name, stream in doc["streams"].items():
        stream.pop("d", None)
        stream["rate"] = inputs.rates[name] * UNIT if name in inputs.rates else stream["rate"]
        stream["size"] = 1
    doc["constants"]["aggregate_size"] = 1
    per_row: dict[str, float] = {}

    def label(node_id: str) -> str:
        return node_id.split(".", 1)[1] if node_id.startswith(query + ".") else node_id

    def visit(node: dict[str, Any]) -> dict[str, Any]:
        node["inputs"] = [visit(child) for child in node.get("inputs", [])]
        if not node["inputs"]:
            node.pop("inputs")
        lab = label(node.get("id", ""))
        if node["op"] in ("select", "join") and lab in inputs.selectivities:
            node["sel"] = max(min(inputs.selectivities[lab], 1.0), 1e-6)
        if node["op"] == "aggregate" and lab in inputs.group_models:
            base, growth = inputs.group_models[lab]
            node["groups"] = {"base": base, "growth": growth * UNIT}  # measured per second, the plan's unit is ms
        if "size" in node:
            node["size"] = 1
        if lab in inputs.bytes_per_row:
            per_row[node["id"]] = inputs.bytes_per_row[lab]
        if node["op"] == "join":  # a join result is one state row downstream, not the sum of its sides' sizes
            return {"op": "project", "id": node["id"] + ".rows", "size": 1, "inputs": [node]}
        return node

    doc["queries"][query] = visit(doc["queries"][query])
    return doc, per_row


def predict(target: Measured, inputs: Measured) -> tuple[float, float]:
    doc, per_row = with_inputs(target, inputs)
    result = estimate(parse_plan(doc), "spark")
    fallback = statistics.mean(per_row.values()) if per_row else math.nan
    rows = result.total.memory
    size = sum(n.memory * per_row.get(node_id, fallback) for node_id, n in result.nodes.items() if n.memory)
    return rows, size


def relative(measured: float, predicted: float) -> float:
    return abs(measured - predicted) / measured if measured else math.inf


def run(cases: list[Case]) -> dict[str, Any]:
    spark = build_session()
    listener = ProgressListener().attach(spark)
    start = math.floor(time.time()) - 100_000
    began = time.monotonic()
    measured = [run_case(spark, listener, case, start, i) for i, case in enumerate(cases)]
    out = []
    for i, m in enumerate(measured):
        other = next((o for j, o in enumerate(measured) if j != i and o.case.shape == m.case.shape), m)
        rows, size = predict(m, other)
        out.append({
            "name": m.case.name,
            "predicted_rows": round(rows, 1), "measured_rows": round(m.rows, 1),
            "rel_err_rows": round(relative(m.rows, rows), 4),
            "predicted_bytes": round(size), "measured_bytes": round(m.bytes),
            "rel_err_bytes": round(relative(m.bytes, size), 4),
            "inputs_from": other.case.name,
            "measured_inputs": {"rates": {k: round(v, 3) for k, v in other.rates.items()},
                                "selectivities": {k: round(v, 4) for k, v in other.selectivities.items()},
                                "group_models": {k: [round(b, 3), round(g, 4)] for k, (b, g) in other.group_models.items()},
                                "bytes_per_row": {k: round(v, 1) for k, v in other.bytes_per_row.items()}},
            "batches": m.batches, "wall_seconds": m.wall_seconds,
        })
    rows_err = statistics.median(c["rel_err_rows"] for c in out)
    bytes_err = statistics.median(c["rel_err_bytes"] for c in out)
    return {
        "plans": "derived", "inputs": "measured", "calibration_file": None,
        "cases": out, "median_rel_err_rows": round(rows_err, 4), "median_rel_err_bytes": round(bytes_err, 4),
        "targets": {"median_rel_err_rows_le_0.10": rows_err <= 0.10, "median_rel_err_bytes_le_0.15": bytes_err <= 0.15},
        "spark_version": spark.version, "wall_seconds": round(time.monotonic() - began, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--shape", action="append", help="run only the cases of this shape (repeatable)")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.shape or c.shape in args.shape]
    result = run(cases)
    if args.json:
        print(json.dumps(result))
    else:
        for c in result["cases"]:
            print(f"{c['name']:<50} rows {c['predicted_rows']:>8} predicted {c['measured_rows']:>8} measured "
                  f"({c['rel_err_rows']:.1%}); bytes {c['rel_err_bytes']:.1%} off")
        print(f"plans derived, inputs measured; median relative error: rows {result['median_rel_err_rows']:.1%}, "
              f"bytes {result['median_rel_err_bytes']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
