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
does not look its modes up run by run; when that is every run of the
other side in one mode, it scans the side's one deque of live tuples.
The window expires tuple by tuple, as in ``regular_join``, so runs hold
live tuples only. The output is (left row, right row) pairs: handing
partition ids on to a further join (§V.D) is left to the caller (the
benchmark's chains cut the output into partitions announcing the hull of
their rows' heralds).

Window semantics (the same in ``regular_join`` and in the tests' oracle):
events are processed in timestamp order, ties left before right; a pair
``(l, r)`` is a result when its predicate holds and ``|l.ts − r.ts| < W``;
it is emitted once, when the later of the two arrives.
"""

from __future__ import annotations

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

    __slots__ = ("pid", "patterns", "rows", "modes")

    def __init__(self, pid: int, patterns: Patterns | None) -> None:
        self.pid = pid
        self.patterns = patterns
        self.rows: deque[Row] = deque()
        self.modes: dict[int, tuple[JoinAction, Callable | None]] = {}
        """This run's column of the control table: the mode against each partition id of the other side."""


class _Chain:
    """Several runs' rows iterated as one (re-iterable, unlike ``itertools.chain``, so a plan can keep it)."""

    __slots__ = ("lists",)

    def __init__(self, lists: list[deque[Row]]) -> None:
        self.lists = lists

    def __iter__(self):
        return chain.from_iterable(self.lists)


class WindowedJoin:
    """What every windowed ``L ⋈_P R`` here shares: each side's attribute positions, its ``ts`` column, the window.

    ``reasoner`` is PredSAT over the predicate (with the attributes it names on each side) for the multi-modal
    joins; the plain batch join, which decides nothing, passes ``reason=False``.
    """

    def __init__(self, predicate: Sequence[Atom], left: Mapping[str, int], right: Mapping[str, int], *, window: float,
                 ts: str = "ts", domain: Domain = Domain.REAL, reason: bool = True) -> None:
        if not window > 0:
            raise ValueError(f"window must be positive, got {window!r}")
        self.reasoner = JoinReasoner(predicate, domain) if reason else None
        self.positions = (dict(left), dict(right))
        self.ts_index = (left[ts], right[ts])
        self.window = window


class MultiModalJoin(WindowedJoin):
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
        super().__init__(predicate, left, right, window=window, ts=ts, domain=domain)
        self.full = compile_pair(self.reasoner.predicate, left, right)
        self.runs: tuple[deque[_Run], deque[_Run]] = (deque(), deque())
        self.window_rows: tuple[deque[Row], deque[Row]] = (deque(), deque())
        """Per side, every live tuple in arrival order (the runs' rows, concatenated): when a tuple joins with
        every run of the other side in one mode, it iterates this instead of chaining the runs."""
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
        if out is None:
            out = []
        self.run(((row[self.ts_index[side]], side, pid, patterns, row),), out)
        return out

    def run(self, events: Iterable[tuple], out: list[tuple[Row, Row]]) -> list[tuple[Row, Row]]:
        """Tuples in timestamp order as ``(ts, side, pid, patterns, row)`` events (``merged_events``); the
        new (left, right) results are appended to ``out``, which is returned.

        One loop for a whole stretch of events, with the state in locals: the per-tuple work of a herald
        partition (is it dead, is the plan current) is two comparisons, so it stays small next to the
        pair evaluations it saves.
        """
        window = self.window
        all_runs, flats, ts_index = self.runs, self.window_rows, self.ts_index
        lefts, rights = all_runs
        left_flat, right_flat = flats
        left_ts, right_ts = ts_index
        dead_by_side, plans, version = self._dead, self._plans, self._version
        for t, side, pid, patterns, row in events:
            horizon = t - window
            # expire tuple by tuple, as the plain join does, so every run holds live tuples only
            while left_flat and left_flat[0][left_ts] <= horizon:
                left_flat.popleft()
                first = lefts[0].rows
                first.popleft()
                if not first:
                    self._expire_run(LEFT)
            while right_flat and right_flat[0][right_ts] <= horizon:
                right_flat.popleft()
                first = rights[0].rows
                first.popleft()
                if not first:
                    self._expire_run(RIGHT)
            if pid != ANONYMOUS:
                known_pid, dead = dead_by_side[side]
                if known_pid != pid:
                    dead = self._decide_alone(side, pid, patterns)
                if dead:
                    self.dropped += 1
                    continue
            plan = plans[side]
            if plan is None or plan[0] != pid or plan[1] != version[1 - side]:
                plan = self._plan(side, pid, patterns)
            for (action, test), partners in plan[2]:
                if side == LEFT:
                    if action is _PASS:
                        out.extend([(row, r) for r in partners])
                    else:
                        out.extend([(row, r) for r in partners if test(row, r)])
                elif action is _PASS:
                    out.extend([(l, row) for l in partners])
                else:
                    out.extend([(l, row) for l in partners if test(l, row)])
            runs = all_runs[side]
            if not runs or runs[-1].pid != pid:
                runs.append(_Run(pid, patterns))
                version[side] += 1
            runs[-1].rows.append(row)
            flats[side].append(row)
        return out

    def _plan(self, side: int, pid: int, patterns: Patterns | None) -> tuple:
        """What a tuple of ``pid`` joins with: the other side's runs not skipped, grouped by consecutive mode.

        Kept until the other side gains or loses a run: the rows lists are
        the runs' own, so tuples appended to them since are seen.
        """
        groups: list[tuple[tuple, list[deque[Row]]]] = []
        others = self.runs[1 - side]
        for run in others:
            entry = run.modes.get(pid)
            if entry is None:
                entry = self._configure(side, pid, patterns, run)
            if entry[0] is _SKIP:
                continue
            if groups and groups[-1][0] is entry:  # consecutive runs in the same mode are joined in one pass
                groups[-1][1].append(run.rows)
            else:
                groups.append((entry, [run.rows]))
        flat = self.window_rows[1 - side]
        groups = [
            (entry, flat if len(lists) == len(others) > 1 else lists[0] if len(lists) == 1 else _Chain(lists))
            for entry, lists in groups
        ]
        plan = self._plans[side] = (pid, self._version[1 - side], groups)
        return plan

    def feed(self, side: int, part: Partition) -> list[tuple[Row, Row]]:
        out: list[tuple[Row, Row]] = []
        for row in part.rows:
            self.insert(side, part.pid, part.herald, row, out)
        return out

    def _expire_run(self, side: int) -> None:
        """The oldest run of ``side`` has no live tuple left: it goes, and with it its partition if no run remains."""
        runs = self.runs[side]
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
