"""Satisfiability and implication of conjunctive inequalities by minimum ranges (paper 002 §III.B).

Why this shape: the herald reasoner asks the same question many times — is
the query's predicate, plus the ranges of the herald in force, satisfiable?
— with only the ranges changing. So the query's part is compiled once into
an *inequality graph* (``InequalityGraph``): one node per attribute, an edge
``x → y`` for ``x < y`` or ``x ≤ y`` (``=`` is two ``≤`` edges), nodes that
reach each other collapsed into one (they must be equal, so a ``<`` edge
inside such a group is a contradiction), constants folded into a lower and
an upper bound per node, and bounds pushed along the edges in topological
order: a node's lower bound flows up to the nodes above it, its upper bound
down to the nodes below. Those are the *minimum ranges*; the conjunction is
satisfiable exactly when no group holds a ``<`` edge and no range is empty.

``refine`` adds a herald's ranges and pushes only what they tighten,
breadth-first from the attributes the herald names, stopping wherever
nothing changes — the incremental step that PredSAT (``predsat``) takes per
herald instead of recomputing everything.

Domains: over the reals a bound is a value and whether it is strict; over
the integers ``x < c`` is ``x ≤ ⌈c⌉ − 1`` and a ``<`` edge adds one, so all
bounds are closed integers. Reasoning over the reals is sound for integer
data too (it proves less); choose ``Domain.INTEGER`` only for attributes
that hold integers.

Implication is decided through satisfiability: S implies ``a`` exactly when
S together with the negation of ``a`` is unsatisfiable (the negation of
``x ≤ y`` is ``y < x``; that of ``x = y`` is ``x < y`` or ``y < x``).
"""

from __future__ import annotations

import math
from collections import deque
from enum import Enum
from typing import Callable, Iterable, Mapping, Sequence

from .patterns import Range
from .predicates import EQ, LE, LT, Atom, Attr


class Domain(Enum):
    REAL = "real"
    INTEGER = "integer"


Bound = tuple[float, bool]
"""(value, strict): a lower bound ``x > v`` or ``x ≥ v``, an upper bound ``x < v`` or ``x ≤ v``."""

NO_LOW: Bound = (-math.inf, False)
NO_HIGH: Bound = (math.inf, False)


def _int_low(b: Bound) -> Bound:
    v, strict = b
    if v in (-math.inf, math.inf):
        return (v, False)
    return (math.floor(v) + 1 if strict else math.ceil(v), False)


def _int_high(b: Bound) -> Bound:
    v, strict = b
    if v in (-math.inf, math.inf):
        return (v, False)
    return (math.ceil(v) - 1 if strict else math.floor(v), False)


def _tighter_low(a: Bound, b: Bound) -> bool:
    """Whether lower bound ``a`` excludes more than ``b``."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] and not b[1])


def _tighter_high(a: Bound, b: Bound) -> bool:
    return a[0] < b[0] or (a[0] == b[0] and a[1] and not b[1])


def empty(low: Bound, high: Bound) -> bool:
    return low[0] > high[0] or (low[0] == high[0] and (low[1] or high[1]))


class InequalityGraph:
    """A conjunction of atoms compiled into collapsed nodes, edges and minimum ranges."""

    def __init__(self, atoms: Iterable[Atom], domain: Domain = Domain.REAL) -> None:
        self.domain = domain
        self.atoms = tuple(atoms)
        names: dict[str, int] = {}
        for a in self.atoms:
            for name in sorted(a.attributes()):
                names.setdefault(name, len(names))
        self.attributes = tuple(names)
        edges: list[tuple[int, int, bool]] = []
        lows: list[Bound] = [NO_LOW] * len(names)
        highs: list[Bound] = [NO_HIGH] * len(names)
        for a in self.atoms:
            strict = a.op == LT
            if isinstance(a.left, Attr) and isinstance(a.right, Attr):
                x, y = names[a.left.name], names[a.right.name]
                edges.append((x, y, strict))
                if a.op == EQ:
                    edges.append((y, x, False))
                continue
            if isinstance(a.left, Attr):  # x θ c: an upper bound (and a lower one for =)
                x, c = names[a.left.name], a.right.value  # type: ignore[union-attr]
                highs[x] = self._min_high(highs[x], (c, strict))
                if a.op == EQ:
                    lows[x] = self._max_low(lows[x], (c, False))
            else:  # c θ x
                x, c = names[a.right.name], a.left.value  # type: ignore[union-attr]
                lows[x] = self._max_low(lows[x], (c, strict))
                if a.op == EQ:
                    highs[x] = self._min_high(highs[x], (c, False))
        self.group = _strongly_connected(len(names), [(x, y) for x, y, _ in edges])
        self._group_of = {name: self.group[i] for name, i in names.items()}
        groups = max(self.group, default=-1) + 1
        self.contradiction = False
        """A ``<`` edge inside a group of attributes that must all be equal."""
        up: list[set[tuple[int, bool]]] = [set() for _ in range(groups)]
        for x, y, strict in edges:
            gx, gy = self.group[x], self.group[y]
            if gx == gy:
                self.contradiction |= strict
            else:
                up[gx].add((gy, strict))
        self.parents = [_strictest(s) for s in up]
        """parents[g]: (h, strict) for every edge g → h of the collapsed graph (g below h)."""
        children: list[dict[int, bool]] = [{} for _ in range(groups)]
        for g in range(groups):
            for h, strict in self.parents[g]:
                children[h][g] = strict
        self.children = [tuple(c.items()) for c in children]
        self.low: list[Bound] = [NO_LOW] * groups
        self.high: list[Bound] = [NO_HIGH] * groups
        for x in range(len(names)):
            g = self.group[x]
            self.low[g] = self._max_low(self.low[g], lows[x])
            self.high[g] = self._min_high(self.high[g], highs[x])
        order = _topological(groups, self.parents)
        for g in order:
            for h, strict in self.parents[g]:
                self.low[h] = self._max_low(self.low[h], self._step_up(self.low[g], strict))
        for h in reversed(order):
            for g, strict in self.children[h]:
                self.high[g] = self._min_high(self.high[g], self._step_down(self.high[h], strict))
        self.satisfiable = not self.contradiction and not any(
            empty(lo, hi) for lo, hi in zip(self.low, self.high)
        )

    # bounds in this graph's domain
    def _max_low(self, a: Bound, b: Bound) -> Bound:
        if self.domain is Domain.INTEGER:
            a, b = _int_low(a), _int_low(b)
        return b if _tighter_low(b, a) else a

    def _min_high(self, a: Bound, b: Bound) -> Bound:
        if self.domain is Domain.INTEGER:
            a, b = _int_high(a), _int_high(b)
        return b if _tighter_high(b, a) else a

    def _step_up(self, low: Bound, strict: bool) -> Bound:
        """The lower bound that ``x θ y`` passes from x to y."""
        if self.domain is Domain.INTEGER:
            return (low[0] + 1, False) if strict else low
        return (low[0], low[1] or strict)

    def _step_down(self, high: Bound, strict: bool) -> Bound:
        """The upper bound that ``x θ y`` passes from y to x."""
        if self.domain is Domain.INTEGER:
            return (high[0] - 1, False) if strict else high
        return (high[0], high[1] or strict)

    def index(self, attribute: str) -> int | None:
        return self._group_of.get(attribute)

    def refine(self, ranges: Mapping[str, Range]) -> Refined:
        """Add ``ranges`` (a herald's patterns) and push only what they tighten (PredSAT's step)."""
        low, high = list(self.low), list(self.high)
        satisfiable = self.satisfiable
        rising: deque[int] = deque()
        falling: deque[int] = deque()
        touched: set[int] = set()
        group_of, real = self._group_of, self.domain is Domain.REAL
        for attribute, r in ranges.items():
            g = group_of.get(attribute)
            if real:  # a pattern's ends are bounds as they are (an unbounded end is no tighter than none)
                lo, hi = (r.low, r.low_open), (r.high, r.high_open)
            else:
                lo = self._max_low(NO_LOW, (r.low, r.low_open))
                hi = self._min_high(NO_HIGH, (r.high, r.high_open))
            if g is None:  # the query does not mention it: only an empty range matters
                satisfiable &= not empty(lo, hi)
                continue
            if _tighter_low(lo, low[g]):
                low[g] = lo
                rising.append(g)
                touched.add(g)
            if _tighter_high(hi, high[g]):
                high[g] = hi
                falling.append(g)
                touched.add(g)
        while rising:
            g = rising.popleft()
            for h, strict in self.parents[g]:
                lo = self._step_up(low[g], strict)
                if _tighter_low(lo, low[h]):
                    low[h] = lo
                    rising.append(h)
                    touched.add(h)
        while falling:
            h = falling.popleft()
            for g, strict in self.children[h]:
                hi = self._step_down(high[h], strict)
                if _tighter_high(hi, high[g]):
                    high[g] = hi
                    falling.append(g)
                    touched.add(g)
        if satisfiable:
            for g in touched:
                if empty(low[g], high[g]):
                    satisfiable = False
                    break
        return Refined(self, low, high, satisfiable, len(touched))

    def reaches(self, x: str, y: str) -> tuple[bool, bool]:
        """(a path x → y exists in the collapsed graph or x, y are one group; some path has a ``<`` edge)."""
        gx, gy = self.index(x), self.index(y)
        if gx is None or gy is None:
            return (False, False)
        if gx == gy:
            return (True, False)
        best: dict[int, bool] = {gx: False}
        queue = deque([gx])
        while queue:
            g = queue.popleft()
            for h, strict in self.parents[g]:
                s = best[g] or strict
                if h not in best or (s and not best[h]):
                    best[h] = s
                    queue.append(h)
        return (gy in best, best.get(gy, False))


class Refined:
    """Minimum ranges of a query's graph after a herald's ranges were added."""

    def __init__(self, graph: InequalityGraph, low: list[Bound], high: list[Bound], satisfiable: bool, visited: int):
        self.graph = graph
        self.low = low
        self.high = high
        self.satisfiable = satisfiable
        self.visited = visited
        """How many collapsed nodes the refinement tightened (the incremental work done)."""

    def bounds(self, attribute: str) -> tuple[Bound, Bound]:
        g = self.graph.index(attribute)
        return (NO_LOW, NO_HIGH) if g is None else (self.low[g], self.high[g])


def _strictest(edges: set[tuple[int, bool]]) -> tuple[tuple[int, bool], ...]:
    best: dict[int, bool] = {}
    for h, strict in edges:
        best[h] = best.get(h, False) or strict
    return tuple(sorted(best.items()))


def _strongly_connected(n: int, edges: Sequence[tuple[int, int]]) -> list[int]:
    """Group index per node (Tarjan's algorithm, iterative)."""
    out: list[list[int]] = [[] for _ in range(n)]
    for x, y in edges:
        out[x].append(y)
    index = [-1] * n
    lowlink = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    group = [-1] * n
    counter = 0
    groups = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = lowlink[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            recurse = False
            for j in range(i, len(out[v])):
                w = out[v][j]
                if index[w] == -1:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if on_stack[w]:
                    lowlink[v] = min(lowlink[v], index[w])
            if recurse:
                continue
            if lowlink[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    group[w] = groups
                    if w == v:
                        break
                groups += 1
            if work:
                parent = work[-1][0]
                lowlink[parent] = min(lowlink[parent], lowlink[v])
    return group


def _topological(n: int, parents: Sequence[Sequence[tuple[int, bool]]]) -> list[int]:
    """Groups with every group before the groups above it (Kahn's algorithm)."""
    indegree = [0] * n
    for g in range(n):
        for h, _ in parents[g]:
            indegree[h] += 1
    ready = deque(g for g in range(n) if indegree[g] == 0)
    order = []
    while ready:
        g = ready.popleft()
        order.append(g)
        for h, _ in parents[g]:
            indegree[h] -= 1
            if indegree[h] == 0:
                ready.append(h)
    return order


def range_bounds(r: Range, domain: Domain) -> tuple[Bound, Bound]:
    """A pattern's ends as bounds of ``domain`` (over the integers, rounded inwards and closed)."""
    low, high = (r.low, r.low_open), (r.high, r.high_open)
    if domain is Domain.INTEGER:
        return _int_low(low), _int_high(high)
    return low, high


def implied_by_bounds(
    a: Atom,
    bounds: Callable[[str], tuple[Bound, Bound]],
    path: Callable[[str, str], tuple[bool, bool]] = lambda x, y: (False, False),
) -> bool:
    """Theorem 3.1's test: does ``a`` hold for every value within the minimum ranges (and paths)?

    ``bounds(x)`` gives x's (lower, upper) minimum range, ``path(x, y)``
    whether the inequality graph leads from x to y and whether through a
    ``<``. Only sound when the formula the ranges come from is satisfiable.
    """
    if isinstance(a.left, Attr) and isinstance(a.right, Attr):
        x, y = a.left.name, a.right.name
        if x == y:
            return a.op != LT
        reach, strict_path = path(x, y)
        (_, x_high), (y_low, _) = bounds(x), bounds(y)
        if a.op == LE:
            return reach or x_high[0] <= y_low[0]
        if a.op == LT:
            return strict_path or x_high[0] < y_low[0] or (x_high[0] == y_low[0] and (x_high[1] or y_low[1]))
        back, _ = path(y, x)
        if reach and back:
            return True
        (x_low, _), (_, y_high) = bounds(x), bounds(y)
        return x_low == x_high == y_low == y_high and not x_low[1] and x_low[0] not in (-math.inf, math.inf)
    if isinstance(a.left, Attr):  # x θ c
        (low, high), c = bounds(a.left.name), a.right.value  # type: ignore[union-attr]
        if a.op == LE:
            return high[0] <= c
        if a.op == LT:
            return high[0] < c or (high[0] == c and high[1])
        return low[0] == high[0] == c and not low[1] and not high[1]
    (low, high), c = bounds(a.right.name), a.left.value  # type: ignore[union-attr]
    if a.op == LE:
        return low[0] >= c
    if a.op == LT:
        return low[0] > c or (low[0] == c and low[1])
    return low[0] == high[0] == c and not low[1] and not high[1]


def negation(a: Atom) -> tuple[Atom, ...]:
    """Atoms whose disjunction is the negation of ``a``."""
    if a.op == LE:
        return (Atom(a.right, LT, a.left),)
    if a.op == LT:
        return (Atom(a.right, LE, a.left),)
    return (Atom(a.left, LT, a.right), Atom(a.right, LT, a.left))


def satisfiable(atoms: Iterable[Atom], domain: Domain = Domain.REAL) -> bool:
    return InequalityGraph(atoms, domain).satisfiable


def implies(atoms: Sequence[Atom], implied: Atom, domain: Domain = Domain.REAL) -> bool:
    """Whether every assignment satisfying ``atoms`` satisfies ``implied`` (vacuously true if none does)."""
    if not satisfiable(atoms, domain):
        return True
    return not any(satisfiable((*atoms, n), domain) for n in negation(implied))


def range_atoms(ranges: Mapping[str, Range]) -> tuple[Atom, ...]:
    return tuple(a for attribute, r in ranges.items() for a in r.atoms(attribute))


__all__ = [
    "Domain",
    "InequalityGraph",
    "Refined",
    "empty",
    "implied_by_bounds",
    "implies",
    "negation",
    "range_atoms",
    "range_bounds",
    "satisfiable",
]
