"""Benchmark: vectorised BatchPlan.evaluate() against the scalar estimate() on paper 001 §5.4's workload.

    python bench/estimate.py [--queries N] [--seed S] [--json]

Builds the §5.4 workload (``armd.costmodel.workload``), parses and compiles it,
then times in the same run

* ``BatchPlan.evaluate()``: median of ``--repeat`` runs after one warm-up;
* ``estimate()``, the scalar per-node Python loop over the same PlanSet: the
  first (cold) run is reported separately as ``loop_cold_ms`` because it also
  fills PlanSet's per-query membership cache; ``loop_ms`` is the median of
  ``--loop-repeat`` warm runs, the cost a policy pays per re-estimation;

and checks that both agree (maximum relative difference of the totals, and
of the per-query sums). Targets: evaluate() ≤ 20 ms and ≥ 20× faster than the
loop. With ``--json`` one JSON object is printed; the exit status is 1 if the
two evaluators disagree by more than 1e-9 relative.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from armd.costmodel.batch import BatchPlan
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from armd.costmodel.workload import section54

TARGET_MS = 20.0
TARGET_SPEEDUP = 20.0
TOLERANCE = 1e-9


def _rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a − b| / max(|a|, |b|) (0 where both are 0 or both are the same infinity)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    same = a == b
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(same, 0.0, np.abs(a - b) / scale)
    return float(np.max(rel, initial=0.0))


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def run(queries: int, seed: int, repeat: int, loop_repeat: int) -> dict:
    t0 = time.perf_counter()
    workload = section54(queries, seed=seed)
    t1 = time.perf_counter()
    plan = parse_plan(workload.doc)
    t2 = time.perf_counter()
    batch = BatchPlan.compile(plan)
    t3 = time.perf_counter()

    result = batch.evaluate()  # warm-up
    vector_times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = batch.evaluate()
        vector_times.append(time.perf_counter() - start)

    start = time.perf_counter()
    reference = estimate(plan)
    loop_cold = time.perf_counter() - start
    loop_times = []
    for _ in range(loop_repeat):
        start = time.perf_counter()
        reference = estimate(plan)
        loop_times.append(time.perf_counter() - start)

    vectorized = statistics.median(vector_times)
    loop = statistics.median(loop_times)
    totals_diff = max(
        _rel_diff(result.total_memory, reference.total.memory),
        _rel_diff(result.total_cpu, reference.total.cpu),
    )
    query_diff = max(
        _rel_diff(result.query_memory, [reference.queries[q].memory for q in batch.query_names]),
        _rel_diff(result.query_cpu, [reference.queries[q].cpu for q in batch.query_names]),
    )
    speedup = loop / vectorized
    return {
        "plans": queries,
        "vectorized_ms": _ms(vectorized),
        "loop_ms": _ms(loop),
        "speedup": round(speedup, 1),
        "loop_cold_ms": _ms(loop_cold),
        "vectorized_min_ms": _ms(min(vector_times)),
        "compile_ms": _ms(t3 - t2),
        "parse_ms": _ms(t2 - t1),
        "generate_ms": _ms(t1 - t0),
        "nodes": len(batch.node_ids),
        "levels": batch.levels,
        "repeats": {"vectorized": repeat, "loop": loop_repeat},
        "max_rel_diff": totals_diff,
        "max_rel_diff_queries": query_diff,
        "total_memory": result.total_memory,
        "total_cpu": result.total_cpu,
        "target_met": bool(vectorized * 1e3 <= TARGET_MS and speedup >= TARGET_SPEEDUP),
        "agree": bool(max(totals_diff, query_diff) <= TOLERANCE),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000, help="number of plans (queries), default 5000")
    parser.add_argument("--seed", type=int, default=0, help="workload seed, default 0")
    parser.add_argument("--repeat", type=int, default=31, help="timed evaluate() runs, default 31")
    parser.add_argument("--loop-repeat", type=int, default=3, help="timed warm estimate() runs, default 3")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.queries < 1 or args.repeat < 1 or args.loop_repeat < 1:
        parser.error("--queries, --repeat and --loop-repeat must be ≥ 1")

    report = run(args.queries, args.seed, args.repeat, args.loop_repeat)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"§5.4 workload: {report['plans']} plans, {report['nodes']} nodes, {report['levels']} levels")
        print(f"  compile            {report['compile_ms']:10.3f} ms (once per plan set)")
        print(f"  BatchPlan.evaluate {report['vectorized_ms']:10.3f} ms (median of {args.repeat})")
        print(f"  estimate() loop    {report['loop_ms']:10.3f} ms (median of {args.loop_repeat} warm runs; "
              f"cold {report['loop_cold_ms']:.0f} ms)")
        print(f"  speedup            {report['speedup']:10.1f}×")
        print(f"  max rel. diff      {max(report['max_rel_diff'], report['max_rel_diff_queries']):10.2e} "
              f"(totals and per query)")
        met = "met" if report["target_met"] else "NOT met"
        print(f"  target (≤ {TARGET_MS:g} ms, ≥ {TARGET_SPEEDUP:g}×): {met}")
    return 0 if report["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
