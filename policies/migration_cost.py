"""What a plan migration costs, and whether a change is worth it (issue 21, item 2).

Every applied change is a migration, and a migration is not free: while it
runs the old plan's state is kept beside the new one, results may stop for a
while, and work is done twice. A change that gains a hundredth of QoS is not
worth a migration that holds half the memory bound for half a minute. This
module estimates the three costs for each way armd migrates and prices them
in QoS units at an exchange rate the operator sets:

* **GenMig** (paper 000): both plans run from the start of the migration
  until the split time has passed and the old plan has drained: about the
  new plan's window, plus the watermark delay, plus two triggers (one to
  see the split time pass, one to emit). The old plan's state is held all
  that time; the output has no gap (that is GenMig's point).
* **Restart**: the old state is dropped at once and the new plan starts
  empty; nothing extra is held, but the results of the first window are
  incomplete: the output gap is the new window.
* **Moving State** (paper 003 §5.1): the states the new box shares with the
  old one are matched and moved, the others recomputed from their inputs;
  recomputing S_AB from S_A and S_B takes λ_A λ_B W² (T_j + T_s σ_AB)
  (003 equation 1), and the output pauses meanwhile.
* **Parallel Track** (paper 003 §5.2): old and new box run side by side
  until every tuple older than the migration is purged: W for one level of
  joins, 2W for more (003 equation 4); the old box's states are the extra
  state, and its processing is done twice meanwhile.

The price of a migration is ``qos_per_bound_second`` × (extra state / memory
bound) × duration in seconds + ``qos_per_gap_second`` × output gap in
seconds. A change goes through only when its gain (the query's weight ×
its QoS increase) is at least that price; reductions that the bounds need
are never priced away (``price_changes`` is where the cycle asks).
Pure: every figure comes in as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from .guardrails import Guarded, Running
from .problem import Bounds, Problem


@dataclass(frozen=True)
class MigrationCost:
    """The costs of one migration; times in seconds, state in bytes."""

    strategy: str
    duration_seconds: float
    """From the start of the migration until the new plan runs alone."""
    extra_state_bytes: float
    """State held beyond what the new plan holds, for the whole duration (an upper estimate)."""
    output_gap_seconds: float
    """Time without complete results."""
    extra_processing: float = 0.0
    """Work done twice or redone (cost units; Moving State's recomputation, Parallel Track's second box)."""

    def as_json(self) -> dict[str, float | str]:
        return {"strategy": self.strategy, "duration_seconds": self.duration_seconds,
                "extra_state_bytes": self.extra_state_bytes, "output_gap_seconds": self.output_gap_seconds,
                "extra_processing": self.extra_processing}


@dataclass(frozen=True)
class Exchange:
    """How many QoS units a migration's costs are worth (``[migration_cost]``)."""

    qos_per_bound_second: float = 0.0
    """QoS units per second of holding extra state as large as the memory bound (in proportion for less), ≥ 0."""
    qos_per_gap_second: float = 0.0
    """QoS units per second of output gap, ≥ 0."""

    def __post_init__(self) -> None:
        for name in ("qos_per_bound_second", "qos_per_gap_second"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be ≥ 0, got {value!r}")

    @property
    def free(self) -> bool:
        """Migrations cost nothing: pricing is off."""
        return self.qos_per_bound_second == 0 and self.qos_per_gap_second == 0

    def price(self, cost: MigrationCost, memory_bound: float) -> float:
        """The migration's cost in QoS units."""
        held = cost.extra_state_bytes / memory_bound * cost.duration_seconds
        return self.qos_per_bound_second * held + self.qos_per_gap_second * cost.output_gap_seconds


def genmig(new_window_seconds: float, watermark_delay_seconds: float, trigger_seconds: float,
           old_state_bytes: float) -> MigrationCost:
    """GenMig: both plans run for the new window + the watermark delay + two triggers; the old state is held meanwhile."""
    duration = new_window_seconds + watermark_delay_seconds + 2 * trigger_seconds
    return MigrationCost("genmig", duration, old_state_bytes, 0.0)


def restart(new_window_seconds: float) -> MigrationCost:
    """A restart: nothing extra held, no results complete until the new window has filled."""
    return MigrationCost("restart", new_window_seconds, 0.0, new_window_seconds)


def instant() -> MigrationCost:
    """Settings that change in place (the simulated plant): no migration to speak of."""
    return MigrationCost("instant", 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Recompute:
    """One state of the new box that the old box does not have: the join of two inputs, recomputed from their states."""

    rate_a: float
    """Tuples per second into the join's first input."""
    rate_b: float
    selectivity: float
    """Fraction of pairs that match (σ_AB)."""


def moving_state(window_seconds: float, recomputed: Sequence[Recompute], *, join_seconds: float, insert_seconds: float,
                 old_operators: int = 0, new_operators: int = 0, match_seconds: float = 0.0,
                 cursor_seconds: float = 0.0) -> MigrationCost:
    """Moving State (003 §5.1): match and move the shared states, recompute the others; the output pauses meanwhile.

    Each recomputed state S_AB joins |S_A| = λ_A W by |S_B| = λ_B W tuples
    (``join_seconds`` per pair) and inserts the matches (``insert_seconds``
    each): λ_A λ_B W² (T_j + T_s σ). Matching compares 4 N M state ids,
    moving creates 2 min(N, M) cursors. The recomputed states are new
    state, not extra: the old box is discarded as they are built.
    """
    w2 = window_seconds * window_seconds
    work = sum(r.rate_a * r.rate_b * w2 * (join_seconds + insert_seconds * r.selectivity) for r in recomputed)
    setup = 4 * old_operators * new_operators * match_seconds + 2 * min(old_operators, new_operators) * cursor_seconds
    duration = setup + work
    return MigrationCost("moving-state", duration, 0.0, duration, work)


def parallel_track(window_seconds: float, height: int, old_state_bytes: float, old_processing: float) -> MigrationCost:
    """Parallel Track (003 §5.2): both boxes run for W (one level of joins) or 2W (more); the old box is the extra.

    ``old_processing`` is the old box's cost per second, done a second time
    for the whole duration; the output has no gap.
    """
    if height < 1:
        raise ValueError(f"the height of a join tree is ≥ 1, got {height!r}")
    duration = window_seconds * (1 if height == 1 else 2)
    return MigrationCost("parallel-track", duration, old_state_bytes, 0.0, old_processing * duration)


@dataclass(frozen=True)
class Priced:
    """One query's change as priced: its gain, the cost and whether it goes through."""

    gain: float
    """The query's weight × (new QoS − QoS in force)."""
    cost: MigrationCost
    price: float
    """``cost`` in QoS units."""
    verdict: str
    """``applied`` (worth its cost), ``required`` (a reduction the bounds need), ``vetoed`` (kept as it runs)."""

    def as_json(self) -> dict:
        return {"gain": self.gain, "price": self.price, "verdict": self.verdict, **self.cost.as_json()}


def price_changes(problem: Problem, bounds: Bounds, guarded: Guarded, running: Running | None, stream_d: np.ndarray | None,
                  costs: Mapping[str, MigrationCost], exchange: Exchange) -> tuple[Guarded, dict[str, Priced]]:
    """Keep each changed query at its running setting unless its gain covers the price of its migration.

    The gain of a query's change is its share of the weighted QoS: weight /
    Σ weights × (new QoS − QoS in force). Changes not worth their price are
    taken back, the largest gains first, while the result still fits the
    bounds (or needs no more than the guarded setting did); a reduction
    stays whenever the settings in force break the bounds or the guardrails
    forced it (``required``), and a reduction another query's growth needs
    stays because taking it back would break the bounds. Queries without a
    cost in ``costs`` (nothing runs yet) are not priced.
    """
    if running is None or exchange.free:
        return guarded, {}
    names = problem.queries
    adjustable = np.where(problem.adjustable, problem.weights, 0.0)
    share = adjustable / adjustable.sum() if adjustable.sum() > 0 else adjustable
    n = len(names)
    old_fd = np.zeros(n) if running.fd is None else running.fd
    new_fd = np.zeros(n) if guarded.fd is None else guarded.fd
    old_qos = problem.score(running.fw, running.fg, old_fd)
    new_qos = problem.score(guarded.fw, guarded.fg, new_fd)
    changed = [i for i in range(n) if names[i] in costs
               and (guarded.fw[i], guarded.fg[i], new_fd[i]) != (running.fw[i], running.fg[i], old_fd[i])]
    over = not bool(problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).fits(bounds))
    gains = {i: float(share[i] * (new_qos[i] - old_qos[i])) for i in changed}
    prices = {i: exchange.price(costs[names[i]], bounds.memory) for i in changed}
    verdicts = {i: "applied" for i in changed if gains[i] >= prices[i]}
    fw, fg, fd, outcome = guarded.fw.copy(), guarded.fg.copy(), new_fd.copy(), guarded.outcome
    for i in sorted((i for i in changed if i not in verdicts), key=lambda i: (-gains[i], names[i])):
        reduction = guarded.fw[i] <= running.fw[i] and guarded.fg[i] <= running.fg[i] and new_fd[i] >= old_fd[i]
        if reduction and (over or names[i] in guarded.forced):
            verdicts[i] = "required"
            continue
        tw, tg, td = fw.copy(), fg.copy(), fd.copy()
        tw[i], tg[i], td[i] = running.fw[i], running.fg[i], old_fd[i]
        trial = problem.evaluate(tw, tg, stream_d, fd=None if guarded.fd is None else td)
        no_worse = trial.total_memory <= outcome.total_memory and trial.total_cpu <= outcome.total_cpu
        if bool(trial.fits(bounds)) or no_worse:
            fw, fg, fd, outcome, verdicts[i] = tw, tg, td, trial, "vetoed"
        else:
            verdicts[i] = "required"
    vetoed = tuple(names[i] for i in changed if verdicts[i] == "vetoed")
    priced = {names[i]: Priced(gains[i], costs[names[i]], prices[i], verdicts[i]) for i in changed}
    if not vetoed:
        return guarded, priced
    return replace(guarded, fw=fw, fg=fg, fd=None if guarded.fd is None else fd, outcome=outcome, limited=tuple(q for q in guarded.limited if q not in vetoed)), priced
