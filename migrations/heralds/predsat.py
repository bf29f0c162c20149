"""PredSAT: what the herald in force proves about a query's predicate (paper 002 §III.A–D).

Given a conjunctive predicate P and the ranges D of a herald, there are
three outcomes (the paper's Table I), for a select and for a join alike:

* P ∧ D is unsatisfiable — no tuple under the herald can qualify: *select
  data skipping* drops the partition before the select, *join data
  skipping* neither probes nor stores the pair (or the tuple, when its own
  herald already rules out every partner);
* D implies P — every such tuple qualifies: *select elimination* passes the
  partition without evaluating, *join simplification* pairs the tuples
  without evaluating the predicate (a Cartesian product of the matching
  partitions);
* otherwise the predicate is evaluated — but only its *residual*: the atoms
  that D and the other remaining atoms do not already imply.

The query's inequality graph is built once (``InequalityGraph``); each
herald only refines its minimum ranges (``refine``), which is the
incremental step the paper's PredSAT takes. The residual is found by
implication tests, each an unsatisfiability test of the predicate, the
herald and one negated atom. Decisions depend only on the patterns, so the
operators cache them by the patterns (heralds recur in practice).

``logical_plan`` names the SQO logical plan a decision selects (§III.D):
with ``∪`` for union all, ``σ_p(S ∪ S_h) = σ_p(S) ∪ S_h`` for elimination,
``σ_p(S)`` for skipping; for a join of partitions h1, h2 either
``S_h1 × S_h2`` (simplification) or nothing (skipping) replaces
``S_h1 ⋈_p S_h2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Sequence

from .herald import Patterns
from .patterns import Range
from .predicates import Atom, attributes_of
from .satisfiability import (
    NO_HIGH,
    NO_LOW,
    Bound,
    Domain,
    InequalityGraph,
    Refined,
    implied_by_bounds,
    implies,
    range_atoms,
    range_bounds,
)


DECISION_CACHE = 4096
"""How many decisions an operator keeps by herald patterns before it starts over (heralds that are
new every time would otherwise grow the cache without end)."""


class Verdict(Enum):
    UNSATISFIABLE = "unsatisfiable"
    IMPLIED = "implied"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class SelectDecision:
    """What to do with a partition: the verdict and the atoms still to evaluate."""

    verdict: Verdict
    residual: tuple[Atom, ...]
    """Empty when implied; all of P minus what the herald makes redundant when unknown."""
    visited: int = 0
    """Collapsed graph nodes the incremental refinement tightened (PredSAT's work for this herald)."""


SELECT_PLANS = {
    Verdict.UNSATISFIABLE: "select data skipping: σ_p(S ∪ S_h) = σ_p(S)",
    Verdict.IMPLIED: "select elimination: σ_p(S ∪ S_h) = σ_p(S) ∪ S_h",
    Verdict.UNKNOWN: "regular select: σ_p'(S_h) with p' the residual",
}
JOIN_PLANS = {
    Verdict.UNSATISFIABLE: "join data skipping: S_h1 ⋈_p S_h2 is dropped",
    Verdict.IMPLIED: "join simplification: S_h1 ⋈_p S_h2 = S_h1 × S_h2",
    Verdict.UNKNOWN: "regular join: S_h1 ⋈_p' S_h2 with p' the residual",
}


class Reasoner:
    """Decides a conjunctive predicate against herald ranges; shared by selects and joins."""

    def __init__(self, predicate: Sequence[Atom], domain: Domain = Domain.REAL) -> None:
        self.predicate = tuple(predicate)
        self.domain = domain
        self.graph = InequalityGraph(self.predicate, domain)
        self.attributes = attributes_of(self.predicate)
        self.without = tuple(
            InequalityGraph(self.predicate[:i] + self.predicate[i + 1 :], domain) for i in range(len(self.predicate))
        )
        """without[i]: the graph of the predicate minus its i-th atom, for Theorem 3.1's implication test."""
        self.linked = tuple(
            bool(a.attributes() & attributes_of(self.predicate[:i] + self.predicate[i + 1 :]))
            for i, a in enumerate(self.predicate)
        )
        """linked[i]: does another atom share an attribute with the i-th? If not, the other atoms cannot add to
        what the herald's own ranges say about it (the herald constrains each attribute on its own), so the
        implication test without it needs no refinement: a herald that proves nothing costs one refinement."""
        self.slow_paths = 0
        """Residuals that needed the general, one-atom-at-a-time search."""

    def decide_ranges(self, ranges: Mapping[str, Range]) -> SelectDecision:
        if not self.graph.satisfiable:
            return SelectDecision(Verdict.UNSATISFIABLE, (), 0)
        refined = self.graph.refine(ranges)
        if not refined.satisfiable:
            return SelectDecision(Verdict.UNSATISFIABLE, (), refined.visited)
        relevant = {a: r for a, r in ranges.items() if a in self.attributes}
        residual = self._residual(relevant)
        return SelectDecision(Verdict.IMPLIED if not residual else Verdict.UNKNOWN, residual, refined.visited)

    def _residual(self, ranges: Mapping[str, Range]) -> tuple[Atom, ...]:
        """The atoms still to evaluate under the herald (P ∧ D known satisfiable).

        Atoms the herald's ranges imply on their own go first (any number
        of them at once: each holds for every tuple under the herald). Of the
        rest, an atom that the herald and the *other* atoms imply is found
        with the precompiled graph without it, refined by the herald, and
        Theorem 3.1's test. One such atom can go; two or more might each
        be implied only by the other, so then the general search decides.
        """
        domain = self.domain
        alone = {a: range_bounds(r, domain) for a, r in ranges.items()}

        def herald_bounds(x: str) -> tuple[Bound, Bound]:
            return alone.get(x, (NO_LOW, NO_HIGH))

        rest = [i for i, a in enumerate(self.predicate) if not implied_by_bounds(a, herald_bounds)]
        if not rest:
            return ()
        by_others = []
        for i in rest:
            if not self.linked[i]:
                continue
            graph = self.without[i]
            refined = graph.refine(ranges)

            def bounds(x: str, refined: Refined = refined) -> tuple[Bound, Bound]:
                return refined.bounds(x) if refined.graph.index(x) is not None else herald_bounds(x)

            if implied_by_bounds(self.predicate[i], bounds, graph.reaches):
                by_others.append(i)
        if len(by_others) <= 1:
            return tuple(self.predicate[i] for i in rest if i not in by_others)
        self.slow_paths += 1
        return self._search(range_atoms(ranges), [self.predicate[i] for i in rest])

    def _search(self, herald: tuple[Atom, ...], kept: list[Atom]) -> tuple[Atom, ...]:
        """Drop, one at a time, every atom that the herald and the atoms still kept imply."""
        i = 0
        while i < len(kept):
            others = (*herald, *kept[:i], *kept[i + 1 :])
            if implies(others, kept[i], self.domain):
                del kept[i]
            else:
                i += 1
        return tuple(kept)


class SelectReasoner(Reasoner):
    """PredSAT for a select over one stream: herald patterns name that stream's attributes."""

    def decide(self, patterns: Patterns | Mapping[str, Range] | None) -> SelectDecision:
        """``None`` is an anonymous partition: nothing is known beyond the predicate itself."""
        if patterns is None:
            if not self.graph.satisfiable:
                return SelectDecision(Verdict.UNSATISFIABLE, ())
            return SelectDecision(Verdict.UNKNOWN, self.predicate)
        return self.decide_ranges(dict(patterns))


class JoinReasoner(Reasoner):
    """PredSAT for a join: the predicate names ``L.a`` / ``R.b``; heralds name their own stream's attributes."""

    def __init__(
        self, predicate: Sequence[Atom], domain: Domain = Domain.REAL, *, left: str = "L", right: str = "R"
    ) -> None:
        super().__init__(predicate, domain)
        self.left, self.right = left, right
        self._qualified: tuple[dict[str, str], dict[str, str]] = ({}, {})
        """Per side, attribute → its name in the predicate (``a`` → ``L.a``), made once per attribute."""

    def decide(self, left: Patterns | None, right: Patterns | None) -> SelectDecision:
        """The pair's decision; ``None`` on a side means that side is anonymous (or not yet known)."""
        ranges: dict[str, Range] = {}
        for prefix, qualified, patterns in ((self.left, self._qualified[0], left), (self.right, self._qualified[1], right)):
            for attribute, r in patterns or ():
                name = qualified.get(attribute)
                if name is None:
                    name = qualified[attribute] = f"{prefix}.{attribute}"
                ranges[name] = r
        return self.decide_ranges(ranges)
