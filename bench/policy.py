"""Benchmark: the paper's baseline policy against the weighted-QoS policy on paper 001 §5.4's workload.

    python bench/policy.py [--sizes 5000,100000] [--seed S] [--json]

For each size it builds the §5.4 workload with its QoS ranges, sets the
bounds inside the span between the all-minimum and the all-maximum estimate
(memory at 25 % of the span, CPU at 60 %, so both policies have to cut), and
measures in the same run:

* ``baseline_ms`` / ``better_ms``: median wall time of a full decision;
* ``incremental_ms``: median time of the weighted policy's re-decision after
  one stream's rate doubles, starting from its previous decision (the
  sub-problem of the queries reading that stream is built inside the timed
  call, as it is the first time a stream changes);
* ``baseline_qos`` / ``better_qos``: weighted QoS each achieves at the same bounds.

It also runs a homogeneous workload (every query the same plan and range),
where the shared fraction of the baseline is already optimal, to show the
better policy does not lose there. Targets: full decision ≤ 50 ms at 5,000
queries and ≤ 1 s at 100,000; incremental ≤ 5 ms at 5,000; better_qos ≥
baseline_qos everywhere.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from armd.costmodel.plan import parse_plan
from armd.costmodel.workload import section54
from armd.policies.base import PolicyInput
from armd.policies.paper import PaperBisection
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS
from armd.policies.weighted import WeightedQoS

MEMORY_SHARE = 0.25
CPU_SHARE = 0.60


def build(queries: int, seed: int, homogeneous: bool = False) -> Problem:
    workload = section54(queries, seed=seed)
    doc, ranges = workload.doc, workload.qos
    if homogeneous:
        first = next(iter(doc["queries"]))
        template = json.dumps(doc["queries"][first])
        doc = {"streams": doc["streams"], "queries": {}}
        qos = {}
        for i in range(queries):
            name = f"h{i:06d}"
            doc["queries"][name] = json.loads(template.replace(f'"{first}.', f'"{name}.'))
            spec = ranges[first]
            qos[name] = QueryQoS(
                windows={node.replace(f"{first}.", f"{name}.", 1): r for node, r in spec.windows.items()},
                granularity=spec.granularity,
            )
    else:
        qos = {q: QueryQoS(windows=r.windows, granularity=r.granularity) for q, r in ranges.items()}
    return Problem(parse_plan(doc), qos)


def bounds_for(problem: Problem) -> Bounds:
    n = len(problem.queries)
    low = problem.evaluate(np.zeros(n), np.zeros(n))
    high = problem.evaluate(np.ones(n), np.ones(n))
    memory = float(low.total_memory + MEMORY_SHARE * (high.total_memory - low.total_memory))
    cpu = float(low.total_cpu + CPU_SHARE * (high.total_cpu - low.total_cpu))
    return Bounds(memory=memory, cpu=cpu)


def timed(call, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, result


def measure(problem: Problem, repeat: int, streams_changed: int) -> dict:
    bounds = bounds_for(problem)
    given = PolicyInput(problem, bounds, now=0.0)
    baseline, better = PaperBisection(), WeightedQoS()
    baseline.decide(given), better.decide(given)  # warm-up
    baseline_ms, base = timed(lambda: baseline.decide(given), repeat)
    better_ms, best = timed(lambda: better.decide(given), repeat)

    incremental = []
    for s in range(streams_changed):
        stream_d = problem.batch.stream_d.copy()
        stream_d[s] /= 2.0
        again = PolicyInput(problem, bounds, now=1.0, stream_d=stream_d, state=best.state,
                            changed_streams=frozenset({problem.batch.stream_names[s]}))
        ms, decision = timed(lambda: better.decide(again), 1)
        assert decision.outcome.fits(bounds)
        incremental.append((ms, decision.details.get("incremental", False)))
    return {
        "queries": len(problem.queries),
        "baseline_ms": round(baseline_ms, 3),
        "better_ms": round(better_ms, 3),
        "incremental_ms": round(statistics.median(ms for ms, _ in incremental), 3) if incremental else None,
        "baseline_qos": round(base.weighted_qos, 6),
        "better_qos": round(best.weighted_qos, 6),
        "incremental_was_incremental": all(flag for _, flag in incremental),
        "memory_bound": bounds.memory,
        "cpu_bound": bounds.cpu,
        "baseline_fits": bool(base.outcome.fits(bounds)),
        "better_fits": bool(best.outcome.fits(bounds)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,100000", help="comma-separated query counts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--streams-changed", type=int, default=5, help="incremental runs (one stream each)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    sizes = []
    for size in (int(s) for s in args.sizes.split(",")):
        repeat = args.repeat if size <= 20_000 else max(1, args.repeat // 2)
        sizes.append(measure(build(size, args.seed), repeat, args.streams_changed))
    homogeneous = measure(build(1000, args.seed, homogeneous=True), args.repeat, 0)
    first = next((s for s in sizes if s["queries"] == 5000), None)
    large = next((s for s in sizes if s["queries"] == 100_000), None)
    targets = {
        "better_qos_ge_baseline": all(s["better_qos"] >= s["baseline_qos"] for s in [*sizes, homogeneous]),
        "full_5000_le_50ms": first is not None and first["better_ms"] <= 50.0,
        "full_100000_le_1s": large is not None and large["better_ms"] <= 1000.0,
        "incremental_5000_le_5ms": first is not None and first["incremental_ms"] <= 5.0,
    }
    result = {"sizes": sizes, "homogeneous": homogeneous, "targets": targets}
    if args.json:
        print(json.dumps(result))
        return
    for s in [*sizes, homogeneous]:
        print(f"{s['queries']:>7} queries: baseline {s['baseline_ms']:8.1f} ms qos {s['baseline_qos']:.4f} | "
              f"better {s['better_ms']:8.1f} ms qos {s['better_qos']:.4f} | incremental {s['incremental_ms']} ms")
    print("targets:", targets)


if __name__ == "__main__":
    main()
