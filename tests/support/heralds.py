"""Shared helpers for the herald tests: brute-force satisfiability and Hypothesis strategies.

The brute force is the reference the reasoner is held to. It evaluates
atoms on every point of a grid with numpy, independently of the reasoner's
code. The grid is complete for predicates over at most three attributes
with integer constants in [-BOUND, BOUND]: over the reals only the order of
the values among themselves and the constants matters, and steps of 1/4
leave room for three distinct values between two neighbouring constants;
over the integers a chain of three strict steps can leave the constants'
span by at most three.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any, Sequence

import numpy as np
from hypothesis import strategies as st

from armd.migrations.heralds import Atom, Attr, Const, Domain, Herald, Range
from armd.migrations.heralds.predicates import EQ, LE, LT

BOUND = 2
NAMES = ("x", "y", "z")


def grid(domain: Domain) -> np.ndarray:
    lo, hi = -BOUND - 4, BOUND + 4
    if domain is Domain.INTEGER:
        return np.arange(lo, hi + 1, dtype=float)
    return np.arange(lo * 4, hi * 4 + 1, dtype=float) / 4


def points(names: Sequence[str], domain: Domain) -> dict[str, np.ndarray]:
    axes = np.meshgrid(*([grid(domain)] * len(names)), indexing="ij") if names else []
    return {n: a.ravel() for n, a in zip(names, axes)}


def truth(atoms: Sequence[Atom], values: dict[str, np.ndarray], size: int) -> np.ndarray:
    ok = np.ones(size, dtype=bool)
    for a in atoms:
        left = values[a.left.name] if isinstance(a.left, Attr) else a.left.value
        right = values[a.right.name] if isinstance(a.right, Attr) else a.right.value
        ok &= {EQ: np.equal, LT: np.less, LE: np.less_equal}[a.op](left, right)
    return ok


def range_truth(ranges: dict[str, Range], values: dict[str, np.ndarray], size: int) -> np.ndarray:
    ok = np.ones(size, dtype=bool)
    for name, r in ranges.items():
        v = values[name]
        ok &= (v > r.low) if r.low_open else (v >= r.low)
        ok &= (v < r.high) if r.high_open else (v <= r.high)
    return ok


def names_of(atoms: Sequence[Atom], ranges: dict[str, Range] | None = None) -> list[str]:
    names = {t.name for a in atoms for t in (a.left, a.right) if isinstance(t, Attr)}
    return sorted(names | set(ranges or ()))


constants = st.integers(-BOUND, BOUND)


@st.composite
def atoms(draw: Any, names: Sequence[str] = NAMES) -> Atom:
    attr = st.sampled_from(list(names)).map(Attr)
    left = draw(st.one_of(attr, constants.map(Const)))
    right = draw(attr) if isinstance(left, Const) else draw(st.one_of(attr, constants.map(Const)))
    if draw(st.booleans()):
        left, right = right, left
    return Atom(left, draw(st.sampled_from([EQ, LT, LE])), right)


@st.composite
def ranges(draw: Any) -> Range:
    low = draw(st.one_of(st.just(-math.inf), constants))
    high = draw(st.one_of(st.just(math.inf), constants))
    return Range(low, high, draw(st.booleans()) and low != -math.inf, draw(st.booleans()) and high != math.inf)


@st.composite
def herald_ranges(draw: Any, names: Sequence[str] = NAMES) -> dict[str, Range]:
    chosen = draw(st.lists(st.sampled_from(list(names)), unique=True, max_size=len(names)))
    return {n: draw(ranges()) for n in chosen}


def punctuated_stream(seed: int, rows: int, *, heralds: int, time_share: float, slack: float) -> list[Any]:
    """Rows (a, b, ts) in timestamp order with truthful heralds at random places.

    Each herald's patterns are the true range of what it covers, widened at
    random (``slack``) or left out per attribute; its lifespan is a count or
    a span of time, so lifespans overlap and heralds merge.
    """
    rnd = random.Random(seed)
    ts = 0.0
    data = []
    for _ in range(rows):
        ts += rnd.choice([0.0, 0.5, 1.0, 2.0])
        cluster = rnd.randrange(4)
        data.append((cluster * 3 + rnd.randrange(3), rnd.randrange(-3, 4), ts))
    places = sorted(rnd.sample(range(rows), min(heralds, rows)))
    out: list[Any] = []
    at = 0
    for i in places:
        out.extend(data[at:i])
        at = i
        if rnd.random() < time_share:
            span = rnd.choice([0.5, 1.0, 3.0, 8.0, math.inf])
            start = data[i][2]
            covered = [r for r in data[i:] if r[2] < start + span]
            life = {"time": span, "ts": start}
        else:
            count = rnd.choice([1, 2, 5, 10, 30, math.inf])
            covered = data[i : i + count] if count != math.inf else data[i:]
            life = {"count": count}
        patterns = {}
        for attribute, column in (("a", 0), ("b", 1)):
            if rnd.random() < 0.25:
                continue
            lo = min(r[column] for r in covered) - (rnd.random() < slack) * rnd.randrange(1, 3)
            hi = max(r[column] for r in covered) + (rnd.random() < slack) * rnd.randrange(1, 3)
            low_open = rnd.random() < 0.3
            high_open = rnd.random() < 0.3
            patterns[attribute] = Range(lo - low_open, hi + high_open, low_open, high_open)
        out.append(Herald.of(patterns, **life))
    out.extend(data[at:])
    return out


def chunks(stream: Sequence[Any], sizes: Sequence[int]) -> list[Sequence[Any]]:
    """Cut ``stream`` into consecutive batches, cycling through ``sizes``."""
    out, i = [], 0
    for size in itertools.cycle(sizes or [len(stream) or 1]):
        if i >= len(stream):
            return out
        out.append(stream[i : i + size])
        i += size
    return out
