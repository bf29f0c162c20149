"""Measuring Spark's state against the model: run a query shape to steady state on simulated time.

The ``armd-synthetic`` source with ``max_seconds_per_batch`` makes every
micro-batch cover a fixed span of event time (a simulated trigger interval)
and ``end_seconds`` ends the stream, so a run of minutes of event time
takes seconds of wall time and is exactly reproducible. ``run_shape``
returns the state of every batch; ``steady`` averages the batches after the
windows have filled. ``python -m armd.adapters.spark.measure`` prints the
experiments behind ``docs/spark-mapping.md`` as JSON lines.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from armd.adapters.synthetic import Schedule

from .listener import ProgressListener, ProgressRecord
from .managed import ManagedSpec, QueryManager, QueryParams
from .mapping import join_rows, window_aggregation_rows
from .sinks import MemorySink
from .source import schedule_json


@dataclass(frozen=True)
class Run:
    records: Sequence[ProgressRecord]
    wall_seconds: float

    def steady(self, skip_seconds: float, batch_seconds: float) -> tuple[float, float]:
        """Mean state rows and bytes over the batches after the first ``skip_seconds`` of event time (empty batches excluded)."""
        skip = int(math.ceil(skip_seconds / batch_seconds))
        chosen = [r for r in self.records if r.batch_id >= skip and r.input_rows > 0]
        if not chosen:
            raise ValueError(f"no batch after {skip} batches of warm-up; run longer")
        return (sum(r.state_rows for r in chosen) / len(chosen), sum(r.state_bytes for r in chosen) / len(chosen))


def sources(
    streams: Mapping[str, float], *, start: float, seconds: float, batch_seconds: float, keys: int = 1, seed: int = 7,
    element_bytes: int = 0,
) -> dict[str, dict[str, Any]]:
    """``armd-synthetic`` options for constant-rate streams (name → rate per second) over [0, seconds)."""
    names = ",".join(sorted(streams))
    return {
        name: {
            "start": repr(start), "schedule": json.dumps(schedule_json(Schedule(rate))), "seed": seed, "all_streams": names,
            "keys": keys, "end_seconds": seconds, "max_seconds_per_batch": batch_seconds, "element_bytes": element_bytes,
        }
        for name, rate in streams.items()
    }


def run_shape(
    spark: Any, listener: ProgressListener, builder: str, params: QueryParams, *, name: str = "measure",
    checkpoint_root: str | None = None, output_mode: str = "append",
) -> Run:
    """Run the builder's query over all its (finite) input and return its progress records."""
    root = checkpoint_root or tempfile.mkdtemp(prefix="armd-measure-")
    manager = QueryManager(spark, root)
    manager.register(ManagedSpec(name, builder, MemorySink(), params, output_mode=output_mode))
    began = time.monotonic()
    query = manager.start(name)
    try:
        query.processAllAvailable()
        listener.wait_for_run(query, 30)
        records = [r for r in listener.records() if r.run_id == str(query.runId)]
    finally:
        manager.stop_all()
    return Run(records, time.monotonic() - began)


def experiments(spark: Any, listener: ProgressListener) -> list[dict[str, Any]]:
    """The measurements of docs/spark-mapping.md: state rows of Spark against the mapped formulas.

    Each case reports ``first_order`` (the issue's ⌈(w + D)/slide⌉ per group,
    and rate × (range + D + T) per join side) and ``predicted`` (``mapping``:
    with the trigger and watermark-lag terms and the hit probability).
    """
    out = []
    start = math.floor(time.time()) - 10_000
    base = "armd.adapters.spark.builders:"

    def case(label: str, builder: str, seconds: float, T: float, rates: Mapping[str, float], keys: int, params: dict,
             first_order: float, predicted: float, warmup: float) -> None:
        extra = {"sources": sources(rates, start=start, seconds=seconds, batch_seconds=T, keys=keys), **params.pop("extra", {})}
        run = run_shape(spark, listener, base + builder, QueryParams(**params, extra=extra), name=label.replace(" ", "_"))
        rows, size = run.steady(warmup, T)
        out.append({
            "case": label, "first_order_rows": round(first_order, 1), "predicted_rows": round(predicted, 1),
            "measured_rows": round(rows, 1), "rel_err_first_order": round((rows - first_order) / first_order, 3),
            "rel_err": round((rows - predicted) / predicted, 3), "bytes_per_row": round(size / rows, 1) if rows else None,
            "batches": len(run.records), "wall_seconds": round(run.wall_seconds, 1),
        })
        print(json.dumps(out[-1]), flush=True)

    # Sliding-window count per key over 5 keys at 20/s.
    for w, s, D, T in ((10, 2, 2, 1), (10, 5, 0, 1), (6, 1, 4, 2), (20, 4, 6, 1)):
        case(f"count per key w={w} slide={s} delay={D} T={T}", "windowed_count", 60, T, {"clicks": 20}, 5,
             {"windows": {"w": w}, "slides": {"w": s}, "extra": {"delay_seconds": D}},
             5 * math.ceil((w + D) / s), window_aggregation_rows(w, s, D, T, 20, 5), w + D + 2 * T)
    # Scalar aggregate (one group) with granularity = slide, a sparse and a dense stream.
    for rate, w, s, D in ((0.5, 10, 1, 2), (0.2, 4, 2, 0), (20, 10, 2, 0)):
        case(f"scalar avg rate={rate} w={w} slide={s} delay={D} T=1", "granular_average", 120, 1, {"clicks": rate}, 1,
             {"windows": {"w": w}, "slides": {"w": s}, "extra": {"delay_seconds": D}},
             math.ceil((w + D) / s), window_aggregation_rows(w, s, D, 1, rate, 1), w + D + 2 + 2 / rate)
    # Range join |t_l - t_r| <= R on equal keys (5 keys), both sides at the same rate.
    for r, R, D, T in ((10, 2, 1, 1), (10, 5, 2, 1), (20, 2, 0, 2)):
        case(f"range join rate={r} range={R} delay={D} T={T}", "range_join", 60, T, {"a": r, "b": r}, 5,
             {"windows": {"w": R}, "extra": {"delay_seconds": D}},
             2 * r * (R + D + T), join_rows((r, r), (R, R), (D, D), T), 2 * (R + D + T) + 2)
    return out


def main() -> None:
    from .session import build_session

    spark = build_session()
    listener = ProgressListener().attach(spark)
    experiments(spark, listener)


if __name__ == "__main__":
    main()
