"""What every policy takes and returns.

A policy is a pure function of its input: the compiled problem, the bounds,
the current source characteristics, its own state from the previous
decision, and the time. It returns a ``Decision`` (the chosen fractions and
values, their estimates and achieved QoS, a reason) and its next state. No
policy reads a clock, does IO or applies anything; guardrails and the daemon
do that around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .problem import Bounds, Outcome, Problem


@dataclass(frozen=True)
class PolicyInput:
    problem: Problem
    bounds: Bounds
    now: float
    """Application time of the decision (passed in; policies read no clock)."""
    stream_d: np.ndarray | None = None
    """Current d per stream in ``problem.batch.stream_names`` order; None keeps the plan's values."""
    state: Any = None
    """The ``Decision.state`` the same policy returned last time, or None."""
    changed_streams: frozenset[str] | None = None
    """Streams whose rate moved since the last decision; None means unknown (decide from scratch)."""


@dataclass(frozen=True)
class Decision:
    policy: str
    feasible: bool
    """True when the estimate fits the usable bounds."""
    fw: np.ndarray
    """Per query window fraction in [0, 1]."""
    fg: np.ndarray
    """Per query granularity fraction in [0, 1]."""
    outcome: Outcome
    """Estimates and per-query QoS of the chosen setting."""
    weighted_qos: float
    reason: str
    state: Any = None
    details: dict[str, Any] = field(default_factory=dict)
    """Policy-specific facts worth recording (steps taken, multipliers, …)."""
    fd: np.ndarray | None = None
    """Per query drop fraction in [0, 1] (1: the least shedding its range allows); None: no query sheds more."""


class Policy(Protocol):
    name: str

    def decide(self, given: PolicyInput) -> Decision: ...


def infeasible_at_minimum(problem: Problem, bounds: Bounds, outcome: Outcome) -> str:
    """Why no setting can fit: the shortfall with every query at its QoS minimum."""
    short_memory = float(outcome.total_memory) - bounds.usable_memory
    short_cpu = float(outcome.total_cpu) - bounds.usable_cpu
    parts = []
    if short_memory > 0:
        parts.append(f"memory short by {short_memory:,.0f} bytes")
    if short_cpu > 0:
        parts.append(f"CPU short by {short_cpu:,.4g} units")
    return "bounds cannot be met even with every query at its QoS minimum: " + ", ".join(parts)
