"""``armd jisc-demo``: JISC and the join-order policy on the single-process host, no Spark, no database.

Three streams of user events (views, carts, clicks; one key per user) are
joined within a window; halfway through, views become the fastest stream and
clicks slow down, so the order the join started in stops being the cheapest.
``control.adaptive_join.run_adaptive`` measures rates and pairwise
selectivities as it goes and switches the order live (JISC); the demo then
checks the output against the brute-force oracle: as many results as the
oracle counts, none twice, each one tuple per stream with equal keys within
the window. The same loop, on Spark, is what the daemon does with
``[managed.NAME.join_order]`` (docs/jisc.md).
"""

from __future__ import annotations

import json
import random
from typing import Any

from armd.migrations.join import EventLog, left_deep, oracle_count, order_text
from armd.control.adaptive_join import run_adaptive

STREAMS = ("views", "carts", "clicks")


def workload(seconds: float, keys: int, seed: int) -> EventLog:
    """Poisson arrivals per stream, uniform keys; rates per second views 2 → 10, carts 2, clicks 8 → 2 at half time."""
    rnd = random.Random(seed)
    rates = {"views": (2.0, 10.0), "carts": (2.0, 2.0), "clicks": (8.0, 2.0)}
    events = []
    for name, (before, after) in rates.items():
        t = 0.0
        while True:
            t += rnd.expovariate(before if t < seconds / 2 else after)
            if t >= seconds:
                break
            events.append((name, rnd.randrange(keys), round(t, 3)))
    return EventLog.from_events(STREAMS, events)


def run_demo(seconds: float = 240.0, window: float = 10.0, keys: int = 10, seed: int = 1,
             decide_every: float = 5.0, cooldown: float = 30.0) -> dict[str, Any]:
    log = workload(seconds, keys, seed)
    run = run_adaptive(log, window, left_deep(list(STREAMS)), decide_every=decide_every, cooldown=cooldown,
                       default_selectivity=1.0 / keys, collect=True)
    got = run.strategy.results()
    closed = all(
        len({log.stream[e] for e in r}) == len(STREAMS) and len({log.key[e] for e in r}) == 1
        and max(log.ts[e] for e in r) - min(log.ts[e] for e in r) < window
        for r in got
    )
    return {
        "tuples": len(log), "seconds": seconds, "window_s": window, "keys": keys,
        "switches": [{"at_s": s.at, "old_order": order_text(s.old), "new_order": order_text(s.new), "reason": s.reason,
                      "rates_per_s": {k: round(v, 3) for k, v in s.rates.items()},
                      "pair_selectivities": {k: round(v, 4) for k, v in s.selectivities.items()}}
                     for s in run.switches],
        "results": sum(got.values()), "oracle_results": oracle_count(log, window),
        "duplicates": sum(n - 1 for n in got.values()), "closed": closed,
        "completions": run.strategy.completions,
        "final_order": order_text(run.strategy.plan.order),
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"JISC demo: {report['tuples']:,} tuples of {', '.join(STREAMS)} over {report['seconds']:g} s, "
             f"window {report['window_s']:g} s, {report['keys']} keys; views speed up and clicks slow down at half time"]
    for s in report["switches"]:
        rates = ", ".join(f"{k} {v:.1f}/s" for k, v in s["rates_per_s"].items())
        lines.append(f"  at {s['at_s']:7.1f} s  {s['old_order']} → {s['new_order']}  ({s['reason']}; rates {rates})")
    if not report["switches"]:
        lines.append("  no order change")
    ok = report["results"] == report["oracle_results"] and report["duplicates"] == 0 and report["closed"]
    lines.append(f"results {report['results']:,} (oracle {report['oracle_results']:,}), duplicates {report['duplicates']}, "
                 f"{'all' if report['closed'] else 'NOT all'} within the window; states completed on demand "
                 f"{report['completions']:,}; {'exact' if ok else 'NOT EXACT'}")
    return "\n".join(lines)


def main(as_json: bool, seconds: float, seed: int) -> int:
    report = run_demo(seconds=seconds, seed=seed)
    print(json.dumps(report, indent=1) if as_json else render(report))
    exact = report["results"] == report["oracle_results"] and report["duplicates"] == 0 and report["closed"]
    return 0 if exact else 1
