"""Brute-force reference results for the windowed n-way equi-join.

The oracle knows nothing of plans, states or expiry: it takes the whole
event log and enumerates, with nested loops, every combination of one event
per stream with equal keys, keeping those with max τ − min τ < W — the
window semantics written down in ``pipeline.py``. Any strategy that is
complete, closed and duplicate-free produces exactly this multiset.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from itertools import product
from math import prod
from typing import Hashable

from .pipeline import EventLog


def oracle_results(log: EventLog, window: float) -> Counter[tuple[int, ...]]:
    """Every result as a sorted tuple of event ids (a multiset, so duplicates would show)."""
    n = len(log.streams)
    by_key: dict[Hashable, list[list[int]]] = defaultdict(lambda: [[] for _ in range(n)])
    for e, (s, k) in enumerate(zip(log.stream, log.key)):
        by_key[k][s].append(e)
    out: Counter[tuple[int, ...]] = Counter()
    ts = log.ts
    for lists in by_key.values():
        for combo in product(*lists):
            times = [ts[e] for e in combo]
            if max(times) - min(times) < window:
                out[tuple(sorted(combo))] += 1
    return out


def oracle_count(log: EventLog, window: float) -> int:
    """The number of results, without enumerating them (for logs too large for ``oracle_results``).

    Each result is counted once, at its last component e: the product over
    the other streams of their events with e's key that precede e and whose
    timestamp is within the window of e's.
    """
    n = len(log.streams)
    live: dict[Hashable, list[deque[float]]] = defaultdict(lambda: [deque() for _ in range(n)])
    total = 0
    for s, k, t in zip(log.stream, log.key, log.ts):
        per = live[k]
        for q in per:
            while q and t - q[0] >= window:
                q.popleft()
        total += prod(len(q) for i, q in enumerate(per) if i != s)
        per[s].append(t)
    return total
