"""The control cycle's deciding half: observe → estimate → decide → desired settings → record.

Applying is the other half (``control/reconciler.py`` and
``control/coordinator.py``): a decision ends by writing ``DesiredSettings``
per query to the store, and what is in force comes back as the
``ActualState`` the reconciler writes. The two meet only in the store.

The controller owns the daemon's working state (smoothed rates and
selectivities, the queries admitted, the settings in force, the policy's
own state) and talks to the
outside only through the ports of ``armd.control.ports``. Each step is a method the
scheduler calls; none of them raises for a problem outside armd:

* a failure that concerns one query (applying its settings, admitting it) is
  caught, logged, counted and alerted, and the step goes on for the others;
* a store that is down does not lose records: they wait in a backlog, in
  order, and are written when the store answers again.

Besides its own steps it watches what it measures and raises events for an
operator (docs/operations.md lists them): the measured state over the memory
bound, a stream that stopped delivering, an estimate far from the
measurement, every migration's start and end, a Spark query that died.
Warnings and errors also go to the alert sink.

Time: the ports carry UTC datetimes; the policies get ``now`` in the cost
model's time unit, counted from the daemon's start, so cool-downs and
predicted trajectories use the same unit as window sizes.

Measured selectivities (of filters and joins, when the source measures
them) are smoothed like the rates; when one moves past the re-decision
threshold, the cost model is rebuilt with the smoothed values in place of
the plan's and a full decision follows.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import numpy as np

from armd.adapters.store import StoreUnavailable
from armd.control.coordinator import stage_changes, staged_message
from armd.control.reconciler import same_settings
from armd.control.errors import TemporaryError
from armd.control.outbox import Outbox
from armd.migrations.join import order_text
from armd.policies.admission import admit
from armd.policies.base import PolicyInput
from armd.policies.guardrails import Guarded, Running, guard
from armd.policies.join_order import JoinOrderState, JoinStats, plan_in_order
from armd.policies.join_order import decide as decide_join_order
from armd.policies.problem import Problem
from armd.policies.registry import make_policy
from armd.policies.staging import Staging
from armd.policies.trajectory import predict
from armd.policies.triggers import RateTracker, decision_due

from .config import Config
from .metrics import NoMetrics
from armd.control.ports import (AlertSink, Applier, DecisionRecord, DesiredSettings, EstimateRow, EventRecord, JoinOrders, NodeRow,
                               Observation, QueryRow, QuerySettings, StatsSource, Store, StreamRow)

def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Controller:
    def __init__(
        self,
        config: Config,
        store: Store,
        source: StatsSource,
        applier: Applier,
        alerts: AlertSink,
        log: Any,
        clock: Callable[[], datetime] = utcnow,
        metrics: Any = None,
        join_orders: JoinOrders | None = None,
    ) -> None:
        self.store, self.source, self.applier, self.alerts, self.log, self.clock = store, source, applier, alerts, log, clock
        self.join_orders = join_orders
        self._join_order_states: dict[str, JoinOrderState] = {}
        self.pair_selectivities: dict[str, RateTracker] = {}
        """Per JISC join: its smoothed measured key-match selectivity per pair of streams ("a,b")."""
        self.metrics = metrics if metrics is not None else NoMetrics()
        self.started = clock()
        self.counters: Counter[str] = Counter()
        self._idle_intervals: Counter[str] = Counter()
        self._stale: set[str] = set()
        self._over_bound = False
        self._estimate_off: set[str] = set()
        self.outbox = Outbox(clock, log)
        self.running: dict[str, QuerySettings] = {}
        self.changed_at: dict[str, float] = {}
        self.status: dict[str, str] = {}
        self.migrating: set[str] = set()
        """Queries whose live migration runs, as the applying side last reported (``ActualState.phase``)."""
        self._versions: dict[str, int] = {}
        """The plan version in force per query, as the applying side last reported."""
        self.last_decision_at: float | None = None
        self.policy_state: Any = None
        self._queries_changed = True
        self._bounds_changed = False
        self._model_changed = False
        self._estimate_over = False
        self._last_feasible = True
        self.config = config
        self.tracker = RateTracker(config.triggers.alpha, config.triggers.threshold)
        self.selectivities = RateTracker(config.triggers.alpha, config.triggers.threshold)
        """Smoothed measured selectivity per plan node (the tracker smooths any positive value per key)."""
        self._install(config)
        self._record("sync_config", lambda at=self.clock(): self._sync(at))
        self.running = self._read_running()
        for query, settings in self.running.items():
            self.metrics.qos(query, settings.qos)

    # --- configuration -----------------------------------------------------------------------

    def _install(self, config: Config) -> None:
        self.config = config
        self.policy = make_policy(config.policy.name, config.policy.params)
        self._build_problems()

    def _build_problems(self) -> None:
        """The cost model of the plan, with the smoothed measured selectivities in place of the plan's
        and every JISC join in the order it runs."""
        config = self.config
        measured = self.selectivities
        plan = config.plan
        if measured.smoothed:
            nodes = {node_id: replace(node, sel=min(1.0, measured.smoothed[node_id])) if node_id in measured.smoothed else node
                     for node_id, node in plan.nodes.items()}
            plan = replace(plan, nodes=nodes)
        for query, order in self._join_orders_in_force().items():
            plan = plan_in_order(plan, query, order, *self._key_match(query))
        self.full_problem = Problem(plan, config.qos, profile=config.model.profile)
        unit = config.model.time_unit_seconds
        self.rails = replace(config.guardrails, cooldown=config.guardrails.cooldown / unit)
        self.stream_names = tuple(self.full_problem.batch.stream_names)
        self.plan_d = np.array([config.plan.streams[s].d for s in self.stream_names], dtype=float)
        self.admitted: list[str] = [q for q in self.full_problem.queries if self.status.get(q) == "active"]
        self.problem = self._problem_of(self.admitted)
        self.metrics.bounds(config.bounds.memory, config.bounds.cpu)

    def reload(self, config: Config) -> None:
        """Switch to a new, already validated configuration."""
        old = self.config
        queries_changed = old.plan_doc != config.plan_doc or dict(old.qos) != dict(config.qos)
        self._bounds_changed |= old.bounds != config.bounds
        if old.policy != config.policy:
            self.policy_state = None
        self._install(config)
        self.tracker = RateTracker(config.triggers.alpha, config.triggers.threshold, self.tracker.smoothed, self.tracker.decided)
        known = {n for n, node in config.plan.nodes.items() if node.sel is not None}
        self.selectivities = RateTracker(config.triggers.alpha, config.triggers.threshold,
                                         {n: v for n, v in self.selectivities.smoothed.items() if n in known},
                                         {n: v for n, v in self.selectivities.decided.items() if n in known})
        self.pair_selectivities = {q: t for q, t in self.pair_selectivities.items()
                                   if q in config.managed and config.managed[q].join_order is not None}
        if queries_changed:
            self._queries_changed = True
            self._record("sync_config", lambda at=self.clock(): self._sync(at))
        self._event("config_reloaded", "info", f"configuration reloaded (queries changed: {queries_changed}, "
                    f"bounds changed: {self._bounds_changed})", None)

    def reject_reload(self, message: str) -> None:
        """A reload that could not be taken: the old configuration stays."""
        self._event("config_reload_failed", "error", f"configuration not reloaded, the old one stays: {message}", None)

    def _sync(self, at: datetime) -> None:
        plan, doc = self.config.plan, self.config.plan_doc
        streams = [StreamRow(name, s.size, s.g, s.d) for name, s in plan.streams.items()]
        queries, nodes = [], []
        for name in plan.queries:
            spec = self.config.qos.get(name)
            qos = {} if spec is None else {
                "window": list(spec.window) if spec.window else None,
                "windows": {k: list(v) for k, v in spec.windows.items()},
                "granularity": list(spec.granularity) if spec.granularity else None,
            }
            queries.append(QueryRow(name, doc["queries"][name], qos, spec.weight if spec else 1.0))
            for node_id in plan.query_nodes(name):
                node = plan.nodes[node_id]
                params = {k: getattr(node, k) for k in ("stream", "w", "c", "g", "sel", "groups", "size") if getattr(node, k) is not None}
                nodes.append(NodeRow(name, node_id, node.op, list(node.inputs), params))
        self.store.sync_config(streams, queries, nodes, at)

    def _read_running(self) -> dict[str, QuerySettings]:
        try:
            return self.store.current_settings()
        except StoreUnavailable as exc:
            self.log.warning("store_unavailable", step="read_settings", error=str(exc))
            return {}

    def _take_actual(self) -> None:
        """What the applying side reports in force (``Store.actual_states``): settings, when they changed, live migrations.

        The reconciler writes it; this is the only way its results reach the
        deciding side. Read at every observation (the decision follows it);
        a store that does not answer leaves the last view.
        """
        if self.outbox.down:
            return  # not before the store answers the outbox again (it says so), so a step keeps its pace
        try:
            actual = self.store.actual_states()
        except TemporaryError:
            return
        for query, state in actual.items():
            if state.settings is None or self._versions.get(query) == state.plan_version:
                continue
            first = query not in self._versions
            self._versions[query] = state.plan_version
            self.running[query] = state.settings
            self.metrics.qos(query, state.settings.qos)
            if state.at is not None and not (first and state.at < self.started):  # put in force by this run: cool-down
                self.changed_at[query] = self._units(state.at)
        self.migrating = {q for q, state in actual.items() if state.phase == "migrating"}

    def _problem_of(self, queries: list[str]) -> Problem:
        index = {q: i for i, q in enumerate(self.full_problem.queries)}
        return self.full_problem.subproblem(np.array(sorted(index[q] for q in queries), dtype=np.intp))

    # --- time --------------------------------------------------------------------------------

    def _units(self, at: datetime) -> float:
        """``at`` in model time units since the daemon started."""
        return (at - self.started).total_seconds() / self.config.model.time_unit_seconds

    def current_d(self) -> np.ndarray:
        smoothed = self.tracker.smoothed
        return np.array([smoothed.get(s, d) for s, d in zip(self.stream_names, self.plan_d)], dtype=float)

    # --- observe and estimate -----------------------------------------------------------------

    def observe(self) -> None:
        self._take_actual()
        at = self.clock()
        try:
            observation = self.source.observe(at)
        except Exception as exc:  # noqa: BLE001 - the source is outside armd; the loop must go on
            self._fail("statistics_failed", f"reading statistics failed: {exc}", None, exc)
            return
        measured = {s.stream: s.d for s in observation.streams if s.rows > 0 and s.stream in self.stream_names}
        self.tracker = self.tracker.observe(measured)
        plan = self.config.plan
        self.selectivities = self.selectivities.observe({
            node: sel for q in observation.queries if q.query in self.admitted
            for node, sel in q.selectivities.items() if node in plan.nodes and plan.nodes[node].sel is not None
        })
        for q in observation.queries:
            if q.pair_selectivities and q.query in self.admitted:
                tracker = self.pair_selectivities.get(q.query) or RateTracker(self.config.triggers.alpha, self.config.triggers.threshold)
                self.pair_selectivities[q.query] = tracker.observe(q.pair_selectivities)
        self._record("observation", lambda: self.store.record_observation(observation))
        rows: list[EstimateRow] = []
        if self.admitted and self.running:
            rows = self._estimate_rows(self._running_fractions(), self.current_d())
            total = rows[-1]
            bounds = self.config.bounds
            self._estimate_over = total.memory_bytes > bounds.memory or total.cpu > bounds.cpu
            self._record("estimates", lambda: self.store.record_estimates(at, rows))
            self.metrics.estimates(rows)
        self.counters["observations"] += 1
        self._watch_streams(observation)
        self._watch_measurements(observation, rows, at)

    def _watch_streams(self, observation: Observation) -> None:
        """``statistics_stale`` once a stream has had no rows for ``alerting.stale_intervals`` observations."""
        limit = self.config.alerting.stale_intervals
        arrived = {s.stream for s in observation.streams if s.rows > 0}
        for stream in self.stream_names:
            if stream in arrived:
                self._idle_intervals[stream] = 0
                if stream in self._stale:
                    self._stale.discard(stream)
                    self._event("statistics_fresh", "info", f"stream {stream!r} delivers rows again", None, {"stream": stream})
                continue
            self._idle_intervals[stream] += 1
            if self._idle_intervals[stream] >= limit and stream not in self._stale:
                self._stale.add(stream)
                seconds = limit * self.config.schedule.observe_seconds
                self._event("statistics_stale", "warning", f"no rows from stream {stream!r} for {limit} observations ({seconds:g} s); "
                            "its rate and every estimate that uses it are stale", None, {"stream": stream, "intervals": limit})

    def _watch_measurements(self, observation: Observation, rows: list[EstimateRow], at: datetime) -> None:
        """``bound_exceeded`` when the measured state passes the memory bound; ``estimate_mismatch`` per query."""
        measured = {q.query: float(q.state_bytes) for q in observation.queries
                    if q.state_bytes is not None and q.query in self.admitted}
        if not measured:
            return
        self.metrics.measured(measured)
        total, bound = sum(measured.values()), self.config.bounds.memory
        over = total > bound
        if over and not self._over_bound:
            self._event("bound_exceeded", "warning", f"measured state {total:,.0f} B is over the memory bound {bound:,.0f} B", None,
                        {"measured_state_bytes": total, "memory_bound_bytes": bound, "queries": measured})
        elif self._over_bound and not over:
            self._event("bound_restored", "info", f"measured state {total:,.0f} B is within the memory bound {bound:,.0f} B again", None,
                        {"measured_state_bytes": total, "memory_bound_bytes": bound})
        self._over_bound = over

        estimated = {r.query: r.memory_bytes for r in rows if r.query is not None}
        factor, now = self.config.alerting.estimate_factor, self._units(at)
        for query, value in measured.items():
            settings, estimate = self.running.get(query), estimated.get(query)
            if settings is None or not estimate or estimate <= 0:
                continue
            # The estimate is the steady state: windows only hold it once they have been open for their size.
            # While a query migrates live, both plans hold state: no steady state to compare with either.
            if now - self.changed_at.get(query, 0.0) < self._longest_window(query, settings) or query in self.migrating:
                continue
            ratio = value / estimate
            off = not (1 / factor <= ratio <= factor)
            if off and query not in self._estimate_off:
                self._event("estimate_mismatch", "warning", f"measured state {value:,.0f} B of {query!r} is {ratio:.3g} × its "
                            f"estimated memory {estimate:,.0f} B (tolerated: a factor of {factor:g})", query,
                            {"measured_state_bytes": value, "estimated_memory_bytes": estimate, "ratio": ratio, "factor": factor})
            if off:
                self._estimate_off.add(query)
            else:
                self._estimate_off.discard(query)

    def _longest_window(self, query: str, settings: QuerySettings) -> float:
        """The largest window of ``query`` in model time units: the decided sizes, else the plan's."""
        plan = self.config.plan
        sizes = [settings.windows.get(n, plan.nodes[n].w) for n in plan.query_nodes(query) if plan.nodes[n].w is not None]
        return max(sizes, default=0.0)

    def report(self, event: EventRecord) -> None:
        """Log, record and (for warnings and errors) alert an event an adapter made, e.g. a lossy restart."""
        self._event(event.kind, event.severity, event.message, event.query, dict(event.details or {}))

    def query_terminated(self, query: str, error: str) -> None:
        """A Spark query stopped with an error (the Spark adapter reports it here); logged, recorded and alerted."""
        self.counters["query_errors"] += 1
        self._event("query_terminated", "error", f"Spark query {query!r} terminated with an error: {error}", query,
                    {"error": self.config.redact(error)})

    def _running_fractions(self) -> tuple[np.ndarray, np.ndarray]:
        fw = np.array([self.running[q].fw if q in self.running else 0.0 for q in self.problem.queries])
        fg = np.array([self.running[q].fg if q in self.running else 0.0 for q in self.problem.queries])
        return fw, fg

    def _estimate_rows(self, fractions: tuple[np.ndarray, np.ndarray], stream_d: np.ndarray) -> list[EstimateRow]:
        outcome = self.problem.evaluate(*fractions, stream_d, with_qos=False)
        rows = [EstimateRow(q, float(m), float(c)) for q, m, c in zip(self.problem.queries, outcome.query_memory, outcome.query_cpu)]
        rows.append(EstimateRow(None, float(outcome.total_memory), float(outcome.total_cpu)))
        return rows

    # --- admission and decisions -------------------------------------------------------------

    def admit_new(self) -> None:
        """Admit or reject every configured query that is neither active nor rejected yet."""
        at = self.clock()
        stream_d = self.current_d()
        bounds = self.config.bounds
        configured = set(self.full_problem.queries)
        for query in [q for q in self.status if q not in configured]:
            del self.status[query]
            self.running.pop(query, None)
        for query in self.full_problem.queries:
            if self.status.get(query) in ("active", "rejected"):
                continue
            try:
                verdict = admit(self._problem_of([*self.admitted, query]), bounds, query, stream_d)
            except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
                self._fail("query_failed", f"admission of {query!r} failed: {exc}", query, exc)
                continue
            if verdict.admitted:
                self.admitted.append(query)
                self.status[query] = "active"
                self._event("query_admitted", "info", verdict.reason, query)
                self._record("status", lambda q=query, r=verdict.reason: self.store.set_query_status(q, "active", at, r))
            else:
                self.status[query] = "rejected"
                details = {"memory_shortfall_bytes": verdict.memory_shortfall, "cpu_shortfall": verdict.cpu_shortfall}
                self._event("query_rejected", "warning", verdict.reason, query, details)
                self._record("status", lambda q=query, r=verdict.reason: self.store.set_query_status(q, "rejected", at, r))
        self.admitted.sort(key=self.full_problem.queries.index)
        self.problem = self._problem_of(self.admitted)

    def decide(self) -> None:
        """Decide when a trigger fires or the periodic interval has passed."""
        if self._queries_changed:
            self.admit_new()
        at = self.clock()
        now = self._units(at)
        reordered = self._reorder_joins(at, now)
        trigger = decision_due(self.tracker, self._queries_changed, self._bounds_changed)
        moved = self.selectivities.drifted()
        if moved:
            self.selectivities = self.selectivities.decide_with()
            listed = ", ".join(f"{n}={self.selectivities.smoothed[n]:.3g}" for n in sorted(moved)[:5])
            trigger = trigger or f"measured selectivity of {len(moved)} node(s) moved past the threshold: {listed}"
        if moved or reordered:
            self._build_problems()
            self.problem = self._problem_of(self.admitted)
            self.policy_state = None  # its state belongs to the old cost model
            self._model_changed = True
            trigger = trigger or f"join order of {', '.join(map(repr, reordered))} changed"
        if trigger is None and self._estimate_over and self._last_feasible:
            # Rates can creep up by less than the threshold each time and still carry the settings in force
            # through the reserve and over the bounds; re-deciding is due then too (not when even the
            # minimum did not fit).
            trigger = "the estimate of the settings in force exceeds the bounds"
        period = self.config.schedule.decide_seconds / self.config.model.time_unit_seconds
        if trigger is None:
            if self.last_decision_at is not None and now - self.last_decision_at < period:
                return
            trigger = "periodic"
        if not self.admitted:
            self._queries_changed = self._bounds_changed = False
            self.last_decision_at = now
            return
        self._decide(at, now, trigger)

    def _reorder_joins(self, at: datetime, now: float) -> list[str]:
        """For every running JISC join: publish a cheaper join order when the join-order policy proposes one.

        Publishing is the whole migration: the query switches each key at its
        next tuple (JISC), so it is recorded as started and finished at once.
        Returns the queries whose order changed (the cost model is rebuilt for them).
        """
        reordered: list[str] = []
        if self.join_orders is None:
            return reordered
        d = dict(zip(self.stream_names, self.current_d()))
        for query in self.join_orders.queries():
            settings = self.running.get(query)
            if query not in self.admitted or settings is None:
                continue
            managed = self.config.managed[query].join_order
            rates = {s: 1.0 / d[s] for s in managed.order}
            if not all(r > 0 for r in rates.values()):
                continue  # a stream that delivered nothing lately: no rate to compare orders on
            try:
                epoch, current = self.join_orders.current(query)
                stats = self._join_stats(query, settings, rates)
                outcome = decide_join_order(
                    current, stats, now, self._join_order_states.get(query), margin=managed.margin,
                    cooldown=managed.cooldown_seconds / self.config.model.time_unit_seconds, shape=managed.shape,
                    constants=self.config.plan.constants)
                if not outcome.migrate:
                    continue
                self.join_orders.publish(query, epoch + 1, outcome.order)
            except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
                self._fail("join_order_failed", f"choosing the join order of {query!r} failed: {exc}", query, exc)
                continue
            self._join_order_states[query] = outcome.state
            reordered.append(query)
            details = _json_safe({"old_order": current, "new_order": outcome.order, "epoch": epoch + 1, "reason": outcome.reason,
                                  "current_cost": outcome.current_cost, "best_cost": outcome.best_cost,
                                  "rates": dict(stats.rates), "selectivity": stats.default_selectivity,
                                  "pair_selectivities": {",".join(sorted(p)): v for p, v in stats.selectivity.items()}})

            def record(q: str = query, doc: dict[str, Any] = details) -> None:
                row = self.store.record_migration(q, "jisc", "done", at, details=doc)
                self.store.update_migration(row, "done", at, finished=True)

            self._record("migration", record)
            self.metrics.migration("done")
            self._event("join_order_changed", "info", f"join order of {query!r} changed to {order_text(outcome.order)} "
                        f"(epoch {epoch + 1}, JISC): {outcome.reason}", query, details)
        return reordered

    def _join_stats(self, query: str, settings: QuerySettings, rates: dict[str, float]) -> JoinStats:
        """The rates given, the query's window and the key-match selectivities (``_key_match``)."""
        plan, streams = self.config.plan, list(rates)
        window = self._longest_window(query, settings)
        pairs, default = self._key_match(query)
        return JoinStats(
            rates=rates, windows={s: window for s in streams},
            selectivity={p: v for p, v in pairs.items() if p <= set(streams)},
            default_selectivity=default, sizes={s: plan.streams[s].size for s in streams},
            granularity=min(plan.streams[s].g for s in streams),
        )

    def _key_match(self, query: str) -> tuple[dict[frozenset[str], float], float]:
        """A JISC join's smoothed measured selectivity per pair of streams, and the one for pairs not measured yet.

        The latter is the geometric mean of the query's join nodes'
        selectivities (measured when reported, else the plan's).
        """
        plan = self.config.plan
        joins = [n for n in plan.query_nodes(query) if plan.nodes[n].op == "join" and plan.nodes[n].sel is not None]
        sels = [min(1.0, self.selectivities.smoothed.get(n, plan.nodes[n].sel)) for n in joins]
        default = math.exp(sum(math.log(x) for x in sels) / len(sels)) if sels else 1.0
        measured = self.pair_selectivities.get(query)
        pairs = {frozenset(key.split(",")): min(1.0, v) for key, v in (measured.smoothed if measured else {}).items()}
        return {p: v for p, v in pairs.items() if len(p) == 2}, default

    def _join_orders_in_force(self) -> dict[str, Any]:
        """The order each JISC join runs, from its control file (one that cannot be read: the plan's order)."""
        if self.join_orders is None:
            return {}
        out = {}
        for query in self.join_orders.queries():
            try:
                out[query] = self.join_orders.current(query)[1]
            except Exception:  # noqa: BLE001 - _reorder_joins reports an unreadable control file as join_order_failed
                continue
        return out

    def _decide(self, at: datetime, now: float, trigger: str) -> None:
        problem, bounds, rails = self.problem, self.config.bounds, self.rails
        stream_d = self.current_d()
        changed = None if self._queries_changed or self._bounds_changed or self._model_changed else self.tracker.drifted()
        started = time.perf_counter()
        decision = self.policy.decide(PolicyInput(problem, bounds, now, stream_d, self.policy_state, changed))
        running = self._running_for(problem)
        guarded = guard(problem, bounds, decision.fw, decision.fg, running, rails, now, stream_d)
        duration_ms = (time.perf_counter() - started) * 1e3
        self.metrics.decision(duration_ms / 1e3)

        proposed = self._settings(problem, decision.fw, decision.fg)
        applied = self._settings(problem, guarded.fw, guarded.fg)
        changes = {
            q: (self.running.get(q), s)
            for q, s in applied.items()
            if q not in self.running or self.running[q].windows != s.windows or self.running[q].granularity != s.granularity
        }
        trajectory = None
        held = 0.0
        if running is not None:
            old_outcome = problem.evaluate(running.fw, running.fg, stream_d)
            held = float(old_outcome.total_memory)
            trajectory = predict(
                problem, bounds, now,
                (*problem.values(running.fw, running.fg), old_outcome),
                (*problem.values(guarded.fw, guarded.fg), guarded.outcome),
            )
        cooling = {q for q in guarded.held if now - self.changed_at.get(q, -math.inf) < rails.cooldown}
        per_query = {
            q: {
                "proposed": proposed[q].as_json(),
                "applied": applied[q].as_json(),
                "guardrail": _guardrail(q, guarded, cooling),
                "estimated_memory_bytes": float(guarded.outcome.query_memory[i]),
                "estimated_cpu": float(guarded.outcome.query_cpu[i]),
            }
            for i, q in enumerate(problem.queries)
        }
        record = DecisionRecord(
            at=at,
            policy=self.policy.name,
            trigger=trigger,
            feasible=bool(decision.feasible),
            dry_run=rails.dry_run,
            applied=guarded.apply and bool(changes),
            weighted_qos=float(problem.weighted_qos(guarded.outcome.qos)),
            reason=decision.reason,
            estimated_memory_bytes=float(guarded.outcome.total_memory),
            estimated_cpu=float(guarded.outcome.total_cpu),
            duration_ms=duration_ms,
            inputs={
                "bounds": {"memory_bytes": bounds.memory, "cpu": bounds.cpu, "reserve": bounds.reserve,
                           "usable_memory_bytes": bounds.usable_memory, "usable_cpu": bounds.usable_cpu},
                "stream_d": {s: _json_number(d) for s, d in zip(self.stream_names, stream_d)},
                "changed_streams": sorted(changed) if changed is not None else None,
                "queries": list(problem.queries),
                "guardrails": {"cooldown": rails.cooldown, "hysteresis": rails.hysteresis,
                               "max_step": rails.max_step, "dry_run": rails.dry_run},
                "now": now,
            },
            outputs={
                "queries": per_query,
                "held": list(guarded.held),
                "limited": list(guarded.limited),
                "forced": list(guarded.forced),
                "proposed_weighted_qos": float(decision.weighted_qos),
                "bounds_hold_at": trajectory.bounds_hold_at if trajectory else None,
                "staging": (staging := stage_changes(
                    changes, held, {q: v["estimated_memory_bytes"] for q, v in per_query.items()}, self.applier, bounds.memory)).as_json(),
                "trajectory": trajectory.as_rows() if trajectory else [],
                "details": _json_safe(decision.details),
            },
        )
        rows = self._estimate_rows((guarded.fw, guarded.fg), stream_d)
        holder: dict[str, int] = {}

        def write() -> None:
            holder["id"] = self.store.record_decision(record)
            self.store.record_estimates(at, rows, holder["id"])

        self._record("decision", write)
        self.log.info(
            "decision_made", policy=self.policy.name, trigger=trigger, feasible=record.feasible,
            weighted_qos=round(record.weighted_qos, 6), changes=len(changes), dry_run=rails.dry_run,
            duration_ms=round(duration_ms, 3),
        )
        if not decision.feasible:
            self._event("bounds_unreachable", "error", decision.reason, None, {"trigger": trigger}, policy=self.policy.name)
        self.policy_state = decision.state
        self._last_feasible = bool(decision.feasible)
        self._estimate_over = False
        self.tracker = self.tracker.decide_with()
        self._queries_changed = self._bounds_changed = self._model_changed = False
        self.last_decision_at = now
        self.counters["decisions"] += 1
        if changes:
            self._write_desired(changes, staging, holder, recommend_only=not guarded.apply, at=at)

    def _write_desired(self, changes: dict[str, tuple[QuerySettings | None, QuerySettings]], staging: Staging,
                       holder: dict[str, int], *, recommend_only: bool, at: datetime) -> None:
        """Hand the changes to the applying side: one ``DesiredSettings`` row per query, version + 1 (the store is the only link).

        Changes staging holds back carry ``may_start = False``; the
        reconciler stages them again once the migrations in progress have
        finished. A dry run's rows are recommendations only.
        """
        def write() -> None:
            before, rows = self.store.desired_settings(), []
            for q, (_old, new) in changes.items():
                row = DesiredSettings(q, (before[q].plan_version if q in before else 0) + 1, new, may_start=q not in staging.later,
                                      recommend_only=recommend_only, decision_id=str(holder["id"]) if "id" in holder else None, at=at)
                last = before.get(q)
                if last is not None and same_settings(last.settings, new) and last.recommend_only == recommend_only:
                    if last.may_start == row.may_start:
                        continue  # asked already: a new version would restart the retries of one that fails
                    row = replace(row, plan_version=last.plan_version)
                rows.append(row)
            if rows:
                self.store.write_desired(rows)

        self._record("desired", write)
        said = staged_message(staging, self.config.bounds.memory)
        if said is not None and not recommend_only:
            self._event("migrations_staged", said[0], said[1], None, staging.as_json())

    def estimate_memory(self, settings: dict[str, QuerySettings]) -> tuple[float, dict[str, float]]:
        """The cost model's memory (total, per query) with ``settings`` in force, at the rates of the moment; the
        migration coordinator stages held-back changes with it (queries without settings hold nothing)."""
        problem = self.problem
        fw = np.array([settings[q].fw if q in settings else 0.0 for q in problem.queries])
        fg = np.array([settings[q].fg if q in settings else 0.0 for q in problem.queries])
        outcome = problem.evaluate(fw, fg, self.current_d(), with_qos=False)
        return float(outcome.total_memory), {q: float(m) for q, m in zip(problem.queries, outcome.query_memory)}

    def _running_for(self, problem: Problem) -> Running | None:
        if not any(q in self.running for q in problem.queries):
            return None
        fw, fg = self._running_fractions()
        changed = np.array([self.changed_at.get(q, math.nan) for q in problem.queries])
        return Running(fw, fg, changed)

    def _settings(self, problem: Problem, fw: np.ndarray, fg: np.ndarray) -> dict[str, QuerySettings]:
        w, g = problem.values(fw, fg)
        qos = problem.qos(w, g)
        node_ids = problem.batch.node_ids
        windows: dict[int, dict[str, float]] = {}
        for node, qi in zip(problem.win_idx, problem.win_query):
            windows.setdefault(int(qi), {})[node_ids[node]] = float(w[node])
        granularity: dict[int, float] = {}
        for node, qi in zip(problem.gran_idx, problem.gran_query):
            granularity.setdefault(int(qi), float(g[node]))
        return {
            q: QuerySettings(float(fw[i]), float(fg[i]), windows.get(i, {}), granularity.get(i), float(qos[i]))
            for i, q in enumerate(problem.queries)
        }

    # --- housekeeping --------------------------------------------------------------------------

    def housekeeping(self) -> None:
        at = self.clock()
        cutoff = at - timedelta(days=self.config.store.retention_days)

        def prune() -> None:
            removed = self.store.prune_observations(cutoff)
            self.log.info("observations_pruned", removed=removed, older_than=cutoff.isoformat())

        self._record("prune", prune)

    def flush(self, force: bool = False) -> bool:
        """Write the backlog (while the store is down, at most every ``outbox.RETRY_SECONDS``); True when it is empty."""
        return self.outbox.flush(force)

    # --- recording, events and failures --------------------------------------------------------

    def _record(self, kind: str, write: Callable[[], Any]) -> None:
        self.outbox.put(kind, write)

    def note(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        """Record an informational event (the daemon started, stopped, …)."""
        self._event(kind, "info", message, None, details)

    def _event(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
               *, alert: bool = True, **fields: Any) -> None:
        """Log (with ``fields`` bound, e.g. ``policy``, ``migration``), record and — when it is a warning or an error — alert."""
        event = EventRecord(self.clock(), kind, severity, self.config.redact(message), query, _json_safe(details or {}))
        getattr(self.log, severity)(kind, query=query, message=event.message, **{k: v for k, v in fields.items() if v is not None})
        self._record("event", lambda: self.store.record_event(event))
        if severity != "info" and alert:
            self.alerts.alert(event)

    def emit(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
             *, alert: bool = True, **fields: Any) -> None:
        """``_event`` for the applying side's events (the daemon wires it as their ``emit``)."""
        self._event(kind, severity, message, query, details, alert=alert, **fields)

    def _fail(self, kind: str, message: str, query: str | None, exc: Exception) -> None:
        self.counters["query_errors" if query else "errors"] += 1
        self._event(kind, "error", message, query, {"error_type": type(exc).__name__})


def _guardrail(query: str, guarded: Guarded, cooling: set[str]) -> str | None:
    if query in guarded.forced:
        return "forced: reduction applied despite the guardrails to keep the bounds"
    if query in guarded.limited:
        return "limited to the maximum step"
    if query in guarded.held:
        return "held by the cool-down" if query in cooling else "held by the hysteresis band"
    return None


def _json_number(value: float) -> float | str:
    return "inf" if math.isinf(value) else float(value)


def _json_safe(value: Any) -> Any:
    """Policy details as plain JSON: numpy scalars and arrays become numbers and lists."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist()) if value.size <= 64 else f"<array of {value.size}>"
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
