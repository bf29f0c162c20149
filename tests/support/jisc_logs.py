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


def heralded_log(seed: int, names: list[str], keys: int, span: int, piece: int, n: int):
    """A random log whose every stream keeps time heralds on its key ``k``: ``(log, heralds)``.

    The timeline ``[0, span)`` is cut into pieces of ``piece`` seconds; per
    stream and piece a herald promises the low half of the keys or the high
    half (9 times in 20 each) or any key (once in 10; a piece now and then
    left without a herald), and the events there keep the promise. ``heralds``
    maps each stream to ``(low, high, start, seconds)`` tuples.
    """
    rng = random.Random(seed)
    half = keys // 2
    ranges = [(0, half - 1), (half, keys - 1), (0, keys - 1)]
    heralds: dict[str, list[tuple[int, int, int, int]]] = {s: [] for s in names}
    allowed: dict[tuple[str, int], tuple[int, int]] = {}
    for s in names:
        for start in range(0, span, piece):
            low, high = rng.choices(ranges, weights=(9, 9, 2))[0]
            allowed[s, start] = (low, high)
            if rng.random() < 0.9:  # now and then a piece without a herald (its tuples are anonymous)
                heralds[s].append((low, high, start, piece))
    events = []
    for _ in range(n):
        s, t = rng.choice(names), rng.randrange(span)
        low, high = allowed[s, t - t % piece]
        events.append((s, rng.randint(low, high), t))
    return EventLog.from_events(names, events), heralds
