"""The cost model the control cycle decides on, and what the configuration fixes around it.

Why a module of its own: the cycle, the watchers and the wiring all need the
same answers — which plan the estimates use (the configured one with the
smoothed measured selectivities in place of the plan's and every JISC join
rebuilt in the order it runs), which queries a problem covers, what settings
a pair of fraction vectors means — and each answer must be computed in one
place, once per change of its inputs, not once per caller. ``Setup`` is the
part the configuration fixes (rebuilt on a reload); ``Model`` is rebuilt
when a measured selectivity, group model, bytes per row, herald skip
fraction or a join order moves. Pure: no clock, no IO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from armd.costmodel.heralds import apply_herald_measures, measured_effect
from armd.costmodel.plan import PlanSet
from armd.policies.base import Policy
from armd.policies.guardrails import Guardrails
from armd.policies.forecast import ForecastRules
from armd.policies.join_order import plan_in_order
from armd.policies.migration_cost import Exchange
from armd.policies.problem import Bounds, Problem
from armd.policies.triggers import ArrivalTracker, RateTracker

from .feedback import FeedbackRules
from .measured import MeasuredInputs
from .ports import EstimateRow, QuerySettings


@dataclass(frozen=True)
class JoinRule:
    """How the join order of one JISC join is chosen (``[managed.*.join_order]``)."""

    order: tuple[str, ...]
    """The join's streams (the configured order)."""
    margin: float
    cooldown: float
    """In model time units."""
    shape: str
    payback: float | None = None
    """In model time units: the saving must pay the migration back within it (None: the migration is not priced)."""


@dataclass(frozen=True)
class Migrations:
    """How the applying side puts settings into force, for pricing a change's migration."""

    strategy: str = "instant"
    """``genmig``, ``naive-restart`` or ``instant`` (the simulated plant)."""
    exchange: Exchange = Exchange()
    timings: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Per Spark query: (watermark delay, trigger interval) in seconds."""
    strategies: Mapping[str, str] = field(default_factory=dict)
    """Per query, a strategy other than ``strategy`` (``armd.agent`` queries: ``genmig``, whatever the daemon's own)."""

    def strategy_of(self, query: str) -> str:
        return self.strategies.get(query, self.strategy)


@dataclass(frozen=True)
class Setup:
    """What the configuration fixes for the cycle: the plan, the bounds, the rules and the policy."""

    plan: PlanSet
    qos: Mapping[str, Any]
    profile: str
    bounds: Bounds
    rails: Guardrails
    """With ``cooldown`` in model time units."""
    policy: Policy
    decide_period: float
    """Model time units between periodic decisions."""
    joins: Mapping[str, JoinRule]
    """The JISC joins whose order the cycle chooses."""
    estimate_factor: float
    """``estimate_mismatch`` when measured and estimated state differ by more than this factor."""
    stale_intervals: int
    """``statistics_stale`` after this many observations without rows."""
    observe_seconds: float
    feedback: FeedbackRules = FeedbackRules()
    """How measurements correct the model (``control/feedback.py``)."""
    time_unit_seconds: float = 1.0
    """Seconds per model time unit (d and windows are in model units, arrival counts in seconds)."""
    migration: Migrations = field(default_factory=lambda: Migrations())
    """How settings go into force and what a migration is worth (``policies.migration_cost``)."""
    forecast: ForecastRules = ForecastRules()
    """Whether decisions use each stream's rate forecast at the adaptation horizon (``policies.forecast``)."""


@dataclass(frozen=True)
class Model:
    """The cost model of every configured query, as the cycle estimates them now."""

    full: Problem
    stream_names: tuple[str, ...]
    plan_d: np.ndarray
    """The configured d per stream (``stream_names`` order): the value until a rate is measured."""
    orders: Mapping[str, Any]
    """The order each JISC join is estimated in."""

    def problem_of(self, queries: list[str] | tuple[str, ...]) -> Problem:
        index = {q: i for i, q in enumerate(self.full.queries)}
        return self.full.subproblem(np.array(sorted(index[q] for q in queries), dtype=np.intp))

    def current_d(self, rates: ArrivalTracker | RateTracker) -> np.ndarray:
        smoothed = rates.smoothed
        return np.array([smoothed.get(s, d) for s, d in zip(self.stream_names, self.plan_d)], dtype=float)


EVALUATED_FLOOR = 1e-6
"""The least evaluated share smoothed: a node whose heralds skip everything still registers (smoothing keeps > 0)."""


def evaluated_shares(skips: Mapping[str, float]) -> dict[str, float]:
    """Measured herald skip fractions as the shares of evaluation work left, the value the cycle smooths.

    The share left is what the cost model prices (``costmodel.heralds``), so a
    relative change of it is a relative change of the node's evaluation cost:
    from skipping 50 % to 90 % is the work divided by five, a decision's worth.
    """
    return {node: max(1.0 - skip, EVALUATED_FLOOR) for node, skip in skips.items()}


def with_herald_measures(plan: PlanSet, evaluated: Mapping[str, float]) -> PlanSet:
    """``plan`` with each select's or join's smoothed measured evaluated share (1 − skip) in place of the
    skip fraction its ``heralds`` declare (nodes that declare none get the default overhead and partition)."""
    effects = {node: measured_effect(plan.nodes[node].heralds, min(1.0, max(0.0, 1.0 - share)))
               for node, share in evaluated.items() if node in plan.nodes and plan.nodes[node].op in ("select", "join")}
    return apply_herald_measures(plan, effects) if effects else plan


def build_model(setup: Setup, selectivities: Mapping[str, float], orders: Mapping[str, Any],
                pair_selectivities: Mapping[str, RateTracker], measured: MeasuredInputs | None = None,
                heralds: Mapping[str, float] | None = None) -> Model:
    """The plan with the smoothed measured ``selectivities`` in place of the plan's, each JISC join in its ``orders``,
    the ``measured`` group models and bytes per state row (``control/measured.py``) in place of the declared ones and
    the smoothed measured evaluated shares of nodes run with ``heralds`` (``evaluated_shares``) priced by paper 002's
    equation 9."""
    plan = setup.plan
    if heralds:
        plan = with_herald_measures(plan, heralds)
    if selectivities:
        nodes = {node_id: replace(node, sel=min(1.0, selectivities[node_id])) if node_id in selectivities else node
                 for node_id, node in plan.nodes.items()}
        plan = replace(plan, nodes=nodes)
    for query, order in orders.items():
        plan = plan_in_order(plan, query, order, *key_match(setup.plan, query, selectivities, pair_selectivities.get(query)))
    if measured is not None:
        plan = measured.apply(plan, setup.time_unit_seconds)
    full = Problem(plan, setup.qos, profile=setup.profile)
    names = tuple(full.batch.stream_names)
    return Model(full, names, np.array([setup.plan.streams[s].d for s in names], dtype=float), dict(orders))


def key_match(plan: PlanSet, query: str, selectivities: Mapping[str, float],
              pairs: RateTracker | None) -> tuple[dict[frozenset[str], float], float]:
    """A JISC join's smoothed measured selectivity per pair of streams, and the one for pairs not measured yet.

    The latter is the geometric mean of the query's join nodes'
    selectivities (measured when reported, else the plan's).
    """
    joins = [n for n in plan.query_nodes(query) if plan.nodes[n].op == "join" and plan.nodes[n].sel is not None]
    sels = [min(1.0, selectivities.get(n, plan.nodes[n].sel)) for n in joins]
    default = math.exp(sum(math.log(x) for x in sels) / len(sels)) if sels else 1.0
    measured = {frozenset(key.split(",")): min(1.0, v) for key, v in (pairs.smoothed if pairs else {}).items()}
    return {p: v for p, v in measured.items() if len(p) == 2}, default


def longest_window(plan: PlanSet, query: str, settings: QuerySettings) -> float:
    """The largest window of ``query`` in model time units: the decided sizes, else the plan's."""
    sizes = [settings.windows.get(n, plan.nodes[n].w) for n in plan.query_nodes(query) if plan.nodes[n].w is not None]
    return max(sizes, default=0.0)


def same_settings(a: QuerySettings | None, b: QuerySettings) -> bool:
    """Whether ``b`` changes nothing that runs (window sizes, granularity, drop rate) compared with ``a``."""
    return (a is not None and dict(a.windows) == dict(b.windows) and a.granularity == b.granularity
            and a.drop_rate == b.drop_rate)


def shrinks(a: QuerySettings | None, b: QuerySettings) -> bool:
    """Whether ``b`` only cuts ``a``'s windows (no window grows, one gets smaller; granularity and drop rate the same)."""
    return (holds_no_more(a, b) and a.granularity == b.granularity and a.drop_rate == b.drop_rate  # type: ignore[union-attr]
            and any(w < a.windows[n] for n, w in b.windows.items()))  # type: ignore[union-attr]


def holds_no_more(a: QuerySettings | None, b: QuerySettings) -> bool:
    """Whether ``b`` holds no more state than ``a`` by construction: no window larger, a granularity no finer (a
    larger slide keeps fewer windows live), a drop rate no lower, and the same windows."""
    if a is None or set(a.windows) != set(b.windows) or b.drop_rate < a.drop_rate:
        return False
    if a.granularity is not None and (b.granularity is None or b.granularity < a.granularity):
        return False
    return all(w <= a.windows[n] for n, w in b.windows.items())


def fractions_of(problem: Problem, running: Mapping[str, QuerySettings]) -> tuple[np.ndarray, np.ndarray]:
    """The fractions in force per query of ``problem`` (0 for a query not started yet)."""
    fw = np.array([running[q].fw if q in running else 0.0 for q in problem.queries])
    fg = np.array([running[q].fg if q in running else 0.0 for q in problem.queries])
    return fw, fg


def drops_of(problem: Problem, running: Mapping[str, QuerySettings]) -> np.ndarray | None:
    """The drop fractions in force per query of ``problem`` (None when no query may shed).

    Read back from each query's drop rate: 1 at the low end of its range, 0 at the high end.
    """
    if not problem.sheds:
        return None
    return problem.drops.fractions(np.array([running[q].drop_rate if q in running else 0.0 for q in problem.queries]))


def settings_of(problem: Problem, fw: np.ndarray, fg: np.ndarray, fd: np.ndarray | None = None) -> dict[str, QuerySettings]:
    """What the fractions mean per query: window sizes per node, the granularity, the drop rate and the QoS achieved."""
    w, g = problem.values(fw, fg)
    qos = problem.qos(w, g)
    drops = np.zeros(len(problem.queries))
    if problem.sheds:
        qos = problem.score(fw, fg, fd)
        drops = problem.drop_rates(fd)
    node_ids = problem.batch.node_ids
    windows: dict[int, dict[str, float]] = {}
    for node, qi in zip(problem.win_idx, problem.win_query):
        windows.setdefault(int(qi), {})[node_ids[node]] = float(w[node])
    granularity: dict[int, float] = {}
    for node, qi in zip(problem.gran_idx, problem.gran_query):
        granularity.setdefault(int(qi), float(g[node]))
    return {
        q: QuerySettings(float(fw[i]), float(fg[i]), windows.get(i, {}), granularity.get(i), float(qos[i]), float(drops[i]))
        for i, q in enumerate(problem.queries)
    }


def memory_of(problem: Problem, settings: Mapping[str, QuerySettings], stream_d: np.ndarray) -> tuple[float, dict[str, float]]:
    """The estimated memory, in total and per query, with ``settings`` in force (queries without settings hold nothing)."""
    outcome = problem.evaluate(*fractions_of(problem, settings), stream_d, with_qos=False, fd=drops_of(problem, settings))
    return float(outcome.total_memory), {q: float(m) for q, m in zip(problem.queries, outcome.query_memory)}


def estimate_rows(problem: Problem, fw: np.ndarray, fg: np.ndarray, stream_d: np.ndarray,
                  fd: np.ndarray | None = None) -> list[EstimateRow]:
    """Memory and CPU per query of ``problem`` at the fractions, the total (shared nodes once) last."""
    outcome = problem.evaluate(fw, fg, stream_d, with_qos=False, fd=fd)
    rows = [EstimateRow(q, float(m), float(c)) for q, m, c in zip(problem.queries, outcome.query_memory, outcome.query_cpu)]
    rows.append(EstimateRow(None, float(outcome.total_memory), float(outcome.total_cpu)))
    return rows
