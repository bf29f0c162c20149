"""Admission control (paper 001 §4.1.1).

A new query is admitted when some setting of all queries, the new one
included, fits the bounds without taking any query below its QoS minimum —
that is exactly when the all-minimum setting fits, because every estimate
grows with the fractions (a query that may shed load is at its minimum when
it sheds the most its range allows). Otherwise it is rejected with the shortfall, so the
operator knows how much more memory or CPU the query would need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import Bounds, Problem


@dataclass(frozen=True)
class Admission:
    query: str
    admitted: bool
    reason: str
    memory_at_minimum: float
    cpu_at_minimum: float
    memory_shortfall: float
    """Bytes missing from the usable memory bound (0 when admitted)."""
    cpu_shortfall: float
    """Cost units missing from the usable CPU bound (0 when admitted)."""


def admit(problem: Problem, bounds: Bounds, candidate: str, stream_d: np.ndarray | None = None) -> Admission:
    """Decide whether ``candidate`` (already part of ``problem``) can join the running queries."""
    if candidate not in problem.queries:
        raise LookupError(f"query {candidate!r} is not part of the problem; queries: {', '.join(problem.queries[:10])}")
    n = len(problem.queries)
    lowest = problem.evaluate(np.zeros(n), np.zeros(n), stream_d, fd=np.zeros(n) if problem.sheds else None)
    memory, cpu = float(lowest.total_memory), float(lowest.total_cpu)
    short_memory = max(0.0, memory - bounds.usable_memory)
    short_cpu = max(0.0, cpu - bounds.usable_cpu)
    if short_memory == 0 and short_cpu == 0:
        reason = f"admitted: with every query at its QoS minimum the estimate is {memory:,.0f} B and {cpu:.4g} CPU"
        return Admission(candidate, True, reason, memory, cpu, 0.0, 0.0)
    missing = []
    if short_memory:
        missing.append(f"{short_memory:,.0f} B of memory")
    if short_cpu:
        missing.append(f"{short_cpu:.4g} CPU units")
    reason = (
        f"rejected {candidate!r}: even with every query at its QoS minimum the bounds lack "
        + " and ".join(missing)
        + f" (usable: {bounds.usable_memory:,.0f} B, {bounds.usable_cpu:.4g} CPU)"
    )
    return Admission(candidate, False, reason, memory, cpu, short_memory, short_cpu)
