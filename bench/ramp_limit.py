"""What any schedule of cuts could reach on bench/control.py's ramp: the least seconds over the usable bound.

    .venv/bin/python bench/ramp_limit.py [--spark-split] [--json]

No armd here: the plant of ``bench/plant.py`` (same seed, same arrivals as
the ``ramp`` scenario) is driven by scripted GenMig cuts chosen with
hindsight. For each time ``detect`` at which a controller could first know
of the ramp, it tries every schedule of the shape the staged cuts of
``control/ramp.py`` take — the two queries whose state does not grow with the
rate cut to their minimum at ``ta``, the sum over clicks cut to ``wb`` at
``tb`` (both at or after ``detect``) — and reports the best. With
``--spark-split`` a cut's old plan drains a whole *old* window after it, as
Spark's GenMig places T_split (the larger window of the two plans,
``adapters/spark/genmig.py``), instead of the new window after it as the plant's
simulated GenMig does. Why: it says how far from 0 s any controller can get,
so a figure above 0 can be told apart from a controller's fault.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from control import QUERIES, SCENARIOS, SEED, START, STREAMS, WARMUP_S, taps_of  # noqa: E402
from plant import Keys, Move, Plant  # noqa: E402

from armd.adapters.synthetic import Schedule  # noqa: E402

USABLE = 220_000 * 0.9
LAG_S = 3.0  # watermark delay + trigger of the plant's queries


def seconds_over(cuts: list[tuple[int, str, float]], spark_split: bool) -> int:
    ramp = next(s for s in SCENARIOS if s.name == "ramp")
    schedules = {s: Schedule(rate) for s, (rate, _) in STREAMS.items()}
    schedules["clicks"] = Schedule(STREAMS["clicks"][0], tuple(ramp.steps), ())
    plant = Plant(schedules, SEED, 0.001, START, taps_of(QUERIES, 1.0), {"clicks": Keys(20, 0.0), "views": Keys(20, 0.0)})
    for q, spec in QUERIES.items():
        plant.set_window(q, f"{q}.w", float(spec["window"][1]))
        plant.started[q] = 0.0
    over = 0
    try:
        for second in range(1, int(ramp.seconds) + 1):
            for at, query, window in cuts:
                if at == second:
                    old = plant.window_sizes[(query, f"{query}.w")]
                    plant.set_window(query, f"{query}.w", window * 1000.0)
                    span = max(old, window * 1000.0) / 1000.0 if spark_split else window
                    plant.moves[query] = Move({f"{query}.w": old}, second, second + span, second + span + LAG_S)
            if second > WARMUP_S and plant.total_state(float(second)) > USABLE:
                over += 1
    finally:
        plant.close()
    return over


def best(detect: int, spark_split: bool) -> dict:
    tried = []
    for ta in range(detect, detect + 16, 2):
        for tb in range(detect, detect + 20, 2):
            cuts = [(ta, "views_sum", 5.0), (ta, "clicks_keys", 5.0), (tb, "clicks_sum", 5.0)]
            tried.append((seconds_over(cuts, spark_split), ta, tb))
    over, ta, tb = min(tried)
    return {"detect_s": detect, "seconds_over_bound": over, "others_cut_at_s": ta, "clicks_sum_cut_at_s": tb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spark-split", action="store_true", help="old plans drain an old window after the cut")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [best(d, args.spark_split) for d in (120, 124, 128, 132, 136, 140)]
    print(json.dumps({"split": "spark" if args.spark_split else "plant", "best": rows}, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
