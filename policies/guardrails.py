"""Guardrails around every policy: hysteresis, cool-down, maximum step, dry run.

A policy proposes fractions; the guardrails decide what is actually applied,
given what is running now and when each query last changed. They damp noise
(hysteresis), stop flapping (cool-down) and limit shocks (maximum step), but
they never hold the system over its bounds: when the guarded setting would
break a bound that the proposal meets, every reduction of the proposal is
applied in full. Changes held back by the hysteresis alone may use the
reserve (the bound itself, not the usable bound, must hold): the reserve is
there for the estimate's noise, and each forced cut is a migration. A dry
run records the decision and applies nothing.

A drop rate (load shedding) migrates no state, so it is not stepped: it is
held by hysteresis and cool-down like a fraction and otherwise applied as
proposed; a rise of shedding counts as a reduction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import Bounds, Outcome, Problem


@dataclass(frozen=True)
class Guardrails:
    cooldown: float = 0.0
    """Minimum time between two changes of the same query (time units of ``now``)."""
    hysteresis: float = 0.0
    """Fraction changes smaller than this are ignored, in [0, 1)."""
    max_step: float = 1.0
    """Largest change of a query's fraction in one decision, in (0, 1]."""
    dry_run: bool = False
    """Decide and record, apply nothing."""

    def __post_init__(self) -> None:
        if not self.cooldown >= 0:
            raise ValueError(f"cooldown must be ≥ 0, got {self.cooldown!r}")
        if not 0 <= self.hysteresis < 1:
            raise ValueError(f"hysteresis must be in [0, 1), got {self.hysteresis!r}")
        if not 0 < self.max_step <= 1:
            raise ValueError(f"max_step must be in (0, 1], got {self.max_step!r}")


@dataclass(frozen=True)
class Running:
    """The fractions in force and when each query last changed (NaN: never)."""

    fw: np.ndarray
    fg: np.ndarray
    changed_at: np.ndarray
    fd: np.ndarray | None = None
    """Drop fractions in force (None: no query may shed)."""


@dataclass(frozen=True)
class Guarded:
    fw: np.ndarray
    fg: np.ndarray
    outcome: Outcome
    apply: bool
    """False in a dry run: record only."""
    held: tuple[str, ...]
    """Queries kept at their running setting by hysteresis or cool-down."""
    limited: tuple[str, ...]
    """Queries whose change was cut to the maximum step."""
    forced: tuple[str, ...]
    """Queries whose reduction went through despite a guardrail, to keep the bounds."""
    fd: np.ndarray | None = None
    """Drop fractions to apply (None: no query may shed)."""
    fitted: tuple[str, ...] = ()
    """Queries whose growth was shortened, or held, so that its live migration's transient fits the memory bound
    (``control/pricing.transient_fit``)."""
    kept: tuple[str, ...] = ()
    """Queries kept at a cut decided before and not in force yet, which this decision would have taken back while the
    measured state is over the bound (``control/pricing.keep_pending_cuts``)."""
    deepened: tuple[str, ...] = ()
    """Queries whose cut went deeper because their input rate stepped up: to the minimum window while the measured
    state is over the bound, else to half their state when the cut freed less than its migration holds
    (``control/pricing.cut_deep_on_step``)."""


def guard(
    problem: Problem,
    bounds: Bounds,
    proposal_fw: np.ndarray,
    proposal_fg: np.ndarray,
    running: Running | None,
    rails: Guardrails,
    now: float,
    stream_d: np.ndarray | None = None,
    proposal_fd: np.ndarray | None = None,
) -> Guarded:
    """The setting to apply for a policy's proposal (``proposal_fd``: its drop fractions, None when no query may shed)."""
    names = problem.queries
    if running is None:
        outcome = problem.evaluate(proposal_fw, proposal_fg, stream_d, fd=proposal_fd)
        return Guarded(proposal_fw, proposal_fg, outcome, not rails.dry_run, (), (), (), proposal_fd)

    # without shedding the drop fractions are all 1 (the least shedding) and never differ
    n = len(names)
    want_fd = np.ones(n) if proposal_fd is None else proposal_fd
    run_fd = np.ones(n) if running.fd is None else running.fd
    small = (np.abs(proposal_fw - running.fw) < rails.hysteresis) & (np.abs(proposal_fg - running.fg) < rails.hysteresis)
    small &= np.abs(want_fd - run_fd) < rails.hysteresis
    cooling = (now - running.changed_at) < rails.cooldown  # NaN (never changed) compares False
    hold = small | cooling
    fw = np.where(hold, running.fw, _step(running.fw, proposal_fw, rails.max_step))
    fg = np.where(hold, running.fg, _step(running.fg, proposal_fg, rails.max_step))
    fd = np.where(hold, run_fd, want_fd)
    limited = ~hold & ((fw != proposal_fw) | (fg != proposal_fg))
    outcome = problem.evaluate(fw, fg, stream_d, fd=fd)

    forced = np.zeros(len(names), dtype=bool)
    # The reserve absorbs the estimate's noise: when only the hysteresis holds changes back (a cut of a tenth of
    # a second is a migration too), they are not forced while what is held stays within the bounds themselves.
    asked = (proposal_fw != running.fw) | (proposal_fg != running.fg) | (want_fd != run_fd)
    tolerant = bool(np.any(small & asked)) and not np.any(cooling & asked & ~small)
    if not (outcome.fits_budget(bounds.memory, bounds.cpu) if tolerant else outcome.fits(bounds)):
        proposed = problem.evaluate(proposal_fw, proposal_fg, stream_d, fd=proposal_fd)
        if proposed.fits(bounds):
            reduce_w, reduce_g, reduce_d = proposal_fw < fw, proposal_fg < fg, want_fd < fd
            forced = reduce_w | reduce_g | reduce_d
            fw = np.where(reduce_w, proposal_fw, fw)
            fg = np.where(reduce_g, proposal_fg, fg)
            fd = np.where(reduce_d, want_fd, fd)
            outcome = problem.evaluate(fw, fg, stream_d, fd=fd)
            if not outcome.fits(bounds):  # growth elsewhere still too much: take the proposal whole
                forced = (fw != proposal_fw) | (fg != proposal_fg) | (fd != want_fd) | forced
                fw, fg, fd, outcome = proposal_fw, proposal_fg, want_fd, proposed

    def listed(mask: np.ndarray) -> tuple[str, ...]:
        return tuple(names[i] for i in np.flatnonzero(mask))

    kept = (fw == running.fw) & (fg == running.fg) & (fd == run_fd)
    held_now = hold & kept & asked
    return Guarded(fw, fg, outcome, not rails.dry_run, listed(held_now), listed(limited & ~forced), listed(forced),
                   None if proposal_fd is None and running.fd is None else fd)


def _step(current: np.ndarray, target: np.ndarray, max_step: float) -> np.ndarray:
    change = target - current
    return np.where(np.abs(change) <= max_step, target, current + np.sign(change) * max_step)
