"""Join reordering on the single-process host: JISC against Moving State, Parallel Track and Restart.

A left-deep plan of 20 joins (21 streams) runs over a synthetic session
workload; transitions are forced every 20k, 50k, 100k and 200k tuples
(the first half an interval in), alternating between the start order and
either a plan that swaps one adjacent pair (the top two streams: one
incomplete state, just below the root — paper 004's best case) or a plan
that leaves every intermediate state incomplete (first and last stream
exchanged — its worst case). For each strategy: overall throughput,
throughput during the transition stage (from the switch until every tuple
from before it has left the window, which is when Parallel Track may drop
its old plan; the same tuple span for every strategy), and the largest
output gap. A fifth row per case, ``no-transition``, is the plain pipeline
(the start order, never changed) timed over the same stages: what a
strategy that cost nothing extra would reach, so ``*_over_plain`` shows
each strategy's own cost during a transition. Every run's output count is
checked against the oracle, and a smaller run compares every strategy's
output multiset with the oracle's.

    .venv/bin/python bench/jisc.py --json          # 200,000 tuples
    .venv/bin/python bench/jisc.py --json --full   # 1,000,000 tuples
    .venv/bin/python bench/jisc.py --json --spark  # armd's join vs Spark's native join (jisc_spark.py)

Workload: each session has a fresh key and one tuple on every stream in the
first half of its span, then 0–20 more on one random "hot" stream in the
second half, each of which completes one more result. Sessions start as a
Poisson process so that about one tuple arrives per time unit; the window
is longer than a session, so every session yields all its results.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from bisect import bisect_right

from armd.migrations.join import STRATEGIES, EventLog, left_deep, oracle_count, oracle_results, run_host

FREQUENCIES = (20_000, 50_000, 100_000, 200_000)
NONE = "no-transition"
"""The plain pipeline: the base order with no transition, timed over the same tuple spans (the stages)."""


def workload(tuples: int, streams: int, span: float, extra: int, seed: int) -> EventLog:
    rnd = random.Random(seed)
    names = [f"s{i:02d}" for i in range(streams)]
    per_session = streams + extra
    events = []
    start = -span
    key = 0
    while start < tuples * 1.05 + span:  # a margin so that at least ``tuples`` fall after time 0
        start += rnd.expovariate(1.0 / per_session)
        hot = rnd.randrange(streams)
        for s in range(streams):
            events.append((names[s], key, start + rnd.uniform(0, span / 2)))
        for _ in range(rnd.randint(0, 2 * extra)):
            events.append((names[hot], key, start + rnd.uniform(span / 2, span)))
        key += 1
    events = [e for e in events if 0 <= e[2]]
    log = EventLog.from_events(names, events)
    n = min(tuples, len(log))
    return EventLog(log.streams, log.stream[:n], log.key[:n], log.ts[:n])


def orders(names: list[str]) -> dict[str, tuple]:
    base = left_deep(names)
    pair = left_deep(names[:-2] + [names[-1], names[-2]])
    every = left_deep([names[-1]] + names[1:-1] + [names[0]])
    return {"base": base, "one-pair": pair, "all-incomplete": every}


def forced(tuples: int, every: int, base, other) -> list[tuple[int, object]]:
    return [(at, other if i % 2 == 0 else base) for i, at in enumerate(range(every // 2, tuples, every))]


def stage_end(log: EventLog, switch: int, window: float) -> int:
    """First event id by which every event before ``switch`` has expired."""
    if switch == 0:
        return switch
    return bisect_right(log.ts, log.ts[switch - 1] + window)


def stage_spans(log: EventLog, switches: list[int], window: float) -> list[tuple[int, int]]:
    """The transition stages as disjoint event-id spans (overlapping stages are merged)."""
    spans: list[tuple[int, int]] = []
    for c in switches:
        end = min(stage_end(log, c, window), len(log))
        if spans and c <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        elif end > c:
            spans.append((c, end))
    return spans


def run_once(log: EventLog, window: float, name: str, transitions, base, clock, spans=None) -> dict:
    """One run of strategy ``name``; ``NONE`` runs the base order without transitions, timed over ``spans``."""
    strategy = STRATEGIES["jisc" if name == NONE else name](log, window, base)
    gc.collect()
    gc.disable()  # the pipeline makes no reference cycles; collector pauses would show up as output gaps
    try:
        run = run_host(strategy, [] if name == NONE else transitions, clock)
    finally:
        gc.enable()
    spans = spans if spans is not None else stage_spans(log, run.switch_at, window)
    stage_tuples = sum(e - c for c, e in spans)
    stage_time = sum(run.span_time(c, e) for c, e in spans)
    # tuples processed under the new plan when the largest gap ended (0: the gap is the switch itself)
    before = [c for c in run.switch_at if c <= run.max_gap_event + 1]
    return {
        "strategy": name,
        "spans": spans,
        "throughput": round(run.events / run.elapsed),
        "transition_throughput": round(stage_tuples / stage_time) if stage_time > 0 else None,
        "max_gap_s": round(run.max_gap, 6),
        "max_gap_tuples_after_switch": run.max_gap_event + 1 - before[-1] if before else None,
        "stage_tuples": stage_tuples,
        "results": run.emitted,
        "transitions": len(run.switch_at),
    }


def best_of(rows: list[dict]) -> dict:
    """Each figure from the run where it is best (highest throughput, smallest gap)."""
    out = dict(rows[0])
    for k in ("throughput", "transition_throughput"):
        values = [r[k] for r in rows if r[k] is not None]
        out[k] = max(values) if values else None
    gap = min(rows, key=lambda r: r["max_gap_s"])
    out["max_gap_s"], out["max_gap_tuples_after_switch"] = gap["max_gap_s"], gap["max_gap_tuples_after_switch"]
    return out


def verify_multisets(args, names_orders) -> dict:
    """A smaller run with frequent overlapping transitions: every multiset against the oracle's."""
    log = workload(25_000, args.streams, args.span, args.extra, args.seed + 1)
    expected = oracle_results(log, args.window)
    out = {}
    for kind in ("one-pair", "all-incomplete"):
        transitions = forced(len(log), 5_000, names_orders["base"], names_orders[kind])
        for name, cls in STRATEGIES.items():
            strategy = cls(log, args.window, names_orders["base"], collect=True)
            run_host(strategy, transitions)
            got = strategy.results()
            out[f"{kind}/{name}"] = {"equal": got == expected, "missing": sum((expected - got).values()),
                                     "extra": sum((got - expected).values())}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--full", action="store_true", help="1,000,000 tuples instead of 200,000")
    parser.add_argument("--tuples", type=int, default=None)
    parser.add_argument("--streams", type=int, default=21)
    parser.add_argument("--window", type=float, default=30_000.0)
    parser.add_argument("--span", type=float, default=2_000.0)
    parser.add_argument("--extra", type=int, default=10, help="mean extra tuples on a session's hot stream")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per case (interleaved across strategies; Restart runs once); best figure kept")
    parser.add_argument("--clock", choices=("process_time", "perf_counter"), default="process_time",
                        help="CPU time of this process (robust on a shared machine) or wall time")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--kinds", default="one-pair,all-incomplete")
    parser.add_argument("--spark", action="store_true",
                        help="instead: armd's join against Spark's native stream-stream join on local Spark (jisc_spark.py)")
    parser.add_argument("--spark-tuples", type=int, default=50_000, help="tuples per stream for --spark")
    parser.add_argument("--spark-repeats", type=int, default=3,
                        help="runs per engine and join for --spark (interleaved; the median is reported)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for --spark's one session (both engines), e.g. "
                             "spark.python.unix.domain.socket.enabled=true; repeatable")
    args = parser.parse_args(argv)
    if args.spark:
        import jisc_spark

        conf = dict(item.split("=", 1) for item in args.spark_conf if "=" in item)
        if len(conf) != len(args.spark_conf):
            parser.error("--spark-conf takes KEY=VALUE")
        report = jisc_spark.main(args.spark_tuples, args.seed, repeats=args.spark_repeats, conf=conf)
        print(json.dumps(report, indent=1 if args.json else None))
        return 0
    if args.window < args.span:
        parser.error("--window must be at least --span, or sessions lose results to the window")
    tuples = args.tuples or (1_000_000 if args.full else 200_000)
    clock = getattr(time, args.clock)
    log = workload(tuples, args.streams, args.span, args.extra, args.seed)
    expected = oracle_count(log, args.window)
    names_orders = orders(list(log.streams))
    cases = []
    for kind in args.kinds.split(","):
        for every in FREQUENCIES:
            transitions = forced(len(log), every, names_orders["base"], names_orders[kind])
            runs: dict[str, list[dict]] = {}
            spans = None
            for rep in range(args.repeats):  # interleaved, so that load on the machine hits every strategy alike
                for name in [*args.strategies.split(","), NONE]:
                    if rep == 0 or name != "restart":
                        row = run_once(log, args.window, name, transitions, names_orders["base"], clock,
                                       spans if name == NONE else None)
                        spans = spans or row["spans"]
                        runs.setdefault(name, []).append(row)
            for name, rows in runs.items():
                row = {"transition": kind, "every": every, **best_of(rows)}
                del row["spans"]
                row["oracle_results"] = expected
                row["lost"] = expected - row["results"]
                row["oracle_ok"] = row["lost"] == 0 if name not in ("restart", NONE) else None
                cases.append(row)
                print(json.dumps(row), file=sys.stderr)

    def pick(kind, name, key):
        return [c[key] for c in cases if c["transition"] == kind and c["strategy"] == name and c[key] is not None]

    ratios = [j / p for j, p in zip(pick("one-pair", "jisc", "transition_throughput"),
                                    pick("one-pair", "parallel-track", "transition_throughput"))]
    plain = pick("one-pair", NONE, "transition_throughput")
    over_plain = {name: [round(x / y, 3) for x, y in zip(pick("one-pair", name, "transition_throughput"), plain)]
                  for name in ("jisc", "parallel-track")}
    jisc_gap = max(c["max_gap_s"] for c in cases if c["strategy"] == "jisc") if cases else None
    ms_gap = max(c["max_gap_s"] for c in cases if c["strategy"] == "moving-state") if cases else None
    multisets = verify_multisets(args, names_orders)
    report = {
        "cases": cases,
        "jisc_over_pt_transition": round(min(ratios), 3) if ratios else None,
        "jisc_over_pt_transition_by_frequency": [round(r, 3) for r in ratios],
        "jisc_over_plain_transition_by_frequency": over_plain["jisc"],
        "pt_over_plain_transition_by_frequency": over_plain["parallel-track"],
        "jisc_max_gap_s": jisc_gap,
        "ms_max_gap_s": ms_gap,
        "tuples": len(log),
        "streams": len(log.streams),
        "joins": len(log.streams) - 1,
        "window": args.window,
        "oracle_violations": sum(1 for c in cases if c["oracle_ok"] is False)
        + sum(1 for k, v in multisets.items() if not v["equal"] and not k.endswith("/restart")),
        "multiset_check": multisets,
    }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for c in cases:
            print(f"{c['transition']:15} every {c['every']:>7} {c['strategy']:15} {c['throughput']:>8}/s "
                  f"stage {c['transition_throughput']}/s gap {c['max_gap_s'] * 1e3:.2f} ms lost {c['lost']}")
        print({k: v for k, v in report.items() if k not in ("cases", "multiset_check")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
