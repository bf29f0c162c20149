"""How well the cost model's ``spark`` profile predicts the state of real Spark queries.

Four query shapes (a windowed count per key, a scalar aggregate with a
granularity over a filter, a two-way and a three-way stream-stream join),
each at two settings, run to steady state on local Spark with the
``armd-synthetic`` source in simulated time (every micro-batch covers one
trigger interval of event time). Predicted state rows come from the cost
model (``estimate(plan, "spark")``) on a plan document of the shape with
one byte per element (a join result too: a projection to one byte over the
first join of the three-way one), so that its memory estimate counts rows. Measured
rows and bytes are Spark's numRowsTotal and memoryUsedBytes averaged over
the batches after the windows have filled. Predicted bytes are the
predicted rows times the bytes per row measured at the shape's *other*
setting (a calibration the prediction did not see).

    .venv/bin/python bench/accuracy.py --json

prints {"cases": [{"name", "predicted_rows", "measured_rows", "rel_err_rows",
"predicted_bytes", "measured_bytes", "rel_err_bytes", …}], "median_rel_err_rows",
"median_rel_err_bytes", "targets"}; relative errors are |measured − predicted| / measured.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from armd.adapters.spark.listener import ProgressListener
from armd.adapters.spark.managed import QueryParams
from armd.adapters.spark.measure import run_shape, sources
from armd.adapters.spark.session import build_session
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan

BUILDERS = "armd.adapters.spark.builders:"
KEYS = 5


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

    def plan(self) -> dict[str, Any]:
        """The shape as a plan document in milliseconds, one byte per element and per aggregate."""
        ms = 1000.0
        streams = {name: {"d": ms / rate, "g": 1, "size": 1} for name, rate in self.rates.items()}
        constants = {"aggregate_size": 1, "watermark_delay": self.delay * ms, "trigger_interval": self.trigger * ms}

        def window(stream: str, node: str, below: dict | None = None) -> dict:
            return {"op": "window", "id": node, "w": self.window * ms, "inputs": [below or {"op": "source", "stream": stream}]}

        if self.shape == "count per key":
            query = {"op": "aggregate", "id": "agg", "groups": KEYS, "inputs": [
                {"op": "granularity", "id": "g", "g": self.slide * ms, "inputs": [window("clicks", "w")]}]}
        elif self.shape == "scalar avg":
            selected = {"op": "select", "id": "f", "sel": 0.5, "inputs": [{"op": "source", "stream": "clicks"}]}
            query = {"op": "aggregate", "id": "agg", "inputs": [
                {"op": "granularity", "id": "g", "g": self.slide * ms, "inputs": [window("clicks", "w", selected)]}]}
        elif self.shape == "two-way join":
            query = {"op": "join", "id": "j", "sel": 1 / KEYS, "inputs": [window("a", "wa"), window("b", "wb")]}
        else:
            lower = {"op": "join", "id": "j1", "sel": 1 / KEYS, "inputs": [window("a", "wa"), window("b", "wb")]}
            # a result of the first join is one row of the second join's state: one byte, not 1 + 1
            lower = {"op": "project", "id": "r1", "size": 1, "inputs": [lower]}
            query = {"op": "join", "id": "j2", "sel": 1 / KEYS, "inputs": [lower, window("c", "wc")]}
        return {"streams": streams, "constants": constants, "queries": {"q": query}}

    def params(self, start: float) -> QueryParams:
        extra = {"sources": sources(self.rates, start=start, seconds=self.seconds, batch_seconds=self.trigger, keys=KEYS),
                 "delay_seconds": self.delay, **self.extra}
        slides = {"w": self.slide} if self.slide else {}
        return QueryParams(windows={"w": self.window}, slides=slides, extra=extra)


CASES = [
    Case("count per key", "windowed_count", {"clicks": 20.0}, 10, 2, 2, 1, 60, {}),
    Case("count per key", "windowed_count", {"clicks": 20.0}, 20, 4, 4, 2, 80, {}),
    Case("scalar avg", "granular_average", {"clicks": 20.0}, 10, 2, 2, 1, 60, {"threshold": 0.5}),
    Case("scalar avg", "granular_average", {"clicks": 20.0}, 30, 5, 0, 1, 90, {"threshold": 0.5}),
    Case("two-way join", "range_join", {"a": 10.0, "b": 10.0}, 2, None, 1, 1, 40, {}),
    Case("two-way join", "range_join", {"a": 10.0, "b": 10.0}, 5, None, 2, 1, 50, {}),
    Case("three-way join", "three_way_join", {"a": 10.0, "b": 10.0, "c": 10.0}, 2, None, 1, 1, 40, {}),
    Case("three-way join", "three_way_join", {"a": 10.0, "b": 10.0, "c": 10.0}, 4, None, 1, 1, 50, {}),
]


def predicted_rows(case: Case) -> float:
    return estimate(parse_plan(case.plan()), "spark").total.memory


def measure(spark: Any, listener: ProgressListener, case: Case, start: float) -> dict[str, Any]:
    run = run_shape(spark, listener, BUILDERS + case.builder, case.params(start), name=case.builder)
    rows, size = run.steady(case.warmup, case.trigger)
    return {"name": case.name, "shape": case.shape, "measured_rows": rows, "measured_bytes": size,
            "predicted_rows": predicted_rows(case), "batches": len(run.records), "wall_seconds": round(run.wall_seconds, 1)}


def relative(measured: float, predicted: float) -> float:
    return abs(measured - predicted) / measured if measured else math.inf


def run(cases: list[Case]) -> dict[str, Any]:
    spark = build_session()
    listener = ProgressListener().attach(spark)
    start = math.floor(time.time()) - 100_000
    measured = [measure(spark, listener, case, start) for case in cases]
    out = []
    for i, m in enumerate(measured):
        others = [o for j, o in enumerate(measured) if j != i and o["shape"] == m["shape"] and o["measured_rows"] > 0]
        per_row = others[0]["measured_bytes"] / others[0]["measured_rows"] if others else math.nan
        predicted_bytes = m["predicted_rows"] * per_row
        out.append({
            "name": m["name"],
            "predicted_rows": round(m["predicted_rows"], 1), "measured_rows": round(m["measured_rows"], 1),
            "rel_err_rows": round(relative(m["measured_rows"], m["predicted_rows"]), 4),
            "predicted_bytes": round(predicted_bytes), "measured_bytes": round(m["measured_bytes"]),
            "rel_err_bytes": round(relative(m["measured_bytes"], predicted_bytes), 4),
            "bytes_per_row_from_other_setting": round(per_row, 1),
            "batches": m["batches"], "wall_seconds": m["wall_seconds"],
        })
    rows_err = statistics.median(c["rel_err_rows"] for c in out)
    bytes_err = statistics.median(c["rel_err_bytes"] for c in out)
    return {
        "cases": out, "median_rel_err_rows": round(rows_err, 4), "median_rel_err_bytes": round(bytes_err, 4),
        "targets": {"median_rel_err_rows_le_0.10": rows_err <= 0.10, "median_rel_err_bytes_le_0.20": bytes_err <= 0.20},
        "spark_version": spark.version,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args(argv)
    result = run(CASES)
    if args.json:
        print(json.dumps(result))
    else:
        for c in result["cases"]:
            print(f"{c['name']:<45} rows {c['predicted_rows']:>8} predicted {c['measured_rows']:>8} measured "
                  f"({c['rel_err_rows']:.1%}); bytes {c['rel_err_bytes']:.1%} off")
        print(f"median relative error: rows {result['median_rel_err_rows']:.1%}, bytes {result['median_rel_err_bytes']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
