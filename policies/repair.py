"""The last check of a decision: the exact total must fit, whatever the policy assumed.

A policy may reason with per-query estimates (the weighted policy prices
each query's options on its own). That is exact only when no query's cost
depends on another query's knobs; a query that reads a window owned by
another query breaks it. So every setting is checked against the exact
total of the whole plan before it is returned, and one that does not fit is
scaled down: all fractions times a common factor t, the largest t found by
a vectorised search that fits. Estimates never fall as a fraction rises, so
t = 0 (every query at its minimum) fits whenever anything does.
"""

from __future__ import annotations

import numpy as np

from .problem import Bounds, Outcome, Problem

_POINTS = 8
_ROUNDS = 5
"""Each round evaluates ``_POINTS`` factors at once; five rounds leave a gap of 8^-5 ≈ 3·10^-5."""


def fit_exactly(
    problem: Problem, bounds: Bounds, fw: np.ndarray, fg: np.ndarray, stream_d: np.ndarray | None = None,
    fd: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, Outcome, float]:
    """(fw, fg, outcome, t): the setting scaled by the largest factor t ≤ 1 whose exact total fits.

    t is 1 when the setting fits as it is, 0 when even the all-minimum setting
    does not fit (then the minimum is returned and the caller reports the shortfall).
    The drop fractions ``fd`` stay as they are (a query that sheds owns all its nodes,
    so its per-query estimate is exact).
    """
    outcome = problem.evaluate(fw, fg, stream_d, fd=fd)
    if outcome.fits(bounds):
        return fw, fg, outcome, 1.0
    low, high = 0.0, 1.0
    for _ in range(_ROUNDS):
        factors = np.linspace(low, high, _POINTS + 2)[1:-1]
        trial = problem.evaluate(fw[:, None] * factors, fg[:, None] * factors, stream_d, with_qos=False,
                                 fd=None if fd is None else np.repeat(fd[:, None], len(factors), axis=1))
        fitting = np.flatnonzero(trial.fits(bounds))
        if len(fitting):
            low = float(factors[fitting[-1]])
            high = float(factors[fitting[-1] + 1]) if fitting[-1] + 1 < len(factors) else high
        else:
            high = float(factors[0])
    scaled_w, scaled_g = fw * low, fg * low
    return scaled_w, scaled_g, problem.evaluate(scaled_w, scaled_g, stream_d, fd=fd), low
