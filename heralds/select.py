"""The multi-modal select: one physical select serving several logical plans (paper 002 §V.A–B).

A select holds a control table from partition id to an action — pass,
skip or evaluate (the paper's flags 0, 1, 2) — and, for evaluate, the
compiled residual predicate. The table is filled by the operator's
configurator the first time a partition shows up, from PredSAT's decision
for the partition's herald (cached by the herald's patterns), and emptied
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
from .partitioner import ANONYMOUS, Partition
from .predicates import Atom, compile_conjunction
from .predsat import DECISION_CACHE, SELECT_PLANS, SelectDecision, SelectReasoner, Verdict
from .satisfiability import Domain


class Action(Enum):
    PASS = 0
    SKIP = 1
    EVALUATE = 2


_ACTION = {Verdict.IMPLIED: Action.PASS, Verdict.UNSATISFIABLE: Action.SKIP, Verdict.UNKNOWN: Action.EVALUATE}
Row = tuple[Any, ...]


class MultiModalSelect:
    """σ_P over partitions; ``position`` maps attribute names to row indices."""

    def __init__(self, predicate: Sequence[Atom], position: Mapping[str, int], domain: Domain = Domain.REAL) -> None:
        self.reasoner = SelectReasoner(predicate, domain)
        self.position = dict(position)
        self.full = compile_conjunction(self.reasoner.predicate, self.position)
        self.control: dict[int, tuple[Action, Callable[[Row], bool] | None]] = {}
        self.plan: dict[int, Verdict] = {}
        self._decided: dict[Patterns, tuple[SelectDecision, Callable[[Row], bool] | None]] = {}
        self._counts = [0, 0, 0]
        self._compiled: dict[tuple[Atom, ...], Callable[[Row], bool]] = {}
        """Compiled residuals: many heralds leave the same atoms to evaluate, and compiling costs more than deciding."""
        self.decisions = 0
        """PredSAT runs (cache misses)."""

    def configure(self, pid: int, patterns: Patterns) -> tuple[Action, Callable[[Row], bool] | None]:
        """The configurator: decide for a new partition and enter it in the control table."""
        known = self._decided.get(patterns)
        if known is None:
            if len(self._decided) >= DECISION_CACHE:
                self._decided.clear()
            decision = self.reasoner.decide(patterns)
            self.decisions += 1
            residual = None
            if decision.verdict is Verdict.UNKNOWN:
                residual = self._compiled.get(decision.residual)
                if residual is None:
                    residual = self._compiled[decision.residual] = compile_conjunction(decision.residual, self.position)
            known = self._decided[patterns] = (decision, residual)
        entry = (_ACTION[known[0].verdict], known[1])
        self.control[pid] = entry
        self.plan[pid] = known[0].verdict
        return entry

    def process(self, part: Partition) -> Partition | None:
        """One partition slice in, its qualifying rows out (same id); None when nothing qualifies."""
        if part.pid == ANONYMOUS:
            rows = [r for r in part.rows if self.full(r)]
            self._counts[Action.EVALUATE.value] += len(part.rows)
            return Partition(part.pid, None, rows) if rows else None
        entry = self.control.get(part.pid)
        if entry is None:
            entry = self.configure(part.pid, part.herald)  # type: ignore[arg-type]
        action, residual = entry
        self._counts[action.value] += len(part.rows)
        if action is Action.SKIP:
            return None
        if action is Action.PASS:
            return part
        rows = [r for r in part.rows if residual(r)]  # type: ignore[misc]
        return Partition(part.pid, part.herald, rows) if rows else None

    @property
    def tuples(self) -> Counter[Action]:
        """Input tuples per action taken (anonymous ones count as evaluated)."""
        return Counter({a: self._counts[a.value] for a in Action if self._counts[a.value]})

    def release(self, pids: Iterable[int]) -> None:
        """Closed partitions leave the control table."""
        for pid in pids:
            self.control.pop(pid, None)
            self.plan.pop(pid, None)

    def scopes(self) -> dict[str, list[int]]:
        """The logical SQO plans in use and the partition ids each one serves."""
        out: dict[str, list[int]] = {}
        for pid, verdict in sorted(self.plan.items()):
            out.setdefault(SELECT_PLANS[verdict], []).append(pid)
        return out


def strip_heralds(stream: Iterable[Any]) -> list[Row]:
    """The data rows of a punctuated stream (what a plan that ignores heralds sees)."""
    return [r for r in stream if r.__class__ is not Herald]


def regular_select(rows: Sequence[Row], predicate: Sequence[Atom], position: Mapping[str, int]) -> list[Row]:
    """The unoptimised plan and the oracle: evaluate the whole predicate on every row."""
    keep = compile_conjunction(predicate, position)
    return [r for r in rows if keep(r)]
