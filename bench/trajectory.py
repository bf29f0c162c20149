"""Paper 001 Fig 7 on local Spark: a window change's measured state against ``policies/trajectory.predict``.

A windowed count per key (5 keys, slide 2 s, watermark delay 2 s, trigger
2 s) on armd's ``armd-synthetic`` source runs with a window of 10 s; once its
watermark has passed 12 s of event time armd's GenMig applier changes the
window to 4 s (``bench/migration.py``'s ``migrate``, the same machinery as
the migration benchmark). Event time runs at wall-clock speed (``SPEED``
1×, a processing-time trigger of 2 s, each batch 2 s of event time), as a
deployment's does: the migration benchmark's 16× leaves GenMig's steps
(polled every 0.2 s wall) 16× less event time, and on a loaded machine the
old run then drained at the stream's end instead of at its T_split. Every batch of
either run is a sample: the query's measured state at the batch's event time
(its latest event time, seconds after the stream's origin) is the latest
numRowsTotal of the old run while it still runs plus that of the new run once
it has started; bytes (memoryUsedBytes) likewise.

The prediction is ``predict`` of the cost model's ``spark`` profile on the
query's plan at one byte per element, so its memory is in state rows. We
compare rows, not bytes: Spark's memoryUsedBytes includes the state store's
per-version maps and jumps with them, so bytes per row are not stable over
a migration (both are in the samples).

The prediction is the one armd makes for a GenMig migration (``predict``
with the lag = watermark delay + trigger): GenMig runs both plans side by
side, so until the old run has drained the query holds both plans' state.
Where it drains is the applier's fact, not the model's ideal: the migration
records ``drain_at`` (``adapters/spark/drain.expected_drain``: the end of
the old run's batch after the one whose newest event passed T_split + the
watermark delay, batches of the span the old run showed), and the
prediction drops the old state there (``predict(..., drain=...)``).
``trajectory_max_rel_err`` = max over every sample from the change to the
end of |measured − predicted| / measured (the measured state never comes
near 0 here: it is the new plan's steady state at the least, ``min_measured_rows``);
``*_after_migration`` restricts it to the samples after the old run
stopped; ``split_lag_max_rel_err`` is the same path drained at T_split +
lag (the model's ideal drain), ``in_place_max_rel_err`` §4.2's in-place
path, both against the same samples.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import migration as mig  # noqa: E402

from armd.adapters.spark.listener import ProgressListener  # noqa: E402
from armd.adapters.spark.managed import QueryManager  # noqa: E402
from armd.adapters.spark.session import build_session  # noqa: E402
from armd.adapters.spark.sinks import MemorySink  # noqa: E402
from armd.costmodel.plan import parse_plan  # noqa: E402
from armd.policies.problem import Bounds, Problem  # noqa: E402
from armd.policies.qos import QueryQoS  # noqa: E402
from armd.policies.trajectory import predict  # noqa: E402

OLD, NEW, SLIDE = 10.0, 4.0, 2.0
SPEED = 1.0
"""Event seconds per wall second."""
SCENARIO = mig.Scenario(f"count per key: window {OLD:g} s → {NEW:g} s, slide {SLIDE:g} s", "count", {"clicks": 10.0},
                        mig.Variant(OLD, SLIDE), mig.Variant(NEW, SLIDE), speed=SPEED)


def predicted_rows(now_s: float, live: bool = True, split_s: float | None = None,
                   drain_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``predict``'s trajectory (times in seconds after the origin, state rows) for the change at ``now_s``.

    ``live``: as armd predicts a GenMig migration (both plans' state until the old one has drained, lag = watermark
    delay + trigger); else §4.2's in-place path. ``split_s``: seconds from the change to the T_split GenMig placed
    (None: the new window, the plant's split). ``drain_s``: seconds from the change to the old run's drain as the
    applier expects it (None: T_split + lag).
    """
    plan = parse_plan(SCENARIO.plan(SCENARIO.old))
    problem = Problem(plan, {"q": QueryQoS(window=(NEW * 1000, OLD * 1000))}, profile="spark")
    high, low = np.ones(1), np.zeros(1)
    old = (*problem.values(high, high), problem.evaluate(high, high))
    new = (*problem.values(low, high), problem.evaluate(low, high))
    lag = np.array([(mig.DELAY + mig.BATCH) * 1000.0]) if live else None
    split = None if split_s is None or not live else np.array([split_s * 1000.0])
    drain = None if drain_s is None or not live else np.array([drain_s * 1000.0])
    path = predict(problem, Bounds(1e18, 1e18), now_s * 1000, old, new, lag, split, drain)
    return path.times / 1000, path.memory


def samples(run: dict[str, Any]) -> list[dict[str, float]]:
    start = run["start"]

    def series(records: list[Any]) -> list[tuple[float, int, int]]:
        return sorted((r.event_max.timestamp() - start, r.state_rows, r.state_bytes) for r in records if r.event_max)

    old, new = series(run["old"]), series(run["new"])
    old_end = old[-1][0] if old else -np.inf
    out = []
    for t in sorted({p[0] for p in old + new}):
        (old_rows, old_bytes), (rows, size) = _at(old, t) if t <= old_end else (0, 0), _at(new, t)
        rows, size = rows + old_rows, size + old_bytes
        out.append({"t": round(t, 3), "rows": rows, "bytes": size, "old_running": t <= old_end})
    return out


def _at(series: list[tuple[float, int, int]], t: float) -> tuple[int, int]:
    before = [(r, b) for at, r, b in series if at <= t]
    return before[-1] if before else (0, 0)


def fig7(quick: bool = False) -> dict[str, Any]:
    """One run (about a minute here; ``quick`` changes nothing: the run is already as short as the windows allow)."""
    spark = build_session()
    listener = ProgressListener().attach(spark)
    manager = QueryManager(spark, tempfile.mkdtemp(prefix="armd-fig7-"))
    run = mig.migrate(listener, manager, MemorySink(), "fig7", "genmig", SCENARIO)
    first = run["transitions"][0]
    began = max(first.facts["positions"].values()) - run["start"]
    split = first.t_split - run["start"] - began  # GenMig's own T_split: the change + the larger window
    drain = first.facts["drain_at"] - run["start"] - began  # and its own drain: a batch boundary
    times, rows = predicted_rows(began, split_s=split, drain_s=drain)
    ideal_times, ideal_rows = predicted_rows(began, split_s=split)
    plain_times, plain_rows = predicted_rows(began, live=False)
    points = []
    for s in samples(run):
        if s["t"] < began - OLD / 2:
            continue
        predicted = _path(s["t"], times, rows, began)
        ideal = _path(s["t"], ideal_times, ideal_rows, began)
        plain = _path(s["t"], plain_times, plain_rows, began)
        points.append(dict(s, predicted_rows=round(predicted, 2), split_lag_rows=round(ideal, 2), in_place_rows=round(plain, 2),
                           rel_err=_err(s["rows"], predicted), split_lag_rel_err=_err(s["rows"], ideal),
                           in_place_rel_err=_err(s["rows"], plain)))
    during = [p for p in points if p["t"] >= began and p["rel_err"] is not None]
    return {"scenario": SCENARIO.name, "plant": "spark", "change_at_s": round(began, 3), "compared": "state rows",
            "event_speed": SPEED, "t_split_s": round(first.t_split - run["start"], 3),
            "batch_span_s": first.facts["batch_span_seconds"],
            "predicted_drain_s": round(began + drain, 3), "split_lag_drain_s": round(began + split + mig.DELAY + mig.BATCH, 3),
            "old_run_last_sample_s": max((p["t"] for p in points if p["old_running"]), default=None),
            "trajectory_max_rel_err": _max(p["rel_err"] for p in during),
            "trajectory_max_rel_err_after_migration": _max(p["rel_err"] for p in during if not p["old_running"]),
            "split_lag_max_rel_err": _max(p["split_lag_rel_err"] for p in during),
            "in_place_max_rel_err": _max(p["in_place_rel_err"] for p in during),
            "samples_compared": len(during), "min_measured_rows": min((p["rows"] for p in during), default=None),
            "before_change_rel_err": _max(p["rel_err"] for p in points if p["t"] < began and p["rel_err"] is not None),
            "samples": points}


def _path(t: float, times: np.ndarray, rows: np.ndarray, began: float) -> float:
    """The predicted rows at ``t``: a step at a drain time belongs to the samples from it on (``side='right'``)."""
    if t < began:
        return float(rows[0])
    i = int(np.searchsorted(times, t, side="right")) - 1
    if i >= len(times) - 1:
        return float(rows[-1])
    return float(rows[i] + (rows[i + 1] - rows[i]) * (t - times[i]) / (times[i + 1] - times[i]))


def _err(measured: float, predicted: float) -> float | None:
    return round(abs(measured - predicted) / measured, 4) if measured else None


def _max(values: Any) -> float | None:
    values = [v for v in values if v is not None]
    return round(max(values), 4) if values else None


if __name__ == "__main__":
    import json

    import structlog

    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    print(json.dumps(fig7(), indent=2))
