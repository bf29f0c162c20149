"""A policy that maximises weighted QoS with a fraction pair per query.

The paper's baseline gives every query the same fraction, so one expensive
query holds all others down. This policy gives each query its own window
fraction and granularity fraction and spends the budget where it buys the
most weighted QoS:

0. *Start safe.* The setting in force is kept as an option when it still
   fits, so more budget never lowers QoS. The option grid also bounds the
   QoS the paper's uniform setting can reach; when the result falls below
   that bound, the uniform setting is computed (its evaluations batched)
   and the search is repeated from it, so the result is never worse than
   the baseline's.
1. *Price.* Every query gets a small grid of (window, granularity) options;
   one vectorised evaluation prices all options of all queries (memory and
   CPU per query, and the QoS each achieves after rounding to allowed values).
2. *Choose.* One option per query under two budgets is a multiple-choice
   knapsack. A Lagrangian relaxation prices memory and CPU; bisection finds
   the lowest price whose choice fits, and a greedy pass spends what is left
   on the upgrades with the most QoS per unit of budget.
3. *Refine.* Each query then gets options one half-step around its choice
   (window up or down, granularity up or down, or stay) and the knapsack is
   solved again, halving the step a few times. Staying is always allowed, so
   a refinement never loses QoS.
4. *Lift.* Like the paper's fine tuning, a last scan raises every window
   fraction by the largest common amount below one step that still fits,
   so the grid's resolution costs no QoS.

Per-query estimates count a node shared by several queries in each of them,
so a choice that fits by the sum of per-query estimates also fits the exact
total. After a rate change of some streams only the queries reading them are
re-decided, within the budget the other queries leave (see ``decide``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Decision, PolicyInput, infeasible_at_minimum
from .problem import Outcome, Problem

_PRICE_STEPS = 30
_SAFE = 1.0 - 1e-9
"""Budgets for sums of per-query estimates are shaved by a relative 1e-9, so that a different
summation order of the exact total can never tip a chosen setting over a bound."""
_LIFT_POINTS = 8
"""Window lifts tried in the last scan, δ = 0 included."""
_SCANS = (16, 16, 4)
_GRANULARITY_STEPS = 10


@dataclass(frozen=True)
class WeightedState:
    """What the next decision reuses: the chosen fractions and their per-query estimates."""

    fw: np.ndarray
    fg: np.ndarray
    query_memory: np.ndarray
    query_cpu: np.ndarray
    qos: np.ndarray
    queries: tuple[str, ...]


@dataclass(frozen=True)
class Found:
    """A setting found by the search with its per-query estimates (from the evaluation that priced it)."""

    fw: np.ndarray
    fg: np.ndarray
    query_memory: np.ndarray
    query_cpu: np.ndarray
    qos: np.ndarray
    facts: dict


@dataclass(frozen=True)
class WeightedQoS:
    name = "weighted-qos"
    window_levels: int = 5
    """Window fractions on the first option grid (≥ 2): 0, 1/(n−1), …, 1."""
    granularity_levels: int = 3
    """Granularity fractions on the first option grid (≥ 2)."""
    refinements: int = 2
    """Rounds of local refinement, each halving the step (≥ 0)."""

    def __post_init__(self) -> None:
        for name, least in (("window_levels", 2), ("granularity_levels", 2), ("refinements", 0)):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= least):
                raise ValueError(f"{name} must be a whole number ≥ {least}, got {value!r}")

    def decide(self, given: PolicyInput) -> Decision:
        """Decide from scratch, or, when only some streams changed, re-decide the queries reading them."""
        state = given.state
        if not (isinstance(state, WeightedState) and state.queries == given.problem.queries):
            state = None
        if state is not None and given.changed_streams is not None:
            decision = self._incremental(given, state)
            if decision is not None:
                return decision
        return self._full(given, state)

    # --- whole problem ---------------------------------------------------------------------

    def _full(self, given: PolicyInput, state: WeightedState | None) -> Decision:
        problem, bounds = given.problem, given.bounds
        n = len(problem.queries)
        memory, cpu = bounds.usable_memory, bounds.usable_cpu
        starts = [] if state is None else [(state.fw, state.fg)]
        found = self._improve(problem, given.stream_d, memory, cpu, starts, self.refinements)
        if found is None:
            lowest = problem.evaluate(np.zeros(n), np.zeros(n), given.stream_d)
            return self._decision(problem, np.zeros(n), np.zeros(n), lowest, False,
                                  infeasible_at_minimum(problem, bounds, lowest), {})
        found, outcome = self._lift(problem, given.stream_d, memory, cpu, found)
        if problem.weighted_qos(found.qos) < found.facts["baseline_ceiling"]:
            # the paper's uniform setting might be better: compute it and start from it too
            uniform = self._uniform(problem, given.stream_d, memory, cpu)
            starts.insert(0, (np.full(n, uniform[0]), np.full(n, uniform[1])))
            found = self._improve(problem, given.stream_d, memory, cpu, starts, self.refinements)
            found, outcome = self._lift(problem, given.stream_d, memory, cpu, found)
            found.facts["uniform_start"] = True
        reason = f"per-query fractions, {found.facts['binding']} binding"
        return self._decision(problem, found.fw, found.fg, outcome, True, reason, found.facts)

    def _improve(
        self,
        problem: Problem,
        stream_d: np.ndarray | None,
        memory: float,
        cpu: float,
        starts: list[tuple[np.ndarray, np.ndarray]],
        rounds: int,
    ) -> Found | None:
        """Knapsack over the option grid and the given starting settings, then local refinement.

        The best starting setting that fits is kept as an option throughout,
        so the result is never worse than it. Returns None when not even the
        all-minimum setting fits. The facts carry ``baseline_ceiling``, an
        upper bound of the weighted QoS the paper's uniform setting can reach.
        """
        n = len(problem.queries)
        rows = np.arange(n)
        weight = np.where(problem.adjustable, problem.weights, 0.0)[:, None]
        grid_w, grid_g = np.meshgrid(
            np.linspace(0.0, 1.0, self.window_levels), np.linspace(0.0, 1.0, self.granularity_levels), indexing="ij"
        )
        options_w = np.column_stack([*(w for w, _ in starts), np.tile(grid_w.ravel(), (n, 1))])
        options_g = np.column_stack([*(g for _, g in starts), np.tile(grid_g.ravel(), (n, 1))])
        priced = problem.evaluate(options_w, options_g, stream_d)
        exact_fit = priced.fits_budget(memory, cpu)
        if not exact_fit[len(starts)]:  # grid column 0 is the all-minimum setting
            return None
        ceiling = self._baseline_ceiling(problem, exact_fit[len(starts):])
        value, a, b = weight * priced.qos, priced.query_memory / (memory * _SAFE), priced.query_cpu / (cpu * _SAFE)
        fitting = [k for k in range(len(starts) + 1) if exact_fit[k]]  # starts were found by exact totals
        stay = max(fitting, key=lambda k: value[:, k].sum())
        choice, binding = choose(value, a, b, stay=stay)

        step_w = 0.5 / (self.window_levels - 1)
        step_g = 0.5 / (self.granularity_levels - 1)
        for _ in range(rounds):
            fw, fg = options_w[rows, choice], options_g[rows, choice]
            options_w = np.clip(np.stack([fw, fw - step_w, fw + step_w, fw, fw], axis=1), 0.0, 1.0)
            options_g = np.clip(np.stack([fg, fg, fg, fg - step_g, fg + step_g], axis=1), 0.0, 1.0)
            priced = problem.evaluate(options_w, options_g, stream_d)
            value, a, b = weight * priced.qos, priced.query_memory / (memory * _SAFE), priced.query_cpu / (cpu * _SAFE)
            choice, binding = choose(value, a, b, stay=0)
            step_w, step_g = step_w / 2, step_g / 2
        return Found(
            options_w[rows, choice], options_g[rows, choice], priced.query_memory[rows, choice],
            priced.query_cpu[rows, choice], priced.qos[rows, choice],
            {"binding": binding, "window_step": 2 * step_w, "baseline_ceiling": ceiling},
        )

    def _baseline_ceiling(self, problem: Problem, grid_fits: np.ndarray) -> float:
        """An upper bound of the paper's weighted QoS, read off the priced option grid.

        The paper ends at a window fraction f_w and granularity fraction f_g
        with (f_w, f_g) fitting. Estimates only grow with either fraction, so
        (f_w, 0) fits, and (f_g, f_g) fits because f_g ≤ f_w. Hence f_w lies
        below the first grid window level whose (level, coarsest) option does
        not fit, and f_g below the first level whose (level, level) option
        does not; QoS only grows with the fractions, so the QoS at those two
        levels bounds the paper's.
        """
        levels_w = np.linspace(0.0, 1.0, self.window_levels)
        levels_g = np.linspace(0.0, 1.0, self.granularity_levels)
        fits = grid_fits.reshape(len(levels_w), len(levels_g))
        over_w = np.flatnonzero(~fits[:, 0])
        f_w = levels_w[over_w[0]] if len(over_w) else 1.0
        f_g = 1.0
        for i, level in enumerate(levels_w):
            j = np.flatnonzero(np.isclose(levels_g, level))
            if len(j) and not fits[i, j[0]]:
                f_g = level
                break
        n = len(problem.queries)
        return float(problem.weighted_qos(problem.score(np.full(n, f_w), np.full(n, f_g))))

    def _uniform(self, problem, stream_d, memory, cpu) -> tuple[float, float] | None:
        """The paper's shared-fraction setting (§4.3), with each step's evaluations batched.

        The granularity pass evaluates all (p − j)/p at once and keeps the
        first that fits, as the paper's sequential pass would. The window
        fraction is then found by scans of 16, 16 and 4 evenly spaced points,
        which cover a dyadic grid of 2^10 points between that fraction and 1.
        That grid contains every point the paper's bisection with a tolerance
        of at least 2^−10 (< 1e-3) can return, and feasibility is monotone in
        the fraction, so the result is at least the baseline's.
        """
        n = len(problem.queries)

        def fitting(fw: np.ndarray, fg: np.ndarray) -> np.ndarray:
            # only the verdicts leave this function, so the evaluator may reuse its buffers
            return np.flatnonzero(problem.evaluate(fw, fg, stream_d, with_qos=False).fits_budget(memory, cpu))

        steps = np.arange(_GRANULARITY_STEPS, -1, -1) / _GRANULARITY_STEPS
        trial = np.tile(steps, (n, 1))
        fits = fitting(trial, trial)
        if len(fits) == 0:
            return None
        f_gran = float(steps[fits[0]])
        low, high = f_gran, 1.0
        for points_per_scan in _SCANS:
            points = np.linspace(low, high, points_per_scan + 1)[1:]
            fits = fitting(np.tile(points, (n, 1)), np.full((n, points_per_scan), f_gran))
            if len(fits) == 0:
                high = points[0]
            else:
                top = fits[-1]
                low = points[top]
                high = points[top + 1] if top + 1 < points_per_scan else points[top]
            if low == high:
                break
        return low, f_gran

    def _lift(self, problem, stream_d, memory, cpu, found: Found) -> tuple[Found, Outcome]:
        """Raise every window fraction by the largest common δ below one grid step that still fits.

        One batched scan over δ = 0 … one step; δ = 0 always fits, so the
        exact estimate of the returned setting comes out of the same call.
        """
        n = len(found.fw)
        rows, deltas = np.arange(n), np.linspace(0.0, found.facts["window_step"], _LIFT_POINTS)
        trial = np.minimum(found.fw[:, None] + deltas[None, :], 1.0)
        priced = problem.evaluate(trial, np.repeat(found.fg[:, None], _LIFT_POINTS, axis=1), stream_d)
        by_query = (priced.query_memory.sum(axis=0) <= memory * _SAFE) & (priced.query_cpu.sum(axis=0) <= cpu * _SAFE)
        fits = by_query & priced.fits_budget(memory, cpu)
        top = int(np.flatnonzero(fits)[-1]) if fits.any() else 0
        column = np.full(n, top)
        lifted = Found(
            trial[:, top], found.fg, priced.query_memory[rows, column], priced.query_cpu[rows, column],
            priced.qos[rows, column], {**found.facts, "window_lift": float(deltas[top])},
        )
        exact = Outcome(lifted.query_memory, lifted.query_cpu, priced.total_memory[top], priced.total_cpu[top], lifted.qos)
        return lifted, exact

    # --- after a rate change -------------------------------------------------------------------

    def _incremental(self, given: PolicyInput, state: WeightedState) -> Decision | None:
        """Re-decide only the queries reading the changed streams, in the budget the others leave.

        Cheaper than a full decision: one knapsack over the option grid and
        the settings in force, one refinement round, no uniform start. Returns
        None (decide from scratch) when those queries cannot fit that budget
        even at their minimum.
        """
        problem, bounds = given.problem, given.bounds
        affected = problem.queries_reading(given.changed_streams)
        keep = np.ones(len(problem.queries), dtype=bool)
        keep[affected] = False
        memory = bounds.usable_memory - state.query_memory[keep].sum()
        cpu = bounds.usable_cpu - state.query_cpu[keep].sum()
        if len(affected) == 0 or memory <= 0 or cpu <= 0 or problem.shares_nodes:
            return None
        sub = problem.subproblem(affected)
        found = self._improve(sub, given.stream_d, memory, cpu, [(state.fw[affected], state.fg[affected])], 1)
        if found is None or found.query_memory.sum() > memory or found.query_cpu.sum() > cpu:
            return None  # even the all-minimum option does not fit what the other queries leave
        fw, fg = state.fw.copy(), state.fg.copy()
        query_memory, query_cpu, qos = state.query_memory.copy(), state.query_cpu.copy(), state.qos.copy()
        fw[affected], fg[affected] = found.fw, found.fg
        query_memory[affected], query_cpu[affected], qos[affected] = found.query_memory, found.query_cpu, found.qos
        outcome = Outcome(query_memory, query_cpu, query_memory.sum(), query_cpu.sum(), qos)
        if not outcome.fits(bounds):
            return None
        reason = f"re-decided {len(affected)} quer{'y' if len(affected) == 1 else 'ies'} reading the changed streams"
        facts = {**found.facts, "incremental": True, "requeried": int(len(affected))}
        return self._decision(problem, fw, fg, outcome, True, reason, facts)

    def _decision(self, problem: Problem, fw, fg, outcome: Outcome, feasible: bool, reason: str, facts) -> Decision:
        state = WeightedState(fw, fg, outcome.query_memory, outcome.query_cpu, outcome.qos, problem.queries)
        return Decision(
            policy=self.name,
            feasible=feasible,
            fw=fw,
            fg=fg,
            outcome=outcome,
            weighted_qos=float(problem.weighted_qos(outcome.qos)),
            reason=reason,
            state=state,
            details=facts,
        )


# --- the multiple-choice knapsack ------------------------------------------------------------


def choose(value: np.ndarray, a: np.ndarray, b: np.ndarray, stay: int | None = None) -> tuple[np.ndarray, str]:
    """One option per row maximising Σ value with Σ a ≤ 1 and Σ b ≤ 1 (arrays of shape (Q, K)).

    ``stay`` names an option column that is known to fit; the result is
    never worse than it. Returns the chosen column per row and which budget
    bound the choice ("memory", "cpu", "memory and cpu" or "none").
    """
    rows = np.arange(len(value))
    candidates: list[tuple[np.ndarray, str]] = []
    if stay is not None:
        candidates.append((_fill(value, a, b, np.full(len(value), stay)), "none"))
    free = np.argmax(value, axis=1)
    over_a, over_b = a[rows, free].sum() > 1.0, b[rows, free].sum() > 1.0
    if not (over_a or over_b):
        return free, "none"
    # price the budgets that are over first; if no price level fits both that way, mix the prices
    if over_a and over_b:
        mixes = ((None, "memory and cpu"), (0.0, "memory"), (1.0, "cpu"))
    else:
        mixes = (((0.0, "memory"),) if over_a else ((1.0, "cpu"),)) + ((None, "memory and cpu"),)
    for mix, label in mixes:
        picked = _priced_choice(value, a, b, mix)
        if picked is not None:
            candidates.append((_fill(value, a, b, picked), label))
            break
    if not candidates:
        raise ValueError("no option per row fits both budgets and no known-fitting option was given")
    best, label = max(candidates, key=lambda item: value[rows, item[0]].sum())
    return best, label


def _priced_choice(value: np.ndarray, a: np.ndarray, b: np.ndarray, mix: float | None) -> np.ndarray | None:
    """The choice at the lowest price that fits both budgets, pricing a·(1 − mix) + b·mix.

    ``mix`` None weighs each budget by how far the unpriced choice overshoots it.
    """
    rows = np.arange(len(value))
    if mix is None:
        free = np.argmax(value, axis=1)
        over_a, over_b = max(a[rows, free].sum() - 1.0, 0.0), max(b[rows, free].sum() - 1.0, 0.0)
        mix = over_b / (over_a + over_b) if over_a + over_b > 0 else 0.5
    cost = a * (1.0 - mix) + b * mix

    def attempt(price: float) -> tuple[bool, np.ndarray]:
        picked = np.argmax(value - price * cost, axis=1)
        return a[rows, picked].sum() <= 1.0 and b[rows, picked].sum() <= 1.0, picked

    high = 1.0
    while True:
        ok, high_pick = attempt(high)
        if ok:
            break
        if high > 1e30:
            return None
        high *= 16.0
    low = high / 16.0 if high > 1.0 else 0.0  # the last price that did not fit (0 fits never here)
    for _ in range(_PRICE_STEPS):
        if high - low <= 1e-3 * high:
            break
        middle = (low + high) / 2
        ok, picked = attempt(middle)
        if ok:
            high, high_pick = middle, picked
        else:
            low = middle
    return high_pick


def _fill(value: np.ndarray, a: np.ndarray, b: np.ndarray, picked: np.ndarray, rounds: int = 2) -> np.ndarray:
    """Spend leftover budget on single-row upgrades with the most value per unit of budget."""
    rows = np.arange(len(value))
    picked = picked.copy()
    for _ in range(rounds):
        chosen_a, chosen_b = a[rows, picked], b[rows, picked]
        slack_a, slack_b = 1.0 - chosen_a.sum(), 1.0 - chosen_b.sum()
        gain = value - value[rows, picked][:, None]
        cost_a, cost_b = a - chosen_a[:, None], b - chosen_b[:, None]
        usable = (gain > 0) & (cost_a <= slack_a) & (cost_b <= slack_b)
        if not usable.any():
            break
        spend = np.maximum(cost_a, 0.0) / max(slack_a, 1e-300) + np.maximum(cost_b, 0.0) / max(slack_b, 1e-300)
        efficiency = np.where(usable, gain / np.maximum(spend, 1e-300), -np.inf)
        option = np.argmax(efficiency, axis=1)
        movers = np.flatnonzero(np.isfinite(efficiency[rows, option]))
        order = movers[np.argsort(-efficiency[movers, option[movers]], kind="stable")]
        running_a = cost_a[order, option[order]].cumsum()
        running_b = cost_b[order, option[order]].cumsum()
        # the longest prefix whose running totals stay within the slack at every point
        within = np.maximum.accumulate(np.maximum(running_a - slack_a, running_b - slack_b)) <= 0
        take = order[within]
        if len(take) == 0:
            break
        picked[take] = option[take]
    return picked
