"""Random join logs and join orders, and the brute-force pair count, for the per-key JISC engine and its Spark host.

Both ``tests/migrations/test_per_key.py`` (the pure engine) and
``tests/adapters/spark/test_spark_jisc.py`` (the engine inside Spark) check
results against ``oracle_results`` and the counts behind the pairwise
selectivities against ``pair_counts`` over logs made here.
"""

from __future__ import annotations

import random
from collections import Counter

from armd.migrations.join import EventLog, left_deep


def random_log(seed: int, names: list[str], keys: int, n: int, span: int) -> EventLog:
    """``n`` events over ``keys`` keys with whole-second timestamps in [0, span)."""
    rng = random.Random(seed)
    events = [(rng.choice(names), rng.randrange(keys), rng.randrange(span)) for _ in range(n)]
    return EventLog.from_events(names, events)


def random_order(rng: random.Random, names: list[str]):
    """Left-deep or bushy, over the names in a random order."""
    names = list(names)
    rng.shuffle(names)
    if rng.random() < 0.5:
        return left_deep(names)

    def bushy(ns):
        if len(ns) == 1:
            return ns[0]
        cut = rng.randrange(1, len(ns))
        return (bushy(ns[:cut]), bushy(ns[cut:]))

    return bushy(names)


def next_order(rng: random.Random, order, names: list[str]):
    """Half the time the top two inputs swapped (the states below stay, one new state: JISC's best case)."""
    if rng.random() < 0.5 and not isinstance(order[0], str):
        (low, high), top = order
        return ((low, top), high)
    return random_order(rng, names)


def pair_counts(log: EventLog, window: float) -> Counter:
    """Brute force: tuples per stream, and per two streams "a,b" the pairs with equal keys less than ``window`` apart."""
    out: Counter = Counter(log.streams[s] for s in log.stream)
    for i in range(len(log)):
        for j in range(i + 1, len(log)):
            a, b = sorted((log.stream[i], log.stream[j]))
            if a != b and log.key[i] == log.key[j] and abs(log.ts[i] - log.ts[j]) < window:
                out[f"{log.streams[a]},{log.streams[b]}"] += 1
    return out
