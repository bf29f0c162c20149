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
   knapsack. A Lagrangian relaxation prices memory and CPU; a bisection that
   re-prices only the queries at the margin (warm-started from the previous
   round's price), finished by an exact sweep of their concave-hull segments,
   finds the best price level that fits, and a greedy pass spends what is
   left on the upgrades with the most QoS per unit of budget.
3. *Refine.* Each query then gets options one half-step around its choice
   (window up or down, granularity up or down, or stay) and the knapsack is
   solved again, halving the step a few times. Staying is always allowed, so
   a refinement never loses QoS.
4. *Lift.* Like the paper's fine tuning, a last scan raises every window
   fraction by the largest common amount below one step that still fits,
   so the grid's resolution costs no QoS.

Load shedding (paper 001 §5.3) is a third knob for the queries whose QoS
allows a drop rate: the option grid then repeats for a few drop fractions
(most shedding first, so column 0 stays the all-minimum setting), each
refinement round also moves the drop fraction a step down or up, and the
knapsack weighs shedding against window reduction by what each costs in
memory and CPU (``Problem`` prices both) and keeps of the QoS (a drop rate p
keeps (1 − p)^k of a k-input query's results). A problem where some query
sheds is always decided whole (no incremental re-decision). Without such a
query nothing of this runs.

Per-query estimates count a node shared by several queries in each of them,
so a choice that fits by the sum of per-query estimates also fits the exact
total. After a rate change of some streams only the queries reading them are
re-decided, within the budget the other queries leave, in one evaluation
(see ``_incremental``). Speed comes from pricing less, not from searching
less: the grid's knob values and QoS are computed once per problem, a
refinement round rounds only the knobs it moves, and the knapsack touches
only the rows whose choice the price can still change.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .base import Decision, PolicyInput, infeasible_at_minimum
from .problem import Outcome, Problem
from .repair import fit_exactly

_SAFE = 1.0 - 1e-9
"""Budgets for sums of per-query estimates are shaved by a relative 1e-9, so that a different
summation order of the exact total can never tip a chosen setting over a bound."""
_LIFT_POINTS = 8
"""Window lifts tried in the last scan, δ = 0 included."""
_SCANS = (16, 16, 4)
_GRANULARITY_STEPS = 10
_NEIGHBOURS = (-0.25, -0.0625, 0.0625)
"""Moves of one fraction around the setting in force offered by an incremental re-decision."""
_MOVES = np.array((0.0, *_NEIGHBOURS))
_NEAR_W = np.array([0, 1, 0, 2, 0, 3, 0])
_NEAR_G = np.array([0, 0, 1, 0, 2, 0, 3])
"""An incremental re-decision's options around the setting in force (stay, then per neighbour move:
window moved, granularity moved) as columns of the rounded trials (stay, then one per move)."""
_WINDOW_MOVES = np.array([0, 1, 2, 0, 0])
_GRANULARITY_MOVES = np.array([0, 0, 0, 1, 2])
_SHED_WINDOW_MOVES = np.array([0, 1, 2, 0, 0, 0, 0])
_SHED_GRANULARITY_MOVES = np.array([0, 0, 0, 1, 2, 0, 0])
_SHED_DROP_MOVES = np.array([0, 0, 0, 0, 0, 1, 2])
"""The same when some query may shed, plus drop fraction down and up (columns of the drop trials)."""
"""A refinement round's options (stay, window down, window up, granularity down, granularity up) as
columns of the rounded window trials (stay, down, up) and granularity trials (stay, down, up)."""


@functools.lru_cache(maxsize=16)
def _levels(count: int) -> np.ndarray:
    """0, 1/(count − 1), …, 1 (read-only, shared)."""
    levels = np.linspace(0.0, 1.0, count)
    levels.flags.writeable = False
    return levels


@functools.lru_cache(maxsize=16)
def _grid(window_levels: int, granularity_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Window and granularity fraction of each grid option, i-major (read-only, shared)."""
    fractions = (np.repeat(_levels(window_levels), granularity_levels), np.tile(_levels(granularity_levels), window_levels))
    for array in fractions:
        array.flags.writeable = False
    return fractions


@dataclass(frozen=True)
class WeightedState:
    """What the next decision reuses: the chosen fractions and their per-query estimates."""

    fw: np.ndarray
    fg: np.ndarray
    query_memory: np.ndarray
    query_cpu: np.ndarray
    qos: np.ndarray
    queries: tuple[str, ...]
    grid_price: tuple[float, str] | None = None
    """The price level (in units of the whole budget) and binding budget of the last full decision's
    grid knapsack: a re-decision starts its price search there, scaled to its budget."""
    fd: np.ndarray | None = None
    """The chosen drop fractions (None: no query may shed)."""


@dataclass(frozen=True)
class Found:
    """A setting found by the search with its per-query estimates (from the evaluation that priced it)."""

    fw: np.ndarray
    fg: np.ndarray
    query_memory: np.ndarray
    query_cpu: np.ndarray
    qos: np.ndarray
    facts: dict
    grid_price: tuple[float, str] | None = None
    """Price level and binding budget of the grid knapsack (see ``WeightedState``)."""
    fd: np.ndarray | None = None
    """Drop fractions (None: no query may shed)."""


@dataclass(frozen=True)
class WeightedQoS:
    name = "weighted-qos"
    window_levels: int = 5
    """Window fractions on the first option grid (≥ 2): 0, 1/(n−1), …, 1."""
    granularity_levels: int = 3
    """Granularity fractions on the first option grid (≥ 2)."""
    refinements: int = 2
    """Rounds of local refinement, each halving the step (≥ 0)."""
    drop_levels: int = 3
    """Drop fractions on the first option grid when some query may shed (≥ 2)."""

    def __post_init__(self) -> None:
        for name, least in (("window_levels", 2), ("granularity_levels", 2), ("refinements", 0), ("drop_levels", 2)):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= least):
                raise ValueError(f"{name} must be a whole number ≥ {least}, got {value!r}")

    def decide(self, given: PolicyInput) -> Decision:
        """Decide from scratch, or, when only some streams changed, re-decide the queries reading them."""
        state = given.state
        queries = given.problem.queries
        if not (isinstance(state, WeightedState) and (state.queries is queries or state.queries == queries)):
            state = None
        if state is not None and given.changed_streams is not None and not given.problem.sheds:
            decision = self._incremental(given, state)
            if decision is not None:
                return decision
        return self._full(given, state)

    # --- whole problem ---------------------------------------------------------------------

    def _full(self, given: PolicyInput, state: WeightedState | None) -> Decision:
        problem, bounds = given.problem, given.bounds
        n = len(problem.queries)
        memory, cpu = bounds.usable_memory, bounds.usable_cpu
        starts = [] if state is None else [(state.fw, state.fg, state.fd)]
        found = self._improve(problem, given.stream_d, memory, cpu, starts, self.refinements)
        if found is None:
            most_shed = np.zeros(n) if problem.sheds else None
            lowest = problem.evaluate(np.zeros(n), np.zeros(n), given.stream_d, fd=most_shed)
            return self._decision(problem, np.zeros(n), np.zeros(n), lowest, False,
                                  infeasible_at_minimum(problem, bounds, lowest), {}, fd=most_shed)
        found, outcome = self._lift(problem, given.stream_d, memory, cpu, found)
        if problem.weighted_qos(found.qos) < found.facts["baseline_ceiling"]:
            # the paper's uniform setting might be better: compute it and start from it too
            uniform = self._uniform(problem, given.stream_d, memory, cpu)
            starts.insert(0, (np.full(n, uniform[0]), np.full(n, uniform[1]), None))
            found = self._improve(problem, given.stream_d, memory, cpu, starts, self.refinements)
            found, outcome = self._lift(problem, given.stream_d, memory, cpu, found)
            found.facts["uniform_start"] = True
        reason = f"per-query fractions, {found.facts['binding']} binding"
        fw, fg, fd, facts = found.fw, found.fg, found.fd, found.facts
        if not outcome.fits(bounds):
            # Per-query prices were not exact (a query reads another query's knob): scale down to fit,
            # and take the paper's uniform setting instead if that is better.
            fw, fg, outcome, factor = fit_exactly(problem, bounds, fw, fg, given.stream_d, fd)
            facts = {**facts, "scaled_to_fit": factor}
            uniform = self._uniform(problem, given.stream_d, memory, cpu)
            if uniform is not None:
                ufw, ufg = np.full(n, uniform[0]), np.full(n, uniform[1])
                candidate = problem.evaluate(ufw, ufg, given.stream_d)
                if candidate.fits(bounds) and problem.weighted_qos(candidate.qos) > problem.weighted_qos(outcome.qos):
                    fw, fg, outcome, facts = ufw, ufg, candidate, {**facts, "uniform_chosen": True}
                    fd = None if fd is None else np.ones(n)
            reason += f"; the exact total needed the fractions scaled by {facts['scaled_to_fit']:.4f}"
        if fd is not None:
            rates = problem.drop_rates(fd)
            facts = {**facts, "drop_rates": {q: float(rates[i]) for i, q in enumerate(problem.queries) if problem.has_drop[i]}}
            shed = [f"{q} p={rates[i]:.3g}" for i, q in enumerate(problem.queries) if rates[i] > 0]
            if shed:
                reason += "; shedding " + ", ".join(shed)
        return self._decision(problem, fw, fg, outcome, True, reason, facts, found.grid_price, fd)

    def _improve(
        self,
        problem: Problem,
        stream_d: np.ndarray | None,
        memory: float,
        cpu: float,
        starts: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
        rounds: int,
        ceiling: bool = True,
    ) -> Found | None:
        """Knapsack over the option grid and the given starting settings, then local refinement.

        The best starting setting that fits is kept as an option throughout,
        so the result is never worse than it. Returns None when not even the
        all-minimum setting fits. With ``ceiling`` the facts carry
        ``baseline_ceiling``, an upper bound of the weighted QoS the paper's
        uniform setting can reach. The grid's knob values and scores are
        computed once per problem (``Problem.grid_parts``); a refinement round
        rounds and scores three window and three granularity trials and
        estimates their five combinations; each round's knapsack starts its
        price search from the previous round's price.
        """
        n = len(problem.queries)
        rows = np.arange(n)
        weight = np.where(problem.adjustable, problem.weights, 0.0)[:, None]
        grid = problem.grid_parts(self._levels_w, self._levels_g)  # cached: only the estimates are new
        sheds = problem.sheds
        # the grid once per drop level, most shedding first (without shedding: once, no drop fractions)
        levels_d = _levels(self.drop_levels) if sheds else np.ones(1)
        width = grid[0].width
        if starts:
            windows = [problem.window_part(np.column_stack([w for w, _, _ in starts])), *[grid[0]] * len(levels_d)]
            granularities = [problem.granularity_part(np.column_stack([g for _, g, _ in starts])), *[grid[1]] * len(levels_d)]
        else:
            windows, granularities = [grid[0]] * len(levels_d), [grid[1]] * len(levels_d)
        fraction_d = None
        if sheds:
            start_d = [np.ones(n) if d is None else d for _, _, d in starts]
            fraction_d = np.concatenate([*(d[:, None] for d in start_d), np.tile(np.repeat(levels_d, width), (n, 1))], axis=1)
        priced = problem.evaluate_parts(windows, granularities, stream_d, fd=fraction_d)
        exact_fit = priced.fits_budget(memory, cpu)
        if not exact_fit[len(starts)]:  # grid column 0 is the all-minimum setting
            return None
        # the paper's baseline does not shed: its bound is read off the grid at the least shedding
        no_shedding = exact_fit[len(starts) + (len(levels_d) - 1) * width:]
        ceiling = self._baseline_ceiling(problem, no_shedding) if ceiling else None
        value, a, b = weight * priced.qos, priced.query_memory / (memory * _SAFE), priced.query_cpu / (cpu * _SAFE)
        fitting = [k for k in range(len(starts) + 1) if exact_fit[k]]  # starts were found by exact totals
        stay = max(fitting, key=lambda k: value[:, k].sum())
        choice, binding, price = knapsack(value, a, b, stay=stay)
        grid_price = None if price is None else (float(price), binding)
        fraction_w = np.concatenate([*(w[:, None] for w, _, _ in starts), np.tile(self._grid_w, (n, len(levels_d)))], axis=1)
        fraction_g = np.concatenate([*(g[:, None] for _, g, _ in starts), np.tile(self._grid_g, (n, len(levels_d)))], axis=1)
        fw, fg = fraction_w[rows, choice], fraction_g[rows, choice]
        fd = fraction_d[rows, choice] if sheds else None
        chosen = (priced.query_memory[rows, choice], priced.query_cpu[rows, choice], priced.qos[rows, choice])

        step_w = 0.5 / (self.window_levels - 1)
        step_g = 0.5 / (self.granularity_levels - 1)
        step_d = 0.5 / (self.drop_levels - 1)
        moves_w, moves_g = (_SHED_WINDOW_MOVES, _SHED_GRANULARITY_MOVES) if sheds else (_WINDOW_MOVES, _GRANULARITY_MOVES)
        for _ in range(rounds):
            # stay, window down, window up, granularity down, granularity up (and drop down, drop up):
            # each kind rounded once
            trial_w = np.clip(np.column_stack([fw, fw - step_w, fw + step_w]), 0.0, 1.0)
            trial_g = np.clip(np.column_stack([fg, fg - step_g, fg + step_g]), 0.0, 1.0)
            trial_d = np.clip(np.column_stack([fd, fd - step_d, fd + step_d]), 0.0, 1.0) if sheds else None
            windows, granularities = problem.window_part(trial_w), problem.granularity_part(trial_g)
            priced = problem.evaluate_parts(windows.take(moves_w), granularities.take(moves_g), stream_d,
                                            fd=trial_d[:, _SHED_DROP_MOVES] if sheds else None)
            value, a, b = weight * priced.qos, priced.query_memory / (memory * _SAFE), priced.query_cpu / (cpu * _SAFE)
            choice, binding, price = knapsack(value, a, b, stay=0, price=price)
            fw, fg = trial_w[rows, moves_w[choice]], trial_g[rows, moves_g[choice]]
            if sheds:
                fd = trial_d[rows, _SHED_DROP_MOVES[choice]]
            chosen = (priced.query_memory[rows, choice], priced.query_cpu[rows, choice], priced.qos[rows, choice])
            step_w, step_g, step_d = step_w / 2, step_g / 2, step_d / 2
        return Found(
            fw, fg, *chosen, {"binding": binding, "window_step": 2 * step_w, "baseline_ceiling": ceiling},
            grid_price, fd,
        )

    @property
    def _levels_w(self) -> np.ndarray:
        return _levels(self.window_levels)

    @property
    def _levels_g(self) -> np.ndarray:
        return _levels(self.granularity_levels)

    @property
    def _grid_w(self) -> np.ndarray:
        """Window fraction of each grid option (i-major, like ``Problem.grid_parts``)."""
        return _grid(self.window_levels, self.granularity_levels)[0]

    @property
    def _grid_g(self) -> np.ndarray:
        return _grid(self.window_levels, self.granularity_levels)[1]

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
        priced = problem.evaluate_parts(problem.window_part(trial), problem.granularity_part(found.fg), stream_d, fd=found.fd)
        by_query = (priced.query_memory.sum(axis=0) <= memory * _SAFE) & (priced.query_cpu.sum(axis=0) <= cpu * _SAFE)
        fits = by_query & priced.fits_budget(memory, cpu)
        top = int(np.flatnonzero(fits)[-1]) if fits.any() else 0
        column = np.full(n, top)
        lifted = Found(
            trial[:, top], found.fg, priced.query_memory[rows, column], priced.query_cpu[rows, column],
            priced.qos[rows, column], {**found.facts, "window_lift": float(deltas[top])}, found.grid_price, found.fd,
        )
        exact = Outcome(lifted.query_memory, lifted.query_cpu, priced.total_memory[top], priced.total_cpu[top], lifted.qos)
        return lifted, exact

    # --- after a rate change -------------------------------------------------------------------

    def _incremental(self, given: PolicyInput, state: WeightedState) -> Decision | None:
        """Re-decide only the queries reading the changed streams, in the budget the others leave.

        Cheaper than a full decision: one evaluation and one knapsack over the
        settings in force and their neighbours (window or granularity fraction
        moved by −1/4, −1/16 or +1/16 of the range), the all-minimum setting and
        the grid's window levels at the granularity in force; no refinement
        round, no lift, no uniform start. The grid's knob values and scores are
        sliced from the whole problem's (``Problem.subproblem``), and the
        neighbours round four window and four granularity trials per query.
        The knapsack's price search starts from the last full decision's price
        (``WeightedState.grid_price``). Returns None (decide from scratch) when
        those queries cannot fit that budget even at their minimum, or when
        operators are shared.
        """
        problem, bounds = given.problem, given.bounds
        if problem.shares_nodes:
            return None
        affected = problem.queries_reading(given.changed_streams)
        if len(affected) == 0:
            return None
        keep = np.ones(len(problem.queries), dtype=bool)
        keep[affected] = False
        memory = bounds.usable_memory - state.query_memory[keep].sum()
        cpu = bounds.usable_cpu - state.query_cpu[keep].sum()
        if memory <= 0 or cpu <= 0:
            return None
        sub = problem.subproblem(affected)
        n = len(affected)
        rows = np.arange(n)
        # the settings in force and their neighbours: each kind of knob rounded and scored once
        trial_w = np.clip(state.fw[affected][:, None] + _MOVES, 0.0, 1.0)
        trial_g = np.clip(state.fg[affected][:, None] + _MOVES, 0.0, 1.0)
        # options: the settings in force and their neighbours, the all-minimum setting, and every window
        # level of the grid at the granularity in force (the grid's parts are sliced from the whole problem's)
        grid_w, grid_g = sub.grid_parts(self._levels_w, self._levels_g)
        near_w, near_g = sub.window_part(trial_w), sub.granularity_part(trial_g)
        levels = np.arange(self.window_levels) * self.granularity_levels  # grid columns (level, coarsest)
        in_force = np.zeros(self.window_levels, dtype=np.intp)  # the granularity trial "stay"
        windows = [near_w.take(_NEAR_W), grid_w.take(levels[:1]), grid_w.take(levels)]
        granularities = [near_g.take(_NEAR_G), grid_g.take(levels[:1]), near_g.take(in_force)]
        fractions_w = np.concatenate((trial_w[:, _NEAR_W], np.zeros((n, 1)), np.tile(self._levels_w, (n, 1))), axis=1)
        fractions_g = np.concatenate((trial_g[:, _NEAR_G], np.zeros((n, 1)), trial_g[:, in_force]), axis=1)
        priced = sub.evaluate_parts(windows, granularities, given.stream_d)
        starts = len(_NEAR_W)
        exact_fit = priced.fits_budget(memory, cpu)
        if not exact_fit[starts]:  # column 7 is the all-minimum setting
            return None  # even the all-minimum option does not fit what the other queries leave
        weight = np.where(sub.adjustable, sub.weights, 0.0)[:, None]
        value, a, b = weight * priced.qos, priced.query_memory / (memory * _SAFE), priced.query_cpu / (cpu * _SAFE)
        fitting = [k for k in range(starts + 1) if exact_fit[k]]  # by exact totals, like the starts of _improve
        stay = max(fitting, key=lambda k: value[:, k].sum())
        choice, binding, _ = knapsack(value, a, b, stay=stay, price=self._price_hint(state, bounds, memory, cpu))
        found_w, found_g = fractions_w[rows, choice], fractions_g[rows, choice]
        found_memory, found_cpu = priced.query_memory[rows, choice], priced.query_cpu[rows, choice]
        if found_memory.sum() > memory or found_cpu.sum() > cpu:
            return None
        fw, fg = state.fw.copy(), state.fg.copy()
        query_memory, query_cpu, qos = state.query_memory.copy(), state.query_cpu.copy(), state.qos.copy()
        fw[affected], fg[affected] = found_w, found_g
        query_memory[affected], query_cpu[affected], qos[affected] = found_memory, found_cpu, priced.qos[rows, choice]
        outcome = Outcome(query_memory, query_cpu, query_memory.sum(), query_cpu.sum(), qos)
        if not outcome.fits(bounds):
            return None
        reason = f"re-decided {len(affected)} quer{'y' if len(affected) == 1 else 'ies'} reading the changed streams"
        facts = {"binding": binding, "window_step": 1.0 / (self.window_levels - 1), "baseline_ceiling": None,
                 "incremental": True, "requeried": len(affected)}
        return self._decision(problem, fw, fg, outcome, True, reason, facts, state.grid_price)

    @staticmethod
    def _price_hint(state: WeightedState, bounds, memory: float, cpu: float) -> float | None:
        """The last full decision's grid price, in units of the budget left to a re-decision.

        Costs are priced as fractions of the budget, so a price per unit of the
        whole budget is that price times the share of the budget left. Only a
        starting point of the price search (see ``knapsack``), never its result.
        """
        if state.grid_price is None:
            return None
        price, binding = state.grid_price
        share_m, share_c = memory / bounds.usable_memory, cpu / bounds.usable_cpu
        share = share_m if binding == "memory" else share_c if binding == "cpu" else float(np.sqrt(share_m * share_c))
        return price * share if price > 0 and share > 0 else None

    def _decision(
        self, problem: Problem, fw, fg, outcome: Outcome, feasible: bool, reason: str, facts, grid_price=None, fd=None,
    ) -> Decision:
        state = WeightedState(fw, fg, outcome.query_memory, outcome.query_cpu, outcome.qos, problem.queries, grid_price, fd)
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
            fd=fd,
        )


# --- the multiple-choice knapsack ------------------------------------------------------------


def choose(value: np.ndarray, a: np.ndarray, b: np.ndarray, stay: int | None = None) -> tuple[np.ndarray, str]:
    """One option per row maximising Σ value with Σ a ≤ 1 and Σ b ≤ 1 (arrays of shape (Q, K)).

    ``stay`` names an option column that is known to fit; the result is
    never worse than it. Returns the chosen column per row and which budget
    bound the choice ("memory", "cpu", "memory and cpu" or "none").
    """
    picked, label, _ = knapsack(value, a, b, stay)
    return picked, label


def knapsack(
    value: np.ndarray, a: np.ndarray, b: np.ndarray, stay: int | None = None, price: float | None = None
) -> tuple[np.ndarray, str, float | None]:
    """``choose``, warm-started: the price search starts from ``price`` (e.g. the previous round's).

    Also returns the price level it ended at (``price`` unchanged when no
    budget is over), for the next warm start. The start only changes how
    many trial prices are needed, not the choice (see ``_priced_choice``).
    """
    n = len(value)
    rows = np.arange(n)
    free = np.argmax(value, axis=1)
    over_a, over_b = a[rows, free].sum() > 1.0, b[rows, free].sum() > 1.0
    if not (over_a or over_b):
        return free, "none", price
    # price the budgets that are over first; if no price level fits both that way, mix the prices
    if over_a and over_b:
        mixes = ((None, "memory and cpu"), (0.0, "memory"), (1.0, "cpu"))
    else:
        mixes = (((0.0, "memory"),) if over_a else ((1.0, "cpu"),)) + ((None, "memory and cpu"),)
    candidates: list[tuple[np.ndarray, str]] = [] if stay is None else [(np.full(n, stay), "none")]
    for mix, label in mixes:
        found = _priced_choice(value, a, b, mix, price)
        if found is not None:
            candidates.append((found[0], label))
            price = found[1]
            break
    if not candidates:
        raise ValueError("no option per row fits both budgets and no known-fitting option was given")
    # only the better start gets the (full-width) greedy fill: it spends a sliver of budget
    best, label = max(candidates, key=lambda item: value[rows, item[0]].sum())
    return _fill(value, a, b, best), label, price


_MARGIN_ROWS = 8
"""The price bisection stops once this few rows still choose differently at its two ends; they are swept."""


def _priced_choice(
    value: np.ndarray, a: np.ndarray, b: np.ndarray, mix: float | None, hint: float | None = None
) -> tuple[np.ndarray, float] | None:
    """The best fitting choice of a Lagrangian relaxation pricing a·(1 − mix) + b·mix, and its price.

    ``mix`` None weighs each budget by how far the unpriced choice overshoots
    it (which is over, as ``knapsack`` calls this only then). The price is
    bracketed from ``hint`` (or 1): the choice at the low end does not fit,
    the one at the high end does. A row choosing the same at both ends
    chooses it at every price between, so the bisection re-prices only the
    rows at the margin, which shrink with every step; once few are left (or
    the bracket is tight) they are settled by ``_sweep``, which is exact. So
    the hint changes how many trial prices are needed, not the result
    (beyond ties). None when no price fits.
    """
    rows = np.arange(len(value))
    if mix is None:
        free = np.argmax(value, axis=1)
        over_a, over_b = max(a[rows, free].sum() - 1.0, 0.0), max(b[rows, free].sum() - 1.0, 0.0)
        mix = over_b / (over_a + over_b) if over_a + over_b > 0 else 0.5
    cost = a if mix == 0.0 else b if mix == 1.0 else a * (1.0 - mix) + b * mix

    def attempt(price: float) -> tuple[bool, np.ndarray]:
        picked = np.argmax(value - price * cost, axis=1)
        return a[rows, picked].sum() <= 1.0 and b[rows, picked].sum() <= 1.0, picked

    factor = 4.0 if hint is not None and hint > 0 else 16.0
    high = hint if hint is not None and hint > 0 else 1.0
    ok, high_pick = attempt(high)
    if ok:  # walk down to a price that does not fit; price 0 picks the unpriced choice, which does not
        low, low_pick = 0.0, np.argmax(value, axis=1)
        for _ in range(30):
            ok, pick = attempt(high / factor)
            if not ok:
                low, low_pick = high / factor, pick
                break
            high, high_pick = high / factor, pick
    else:
        low, low_pick = high, high_pick
        while True:
            high *= factor
            if high > 1e30:
                return None
            ok, high_pick = attempt(high)
            if ok:
                break
            low, low_pick = high, high_pick
    # bisect on the rows that choose differently at the two ends (compacted); the others are fixed
    live = np.flatnonzero(low_pick != high_pick)
    total_a, total_b = a[rows, high_pick].sum(), b[rows, high_pick].sum()
    # the live rows' options (value, cost, a, b) in one array, so that dropping rows is one operation
    options = np.stack((value[live], cost[live], a[live], b[live]))
    v, c, a_live, b_live = options
    low_live, high_live = low_pick[live], high_pick[live]
    if len(live) > _MARGIN_ROWS:
        r = np.arange(len(live))
        at_high = np.stack((a_live[r, high_live], b_live[r, high_live]))  # a and b of each live row's high pick
        picks = np.stack((live, low_live, high_live))
    while len(live) > _MARGIN_ROWS and high - low > 1e-9 * high:
        was_a, was_b = at_high.sum(axis=1)
        middle = np.sqrt(low * high) if 0 < 4 * low < high else (low + high) / 2
        picked = np.argmax(v - middle * c, axis=1)
        at_picked = np.stack((a_live[r, picked], b_live[r, picked]))
        now_a, now_b = at_picked.sum(axis=1)
        if total_a - was_a + now_a <= 1.0 and total_b - was_b + now_b <= 1.0:
            high, picks[2], at_high = middle, picked, at_picked
            total_a, total_b = total_a - was_a + now_a, total_b - was_b + now_b
            keep = picked != picks[1]
        else:
            low, picks[1] = middle, picked
            keep = picked != picks[2]
        high_pick[picks[0]] = picks[2]
        options, picks, at_high = options[:, keep], picks[:, keep], at_high[:, keep]
        (v, c, a_live, b_live), (live, low_live, high_live) = options, picks
        r = r[:len(live)]
    high_pick[live] = high_live
    if len(live):
        rest_a = a[rows, high_pick].sum() - a[live, high_live].sum()
        rest_b = b[rows, high_pick].sum() - b[live, high_live].sum()
        swept = _sweep(v, a_live, b_live, c, 1.0 - rest_a, 1.0 - rest_b)
        if swept is not None and v[np.arange(len(live)), swept].sum() > v[np.arange(len(live)), high_live].sum():
            high_pick[live] = swept
    return high_pick, high


def _sweep(value, a, b, cost, budget_a: float, budget_b: float) -> np.ndarray | None:
    """The exact Lagrangian sweep over some rows: the longest fitting prefix of their hull segments.

    As the price on ``cost`` falls, each row's choice walks along its upper
    concave hull of (cost, value) (``_hulls``), so the choices of all prices
    are the prefixes of all rows' hull segments sorted by slope (gain per
    unit of cost). Returns the choice of the longest prefix with Σ a ≤
    budget_a and Σ b ≤ budget_b, or None when not even the hull starts fit.
    """
    n = len(value)
    rows = np.arange(n)
    hull = _hulls(value, cost)
    start = hull[:, 0]
    base_a, base_b = a[rows, start].sum(), b[rows, start].sum()
    if not (base_a <= budget_a and base_b <= budget_b):
        return None
    step, seg_row = np.nonzero(hull[:, 1:].T >= 0)  # step-major: a row's segments in hull order
    here, there = hull[seg_row, step], hull[seg_row, step + 1]
    slope = (value[seg_row, there] - value[seg_row, here]) / (cost[seg_row, there] - cost[seg_row, here])
    order = np.argsort(-slope, kind="stable")  # slopes fall along a hull: a row's segments stay in order
    seg_row, here, there = seg_row[order], here[order], there[order]
    total_a = base_a + np.cumsum(a[seg_row, there] - a[seg_row, here])
    total_b = base_b + np.cumsum(b[seg_row, there] - b[seg_row, here])
    fitting = np.flatnonzero((total_a <= budget_a) & (total_b <= budget_b))
    taken = 0 if len(fitting) == 0 else int(fitting[-1]) + 1
    return hull[rows, np.bincount(seg_row[:taken], minlength=n)]


def _hulls(value: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Per row, the options on the upper concave hull of (cost, value) from the cheapest, by rising cost.

    Returns (Q, H) option indices padded with −1: column 0 is the cheapest
    option (the most valuable among equally cheap ones), and each next one
    the option with the steepest gain per unit of cost over the previous.
    A gift-wrapping walk, vectorised over rows. For few rows (the sweep's
    margin) every option's successor is found at once from the (Q, K, K)
    slopes and the walks only follow them; otherwise each step prices the
    rows still walking.
    """
    n, k = value.shape
    cheapest = cost.min(axis=1)
    current = np.argmax(np.where(cost == cheapest[:, None], value, -np.inf), axis=1)
    if n * k * k <= _HULL_CELLS:
        # successor[r][i]: the option after i on row r's hull (−1: none)
        dc = cost[:, None, :] - cost[:, :, None]  # [r, i, j] = cost[r, j] − cost[r, i]
        dv = value[:, None, :] - value[:, :, None]
        up = (dc > 0.0) & (dv > 0.0)
        slope = np.divide(dv, dc, out=np.full(dv.shape, -np.inf), where=up)
        nxt = np.argmax(slope, axis=2)
        successor = np.where(np.take_along_axis(up, nxt[:, :, None], axis=2)[:, :, 0], nxt, -1).tolist()
        walks = []
        for here, after in zip(current.tolist(), successor):  # few rows: a short walk each, in Python
            walk = [here]
            while after[here] >= 0:
                here = after[here]
                walk.append(here)
            walks.append(walk)
        width = max(map(len, walks), default=1)
        return np.array([walk + [-1] * (width - len(walk)) for walk in walks], dtype=np.intp).reshape(n, width)
    hull = np.full((n, k), -1, dtype=np.intp)
    hull[:, 0] = current
    live = np.arange(n)
    for j in range(1, k):
        c, v = cost[live], value[live]
        here = current[live][:, None]
        dc = c - np.take_along_axis(c, here, axis=1)
        dv = v - np.take_along_axis(v, here, axis=1)
        up = (dc > 0.0) & (dv > 0.0)
        slope = np.divide(dv, dc, out=np.full(dv.shape, -np.inf), where=up)
        nxt = np.argmax(slope, axis=1)
        more = up[np.arange(len(live)), nxt]
        live, nxt = live[more], nxt[more]
        if len(live) == 0:
            return hull[:, :j]
        hull[live, j] = nxt
        current[live] = nxt
    return hull


_HULL_CELLS = 1 << 14
"""``_hulls`` finds all successors at once when rows × options² is at most this (128 KiB of slopes)."""


def _fill(value: np.ndarray, a: np.ndarray, b: np.ndarray, picked: np.ndarray, rounds: int = 2) -> np.ndarray:
    """Spend leftover budget on single-row upgrades with the most value per unit of budget.

    Only the (row, option) upgrades that fit the slack on their own are
    scored; the best of each row is taken in order of efficiency while the
    running totals stay within the slack.
    """
    rows = np.arange(len(value))
    picked = picked.copy()
    for _ in range(rounds):
        chosen_v, chosen_a, chosen_b = value[rows, picked], a[rows, picked], b[rows, picked]
        slack_a, slack_b = 1.0 - chosen_a.sum(), 1.0 - chosen_b.sum()
        usable = value > chosen_v[:, None]
        usable &= a - chosen_a[:, None] <= slack_a
        usable &= b - chosen_b[:, None] <= slack_b
        row, option = np.nonzero(usable)
        if len(row) == 0:
            break
        cost_a, cost_b = a[row, option] - chosen_a[row], b[row, option] - chosen_b[row]
        spend = np.maximum(cost_a, 0.0) / max(slack_a, 1e-300) + np.maximum(cost_b, 0.0) / max(slack_b, 1e-300)
        efficiency = (value[row, option] - chosen_v[row]) / np.maximum(spend, 1e-300)
        best = np.lexsort((-efficiency, row))  # per row, the most efficient upgrade first
        ranked = row[best]
        first = best[np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))]
        order = first[np.argsort(-efficiency[first], kind="stable")]
        # the longest prefix whose running totals stay within the slack at every point
        within = np.maximum.accumulate(np.maximum(cost_a[order].cumsum() - slack_a, cost_b[order].cumsum() - slack_b)) <= 0
        take = order[within]
        if len(take) == 0:
            break
        picked[row[take]] = option[take]
    return picked
