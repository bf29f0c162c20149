"""Closed loop: measured state and CPU correct the cost model the cycle decides on.

Why: the cost model is a feed-forward estimate. When it is wrong — a plan's
bytes per row off, keys that drift so a window holds more distinct groups than
the model assumes — a decision that trusts it alone calls the system feasible
while the measured state stays over the bound. Here measurements become
feedback (paper 001 §4: the adaptation must hold the bounds the system really
has):

- Per query, a ratio measured / estimated for state bytes (and, when the model
  is calibrated in seconds, for CPU) is smoothed over a time window (weight
  1 − exp(−Δt/τ) for an observation Δt after the last one, so its meaning does
  not change with the observation interval). The smoothing is asymmetric: a
  ratio above the factor by more than the dead band is followed within
  ``rise`` (seconds), anything else only over ``window`` — under-estimating state breaks the bound, over-estimating
  it only costs some QoS for a while. Observations of a migrating query never
  count (both plans hold state). A query whose windows are still filling since
  its last change counts once a quarter of its window has filled, against the
  part of the estimate that can exist so far (estimate × filled fraction: the
  state a window holds grows with the time it has been open; the cycle gives
  filling fractions only when every change starts a new, empty plan — GenMig
  or a restart, not a change in place — and only for queries without joins,
  whose state grows faster than linearly), so a plan whose
  bytes per row is wrong is corrected during warm-up, before the bound is hit;
  such a factor is provisional (a partly filled window over-counts its first
  granules), and the first steady ratio replaces it.
- The decision optimises the estimates times those ratios
  (``Problem.corrected``).
- While the measured total is over the usable bound, a decision is due and each
  query's factor is at least its latest measured ratio — steady or not (a
  window that still holds a burst's start under-counts, so this only raises a
  factor where the state really exceeds the model) — so the corrected
  estimate of what runs is at least what was measured and the decision cuts.
- Item 5 (ineffective adaptation): the last decision's predicted trajectory
  (``policies/trajectory.py``) says when the bound holds; once that time has
  passed and every query is steady, measured state over the bound means the
  adaptation did not work: ``adaptation_ineffective``, the ratios set to the
  latest measurement at once (not smoothed) and a new, tighter decision.

Pure: times are model time units given by the caller; no clock, no IO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

import numpy as np

from armd.policies.problem import Bounds, Problem
from armd.policies.trajectory import Trajectory

from .ports import EstimateRow, EventRecord, Observation


@dataclass(frozen=True)
class FeedbackRules:
    """``[feedback]`` of the configuration, in model time units."""

    enabled: bool = True
    window: float = 60.0
    """Time constant τ of the smoothing, in model time units."""
    min_ratio: float = 0.25
    max_ratio: float = 8.0
    cpu: bool = False
    """Correct CPU too (meaningful only when the model is calibrated: estimates in seconds per time unit)."""
    time_unit_seconds: float = 1.0
    deadband: float = 0.15
    """A factor within this relative distance of the one the last decision used is kept at that one."""
    rise: float = 5.0
    """Time constant for a ratio above the factor (model time units): the factor rises fast, falls over ``window``."""


MIN_FILL = 0.25
"""A filling window counts once this fraction of it has filled: before, a few rows make the ratio noise."""


@dataclass(frozen=True)
class QueryFeedback:
    memory: float = 1.0
    """Smoothed measured / estimated state bytes."""
    cpu: float = 1.0
    """Smoothed measured / estimated CPU."""
    last_memory: float | None = None
    """The latest steady ratio, unsmoothed (clamped)."""
    memory_at: float | None = None
    cpu_at: float | None = None
    raw: float | None = None
    """The latest ratio of any observation outside a migration (windows filling or holding two rates included)."""
    provisional: bool = False
    """``memory`` comes from filling windows only: the first steady ratio replaces it."""


@dataclass(frozen=True)
class Expectation:
    """What the last decision promised: from ``hold_at`` on the state is within the bound."""

    hold_at: float
    """Model time."""
    since: datetime
    predicted: float
    """Bytes the trajectory predicts once it has settled."""


@dataclass(frozen=True)
class FeedbackState:
    queries: Mapping[str, QueryFeedback] = field(default_factory=dict)
    measured_total: float | None = None
    over_since: float | None = None
    """Model time since which the measured total is over the usable bound (None: it is not)."""
    over_decided: bool = False
    """A decision ran since the measured total went over."""
    expectation: Expectation | None = None
    due: str | None = None
    """Why a decision is due now (an ineffective adaptation), cleared by the decision."""
    stepped_at: Mapping[str, float] = field(default_factory=dict)
    """Per stream, the model time its rate last stepped (windows holding both rates give no ratio)."""
    fell_at: Mapping[str, float] = field(default_factory=dict)
    """Per stream, the model time its rate last stepped *down*: until a window has turned over since, the windows
    reading it hold state of the faster rate that is going away (``control.ramp.deciding_bounds``)."""
    decided: tuple[tuple[str, float, float], ...] = ()
    """The factors the last decision used (a policy's incremental state is only valid for the same ones)."""
    at_step: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Per query whose input rate stepped: (model time of the step, measured state bytes then), for ``projected``."""
    spread: float = 0.0
    """One standard deviation of the measured total from the arrivals' noise, in bytes (0: rows not counted)."""
    unmeasured: frozenset[str] = frozenset()
    """Queries whose windows fill since they started or changed and that have no ratio yet (under ``MIN_FILL``)."""
    prior: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Per query whose input rate stepped up: (``step_prior``'s factor, model time of the step), kept until a window
    has turned over since the step (the cycle drops it then); the factor is at least that meanwhile."""


def smoothed(previous: float, sample: float, elapsed: float, window: float, rise: float | None = None,
             band: float = 0.0) -> float:
    """Exponential smoothing by time: the new sample weighs 1 − exp(−elapsed/τ).

    τ is ``rise`` for a sample more than ``band`` (relative) above the
    previous value, else ``window``: a real rise is followed at once, while
    noise within the band moves the value symmetrically, so it is not biased up.
    """
    tau = rise if rise is not None and sample > previous * (1 + band) else window
    weight = 1.0 - math.exp(-max(elapsed, 0.0) / tau) if tau > 0 else 1.0
    return previous + weight * (sample - previous)


def clamp(ratio: float, rules: FeedbackRules) -> float:
    return min(rules.max_ratio, max(rules.min_ratio, ratio))


def measured_cpu(observation: Observation, unit_seconds: float) -> dict[str, float]:
    """Per query, the seconds its engine batches took per model time unit over the interval (empty without batches)."""
    interval = max((s.interval_seconds for s in observation.streams), default=0.0)
    if interval <= 0 or not observation.batches:
        return {}
    busy: dict[str, float] = {}
    for batch in observation.batches:
        busy[batch.query] = busy.get(batch.query, 0.0) + batch.batch_ms / 1e3
    return {q: seconds / (interval / unit_seconds) for q, seconds in busy.items()}


def observe(state: FeedbackState, rules: FeedbackRules, *, at: datetime, now: float, measured: Mapping[str, float],
            estimated: Mapping[str, float], steady: frozenset[str] | set[str], usable: float, bound: float,
            cpu_measured: Mapping[str, float] | None = None, cpu_estimated: Mapping[str, float] | None = None,
            settled: bool = False, rows: int | None = None, filling: Mapping[str, float] | None = None,
            migrating: bool = False, stepped: frozenset[str] | set[str] = frozenset(),
            projected: Mapping[str, float] | None = None, total: float | None = None) -> tuple[FeedbackState, list[EventRecord]]:
    """Fold one observation in: the ratios of steady queries, the measured total against the bounds, item 5's check.

    ``measured``/``estimated``: state bytes per admitted query (the raw model's
    estimate of the settings in force); ``settled``: every admitted query runs
    steadily (none migrates, all windows filled since their last change);
    ``total``: the measured state of every admitted query, each its newest
    report (``control/held_state.py``; default: the sum of ``measured``,
    which may hold only the queries of the applications that reported this
    time); ``rows``: the state rows behind ``total`` when the source counts them;
    ``filling``: per query that runs (not migrating) with windows still
    filling since its last change, the fraction filled; ``migrating``: some
    query holds both plans' state, so a total over the bound is (in part) a
    migration's transient, already predicted when it was staged, and no
    reason to decide again before it ends; ``stepped``: queries (not
    migrating) whose windows hold two input rates since a step;
    ``projected``: for some of those, the state their windows will hold
    once turned over (``project``), which stands for the measured state in
    their latest ratio.
    """
    if not rules.enabled:
        return state, []
    queries = dict(state.queries)
    for q, value in measured.items():
        if estimated.get(q, 0.0) > 0 and (q in steady or q in (filling or {}) or q in (stepped or ())):
            value = max(value, (projected or {}).get(q, 0.0))
            queries[q] = replace(queries.get(q, QueryFeedback()), raw=clamp(value / estimated[q], rules))
    share = {q: 1.0 for q in steady}
    share.update({q: f for q, f in (filling or {}).items() if q not in share and f >= MIN_FILL})
    for q, fraction in share.items():
        if q in measured and estimated.get(q, 0.0) > 0:
            ratio = clamp(measured[q] / (estimated[q] * min(fraction, 1.0)), rules)
            old = queries.get(q, QueryFeedback())
            fresh = old.memory_at is None or (old.provisional and fraction >= 1.0)
            value = ratio if fresh else smoothed(old.memory, ratio, now - old.memory_at, rules.window, rules.rise,
                                                 rules.deadband)
            queries[q] = replace(old, memory=value, last_memory=ratio, memory_at=now,
                                 provisional=fraction < 1.0 and (old.provisional or old.memory_at is None))
    if rules.cpu:
        for q, seconds in (cpu_measured or {}).items():
            estimate = (cpu_estimated or {}).get(q, 0.0)
            if q in steady and estimate > 0:
                ratio = clamp(seconds / estimate, rules)
                old = queries.get(q, QueryFeedback())
                value = ratio if old.cpu_at is None else smoothed(old.cpu, ratio, now - old.cpu_at, rules.window)
                queries[q] = replace(old, cpu=value, cpu_at=now)
    if total is None:
        total = float(sum(measured.values())) if measured else None
    over = total is not None and total > usable + noise(total, rows) and not migrating
    over_since = (state.over_since if state.over_since is not None else now) if over else None
    state = replace(state, queries=queries, measured_total=total, over_since=over_since,
                    spread=noise(total, rows) / 2 if total is not None else 0.0,
                    over_decided=state.over_decided and over_since is not None)
    expected = state.expectation
    if expected is None or total is None or now < expected.hold_at or not settled or total <= bound + noise(total, rows):
        return state, []
    # The trajectory said the bound holds by now and nothing is in transition: the model is still wrong.
    queries = {q: replace(f, memory=f.last_memory) if f.last_memory is not None else f for q, f in queries.items()}
    message = (f"the last adaptation was predicted to hold the memory bound {bound:,.0f} B from "
               f"{expected.since.isoformat()} at about {expected.predicted:,.0f} B, but {total:,.0f} B is measured; "
               "recalibrating from the measurements and deciding again")
    event = EventRecord(at, "adaptation_ineffective", "warning", message, None,
                        {"predicted": expected.predicted, "measured": total, "since": expected.since.isoformat(),
                         "bound": bound, "ratios": {q: f.memory for q, f in sorted(queries.items())}})
    return replace(state, queries=queries, expectation=None, due="the last adaptation was ineffective: measured state "
                   f"{total:,.0f} B over the bound {bound:,.0f} B after its predicted settle time"), [event]


def project(at_step: tuple[float, float], measured: float, now: float, window: float) -> float | None:
    """The state a window will hold once it has turned over since its input rate stepped, from its growth so far.

    A window of size W that saw its rate step τ ago holds (1 − τ/W) of the
    old rate's elements and τ/W of the new one's, so its state moves
    linearly from what it held at the step to the new steady state: that
    state is m_step + (m − m_step)·W/τ. The model may not know the new
    steady state (keys that drift: a count per key's groups grow with the
    arrivals while its estimate stays flat), the measurement's slope does.
    None before a quarter of the window (``MIN_FILL``) has turned over: a few
    seconds' growth times W/τ is mostly noise.
    """
    stepped, before = at_step
    elapsed = now - stepped
    if window <= 0 or elapsed < MIN_FILL * window or elapsed >= window:
        return None
    return max(0.0, before + (measured - before) * window / elapsed)


def step_prior(factor: float, before: float, after: float, up: float, shared: float = 1.0) -> float | None:
    """The factor for a query right after its input rate stepped up by ``up`` (new / old rate), when the state the
    model does not explain is assumed to come with the arrivals.

    Before the step the query held ``before`` × ``factor`` (``before``: the estimate at the old rate), of which
    ``before`` × (``factor`` − ``shared``) the model does not explain (``shared``: the part of the factor every query
    of the stream has, the elements' bytes, which follows the estimate); that part times ``up``, over the estimate at
    the new rate ``after``, plus ``shared``. None when there is nothing unexplained, no rise or no estimate.
    A count per key whose keys drift (new ids with every arrival) holds groups its fixed group-by does not foresee:
    its estimate stays flat through a ×4 burst while that excess grows ×4 — known from the measurements only once
    a quarter of its window has turned over (``project``), after the decision at the step has cut too little.
    """
    shared = min(max(shared, 1.0), factor)
    if factor <= shared or up <= 1.0 or before <= 0 or after <= 0:
        return None
    prior = shared + before * (factor - shared) * up / after
    return prior if prior > factor else None


def noise(total: float, rows: int | None) -> float:
    """Two standard deviations of a state of ``rows`` Poisson-counted rows, in bytes (0 when not counted).

    A controller that fills the usable bound holds state about at it, so
    arrivals' noise alone crosses it up and down; only a crossing by more than
    that is a reason to cut (and to re-decide), or the noise drives decisions.
    """
    return 2.0 * total / math.sqrt(rows) if rows else 0.0


def waiting(state: FeedbackState, rules: FeedbackRules) -> bool:
    """Some query's ratio is about to be known (its windows fill and a ratio comes at ``MIN_FILL``) and the measured
    state is not over the bound: an estimate of the settings in force over the bounds waits for it.

    During the warm-up the windows fill: a decision on the ratios of some queries and the plan's word for the others
    cuts too little, and the next one, a few seconds later, cuts the same queries again, each cut a migration whose
    old plan goes on filling beside the new one until it drains (a plan whose bytes per row is 2× the model's made
    four warm-up migrations this way)."""
    return rules.enabled and bool(state.unmeasured) and state.over_since is None


def with_margin(bounds: Bounds, state: FeedbackState, rules: FeedbackRules) -> Bounds:
    """``bounds`` with the usable memory lowered by one standard deviation of the measured state's noise.

    A decision that fills the usable bound in expectation leaves the measured state over it about every other
    second, by the arrivals' noise alone (a plant at its QoS minima after a burst sat 0.2–1.5 % over for 18 of its 32
    seconds over). Aiming one standard deviation under it keeps the state under about five seconds in six; the cost
    is that much QoS (about 3 % of the bound at a thousand state rows), only where the bound binds.
    """
    if not rules.enabled or state.spread <= 0 or state.spread >= bounds.usable_memory / 2:
        return bounds
    return replace(bounds, memory=bounds.memory - state.spread / (1.0 - bounds.reserve))


def trigger(state: FeedbackState) -> str | None:
    """Why feedback makes a decision due now, if it does."""
    if state.due:
        return state.due
    if state.over_since is not None and not state.over_decided and state.measured_total is not None:
        return f"measured state {state.measured_total:,.0f} B is over the usable memory bound"
    return None


def factors(state: FeedbackState, rules: FeedbackRules, queries: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Memory and CPU factors per query (1 without a measurement); at least the latest ratio while over the bound."""
    memory, cpu = np.ones(len(queries)), np.ones(len(queries))
    if not rules.enabled:
        return memory, cpu
    used = {q: (m, c) for q, m, c in state.decided}
    for i, q in enumerate(queries):
        f = state.queries.get(q)
        if f is None:
            continue
        memory[i] = max(f.memory, f.last_memory or 0.0, f.raw or 0.0) if state.over_since is not None else f.memory
        if q in state.prior:
            memory[i] = max(memory[i], state.prior[q][0])
        cpu[i] = f.cpu
        if q in used:  # noise around the factor a decision used is no reason to decide (and migrate) again
            memory[i], cpu[i] = _kept(memory[i], used[q][0], rules.deadband), _kept(cpu[i], used[q][1], rules.deadband)
    return memory, cpu


def _kept(factor: float, used: float, deadband: float) -> float:
    return used if abs(factor - used) <= deadband * used else factor


def corrected(problem: Problem, state: FeedbackState, rules: FeedbackRules) -> Problem:
    """``problem`` with the feedback factors applied (itself when every factor is 1)."""
    memory, cpu = factors(state, rules, problem.queries)
    if np.all(memory == 1.0) and np.all(cpu == 1.0):
        return problem
    return problem.corrected(memory, cpu)


def corrected_total(rows: Sequence[EstimateRow], state: FeedbackState, rules: FeedbackRules) -> tuple[float, float]:
    """The total memory and CPU of estimate rows (per query, the total last) with the factors applied, as ``corrected``."""
    per_query = [r for r in rows if r.query is not None]
    memory, cpu = factors(state, rules, [r.query for r in per_query])
    total = rows[-1]
    return (float(total.memory_bytes + sum((f - 1) * r.memory_bytes for f, r in zip(memory, per_query))),
            float(total.cpu + sum((f - 1) * r.cpu for f, r in zip(cpu, per_query))))


def as_json(problem: Problem) -> dict[str, Any]:
    """The factors a decision used, for its record."""
    queries = problem.queries
    memory = problem.memory_scale if problem.memory_scale is not None else np.ones(len(queries))
    cpu = problem.cpu_scale if problem.cpu_scale is not None else np.ones(len(queries))
    return {q: {"memory": float(m), "cpu": float(c)} for q, m, c in zip(queries, memory, cpu)}


def signature(problem: Problem) -> tuple[tuple[str, float, float], ...]:
    return tuple((q, f["memory"], f["cpu"]) for q, f in as_json(problem).items())


def decided(state: FeedbackState, rules: FeedbackRules, problem: Problem, trajectory: Trajectory | None, *, at: datetime,
            now: float, settled_memory: float) -> FeedbackState:
    """After a decision: what it promised (when its trajectory says the bound holds), the factors it used."""
    expectation = None
    if trajectory is not None and trajectory.bounds_hold_at is not None:
        since = at + timedelta(seconds=(trajectory.bounds_hold_at - now) * rules.time_unit_seconds)
        expectation = Expectation(float(trajectory.bounds_hold_at), since, settled_memory)
    return replace(state, expectation=expectation, due=None, over_decided=state.over_since is not None,
                   decided=signature(problem))

