"""The multi-modal select: one physical select serving several logical plans (paper 002 §V.A–B).

A select holds a control table from partition id to an action — pass,
skip or evaluate (the paper's flags 0, 1, 2) — and, for evaluate, the
compiled residual predicate. The table is filled by the operator's
configurator the first time a partition shows up, from PredSAT's decision
for the partition's herald (cached by the herald's patterns, and made once
per projection of them on the predicate's attributes), and emptied
as partitions close. Anonymous partitions (id 0) are always evaluated in
full. Output keeps the partition ids, so operators downstream can be
configured the same way without partitioning again (§V.D).

Every partition id in the table belongs to one logical SQO plan at a time;
``scopes`` lists them, which is the set of concurrent logical plans and the
substreams each one serves (§IV).
"""

from __future__ import annotations

from collections import Counter
from enum import Enum
from typing import Any, Callable, Iterable, Mapping, Sequence

from .herald import Herald, Patterns
from .partitioner import ANONYMOUS, Partition, partition
from .predicates import Atom, attributes_of, compile_conjunction
from .predsat import DECISION_CACHE, SELECT_PLANS, SelectReasoner, Verdict
from .satisfiability import Domain


class Action(Enum):
    PASS = 0
    SKIP = 1
    EVALUATE = 2


_ACTION = {Verdict.IMPLIED: Action.PASS, Verdict.UNSATISFIABLE: Action.SKIP, Verdict.UNKNOWN: Action.EVALUATE}
_PASS, _SKIP, _EVALUATE = Action.PASS.value, Action.SKIP.value, Action.EVALUATE.value
Row = tuple[Any, ...]


class MultiModalSelect:
    """σ_P over partitions; ``position`` maps attribute names to row indices."""

    def __init__(self, predicate: Sequence[Atom], position: Mapping[str, int], domain: Domain = Domain.REAL) -> None:
        self.reasoner = SelectReasoner(predicate, domain)
        self.position = dict(position)
        self.full = compile_conjunction(self.reasoner.predicate, self.position)
        self.control: dict[int, tuple[int, Callable[[Row], bool] | None, Verdict]] = {}
        """Partition id → (action flag, compiled residual for evaluate, PredSAT's verdict)."""
        self._decided: dict[Patterns, tuple[int, Callable[[Row], bool] | None, Verdict]] = {}
        self._projected: dict[Patterns, tuple[int, Callable[[Row], bool] | None, Verdict]] = {}
        self.attributes = frozenset(attributes_of(self.reasoner.predicate))
        """The attributes the predicate mentions: the only ones of a herald's patterns a decision depends on."""
        self._counts = [0, 0, 0]
        self._compiled: dict[tuple[Atom, ...], Callable[[Row], bool]] = {self.reasoner.predicate: self.full}
        """Compiled residuals: many heralds leave the same atoms to evaluate, and compiling costs more than deciding
        (a herald that proves nothing leaves the whole predicate, compiled already)."""
        self.decisions = 0
        """PredSAT runs (cache misses of the projected patterns)."""
        self.partitions = 0
        """Partitions configured (herald partitions seen; anonymous ones are not counted)."""

    def configure(self, pid: int, patterns: Patterns) -> tuple[int, Callable[[Row], bool] | None, Verdict]:
        """The configurator: decide for a new partition and enter it in the control table.

        Decisions are cached by the patterns, and PredSAT runs once per distinct projection of them on the
        predicate's attributes: a range on an attribute P does not mention cannot change the decision, so a
        herald that says nothing about P's attributes gets the full predicate, as an anonymous partition does."""
        self.partitions += 1
        entry = self._decided.get(patterns)
        if entry is None:
            if len(self._decided) >= DECISION_CACHE:
                self._decided.clear()
                self._projected.clear()
            projection = tuple(p for p in patterns if p[0] in self.attributes)
            entry = self._projected.get(projection)
            if entry is None:
                entry = self._projected[projection] = self._decide(projection)
            self._decided[patterns] = entry
        self.control[pid] = entry
        return entry

    def _decide(self, patterns: Patterns) -> tuple[int, Callable[[Row], bool] | None, Verdict]:
        decision = self.reasoner.decide(patterns)
        self.decisions += 1
        residual = None
        if decision.verdict is Verdict.UNKNOWN:
            residual = self._compiled.get(decision.residual)
            if residual is None:
                residual = self._compiled[decision.residual] = compile_conjunction(decision.residual, self.position)
        return (_ACTION[decision.verdict].value, residual, decision.verdict)

    def process(self, part: Partition) -> Partition | None:
        """One partition slice in, its qualifying rows out (same id); None when nothing qualifies."""
        pid, herald, rows = part
        if pid == ANONYMOUS:
            kept = [r for r in rows if self.full(r)]
            self._counts[_EVALUATE] += len(rows)
            return Partition(pid, None, kept) if kept else None
        entry = self.control.get(pid)
        if entry is None:
            entry = self.configure(pid, herald)  # type: ignore[arg-type]
        flag, residual, _ = entry
        self._counts[flag] += len(rows)
        if flag == _SKIP:
            return None
        if flag == _PASS:
            return part
        kept = [r for r in rows if residual(r)]  # type: ignore[misc]
        return partition(pid, herald, kept) if kept else None

    def process_all(self, parts: Iterable[Partition], closed: Iterable[int] = ()) -> list[Partition]:
        """``process`` over a batch's slices: the non-empty output slices, in stream order; then the partitions in
        ``closed`` leave the control table (``release``)."""
        out = [q for q in map(self.process, parts) if q is not None]
        self.release(closed)
        return out

    @property
    def tuples(self) -> Counter[Action]:
        """Input tuples per action taken (anonymous ones count as evaluated)."""
        return Counter({a: self._counts[a.value] for a in Action if self._counts[a.value]})

    @property
    def skip_counts(self) -> tuple[int, int]:
        """(input tuples not evaluated, all input tuples) so far: the counts behind ``skip_fraction``, which a
        meter differences per observation interval (``adapters.herald_meter``)."""
        return self._counts[_SKIP] + self._counts[_PASS], sum(self._counts)

    @property
    def skip_fraction(self) -> float | None:
        """Measured: the fraction of input tuples not evaluated (skipped or passed), the cost model's ``skip``
        for a select (``costmodel.heralds.measured_effect``); None before any tuple."""
        skipped, total = self.skip_counts
        return skipped / total if total else None

    def release(self, pids: Iterable[int]) -> None:
        """Closed partitions leave the control table."""
        for pid in pids:
            self.control.pop(pid, None)

    def scopes(self) -> dict[str, list[int]]:
        """The logical SQO plans in use and the partition ids each one serves."""
        out: dict[str, list[int]] = {}
        for pid, (_, _, verdict) in sorted(self.control.items()):
            out.setdefault(SELECT_PLANS[verdict], []).append(pid)
        return out


def strip_heralds(stream: Iterable[Any]) -> list[Row]:
    """The data rows of a punctuated stream (what a plan that ignores heralds sees)."""
    return [r for r in stream if r.__class__ is not Herald]


def regular_select(rows: Sequence[Row], predicate: Sequence[Atom], position: Mapping[str, int]) -> list[Row]:
    """The unoptimised plan and the oracle: evaluate the whole predicate on every row."""
    keep = compile_conjunction(predicate, position)
    return [r for r in rows if keep(r)]
