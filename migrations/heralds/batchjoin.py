"""A multi-modal windowed join that works a micro-batch at a time, deciding per partition pair (paper 002 §V.C).

Why a second join beside ``join.MultiModalJoin``: that one is tuple at a
time, so even a tuple whose partition skips every partner still pays the
per-tuple Python work of the event loop (merging, the expiry check, the
mode lookup), and that floor kept the savings at about half the time. Here
a micro-batch's tuples arrive as partition slices, and all the work that
heralds can remove is decided once per *pair of partitions*: a skipped pair
costs one dict lookup whatever its size. A new slice is stored by
extending lists (C-level), and probes the other side's window in *groups*:
consecutive runs of the other side in the same mode form one index range of
its state, and each tuple finds its window in the range with two bisections
over the state's timestamps and evaluates the residual with one list
comprehension over that slice. ``BatchJoin`` is the same code with one
group per side and the whole predicate, the baseline, so with and without
heralds the work per surviving pair is identical and the saving is exactly
what the skipped groups would have cost.

Semantics are those of ``join.regular_join``: a pair ``(l, r)`` is a result
when P holds and ``|l.ts − r.ts| < W``. Within one call, new right slices
probe the left state first, then new left slices probe the whole right
state, so each pair is found once. Batches must come in timestamp order
(every row of a later batch no earlier than the earliest row of this one,
each side's rows in timestamp order), as a micro-batch engine delivers
them; state older than the batch's earliest row minus W is dropped.

The output is a list of ``Joined`` chunks, each the pairs of one slice
against one group, with the heralds of both (the hull of the group's runs'
heralds): a join further up (§V.D) is configured from them without looking
at rows.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from functools import lru_cache
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping, Sequence

from .herald import Herald, Patterns, hull
from .join import JoinAction, WindowedJoin
from .partitioner import ANONYMOUS, Partition
from .predicates import Atom, attributes_of, compile_pair
from .predsat import DECISION_CACHE, Verdict
from .satisfiability import Domain

Row = tuple[Any, ...]
LEFT, RIGHT = 0, 1
_PASS, _SKIP, _EVALUATE = JoinAction.PASS, JoinAction.SKIP, JoinAction.EVALUATE
_PASSED, _SKIPPED = (_PASS, None, _PASS.value), (_SKIP, None, _SKIP.value)
_NOTHING: frozenset[int] = frozenset()
_NAME = itemgetter(4)
_EVALUATE_FLAG = _EVALUATE.value
"""Modes: (action, compiled residual for evaluate, the action's flag)."""


class Joined:
    """Result pairs of one left and one right group, with the (hull) heralds of each (None: anonymous).

    The hulls are computed when first read: a consumer that does not look at them (a final join) does not
    pay for them, one that does (a join further up) gets them from the slices' and runs' heralds, which
    are fixed when the chunk is made."""

    __slots__ = ("_left", "_right", "pairs")

    def __init__(self, left: Patterns | list | None, right: Patterns | list | None, pairs: list[tuple[Row, Row]]) -> None:
        self._left, self._right, self.pairs = left, right, pairs

    @property
    def left(self) -> Patterns | None:
        if type(self._left) is not tuple and self._left is not None:
            self._left = _hull_all(self._left)
        return self._left  # type: ignore[return-value]

    @property
    def right(self) -> Patterns | None:
        if type(self._right) is not tuple and self._right is not None:
            self._right = _hull_all(self._right)
        return self._right  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Joined(left={self.left!r}, right={self.right!r}, pairs={self.pairs!r})"


class _Runs(list):
    """A group's runs (a list of them, made in C), whose heralds a chunk hulls only when a consumer asks."""

    __slots__ = ()


def _hull_all(heralds: list[Patterns | None] | _Runs) -> Patterns | None:
    if type(heralds) is _Runs:
        heralds = [run[1] if run[0] != ANONYMOUS else None for run in heralds]
    out = heralds[0]
    for h in heralds[1:]:
        out = _hull(out, h)
    return out


class _Side:
    """One side's window state: rows and their timestamps in arrival order, and runs of partitions over them."""

    __slots__ = ("rows", "ts", "runs", "gone")

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.ts: list[Any] = []
        self.runs: list[list] = []
        """[pid, patterns, start, end, name): consecutive rows of one partition; ``name`` is the operator's
        small integer for the patterns (hashing an int per pair of runs, not nested tuples). ``start`` and
        ``end`` count every row the side ever stored, so expiry does not shift them: ``rows[i]`` is row
        ``gone + i`` (the first run may start before ``gone``)."""
        self.gone = 0
        """Rows expired so far."""

    def append(self, pid: int, patterns: Patterns | None, rows: Sequence[Row], ts_index: int, name: int = 0) -> None:
        start = self.gone + len(self.rows)
        self.rows.extend(rows)
        self.ts.extend(map(itemgetter(ts_index), rows))
        runs = self.runs
        if runs and runs[-1][0] == pid:
            runs[-1][3] = self.gone + len(self.rows)
        else:
            runs.append([pid, patterns, start, self.gone + len(self.rows), name])

    def expire(self, horizon: Any) -> None:
        """Drop the rows with ts ≤ horizon, and the runs left empty."""
        cut = bisect_right(self.ts, horizon)
        if not cut:
            return
        del self.rows[:cut]
        del self.ts[:cut]
        gone = self.gone = self.gone + cut
        runs = self.runs
        if not self.rows:
            runs.clear()
            return
        # every stored row is in a run, so a run ending after ``gone`` remains
        first = 0
        while runs[first][3] <= gone:
            first += 1
        if first:
            del runs[:first]


def _probe(
    side: int,
    rows: Sequence[Row],
    ts_index: int,
    other: _Side,
    start: int,
    end: int,
    action: JoinAction,
    test: Callable[[Row, Row], bool] | None,
    window: Any,
) -> list[tuple[Row, Row]]:
    """Pairs of ``rows`` (of ``side``) with the other side's state rows in [start, end) within the window."""
    ots, orows = other.ts, other.rows
    out: list[tuple[Row, Row]] = []
    for row in rows:
        t = row[ts_index]
        lo = bisect_right(ots, t - window, start, end)
        hi = bisect_left(ots, t + window, lo, end)
        if lo == hi:
            continue
        if side == LEFT:
            if action is _PASS:
                out.extend([(row, r) for r in orows[lo:hi]])
            else:
                out.extend([(row, r) for r in orows[lo:hi] if test(row, r)])  # type: ignore[misc]
        elif action is _PASS:
            out.extend([(r, row) for r in orows[lo:hi]])
        else:
            out.extend([(r, row) for r in orows[lo:hi] if test(r, row)])  # type: ignore[misc]
    return out


class BatchJoin(WindowedJoin):
    """The plain plan: ``L ⋈_P R`` windowed, a micro-batch at a time, every pair in the window evaluated."""

    def __init__(self, predicate: Sequence[Atom], left: Mapping[str, int], right: Mapping[str, int], *, window: float, ts: str = "ts") -> None:
        super().__init__(predicate, left, right, window=window, ts=ts, reason=False)
        self.test = compile_pair(predicate, left, right)
        self.sides = (_Side(), _Side())

    def process(self, left: Sequence[Row], right: Sequence[Row]) -> list[tuple[Row, Row]]:
        """One micro-batch of rows per side (each in timestamp order); the new result pairs."""
        li, ri = self.ts_index
        firsts = [rows[0][i] for rows, i in ((left, li), (right, ri)) if rows]
        if not firsts:
            return []
        horizon = min(firsts) - self.window
        ls, rs = self.sides
        ls.expire(horizon)
        rs.expire(horizon)
        out = _probe(RIGHT, right, ri, ls, 0, len(ls.rows), _EVALUATE, self.test, self.window)
        rs.append(ANONYMOUS, None, right, ri)
        out += _probe(LEFT, left, li, rs, 0, len(rs.rows), _EVALUATE, self.test, self.window)
        ls.append(ANONYMOUS, None, left, li)
        return out


class MultiModalBatchJoin(WindowedJoin):
    """``L ⋈_P R`` over partition slices, a micro-batch at a time, run by a control table of herald pairs."""

    def __init__(
        self,
        predicate: Sequence[Atom],
        left: Mapping[str, int],
        right: Mapping[str, int],
        *,
        window: float,
        ts: str = "ts",
        domain: Domain = Domain.REAL,
    ) -> None:
        super().__init__(predicate, left, right, window=window, ts=ts, domain=domain)
        self.full = (_EVALUATE, compile_pair(self.reasoner.predicate, left, right), _EVALUATE.value)
        self.sides = (_Side(), _Side())
        self._names: dict[tuple[int, Patterns], int] = {}
        self._projected: dict[tuple[int, Patterns], int] = {}
        used = [a.split(".", 1) for a in attributes_of(self.reasoner.predicate)]
        sides = (self.reasoner.left, self.reasoner.right)
        self._used = tuple(frozenset(n for prefix, n in used if prefix == p) for p in sides)
        """Per side, the attributes the predicate mentions."""
        self._last_name = 0
        self._pairs: dict[tuple[int, int], tuple] = {}
        """The control table, by the pair of pattern names (left, right) rather than partition ids: a mode
        depends on the two heralds only, so partitions with recurring heralds share their entries, and
        a pair of runs needs no entry of its own that must be released when it leaves the window."""
        self._evaluate: dict[tuple[Atom, ...], tuple] = {self.reasoner.predicate: self.full}
        """One entry per distinct residual, so runs in the same mode are recognised by identity and grouped."""
        self._alone: dict[tuple[int, int], bool] = {}
        self._full_with: tuple[dict[int, set[int]], dict[int, set[int]]] = ({}, {})
        """Per side, per pattern name, the other side's names it is known to meet in the full predicate's mode:
        when that covers every name in the other side's window, a slice meets the window as one group without
        a lookup per run — the plain join's path, so heralds that prove nothing cost next to nothing."""
        self._slots: tuple[dict[Patterns, list], dict[Patterns, list]] = ({}, {})
        """Per side, a herald's patterns → [name, dead, its set in ``_full_with``]: the per-slice path's one lookup.
        Emptied with the caches it reads from."""
        self._met = [0, 0, 0]
        self.decisions = 0
        """PredSAT runs for pairs (cache misses)."""
        self.dropped = 0
        """Tuples neither probed nor stored (their herald alone rules the predicate out)."""
        self._work = [0, 0]
        """Probe work as (new tuple, state tuple) pairs met: [skipped by heralds, all], for ``skip_fraction``."""

    def process(self, left: Iterable[Partition], right: Iterable[Partition]) -> list[Joined]:
        """One micro-batch of partition slices per side (each in timestamp order); the new results, in chunks."""
        li, ri = self.ts_index
        if type(left) is not list:
            left = list(left)
        if type(right) is not list:
            right = list(right)
        firsts = []
        for parts, i in ((left, li), (right, ri)):
            for p in parts:
                if p[2]:
                    firsts.append(p[2][0][i])
                    break
        if not firsts:
            return []
        horizon = min(firsts) - self.window
        ls, rs = self.sides
        ls.expire(horizon)
        rs.expire(horizon)
        out: list[Joined] = []
        met, work = self._met, self._work
        for side, parts, mine, other, ts_index in ((RIGHT, right, rs, ls, ri), (LEFT, left, ls, rs, li)):
            # The other side's window does not change while this side's slices probe it, so what a name meets
            # there, and the one group of a slice that meets all of it in the full predicate's mode, hold for
            # the whole loop.
            runs = other.runs
            names = set(map(_NAME, runs))
            whole = [[self.full, 0, len(other.rows), _Runs(runs)]] if runs else []
            slots, known = self._slots[side], self._full_with[side]
            # consecutive slices that meet the other side's window in the same groups probe it together
            patterns: list[Patterns | None] = []
            """The heralds of the slices probing together, hulled only if a consumer asks (``Joined``)."""
            plan: list[list] | None = None
            stored: list[Row] = []
            """This side's slices join its state after the loop, in one extend (the loop probes the other side);
            their runs are entered as the loop goes, since nothing reads this side's state meanwhile."""
            base = mine.gone + len(mine.rows)
            mruns = mine.runs
            last = mruns[-1] if mruns else None
            dropped = wholes = begun = 0
            for part in parts:
                pid, herald, prows = part
                if not prows:
                    continue
                # the per-slice path is one dict lookup and a set comparison: most slices carry recurring heralds
                if pid:
                    slot = slots.get(herald)
                    if slot is None:
                        slot = self._slot(side, part)
                    name, dead, full = slot
                    if dead:
                        dropped += len(prows)
                        continue
                else:  # anonymous
                    name, herald, full = 0, None, known.get(0, _NOTHING)
                if names <= full:
                    groups = whole
                    wholes += 1
                else:
                    groups = self._groups(side, part, name, other)
                    work[0] += len(prows) * (len(other.rows) - sum([g[2] - g[1] for g in groups]))
                if groups is plan or (plan is not None and _same(plan, groups)):
                    if patterns[-1] is not herald:
                        patterns.append(herald)
                else:
                    if plan:  # the slices since ``begun`` probe together
                        self._probe_groups(side, stored[begun:], patterns, plan, other, ts_index, out)
                    begun, patterns, plan = len(stored), [herald], groups
                at = base + len(stored)
                stored += prows
                if last is not None and last[0] == pid:
                    last[3] = at + len(prows)
                else:
                    last = [pid, herald, at, at + len(prows), name]
                    mruns.append(last)
            if dropped:
                self.dropped += dropped
                work[0] += dropped * len(other.rows)
            work[1] += (dropped + len(stored)) * len(other.rows)
            met[_EVALUATE_FLAG] += wholes * len(runs)
            if plan:
                self._probe_groups(side, stored[begun:] if begun else stored, patterns, plan, other, ts_index, out)
            mine.rows += stored
            mine.ts += map(itemgetter(ts_index), stored)
        return out

    def _slot(self, side: int, part: Partition) -> list:
        """What the per-slice path needs of a herald, looked up once: [name, dead, the names it meets in full]."""
        name = self._name(side, part)
        slot = [name, self._dead(side, part, name), self._full_with[side].setdefault(name, set())]
        self._slots[side][part.herald] = slot
        return slot

    def _name(self, side: int, part: Partition) -> int:
        """A small integer per distinct patterns (0: anonymous), so decisions are cached by ints.

        Patterns that agree on the predicate's attributes of this side get the same name: a range on an
        attribute the predicate does not mention cannot change a decision, and heralds that differ only
        there (a join's output announcing its other columns) then share PredSAT's work."""
        if part.pid == ANONYMOUS:
            return 0
        key = (side, part.herald)
        name = self._names.get(key)
        if name is None:
            if len(self._names) >= DECISION_CACHE:
                self._names.clear()
                self._projected.clear()
                self._pairs.clear()
                self._alone.clear()
                self._forget_full()
            used = self._used[side]
            projection = (side, tuple(p for p in part.herald if p[0] in used))  # type: ignore[union-attr]
            name = self._projected.get(projection)
            if name is None:
                self._last_name += 1  # never reused: runs still in the window keep theirs after a clear
                name = self._projected[projection] = self._last_name
            self._names[key] = name
        return name

    def _forget_full(self) -> None:
        for caches in (self._full_with, self._slots):
            caches[0].clear()
            caches[1].clear()

    def _groups(self, side: int, part: Partition, name: int, other: _Side) -> list[list]:
        """What one slice meets in the other side's window: [mode, start, end, runs] per group of
        consecutive runs in one mode, skipped runs left out.

        The mode of a pair of runs is looked up by the pair of pattern names (two small ints), so a
        recurring pair costs one dict lookup and nothing else."""
        decided = self._pairs
        met = self._met
        full, known = self.full, self._full_with[side]
        mine = part.herald if part.pid != ANONYMOUS else None
        groups: list[list] = []
        gone = other.gone
        for run in other.runs:
            entry = decided.get((name, run[4]) if side == LEFT else (run[4], name))
            if entry is None:
                entry = self._configure(side, mine, name, run)
            met[entry[2]] += 1
            if entry is full:
                known.setdefault(name, set()).add(run[4])
            elif entry[0] is _SKIP:
                continue
            start, end = run[2] - gone, run[3] - gone  # positions in ``other.rows``
            if groups and groups[-1][0] is entry and groups[-1][2] == start:
                groups[-1][2] = end
                groups[-1][3].append(run)
            else:
                groups.append([entry, start if start > 0 else 0, end, _Runs((run,))])
        return groups

    def _probe_groups(
        self, side: int, rows: list[Row], mine: list[Patterns | None], groups: list[list], other: _Side, ts_index: int, out: list[Joined]
    ) -> None:
        window = self.window
        for (action, test, _), start, end, runs in groups:
            pairs = _probe(side, rows, ts_index, other, start, end, action, test, window)
            if pairs:
                out.append(Joined(mine, runs, pairs) if side == LEFT else Joined(runs, mine, pairs))

    def _dead(self, side: int, part: Partition, name: int) -> bool:
        """Does this slice's herald alone rule the predicate out, whatever the other side holds?"""
        dead = self._alone.get((side, name))
        if dead is None:
            pair = (part.herald, None) if side == LEFT else (None, part.herald)
            dead = self._alone[(side, name)] = self.reasoner.decide(*pair).verdict is Verdict.UNSATISFIABLE
        return dead

    def _configure(self, side: int, mine: Patterns | None, name: int, run: list):
        """The configurator: PredSAT's mode for a pair of heralds met for the first time."""
        names = (name, run[4]) if side == LEFT else (run[4], name)
        if len(self._pairs) >= DECISION_CACHE:
            self._pairs.clear()
            self._forget_full()
        theirs = run[1] if run[0] != ANONYMOUS else None
        decision = self.reasoner.decide(*((mine, theirs) if side == LEFT else (theirs, mine)))
        if decision.verdict is Verdict.UNSATISFIABLE:
            entry = _SKIPPED
        elif decision.verdict is Verdict.IMPLIED:
            entry = _PASSED
        else:
            entry = self._evaluate.get(decision.residual)
            if entry is None:
                test = compile_pair(decision.residual, *self.positions)
                entry = self._evaluate[decision.residual] = (_EVALUATE, test, _EVALUATE.value)
        self._pairs[names] = entry
        self.decisions += 1
        return entry

    @property
    def skip_counts(self) -> tuple[int, int]:
        """(probe work skipped by heralds, all probe work) so far, in pairs met: the counts behind
        ``skip_fraction``, which a meter differences per observation interval (``adapters.herald_meter``)."""
        return self._work[0], self._work[1]

    @property
    def skip_fraction(self) -> float | None:
        """Measured: the fraction of probe work (pairs of a new tuple and a state tuple met) that heralds skipped,
        the cost model's ``skip`` for a join (``costmodel.heralds.measured_effect``); None before any probe."""
        skipped, total = self._work
        return skipped / total if total else None

    @property
    def met(self) -> Counter[JoinAction]:
        """How often a slice met a run of the other side's window, per mode (each meeting costs one lookup)."""
        return Counter({a: self._met[a.value] for a in JoinAction if self._met[a.value]})


def _same(a: list[list], b: list[list]) -> bool:
    """Do two slices meet the same groups (same modes over the same index ranges)?"""
    return len(a) == len(b) and all(x[0] is y[0] and x[1] == y[1] and x[2] == y[2] for x, y in zip(a, b))


@lru_cache(maxsize=4096)
def _hull(a: Patterns | None, b: Patterns | None) -> Patterns | None:
    """Cached: the runs in a window carry recurring heralds, so the same hulls come up again and again."""
    return None if a is None or b is None else hull(a, b)


def time_batches(stream: Sequence[Any], ts_index: int, bounds: Sequence[Any]) -> list[list[Any]]:
    """Cut a (punctuated) stream in timestamp order into ``len(bounds) + 1`` micro-batches: batch i holds the
    rows with ``bounds[i-1] ≤ ts < bounds[i]``; a herald goes with the row after it."""
    out: list[list[Any]] = [[] for _ in range(len(bounds) + 1)]
    i, pending = 0, []
    for item in stream:
        if item.__class__ is Herald:
            pending.append(item)
            continue
        t = item[ts_index]
        while i < len(bounds) and t >= bounds[i]:
            i += 1
        if pending:
            out[i].extend(pending)
            pending = []
        out[i].append(item)
    out[i].extend(pending)
    return out
