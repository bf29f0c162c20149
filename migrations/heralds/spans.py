"""A select's plan per span of event time, for engines that see a batch as a set, not a sequence (paper 002 §IV).

On Spark a micro-batch has no order to cut into partitions by position, but
a time-based herald needs none: it describes the tuples whose timestamp lies
in ``[start, start + seconds)``. The timeline is cut at every herald's start
and end into **spans**; in each span the heralds covering it are in force
together, so their patterns are intersected (the merged herald), and
PredSAT decides the span once — skip, pass, or evaluate a residual. A span
is a partition whose id is its place on the timeline: the plan is a
``CASE`` over the timestamp, which the engine evaluates per row without any
Python. Spans where overlapping heralds contradict each other are left to
the full predicate (a promise that cannot hold is not trusted to skip).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .herald import Herald, Patterns, hull, intersect
from .predicates import Atom
from .predsat import SelectReasoner, Verdict


@dataclass(frozen=True)
class Span:
    """Tuples with ``start ≤ ts < end`` are under ``patterns``; ``verdict`` and ``residual`` are PredSAT's."""

    start: float
    end: float
    patterns: Patterns
    verdict: Verdict
    residual: tuple[Atom, ...]


def spans(heralds: Sequence[Herald], reasoner: SelectReasoner) -> list[Span]:
    """The plan per span for time-based heralds (each with ``ts`` and a time lifespan), in time order."""
    covers = [(h.ts, h.ts + h.lifespan.value, h.patterns) for h in heralds if h.lifespan.kind == "time"]
    cuts = sorted({t for start, end, _ in covers for t in (start, end)})
    out: list[Span] = []
    for start, end in zip(cuts, cuts[1:]):
        merged: Patterns | None = None
        for s, e, patterns in covers:
            if s <= start and end <= e:
                merged = patterns if merged is None else intersect(merged, patterns)
        if merged is None or any(r.empty for _, r in merged):
            continue  # no herald here, or heralds that contradict: the full predicate decides
        decision = reasoner.decide(merged)
        if out and out[-1].end == start and (out[-1].verdict, out[-1].residual) == (decision.verdict, decision.residual):
            last = out.pop()  # adjacent spans with one plan are one branch for the engine; the hull stays truthful
            start, merged = last.start, hull(last.patterns, merged)
        out.append(Span(start, end, merged, decision.verdict, decision.residual))
    return out
