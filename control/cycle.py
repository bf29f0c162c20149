"""One tick of the control cycle as pure functions: observation in, estimates, events and desired settings out.

Why pure: everything armd decides must be reproducible from what it saw.
The wiring (``daemon/controller.py``) reads the clock, the statistics
source, the store and the join-order control files, puts what it read into
a ``Snapshot``, calls ``observe`` and ``decide`` here, and writes what they
return; nothing in this module reads a clock or does IO, so a test drives a
tick with plain values and checks every output.

What used to travel between the scheduler's steps in flags is explicit:
``Changes`` says what moved since the last decision (queries, bounds, the
model), ``CycleState`` is what the cycle remembers between ticks (smoothed
statistics, the policy's state, admission verdicts, the watchers' state).

Every change goes the same way: decide → guard → price → stage → desired.
The policy decides on the smoothed rates, or on the rates forecast at the
adaptation delay when forecasting is on (``forecasting``); a change whose
QoS gain does not cover its migration's price is taken back (``pricing``).
Window and granularity settings come from the QoS policy through the guardrails;
JISC join orders from the join-order policy (its margin and cool-down are
its guardrails). Staging marks which changes may start migrating now. The
result is one ``DesiredSettings`` per changed query, with the next
``plan_version``; in a dry run the rows are recommendations
(``recommend_only``) and nothing is put into force, join orders included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Collection, Mapping

import numpy as np

from armd.policies.admission import Admission, admit
from armd.policies.base import PolicyInput
from armd.policies.forecast import RateHistory
from armd.policies.guardrails import Guarded, Running, guard
from armd.policies.join_order import JoinOrderState, JoinStats
from armd.policies.join_order import decide as decide_join_order
from armd.policies.problem import Bounds, Problem
from armd.policies.ramp import Trend
from armd.policies.staging import Staging
from armd.policies.trajectory import predict
from armd.policies.triggers import ArrivalTracker, RateTracker, TriggerRules, decision_due

from . import feedback
from .forecasting import forecast_d, rising_streams
from .held_state import HeldState
from .ramp import deciding_bounds, drained_growths, grows, staged_cuts
from .measured import MeasuredInputs
from .model import (Model, Setup, build_model, drops_of, estimate_rows, evaluated_shares, fractions_of, key_match,
                    longest_window, same_settings, settings_of)
from .ports import DecisionRecord, DesiredSettings, EstimateRow, EventRecord, Observation, QuerySettings
from .desired import TransientMemory, stage_changes, staged_events
from .pricing import concentrate_cuts, cut_deep_on_step, hold_small_cuts, keep_pending_cuts, price, transient_fit
from .records import decision_record, json_safe, new_id
from .watchers import WatchState, watch_bound, watch_estimates, watch_streams



@dataclass(frozen=True)
class Changes:
    """What moved since the last decision, besides rates and selectivities (which the state tracks)."""

    queries: bool = False
    """Queries were added or removed (admission runs first)."""
    bounds: bool = False
    model: bool = False
    """The cost model was rebuilt (the policy's state belongs to the old one)."""

    def __or__(self, other: Changes) -> Changes:
        return Changes(self.queries or other.queries, self.bounds or other.bounds, self.model or other.model)


@dataclass(frozen=True)
class CycleState:
    """What the cycle remembers from one tick to the next."""

    rates: ArrivalTracker
    """Arrival counts and smoothed d per stream."""
    selectivities: RateTracker
    """Smoothed measured selectivity per plan node."""
    pair_selectivities: Mapping[str, RateTracker] = field(default_factory=dict)
    """Per JISC join: its smoothed measured key-match selectivity per pair of streams ("a,b")."""
    policy_state: Any = None
    join_states: Mapping[str, JoinOrderState] = field(default_factory=dict)
    status: Mapping[str, str] = field(default_factory=dict)
    """Admission verdict per configured query: ``active`` or ``rejected`` (absent: not decided yet)."""
    last_decision_at: float | None = None
    last_feasible: bool = True
    estimate_over: bool = False
    """The latest estimate of the settings in force exceeds the bounds (cleared by a decision)."""
    watch: WatchState = field(default_factory=WatchState)
    feedback: feedback.FeedbackState = field(default_factory=feedback.FeedbackState)
    """Measured / estimated ratios per query and what the last decision promised (``control/feedback.py``)."""
    history: RateHistory = field(default_factory=RateHistory)
    """The last observed rates per stream, for the forecast (kept only while forecasting is on)."""
    measured: MeasuredInputs = field(default_factory=MeasuredInputs)
    """Measured group models and bytes per state row per plan node, and those the model is built with."""
    held: HeldState = field(default_factory=HeldState)
    """Each admitted query's newest measured state: their sum is the fleet's (``control/held_state.py``)."""
    heralds: RateTracker = field(default_factory=RateTracker)
    """Per select or join run with heralds: the smoothed share of its evaluation work left (1 − the measured skip
    fraction, ``model.evaluated_shares``), and the share the model is built with."""

    def admitted(self, model: Model) -> list[str]:
        """The active queries, in the model's order."""
        return [q for q in model.full.queries if self.status.get(q) == "active"]

    def reconfigured(self, rules: TriggerRules, nodes: Collection[str], joins: Collection[str],
                     keep_policy_state: bool, stateful: Collection[str] = ()) -> CycleState:
        """After a reload: the smoothing rules given, measurements kept only for the plan ``nodes`` (selectivities),
        ``stateful`` nodes (group models, bytes per row) and JISC ``joins`` still configured, the policy's state only when
        the policy is the same."""
        sels, heralds = self.selectivities, self.heralds
        return replace(
            self, policy_state=self.policy_state if keep_policy_state else None,
            rates=replace(self.rates, rules=rules),
            selectivities=replace(RateTracker.of(rules), smoothed={n: v for n, v in sels.smoothed.items() if n in nodes},
                                  decided={n: v for n, v in sels.decided.items() if n in nodes}),
            pair_selectivities={q: replace(t, threshold=rules.threshold, window_seconds=rules.window_seconds)
                                for q, t in self.pair_selectivities.items() if q in joins},
            measured=self.measured.kept(stateful, rules.threshold),
            heralds=replace(RateTracker.of(rules), smoothed={n: v for n, v in heralds.smoothed.items() if n in nodes},
                            decided={n: v for n, v in heralds.decided.items() if n in nodes}))


@dataclass(frozen=True)
class Snapshot:
    """What the wiring read for one decision: the time and the queries' state on the applying side."""

    at: datetime
    now: float
    """``at`` in model time units since the daemon started."""
    running: Mapping[str, QuerySettings]
    """Settings in force per query (queries not started are absent)."""
    changed_at: Mapping[str, float] = field(default_factory=dict)
    """When each query's settings last changed, in model time units."""
    changes: Changes = Changes()
    desired: Mapping[str, DesiredSettings] = field(default_factory=dict)
    """The latest desired settings per query (the next ``plan_version`` follows theirs)."""
    orders: Mapping[str, tuple[int, Any]] = field(default_factory=dict)
    """Per JISC join whose control file could be read: (epoch, order) in force."""
    unreadable_orders: Mapping[str, Exception] = field(default_factory=dict)
    """Per JISC join whose control file could not be read: why."""
    transient_memory: TransientMemory | None = None
    """The applier's estimate of a live migration's extra state (None: migrations hold nothing extra)."""


@dataclass(frozen=True)
class Failure:
    """A problem with one query the cycle met and went past (the wiring logs, counts and alerts it)."""

    kind: str
    query: str
    message: str
    error: Exception


@dataclass(frozen=True)
class JoinOrderChange:
    query: str
    epoch: int
    """The epoch the new order goes into force under (one past the one in force)."""
    old: Any
    new: Any
    reason: str
    details: Mapping[str, Any]
    """JSON-safe: orders, costs, the rates and selectivities the choice used."""


@dataclass(frozen=True)
class Observed:
    state: CycleState
    estimates: list[EstimateRow]
    """Of the settings in force (empty while nothing runs); the total last."""
    measured: dict[str, float]
    """Measured state bytes per admitted query that reported it."""
    events: list[EventRecord]


@dataclass(frozen=True)
class Tick:
    """Everything one decision step decided; ``decision`` is None when no decision was due."""

    state: CycleState
    model: Model
    admissions: tuple[Admission, ...] = ()
    removed: tuple[str, ...] = ()
    """Queries no longer configured (their verdicts are forgotten)."""
    failures: tuple[Failure, ...] = ()
    decision: DecisionRecord | None = None
    estimates: tuple[EstimateRow, ...] = ()
    """Of the decided (guarded) settings; the total last."""
    guarded: Guarded | None = None
    changes: Mapping[str, tuple[QuerySettings | None, QuerySettings]] = field(default_factory=dict)
    """Settings that differ from those in force: (in force, decided) per query."""
    staging: Staging | None = None
    join_orders: tuple[JoinOrderChange, ...] = ()
    desired: tuple[DesiredSettings, ...] = ()
    events: tuple[EventRecord, ...] = ()
    readmitted: tuple[str, ...] = ()
    """Queries rejected before and admitted now that room has freed (their verdicts are among ``admissions``)."""


def initial_state(rules: TriggerRules) -> CycleState:
    return CycleState(ArrivalTracker(rules), RateTracker.of(rules), measured=MeasuredInputs(rules.threshold),
                      heralds=RateTracker.of(rules))


def orders_for_model(orders: Mapping[str, tuple[int, Any]], desired: Mapping[str, DesiredSettings]) -> dict[str, Any]:
    """The order each JISC join is estimated in: the one desired (unless only recommended), else the one in force."""
    out = {q: order for q, (_epoch, order) in orders.items()}
    for query, row in desired.items():
        if query in out and row.join_order is not None and not row.recommend_only:
            out[query] = row.join_order
    return out


# --- observe -------------------------------------------------------------------------------------


def observe(setup: Setup, model: Model, state: CycleState, observation: Observation, *, at: datetime, now: float,
            running: Mapping[str, QuerySettings], changed_at: Mapping[str, float], migrating: frozenset[str]) -> Observed:
    """Fold one observation into the smoothed statistics, estimate the settings in force and watch the measurements."""
    admitted = state.admitted(model)
    plan = setup.plan
    rates = state.rates.observe({s.stream: (s.rows, s.interval_seconds) for s in observation.streams
                                 if s.stream in model.stream_names}, setup.time_unit_seconds)
    seconds = max((s.interval_seconds for s in observation.streams), default=setup.observe_seconds)
    history = state.history
    if setup.forecast.enabled:
        history = replace(history, limit=setup.forecast.history).restart(rates.stepped).add(now * setup.time_unit_seconds, {
            s.stream: s.rows / s.interval_seconds for s in observation.streams if s.interval_seconds > 0 and s.stream in model.stream_names})
    selectivities = state.selectivities.observe({
        node: sel for q in observation.queries if q.query in admitted
        for node, sel in q.selectivities.items() if node in plan.nodes and plan.nodes[node].sel is not None
    }, seconds)
    heralds = state.heralds.observe(evaluated_shares({
        node: skip for q in observation.queries if q.query in admitted
        for node, skip in q.herald_skips.items() if node in plan.nodes and plan.nodes[node].op in ("select", "join")
    }), seconds)
    pairs = dict(state.pair_selectivities)
    for q in observation.queries:
        if q.pair_selectivities and q.query in admitted:
            pairs[q.query] = (pairs.get(q.query) or RateTracker.of(rates.rules)).observe(q.pair_selectivities, seconds)
    rows: list[EstimateRow] = []
    estimate_over = state.estimate_over
    if admitted and running:
        problem = model.problem_of(admitted)
        rows = estimate_rows(problem, *fractions_of(problem, running), model.current_d(rates), drops_of(problem, running))
        memory, cpu = feedback.corrected_total(rows, state.feedback, setup.feedback)
        estimate_over = memory > setup.bounds.memory or cpu > setup.bounds.cpu
    arrived = {s.stream for s in observation.streams if s.rows > 0}
    watch, events = watch_streams(state.watch, at, model.stream_names, arrived, setup.stale_intervals, setup.observe_seconds)
    measured = {q.query: float(q.state_bytes) for q in observation.queries if q.state_bytes is not None and q.query in admitted}
    held = state.held.observe(at, {q.query: (measured[q.query], q.state_rows) for q in observation.queries
                                   if q.query in measured}, admitted, setup.stale_intervals * setup.observe_seconds)
    if measured:
        watch, over = watch_bound(watch, at, held.per_query(), setup.bounds.memory)
        # The estimate is the steady state: windows only hold it once they have been open for their size.
        # While a query migrates live, both plans hold state: no steady state to compare with either.
        # A window that saw its input rate step holds a mix of both rates, which the estimate (at the new
        # rate) does not describe either: no ratio from it until a whole window has passed since the step.
        stepped_at = {**state.feedback.stepped_at, **{s: now for s in getattr(rates, "stepped", ())}}
        fell_at = {**state.feedback.fell_at, **{s: now for s in getattr(rates, "fell", ())}}
        calm = {q for q in measured if q in running and q not in migrating}
        longest = {q: longest_window(plan, q, running[q]) for q in calm
                   if now - max((stepped_at.get(s, -math.inf) for s in _streams(plan, q)), default=-math.inf)
                   >= longest_window(plan, q, running[q])}
        steady = {q for q, w in longest.items() if now - changed_at.get(q, 0.0) >= w}
        # A plan that starts empty (every change migrates to a new plan: GenMig, a restart) holds state that grows
        # with the time its window has been open — linearly, unless a join multiplies two filling windows: only
        # then, and only for queries without joins, a ratio while filling. A change in place keeps what it has.
        filling = {q: (now - changed_at.get(q, 0.0)) / w for q, w in longest.items()
                   if setup.migration.strategy_of(q) in ("genmig", "naive-restart") and q not in steady and w > 0
                   and not _joins(plan, q)}
        estimated = {r.query: r.memory_bytes for r in rows if r.query is not None}
        # A window turning over since a step: its measured growth says where its state goes (feedback.project).
        at_step = {q: v for q, v in state.feedback.at_step.items() if q in calm - set(longest)}
        for q in calm - set(longest):
            step = max((stepped_at.get(s, -math.inf) for s in _streams(plan, q)), default=-math.inf)
            if step == now and changed_at.get(q, 0.0) <= step and not _joins(plan, q):
                at_step[q] = (now, measured[q])
        stepped_now = getattr(rates, "stepped", frozenset())
        prior = {q: v for q, v in state.feedback.prior.items()
                 if q in running and now - v[1] < longest_window(plan, q, running[q])}
        if stepped_now and rows:
            prior.update(_step_priors(plan, model, admitted, running, state, rates, estimated, stepped_now, now))
        projected = {q: p for q, (t, m) in at_step.items() if changed_at.get(q, 0.0) <= t
                     and (p := feedback.project((t, m), measured[q], now, longest_window(plan, q, running[q]))) is not None}
        watch, off = watch_estimates(watch, at, measured, estimated, setup.estimate_factor, steady)
        events += over + off
        rules = setup.feedback
        fleet_migrating = bool(migrating & set(held.reports))
        loop, checked = feedback.observe(
            state.feedback, rules, at=at, now=now, measured=measured, estimated=estimated, steady=steady,
            usable=setup.bounds.usable_memory, bound=setup.bounds.memory,
            cpu_measured=feedback.measured_cpu(observation, rules.time_unit_seconds) if rules.cpu else None,
            cpu_estimated={r.query: r.cpu for r in rows if r.query is not None},
            settled=all(q in steady for q in measured) and not fleet_migrating,
            total=held.total(), rows=held.rows(), filling=filling, migrating=fleet_migrating,
            stepped=calm - set(longest), projected=projected)
        unmeasured = frozenset(q for q, f in filling.items() if f < feedback.MIN_FILL
                               and (q not in loop.queries or loop.queries[q].memory_at is None))
        state = replace(state, feedback=replace(loop, stepped_at=stepped_at, fell_at=fell_at, at_step=at_step, prior=prior,
                                                unmeasured=unmeasured))
        events += checked
    inputs = state.measured.observe(plan, observation.queries, admitted, setup.time_unit_seconds)
    state = replace(state, rates=rates, selectivities=selectivities, heralds=heralds, pair_selectivities=pairs, estimate_over=estimate_over,
                    watch=watch, history=history, measured=inputs, held=held)
    return Observed(state, rows, measured, events)


def _step_priors(plan: Any, model: Model, admitted: list[str], running: Mapping[str, QuerySettings], state: CycleState,
                 rates: ArrivalTracker, estimated: Mapping[str, float], stepped: Collection[str],
                 now: float) -> dict[str, tuple[float, float]]:
    """Per query whose input rate stepped *up* and whose state the model under-estimated: the factor of the prior that
    the unexplained state grows with the arrivals (``feedback.step_prior``), with the step's model time.

    The model's part of a query's state follows its own rate law (a count per key with a fixed group-by stays flat
    through a burst), the part it does not explain came with the arrivals (ids never seen before keep coming): until a
    window has turned over since the step, nothing measured says how that part grows, so the decision at the step
    assumes it grows with the rate, not with the estimate. A plan whose bytes per row is off has an excess that follows
    the estimate instead, and shows in every query reading the stream: the least factor among those is taken as that
    common error (``shared``), only the rest as arrivals'. Without such a peer the prior may over-cut a query for one
    window; its steady ratio replaces the prior then."""
    problem = model.problem_of(admitted)
    fw, fg = fractions_of(problem, running)
    before = estimate_rows(problem, fw, fg, model.current_d(state.rates), drops_of(problem, running))
    old = {r.query: r.memory_bytes for r in before if r.query is not None}
    d_old = dict(zip(model.stream_names, model.current_d(state.rates)))
    d_new = dict(zip(model.stream_names, model.current_d(rates)))
    factors = {q: f.memory for q, f in state.feedback.queries.items() if q in admitted and f.memory_at is not None}
    common = {}  # per stream, the least factor of the queries reading it: an error they share is the elements' bytes
    for q, value in factors.items():
        for s in _streams(plan, q):
            common[s] = min(common.get(s, value), value)
    out = {}
    for q in admitted:
        f = state.feedback.queries.get(q)
        if f is None or q not in running or q not in estimated or _joins(plan, q):
            continue
        up = max((d_old[s] / d_new[s] for s in _streams(plan, q) & set(stepped) if d_new.get(s, 0) > 0), default=1.0)
        shared = min((common[s] for s in _streams(plan, q) if s in common), default=f.memory)
        factor = feedback.step_prior(f.memory, old.get(q, 0.0), estimated[q], up, shared)
        if factor is not None:
            out[q] = (factor, now)
    return out


def _streams(plan: Any, query: str) -> set[str]:
    return {plan.nodes[n].stream for n in plan.query_nodes(query) if plan.nodes[n].stream is not None}


def _joins(plan: Any, query: str) -> bool:
    return any(plan.nodes[n].op == "join" for n in plan.query_nodes(query))


# --- decide --------------------------------------------------------------------------------------


def decide(setup: Setup, model: Model, state: CycleState, snapshot: Snapshot, *,
           make_id: Callable[[], str] = new_id, timer: Callable[[], float] = lambda: 0.0) -> Tick:
    """Admit new queries, choose join orders and, when a decision is due, decide, guard and stage the settings.

    ``timer`` (seconds, e.g. ``time.perf_counter``) only measures how long
    the policy and the guardrails took, for the record.
    """
    now, changes = snapshot.now, snapshot.changes
    admissions: list[Admission] = []
    failures: list[Failure] = []
    removed: tuple[str, ...] = ()
    if changes.queries:
        state, admissions, removed, failures = _admit(setup, model, state)
    admitted = state.admitted(model)
    stream_d = model.current_d(state.rates)
    proposals, join_states, join_failures = _choose_join_orders(setup, model, state, snapshot, admitted, stream_d)
    failures += join_failures
    state = replace(state, join_states={**state.join_states, **join_states})

    trigger = decision_due(state.rates, changes.queries, changes.bounds)
    moved = state.selectivities.drifted()
    if moved:
        state = replace(state, selectivities=state.selectivities.decide_with())
        listed = ", ".join(f"{n}={state.selectivities.smoothed[n]:.3g}" for n in sorted(moved)[:5])
        trigger = trigger or f"measured selectivity of {len(moved)} node(s) moved past the threshold: {listed}"
    skipping = state.heralds.drifted()
    if skipping:
        state = replace(state, heralds=state.heralds.decide_with())
        listed = ", ".join(f"{n}={1.0 - state.heralds.smoothed[n]:.3g}" for n in sorted(skipping)[:5])
        trigger = trigger or f"measured herald skip fraction of {len(skipping)} node(s) moved past the threshold: {listed}"
    inputs = state.measured.drifted()
    if inputs:
        state = replace(state, measured=state.measured.decide_with())
        trigger = trigger or f"measured inputs moved past the threshold: {', '.join(sorted(inputs)[:5])}"
    orders = orders_for_model(snapshot.orders, snapshot.desired)
    if not setup.rails.dry_run:
        orders.update({c.query: c.new for c in proposals})
    if moved or skipping or inputs or orders != dict(model.orders):
        model = build_model(setup, state.selectivities.smoothed, orders, state.pair_selectivities, state.measured,
                            state.heralds.smoothed)
        changes |= Changes(model=True)
    if proposals:
        trigger = trigger or f"join order of {', '.join(repr(c.query) for c in proposals)} changed"
    elif changes.model:
        trigger = trigger or "join order in force changed"
    pending = any(not row.recommend_only and not same_settings(snapshot.running.get(q), row.settings)
                  for q, row in snapshot.desired.items())
    if trigger is None and state.estimate_over and state.last_feasible and not pending \
            and not feedback.waiting(state.feedback, setup.feedback):
        # Rates can creep up by less than the threshold each time and still carry the settings in force
        # through the reserve and over the bounds; re-deciding is due then too (not when even the
        # minimum did not fit, nor while the last decision's settings are still being put into force:
        # deciding again each second on noisy rates only moves the target of the migrations waiting;
        # nor while a filling query's ratio is seconds away: ``feedback.waiting``).
        trigger = "the estimate of the settings in force exceeds the bounds"
    trigger = trigger or feedback.trigger(state.feedback)
    rising = rising_streams(setup, state.history)
    if trigger is None and rising and not pending:
        # A ramp: decide while it lasts (``control.ramp`` stages the cuts; a decision that changes nothing is free).
        trigger = "rate rising: " + ", ".join(f"{s} ({t.slope:+.2f}/s², p={t.p:.1e})" for s, t in sorted(rising.items()))
    done = Tick(state, model, tuple(admissions), removed, tuple(failures))
    if trigger is None:
        if state.last_decision_at is not None and now - state.last_decision_at < setup.decide_period:
            return done
        trigger = "periodic"
    if not admitted:
        return replace(done, state=replace(state, last_decision_at=now))
    return _decide(setup, model, state, snapshot, done, admitted, stream_d, trigger, changes, proposals, rising,
                   make_id(), timer)


def _admit(setup: Setup, model: Model, state: CycleState) -> tuple[CycleState, list[Admission], tuple[str, ...], list[Failure]]:
    """Admit or reject every configured query that is neither active nor rejected yet."""
    configured = set(model.full.queries)
    removed = tuple(q for q in state.status if q not in configured)
    status = {q: v for q, v in state.status.items() if q in configured}
    stream_d = model.current_d(state.rates)
    verdicts, failures = [], []
    new = [q for q in model.full.queries if status.get(q) not in ("active", "rejected")]
    if len(new) > 1:  # many at once (a fleet of applications joining): when all fit together, each one does
        together = _admit_together(setup, model, state, status, new, stream_d)
        if together:
            return replace(state, status={**status, **{v.query: "active" for v in together}}), together, removed, failures
    for query in new:
        admitted = [q for q in model.full.queries if status.get(q) == "active"]
        try:
            problem = feedback.corrected(model.problem_of([*admitted, query]), state.feedback, setup.feedback)
            verdict = admit(problem, setup.bounds, query, stream_d)
        except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
            failures.append(Failure("query_failed", query, f"admission of {query!r} failed: {exc}", exc))
            continue
        status[query] = "active" if verdict.admitted else "rejected"
        verdicts.append(verdict)
    return replace(state, status=status), verdicts, removed, failures


def _admit_together(setup: Setup, model: Model, state: CycleState, status: Mapping[str, str], new: list[str],
                    stream_d: np.ndarray) -> list[Admission]:
    """Verdicts admitting every query of ``new`` when they fit together at their QoS minimum; else none (one by one then).

    Adding a query never lowers the estimate at the minimum, so each of them would be admitted alone too; one check
    instead of one per query keeps a thousand arrivals linear."""
    admitted = [q for q in model.full.queries if status.get(q) == "active"]
    try:
        problem = feedback.corrected(model.problem_of([*admitted, *new]), state.feedback, setup.feedback)
        verdict = admit(problem, setup.bounds, new[-1], stream_d)
    except Exception:  # noqa: BLE001 - the one-by-one path says which query failed
        return []
    return [replace(verdict, query=q) for q in new] if verdict.admitted else []


def _readmit(setup: Setup, model: Model, state: CycleState, stream_d: np.ndarray) -> tuple[CycleState, list[Admission]]:
    """Rejected queries that fit now (room freed, estimates dropped): admitted, with the corrected estimates."""
    status, verdicts = dict(state.status), []
    for query in model.full.queries:
        if status.get(query) != "rejected":
            continue
        admitted = [q for q in model.full.queries if status.get(q) == "active"]
        try:
            problem = feedback.corrected(model.problem_of([*admitted, query]), state.feedback, setup.feedback)
            verdict = admit(problem, setup.bounds, query, stream_d)
        except Exception:  # noqa: BLE001 - it was rejected before and stays so; the next decision tries again
            continue
        if verdict.admitted:
            status[query] = "active"
            reason = f"re-admitted {query!r}: room has freed; " + verdict.reason.removeprefix("admitted: ")
            verdicts.append(replace(verdict, reason=reason))
    return replace(state, status=status), verdicts


def _choose_join_orders(setup: Setup, model: Model, state: CycleState, snapshot: Snapshot, admitted: list[str],
                        stream_d: np.ndarray) -> tuple[list[JoinOrderChange], dict[str, JoinOrderState], list[Failure]]:
    """For every running JISC join: a cheaper join order when the join-order policy proposes one (and its new state)."""
    proposals, states, failures = [], {}, []
    d = dict(zip(model.stream_names, stream_d))
    current_orders = orders_for_model(snapshot.orders, snapshot.desired)
    for query, rule in setup.joins.items():
        settings = snapshot.running.get(query)
        if query not in admitted or settings is None:
            continue
        rates = {s: 1.0 / d[s] for s in rule.order}
        if not all(r > 0 for r in rates.values()):
            continue  # a stream that delivered nothing lately: no rate to compare orders on
        try:
            if query in snapshot.unreadable_orders:
                raise snapshot.unreadable_orders[query]
            epoch, current = snapshot.orders[query][0], current_orders[query]
            window = longest_window(setup.plan, query, settings)
            pairs, default = key_match(setup.plan, query, state.selectivities.smoothed, state.pair_selectivities.get(query))
            stats = JoinStats(rates=rates, windows={s: window for s in rates},
                              selectivity={p: v for p, v in pairs.items() if p <= set(rates)}, default_selectivity=default,
                              sizes={s: setup.plan.streams[s].size for s in rates},
                              granularity=min(setup.plan.streams[s].g for s in rates))
            outcome = decide_join_order(current, stats, snapshot.now, state.join_states.get(query), margin=rule.margin,
                                        cooldown=rule.cooldown, shape=rule.shape, constants=setup.plan.constants,
                                        payback=rule.payback)
        except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
            failures.append(Failure("join_order_failed", query, f"choosing the join order of {query!r} failed: {exc}", exc))
            continue
        if not outcome.migrate:
            continue
        details = json_safe({"old_order": current, "new_order": outcome.order, "epoch": epoch + 1, "reason": outcome.reason,
                             "current_cost": outcome.current_cost, "best_cost": outcome.best_cost, "rates": dict(stats.rates),
                             "selectivity": stats.default_selectivity,
                             "pair_selectivities": {",".join(sorted(p)): v for p, v in stats.selectivity.items()}})
        proposals.append(JoinOrderChange(query, epoch + 1, current, outcome.order, outcome.reason, details))
        states[query] = outcome.state
    return proposals, states, failures


def _decide(setup: Setup, model: Model, state: CycleState, snapshot: Snapshot, done: Tick, admitted: list[str],
            stream_d: np.ndarray, trigger: str, changes: Changes, proposals: list[JoinOrderChange], rising: Mapping[str, Trend],
            decision_id: str, timer: Callable[[], float]) -> Tick:
    """Decide, guard and stage; the desired settings of every query whose settings or join order change.

    ``rising``: the streams whose rate rises significantly now and their trend (``rising_streams``), for the forecast
    and the ramp's staged cuts."""
    state, readmitted = _readmit(setup, model, state, stream_d)
    if readmitted:
        admitted = state.admitted(model)
        done = replace(done, admissions=(*done.admissions, *readmitted), readmitted=tuple(v.query for v in readmitted))
        changes |= Changes(queries=True)
    problem = feedback.corrected(model.problem_of(admitted), state.feedback, setup.feedback)
    bounds, rails, now, at = feedback.with_margin(setup.bounds, state.feedback, setup.feedback), setup.rails, snapshot.now, snapshot.at
    stream_d, forecasts = forecast_d(setup, model, state.history, snapshot.running, admitted, stream_d, rising)
    in_force = snapshot.running
    changed = None if changes.queries or changes.bounds or changes.model else state.rates.drifted()
    if feedback.signature(problem) != state.feedback.decided:
        changed = None  # other corrections: the policy's incremental state was computed on other estimates
    policy_state = None if changes.model else state.policy_state  # a rebuilt model makes the old state meaningless
    live = any(setup.migration.strategy_of(q) == "genmig" for q in problem.queries)
    running = _running(problem, snapshot)
    deciding = deciding_bounds(problem, bounds, running, stream_d) if live and setup.forecast.enabled else bounds
    started = timer()
    decision = setup.policy.decide(PolicyInput(problem, deciding, now, stream_d, policy_state, changed))
    if deciding is not bounds and running is not None and grows(decision, running) \
            and _falling(setup, problem, snapshot, state, now):
        whole = setup.policy.decide(PolicyInput(problem, bounds, now, stream_d, policy_state, changed))
        decision = drained_growths(problem, bounds, stream_d, running, decision, whole)
    guarded = guard(problem, bounds, decision.fw, decision.fg, running, rails, now, stream_d, decision.fd)
    guarded, priced = price(setup, problem, guarded, running, snapshot.running, stream_d, (decision.fw, decision.fg))
    guarded, priced = concentrate_cuts(problem, bounds, guarded, running, stream_d, priced, live)
    guarded = hold_small_cuts(problem, bounds, guarded, running, stream_d, live, state.feedback.over_since is not None)
    fitted = transient_fit(problem, bounds, guarded, running, stream_d, live=live, hysteresis=rails.hysteresis)
    if fitted is not guarded:  # growths cut short are priced again: a sliver of a growth is a whole migration
        fitted, again = price(setup, problem, fitted, running, snapshot.running, stream_d)
        # a growth held whole is no longer the change priced before: its record must not say it goes through
        priced = {**{q: p for q, p in priced.items() if q not in fitted.fitted}, **again}
    over = _measured_over(state, setup.bounds)
    guarded = keep_pending_cuts(problem, fitted, running, _pending(problem, snapshot), stream_d, over)
    guarded = cut_deep_on_step(problem, guarded, running, stream_d, _stepped_up(setup, problem, snapshot, state, now),
                               over, live, rails.hysteresis)
    ramp_stage = None
    if live and running is not None:
        guarded, ramp_stage = staged_cuts(problem, bounds, guarded, running, stream_d, _lag(setup, problem), now, frozenset(rising),
                                          _draining(setup, problem, snapshot, now))
    duration_ms = (timer() - started) * 1e3

    proposed = settings_of(problem, decision.fw, decision.fg, decision.fd)
    applied = settings_of(problem, guarded.fw, guarded.fg, guarded.fd)
    settings_changes = {q: (in_force.get(q), s) for q, s in applied.items() if not same_settings(in_force.get(q), s)}
    trajectory, held = None, 0.0
    if running is not None:
        old_outcome = problem.evaluate(running.fw, running.fg, stream_d, fd=running.fd)
        held = float(old_outcome.total_memory)
        if state.feedback.measured_total is not None:  # staged against measured headroom when it is less
            held = max(held, state.feedback.measured_total)
        trajectory = predict(problem, bounds, now, (*problem.values(running.fw, running.fg), old_outcome),
                             (*problem.values(guarded.fw, guarded.fg), guarded.outcome), _lag(setup, problem))
    memory = {q: float(guarded.outcome.query_memory[i]) for i, q in enumerate(problem.queries)}
    staging = stage_changes(settings_changes, held, memory, snapshot.transient_memory, bounds.memory)
    joins = {c.query: c for c in proposals}
    cooling = {q for q in guarded.held if now - snapshot.changed_at.get(q, -math.inf) < rails.cooldown}
    record = decision_record(
        id=decision_id, at=at, now=now, trigger=trigger, policy=setup.policy.name, problem=problem, bounds=bounds, rails=rails,
        stream_names=model.stream_names, stream_d=stream_d, changed=changed, decision=decision, guarded=guarded,
        proposed=proposed, applied=applied, cooling=cooling, trajectory=trajectory, staging=staging,
        join_orders={q: c.details for q, c in joins.items()}, changes_something=bool(settings_changes or joins),
        duration_ms=duration_ms,
        feedback={"enabled": setup.feedback.enabled, "factors": feedback.as_json(problem),
                  "measured_memory_bytes": state.feedback.measured_total, "held_bytes": held})
    record = replace(record, outputs={**record.outputs, "migration_cost": json_safe({q: p.as_json() for q, p in priced.items()}),
                                      "forecast": json_safe({**forecasts, **({"ramp_stage": ramp_stage} if ramp_stage else {})}), "measured_inputs": state.measured.as_json()})
    estimates = [EstimateRow(q, memory[q], float(guarded.outcome.query_cpu[i])) for i, q in enumerate(problem.queries)]
    estimates.append(EstimateRow(None, float(guarded.outcome.total_memory), float(guarded.outcome.total_cpu)))
    orders = orders_for_model(snapshot.orders, snapshot.desired)
    desired = tuple(
        DesiredSettings(
            q, (snapshot.desired[q].plan_version if q in snapshot.desired else 0) + 1, applied[q],
            join_order=joins[q].new if q in joins else orders.get(q), may_start=q not in staging.later,
            recommend_only=rails.dry_run, decision_id=decision_id, at=at,
            reason={"join_order": {**joins[q].details, "reason": joins[q].reason}} if q in joins else {})
        for q in problem.queries if q in settings_changes or q in joins
    )
    events = []
    if not decision.feasible:
        events.append(EventRecord(at, "bounds_unreachable", "error", decision.reason, None, {"trigger": trigger}))
    if guarded.apply and settings_changes:
        events += staged_events(staging, bounds.memory, at)
    loop = feedback.decided(state.feedback, setup.feedback, problem, trajectory, at=at, now=now,
                            settled_memory=float(guarded.outcome.total_memory))
    state = replace(state, policy_state=decision.state, last_feasible=bool(decision.feasible), estimate_over=False,
                    rates=state.rates.decide_with(), last_decision_at=now, feedback=loop)
    return replace(done, state=state, decision=record, estimates=tuple(estimates), guarded=guarded, changes=settings_changes,
                   staging=staging, join_orders=tuple(proposals), desired=desired, events=tuple(events))


def _lag(setup: Setup, problem: Problem) -> np.ndarray | None:
    """Per query, watermark delay + trigger in model time units when its changes migrate live (GenMig; 0 for the
    others), None when no query's do."""
    genmig = [setup.migration.strategy_of(q) == "genmig" for q in problem.queries]
    if not any(genmig):
        return None
    timings = setup.migration.timings
    return np.array([sum(timings.get(q, (0.0, 0.0))) / setup.time_unit_seconds if live else 0.0
                     for q, live in zip(problem.queries, genmig)])


def _within_window(setup: Setup, problem: Problem, snapshot: Snapshot, now: float, since: Mapping[str, float]) -> np.ndarray:
    """Per query, True while less than its window in force (+ lag) has passed since ``since[query]``."""
    lag = _lag(setup, problem)
    out = np.zeros(len(problem.queries), dtype=bool)
    for i, q in enumerate(problem.queries):
        settings, at = snapshot.running.get(q), since.get(q)
        if settings is not None and at is not None and math.isfinite(at):
            out[i] = now - at < longest_window(setup.plan, q, settings) + (0.0 if lag is None else lag[i])
    return out


def _draining(setup: Setup, problem: Problem, snapshot: Snapshot, now: float) -> np.ndarray:
    """Per query, True while its last change may still hold two plans (less than its window in force + lag ago)."""
    return _within_window(setup, problem, snapshot, now, snapshot.changed_at)


def _falling(setup: Setup, problem: Problem, snapshot: Snapshot, state: CycleState, now: float) -> bool:
    """Whether some query's measured state is draining: a stream it reads stepped down less than its window in force
    (+ lag) ago, so its windows still hold state of the faster rate that goes away by itself."""
    return bool(_stream_stepped_within_window(setup, problem, snapshot, now, state.feedback.fell_at).any())


def _stepped_up(setup: Setup, problem: Problem, snapshot: Snapshot, state: CycleState, now: float) -> np.ndarray:
    """Per query, True while a stream it reads stepped *up* (its last step) less than its window in force (+ lag) ago."""
    stepped, fell = state.feedback.stepped_at, state.feedback.fell_at
    up = {s: t for s, t in stepped.items() if t > fell.get(s, -math.inf)}
    return _stream_stepped_within_window(setup, problem, snapshot, now, up)


def _stream_stepped_within_window(setup: Setup, problem: Problem, snapshot: Snapshot, now: float,
                                  stepped_at: Mapping[str, float]) -> np.ndarray:
    """Per query, True while a stream it reads stepped (``stepped_at``: stream → model time) less than its window in
    force (+ lag) ago."""
    since = {q: max((stepped_at.get(s, -math.inf) for s in _streams(setup.plan, q)), default=-math.inf)
             for q in problem.queries}
    return _within_window(setup, problem, snapshot, now, since)


def _pending(problem: Problem, snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray] | None:
    """The fractions last asked for, where they are not in force yet (the in-force fractions elsewhere); None when
    nothing waits."""
    waiting = {q: d.settings for q, d in snapshot.desired.items()
               if q in snapshot.running and not same_settings(snapshot.running[q], d.settings)}
    if not waiting:
        return None
    return fractions_of(problem, {**snapshot.running, **waiting})


def _measured_over(state: CycleState, bounds: Bounds) -> bool:
    """Whether the state last measured (both plans' state of a migration included) is over the memory bound."""
    return state.feedback.measured_total is not None and state.feedback.measured_total > bounds.memory


def _running(problem: Problem, snapshot: Snapshot) -> Running | None:
    """The fractions in force and when each query last changed, for the guardrails (None: nothing runs yet)."""
    if not any(q in snapshot.running for q in problem.queries):
        return None
    fw, fg = fractions_of(problem, snapshot.running)
    return Running(fw, fg, np.array([snapshot.changed_at.get(q, math.nan) for q in problem.queries]),
                   drops_of(problem, snapshot.running))
