"""The baseline policy of paper 001 §4.3: one shared fraction, granularities first.

All windows and granularities sit at the same fraction f of their ranges.
A rough pass tries f = (p − j)/p for j = 0…p and stops at the first f whose
estimate fits both bounds; the granularities stay there. Then the window
fraction alone is refined by bisection between that f and 1. This is the
yardstick better policies are measured against, so it is kept literal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Decision, PolicyInput, infeasible_at_minimum


@dataclass(frozen=True)
class PaperBisection:
    name = "paper-bisection"
    steps: int = 10
    """p: the number of granularity steps of the rough pass (≥ 1)."""
    tolerance: float = 1e-3
    """Width of the final bisection bracket on the window fraction."""

    def __post_init__(self) -> None:
        if not (isinstance(self.steps, int) and self.steps >= 1):
            raise ValueError(f"steps must be a whole number ≥ 1, got {self.steps!r}")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must be in (0, 1), got {self.tolerance!r}")

    def decide(self, given: PolicyInput) -> Decision:
        problem, bounds = given.problem, given.bounds
        n = len(problem.queries)

        def at(fw: float, fg: float):
            return problem.evaluate(np.full(n, fw), np.full(n, fg), given.stream_d)

        evaluations = 0
        for j in range(self.steps + 1):
            f_gran = (self.steps - j) / self.steps
            outcome = at(f_gran, f_gran)
            evaluations += 1
            if outcome.fits(bounds):
                break
        else:
            return self._decision(problem, 0.0, 0.0, outcome, False, infeasible_at_minimum(problem, bounds, outcome),
                                  evaluations)

        low, high = f_gran, 1.0
        best = outcome
        top = at(high, f_gran)
        evaluations += 1
        if top.fits(bounds):
            low, best = high, top
        while high - low > self.tolerance:
            middle = (low + high) / 2
            candidate = at(middle, f_gran)
            evaluations += 1
            if candidate.fits(bounds):
                low, best = middle, candidate
            else:
                high = middle
        reason = f"granularity fraction {f_gran:.3g} after {j} step(s), window fraction {low:.4g} by bisection"
        return self._decision(problem, low, f_gran, best, True, reason, evaluations)

    def _decision(self, problem, fw, fg, outcome, feasible, reason, evaluations) -> Decision:
        n = len(problem.queries)
        return Decision(
            policy=self.name,
            feasible=feasible,
            fw=np.full(n, fw),
            fg=np.full(n, fg),
            outcome=outcome,
            weighted_qos=float(problem.weighted_qos(outcome.qos)),
            reason=reason,
            details={"evaluations": evaluations},
        )
