"""A multi-modal windowed join of two streams on the single-process host (paper 002 §V.C).

Why not armd's n-way join (``migrations/join``): that pipeline is a hash
equi-join on one key, and a hash probe never touches a partner with another
key, so it has nothing to skip. Heralds pay off where the join predicate
must be evaluated pair by pair — inequalities, bands, the paper's
``flBelow.temp * 1.25 ≤ flAbove.temp`` — so this join evaluates a
conjunctive predicate over the pairs in the window (a nested-loop symmetric
join, as in the paper's engine), and keeps each side's window state as a
run of partitions in arrival order.

Per pair of partitions (left id, right id) the control table holds one
mode, decided by PredSAT on the two heralds and cached by their patterns:

* skip (join data skipping) — the pair is never looked at;
* pass (join simplification) — every pair in the window is a result, no
  predicate is evaluated;
* evaluate — the residual predicate is evaluated per pair.

A tuple whose own herald already contradicts the predicate, whatever the
other side holds, is neither probed nor stored. Anonymous partitions
(id 0) are evaluated in full. Each side remembers, for its latest
partition, what it joins with (the other side's runs that are not skipped,
grouped by mode) until the other side gains or loses a run, so a tuple
does not look its modes up run by run. The output is (left row, right
row) pairs: handing the pair of partition ids on to a further join
(§V.D) is not built.

Window semantics (the same in ``regular_join`` and in the tests' oracle):
events are processed in timestamp order, ties left before right; a pair
``(l, r)`` is a result when its predicate holds and ``|l.ts − r.ts| < W``;
it is emitted once, when the later of the two arrives.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, deque
from enum import Enum
from heapq import merge
from itertools import chain
from typing import Any, Callable, Iterable, Mapping, Sequence

from .herald import Patterns
from .partitioner import ANONYMOUS, Partition
from .predicates import Atom, compile_pair
from .predsat import DECISION_CACHE, JoinReasoner, Verdict
from .satisfiability import Domain

Row = tuple[Any, ...]
LEFT, RIGHT = 0, 1


class JoinAction(Enum):
    PASS = 0
    SKIP = 1
    EVALUATE = 2


_PASS, _SKIP = JoinAction.PASS, JoinAction.SKIP
_PASSED, _SKIPPED = (_PASS, None), (_SKIP, None)


class _Run:
    """Consecutive tuples of one partition in one side's window."""

    __slots__ = ("pid", "patterns", "rows", "ts", "modes")

    def __init__(self, pid: int, patterns: Patterns | None) -> None:
        self.pid = pid
        self.patterns = patterns
        self.rows: list[Row] = []
        self.ts: list[float] = []
        self.modes: dict[int, tuple[JoinAction, Callable | None]] = {}
        """This run's column of the control table: the mode against each partition id of the other side."""


class MultiModalJoin:
    """``L ⋈_P R`` over partitions, windowed by ``window`` on each side's ``ts`` attribute."""

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
        if not window > 0:
            raise ValueError(f"window must be positive, got {window!r}")
        self.reasoner = JoinReasoner(predicate, domain)
        self.positions = (dict(left), dict(right))
        self.ts_index = (left[ts], right[ts])
        self.window = window
        self.full = compile_pair(self.reasoner.predicate, left, right)
        self.runs: tuple[deque[_Run], deque[_Run]] = (deque(), deque())
        self.control: dict[tuple[int, int], tuple[JoinAction, Callable[[Row, Row], bool] | None]] = {}
        self._pairs: dict[tuple[Patterns | None, Patterns | None], tuple[JoinAction, Callable | None]] = {}
        self._evaluate: dict[tuple[Atom, ...], tuple[JoinAction, Callable]] = {}
        """One entry per distinct residual, so runs in the same mode are recognised by identity."""
        self._alone: dict[tuple[int, Patterns | None], bool] = {}
        """Whether a herald alone rules the predicate out, by side and patterns."""
        self._dead = [(ANONYMOUS, False), (ANONYMOUS, False)]
        """Per side, the last partition id decided alone and whether its herald rules the predicate out
        (a side's partitions arrive one after the other, so one entry per side is enough)."""
        self._version = [0, 0]
        """Per side, bumped whenever the side gains or loses a run (which invalidates the other side's plan)."""
        self._plans: list[tuple | None] = [None, None]
        """Per side, the last tuple's partition id, the other side's version and its grouping (``_plan``)."""
        self.pairs: Counter[JoinAction] = Counter()
        """Partition pairs met, per mode."""
        self.dropped = 0
        """Tuples neither probed nor stored."""

    def insert(
        self, side: int, pid: int, patterns: Patterns | None, row: Row, out: list[tuple[Row, Row]] | None = None
    ) -> list[tuple[Row, Row]]:
        """One tuple of partition ``pid`` arrives on ``side``; the new (left, right) results are appended
        to ``out`` (a new list when not given), which is returned."""
        t = row[self.ts_index[side]]
        horizon = t - self.window
        for runs in self.runs:
            if runs and runs[0].ts[-1] <= horizon:
                self._expire(horizon)
                break
        if pid != ANONYMOUS:
            known_pid, dead = self._dead[side]
            if known_pid != pid:
                dead = self._decide_alone(side, pid, patterns)
            if dead:
                self.dropped += 1
                return [] if out is None else out
        if out is None:
            out = []
        plan = self._plans[side]
        if plan is None or plan[0] != pid or plan[1] != self._version[1 - side]:
            plan = self._plan(side, pid, patterns)
        groups, first = plan[2], plan[3]
        if first is not None and first.ts[0] <= horizon:  # only the oldest run can hold expired tuples
            live = first.rows[bisect_right(first.ts, horizon) :]
            groups = [(groups[0][0], [live, *groups[0][1][1:]]), *groups[1:]]
        for (action, test), lists in groups:
            partners = lists[0] if len(lists) == 1 else chain.from_iterable(lists)
            if side == LEFT:
                if action is _PASS:
                    out.extend([(row, r) for r in partners])
                else:
                    out.extend([(row, r) for r in partners if test(row, r)])
            elif action is _PASS:
                out.extend([(l, row) for l in partners])
            else:
                out.extend([(l, row) for l in partners if test(l, row)])
        runs = self.runs[side]
        if not runs or runs[-1].pid != pid:
            runs.append(_Run(pid, patterns))
            self._version[side] += 1
        last = runs[-1]
        last.rows.append(row)
        last.ts.append(t)
        return out

    def _plan(self, side: int, pid: int, patterns: Patterns | None) -> tuple:
        """What a tuple of ``pid`` joins with: the other side's runs not skipped, grouped by consecutive mode.

        Kept until the other side gains or loses a run: the rows lists are
        the runs' own, so tuples appended to them since are seen.
        """
        groups: list[tuple[tuple, list[list[Row]]]] = []
        first = None
        for run in self.runs[1 - side]:
            entry = run.modes.get(pid)
            if entry is None:
                entry = self._configure(side, pid, patterns, run)
            if entry[0] is _SKIP:
                continue
            if not groups:
                first = run
            if groups and groups[-1][0] is entry:  # consecutive runs in the same mode are joined in one pass
                groups[-1][1].append(run.rows)
            else:
                groups.append((entry, [run.rows]))
        plan = self._plans[side] = (pid, self._version[1 - side], groups, first)
        return plan

    def feed(self, side: int, part: Partition) -> list[tuple[Row, Row]]:
        out: list[tuple[Row, Row]] = []
        for row in part.rows:
            self.insert(side, part.pid, part.herald, row, out)
        return out

    def _expire(self, horizon: float) -> None:
        for side, runs in enumerate(self.runs):
            while runs and runs[0].ts[-1] <= horizon:
                gone = runs.popleft()
                self._version[side] += 1
                if not any(r.pid == gone.pid for r in runs):
                    self._release(gone.pid, side)

    def _release(self, pid: int, side: int) -> None:
        """A partition left its side's window: its control-table entries go."""
        for key in [k for k in self.control if k[side] == pid]:
            del self.control[key]
        for run in self.runs[1 - side]:
            run.modes.pop(pid, None)

    def _decide_alone(self, side: int, pid: int, patterns: Patterns | None) -> bool:
        """Does this partition's herald alone rule the predicate out, whatever the other side holds?"""
        dead = self._alone.get((side, patterns))
        if dead is None:
            if len(self._alone) >= DECISION_CACHE:
                self._alone.clear()
            left, right = (patterns, None) if side == LEFT else (None, patterns)
            dead = self._alone[(side, patterns)] = self.reasoner.decide(left, right).verdict is Verdict.UNSATISFIABLE
        self._dead[side] = (pid, dead)
        return dead

    def _configure(self, side: int, pid: int, patterns: Patterns | None, run: _Run):
        """The configurator: the mode for (this partition, a partition in the other side's window)."""
        mine = patterns if pid != ANONYMOUS else None
        theirs = run.patterns if run.pid != ANONYMOUS else None
        pair = (mine, theirs) if side == LEFT else (theirs, mine)
        entry = self._pairs.get(pair)
        if entry is None:
            if len(self._pairs) >= DECISION_CACHE:
                self._pairs.clear()
            decision = self.reasoner.decide(*pair)
            if decision.verdict is Verdict.UNSATISFIABLE:
                entry = _SKIPPED
            elif decision.verdict is Verdict.IMPLIED:
                entry = _PASSED
            else:
                entry = self._evaluate.get(decision.residual)
                if entry is None:
                    test = compile_pair(decision.residual, *self.positions)
                    entry = self._evaluate[decision.residual] = (JoinAction.EVALUATE, test)
            self._pairs[pair] = entry
        run.modes[pid] = entry
        self.control[(pid, run.pid) if side == LEFT else (run.pid, pid)] = entry
        self.pairs[entry[0]] += 1
        return entry


def merged_events(left: Iterable[Partition], right: Iterable[Partition], ts: tuple[int, int]) -> Iterable[tuple]:
    """(side, pid, patterns, row) for both sides' partition slices, in timestamp order, left first on ties."""

    def events(side: int, parts: Iterable[Partition]):
        for part in parts:
            for row in part.rows:
                yield (row[ts[side]], side, part.pid, part.herald, row)

    return merge(events(LEFT, left), events(RIGHT, right), key=lambda e: (e[0], e[1]))


def regular_join(
    left: Sequence[Row],
    right: Sequence[Row],
    predicate: Sequence[Atom],
    left_position: Mapping[str, int],
    right_position: Mapping[str, int],
    *,
    window: float,
    ts: str = "ts",
) -> list[tuple[Row, Row]]:
    """The unoptimised plan: the same symmetric windowed nested-loop join, every pair evaluated."""
    test = compile_pair(predicate, left_position, right_position)
    li, ri = left_position[ts], right_position[ts]
    states: tuple[deque[Row], deque[Row]] = (deque(), deque())
    out: list[tuple[Row, Row]] = []
    tagged = merge(((r[li], LEFT, r) for r in left), ((r[ri], RIGHT, r) for r in right), key=lambda e: (e[0], e[1]))
    for t, side, row in tagged:
        horizon = t - window
        for state, index in ((states[LEFT], li), (states[RIGHT], ri)):
            while state and state[0][index] <= horizon:
                state.popleft()
        if side == LEFT:
            out.extend((row, r) for r in states[RIGHT] if test(row, r))
        else:
            out.extend((l, row) for l in states[LEFT] if test(l, row))
        states[side].append(row)
    return out
