"""The controller: the wiring of the control cycle to the ports, one tick at a time.

The pure functions of ``armd.control.cycle`` decide everything (observe →
estimate → admit → decide → guard → stage → desired settings); the
controller reads what they need (the clock, the statistics source, the
store, the join-order control files) into a snapshot, and writes, logs,
counts and alerts what comes back. Between ticks it keeps the cycle's state,
the cost model and the changes a reload made since the last decision.

None of its steps raises for a problem outside armd: a failure that
concerns one query is logged, counted and alerted and the step goes on for
the others; records go through the outbox, so a store that is down loses
none. docs/operations.md lists the events it raises.

Deciding and applying meet only in the store: a decision ends by writing
desired settings; what is in force comes back as the actual states the
reconciler (``armd.control.reconciler``) writes, read at every observation.

Time: the ports carry UTC datetimes; the cycle gets ``now`` in the cost
model's time unit, counted from the daemon's start, so cool-downs and
predicted trajectories use the same unit as window sizes.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable


from armd.adapters.alerts.alertmanager import RESOLVES
from armd.adapters.store import applications as apps
from armd.adapters.store.applications import GovernedQuery
from armd.control.cycle import Changes, Snapshot, Tick, decide, initial_state, observe, orders_for_model
from armd.control.desired import not_asked_yet
from armd.control.estimates import EstimateLog
from armd.control import feedback
from armd.control.feedback import FeedbackState
from armd.control.errors import TemporaryError
from armd.control.cpu_fit import CpuRefit, cpu_terms_now
from armd.control.measured import STATEFUL_OPS
from armd.control.model import build_model, memory_of
from armd.control.outbox import Outbox
from armd.control.ports import (AlertSink, Applications, Applier, DesiredSettings, EventRecord, JoinOrders, LiveApplier, Observation,
                                QuerySettings, StatsSource, Store)
from armd.control.records import json_safe
from armd.control.statistics import rejected_event, screen
from armd.policies.problem import Problem

from .config import Config
from .metrics import NoMetrics
from .names import node_labels
from .render import Words
from .fleet import Fleet, effective, identity
from .setup import config_rows, setup_of, trigger_rules


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Controller:
    def __init__(self, config: Config, store: Store, source: StatsSource, applier: Applier, alerts: AlertSink, log: Any,
                 clock: Callable[[], datetime] = utcnow, metrics: Any = None, join_orders: JoinOrders | None = None,
                 agents: StatsSource | None = None) -> None:
        self.store, self.source, self.applier, self.alerts, self.log, self.clock = store, source, applier, alerts, log, clock
        self.agents = agents
        """The statistics ``armd.agent`` applications reported (``AgentStats``); ``None``: the fleet is not governed."""
        self.fleet = Fleet()
        self._fleet_key: Any = None
        self._governed: list[GovernedQuery] = []
        self._checked: dict[Any, Any] = {}
        """Each agent query's own check, by what it depends on (``daemon/fleet.py``), kept while the configuration is."""
        self._fleet_identity: Any = None
        self.join_orders = join_orders
        self.metrics = metrics if metrics is not None else NoMetrics()
        self.started = clock()
        self.counters: Counter[str] = Counter()
        self.outbox = Outbox(clock, log)
        self.estimate_log = EstimateLog()
        self.changed_at: dict[str, float] = {}
        self.migrating: set[str] = set()
        """Queries whose live migration runs, as the applying side last reported (``ActualState.phase``)."""
        self._versions: dict[str, int] = {}
        """The plan version in force per query, as the applying side last reported."""
        self.changes = Changes(queries=True)
        """What moved since the last decision; the next decision step hands it to the cycle."""
        self.state = initial_state(trigger_rules(config))
        self.cpu_refit: CpuRefit | None = None
        self.desired: dict[str, DesiredSettings] = self._read("read_desired", "desired_settings")
        self.base = self.config = config
        """The configuration as read; ``self.config`` is it with the fleet's queries merged in (``daemon/fleet.py``)."""
        self._read_fleet()
        self._install(self._with_fleet(config))
        self._record("sync_config", lambda at=self.clock(): self.store.sync_config(*config_rows(config), at))
        self.running: dict[str, QuerySettings] = self._read("read_settings", "current_settings")
        for query, settings in self.running.items():
            self.metrics.settings(query, settings)

    # --- configuration -----------------------------------------------------------------------

    def _install(self, config: Config) -> None:
        """Take ``config``: the cycle's setup and the cost model rebuilt with the measurements so far."""
        self.config = config
        self.setup = setup_of(config, join_orders=self.join_orders is not None)
        if not config.model.cpu_refit:
            self.cpu_refit = None
        elif self.cpu_refit is None:
            self.cpu_refit = CpuRefit(config.plan.constants)
        self.labels = node_labels(config.plan)
        self.metrics.node_names = self.labels
        self._rebuild()
        self.metrics.bounds(config.bounds.memory, config.bounds.cpu)

    def _rebuild(self) -> None:
        """The cost model of the setup with the measurements so far (and the CPU constants refitted online, if any)."""
        if self.cpu_refit is not None and self.cpu_refit.constants is not None:
            self.setup = replace(self.setup, plan=replace(self.setup.plan, constants=self.cpu_refit.constants))
        orders, _unreadable = self._read_orders()
        self.model = build_model(self.setup, self.state.selectivities.smoothed, orders_for_model(orders, self.desired),
                                 self.state.pair_selectivities, self.state.measured, self.state.heralds.smoothed)

    def reload(self, config: Config) -> None:
        """Switch to a new, already validated configuration."""
        old_base, self.base = self.base, config
        self._checked = {}  # checked against the old configuration's time unit
        own_changed = old_base.plan_doc != config.plan_doc or dict(old_base.qos) != dict(config.qos)
        queries_changed = self._reconfigure(self._with_fleet(config))
        if own_changed:
            self._record("sync_config", lambda at=self.clock(): self.store.sync_config(*config_rows(config), at))
        self.emit("config_reloaded", "info", f"configuration reloaded (queries changed: {queries_changed}, "
                    f"bounds changed: {self.changes.bounds})", None)

    def _reconfigure(self, config: Config) -> bool:
        """Take ``config`` (the fleet merged in) in place of the one in force; True when its queries changed."""
        old = self.config
        queries_changed = old.plan_doc != config.plan_doc or dict(old.qos) != dict(config.qos)
        self.changes |= Changes(queries=queries_changed, bounds=old.bounds != config.bounds)
        self.state = self.state.reconfigured(
            trigger_rules(config), {n for n, node in config.plan.nodes.items() if node.sel is not None},
            {q for q, m in config.managed.items() if m.join_order is not None}, keep_policy_state=old.policy == config.policy,
            stateful={n for n, node in config.plan.nodes.items() if node.op in STATEFUL_OPS})
        if old.plan != config.plan:  # the ratios measured what the old plan's estimates missed
            self.state = replace(self.state, feedback=FeedbackState())
        self._install(config)
        return queries_changed

    # --- the fleet ---------------------------------------------------------------------------

    def _read_fleet(self) -> bool:
        """Read the agent queries again when the set changed (cheap key first); True when it was read anew."""
        if self.agents is None:
            return False
        try:
            key = apps.fleet_key(self.store)  # type: ignore[arg-type]
            if key == self._fleet_key:
                return False
            self._governed = apps.governed(self.store)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - the store is away: the fleet stays as it was, the next tick looks again
            self.log.warning("store_unavailable", step="read_fleet", error=self.base.redact(str(exc)))
            return False
        self._fleet_key = key
        return True

    def _with_fleet(self, config: Config) -> Config:
        """``config`` with the fleet's queries merged in; a query newly left out is said once (``agent_query_skipped``)."""
        merged, fleet = effective(config, self._governed, self._checked)
        self._fleet_identity = [identity(q) for q in self._governed]
        for query, why in fleet.skipped.items():
            if self.fleet.skipped.get(query) != why:
                self.emit("agent_query_skipped", "warning", f"agent query {query!r} is left out of armd's decisions and runs "
                          f"with its initial settings: {why}", query, {"reason": why})
        old, self.fleet = self.fleet.names, fleet
        if fleet.names != old:
            self.log.info("fleet_changed", queries=len(fleet.names), joined=sorted(fleet.names - old), left=sorted(old - fleet.names))
        return merged

    def _fleet_moved(self) -> None:
        """Agent queries joined or left (an application came, stopped, was marked gone): admit and re-decide."""
        if not self._read_fleet():
            return
        same = [identity(q) for q in self._governed] == self._fleet_identity  # only verdicts moved: the problem stands
        # A query registered again (its application restarted) waits for a verdict: admitted anew, not as remembered.
        waiting = {q.name for q in self._governed if q.status == "pending" and q.name in self.state.status}
        if waiting:
            self.state = replace(self.state, status={q: v for q, v in self.state.status.items() if q not in waiting})
        if (not same and self._reconfigure(self._with_fleet(self.base))) or waiting:
            self.changes |= Changes(queries=True)

    def reject_reload(self, message: str) -> None:
        """A reload that could not be taken: the old configuration stays."""
        self.emit("config_reload_failed", "error", f"configuration not reloaded, the old one stays: {message}", None)

    def _read(self, step: str, method: str) -> dict[str, Any]:
        """What the store holds (settings in force, desired settings), read back at start; nothing while it is down."""
        try:
            return dict(getattr(self.store, method)())
        except TemporaryError as exc:
            self.log.warning("store_unavailable", step=step, error=str(exc))
            return {}

    def _read_orders(self) -> tuple[dict[str, tuple[int, Any]], dict[str, Exception]]:
        """The (epoch, order) each JISC join runs, from its control file; and why a file could not be read."""
        orders: dict[str, tuple[int, Any]] = {}
        unreadable: dict[str, Exception] = {}
        for query in self.join_orders.queries() if self.join_orders is not None else ():
            try:
                orders[query] = self.join_orders.current(query)
            except Exception as exc:  # noqa: BLE001 - the cycle reports it as join_order_failed once the query runs
                unreadable[query] = exc
        return orders, unreadable

    # --- views -------------------------------------------------------------------------------

    @property
    def admitted(self) -> list[str]:
        return self.state.admitted(self.model)

    @property
    def problem(self) -> Problem:
        return self.model.problem_of(self.admitted)

    def _units(self, at: datetime) -> float:
        """``at`` in model time units since the daemon started."""
        return (at - self.started).total_seconds() / self.config.model.time_unit_seconds

    def _take_actual(self) -> None:
        """What the applying side reports in force (``Store.actual_states``): settings, when they changed, live migrations.

        The reconciler writes it; this is the only way its results reach the
        deciding side. A store that does not answer leaves the last view.
        """
        if self.outbox.down:
            return  # not before the store answers the outbox again, so a step keeps its pace
        try:
            actual = self.store.actual_states()
        except TemporaryError:
            return
        for query, state in actual.items():
            if query not in self.config.plan.queries:
                continue  # a query that left the problem (its application is gone); taken again when it comes back
            if state.settings is None or self._versions.get(query) == state.plan_version:
                continue
            first = query not in self._versions
            self._versions[query] = state.plan_version
            self.running[query] = state.settings
            self.metrics.settings(query, state.settings)
            if state.at is not None and not (first and state.at < self.started):  # put in force by this run: cool-down
                self.changed_at[query] = self._units(state.at)
        self.migrating = {q for q, state in actual.items() if state.phase == "migrating"}

    # --- the cycle ---------------------------------------------------------------------------------

    def tick(self) -> None:
        """One cycle: observe, then decide (and write the desired settings)."""
        self.observe()
        self.decide()

    def observe(self) -> None:
        """Read the statistics, fold them into the cycle's state, record them with the estimate of the settings in force."""
        self._fleet_moved()
        self._take_actual()
        at = self.clock()
        try:
            observation = self.source.observe(at)
            reported = self.agents.observe(at) if self.agents is not None and self.fleet.queries else None
        except Exception as exc:  # noqa: BLE001 - the source is outside armd; the loop must go on
            self._fail("statistics_failed", f"reading statistics failed: {exc}", None, exc)
            return
        observation, rejected = screen(observation)  # values outside their domain never reach the model or the store
        own = observation
        if reported is not None:  # what the applications reported is in the store already: used, not recorded again
            self.metrics.agent_lags(getattr(self.agents, "lags", ()))  # none when the agent feed reads them
            self.metrics.agent_taken(getattr(self.agents, "taken", ()))
            reported, dropped = screen(reported)
            rejected = [*rejected, *dropped]
            observation = joined(own, reported, set(self.base.plan.streams))
        if rejected:
            self.counters["statistics_rejected"] += 1
            self._raise(rejected_event(at, rejected))
        observed = observe(self.setup, self.model, self.state, observation, at=at, now=self._units(at), running=self.running,
                           changed_at=self.changed_at, migrating=frozenset(self.migrating))
        self.state = observed.state
        self._record("observation", lambda: self.store.record_observation(own))
        if observed.estimates:
            rows = self.estimate_log.due(observed.estimates, (at - self.started).total_seconds())
            if rows:  # a row when an estimate moved or grew old (control/estimates.py), not a thousand each second
                self._record("estimates", lambda: self.store.record_estimates(at, rows))
            self.metrics.estimates(observed.estimates)
        self.counters["observations"] += 1
        if observed.measured:  # every query's newest report: applications report apart (control/held_state.py)
            self.metrics.measured(observed.state.held.per_query())
        for event in observed.events:
            self._raise(event)
        if self.cpu_refit is not None and observation.batches:
            self._refit_cpu(observation.batches, at)

    def _refit_cpu(self, batches: Any, at: datetime) -> None:
        """Feed the batches to the online CPU fit; a good refit goes into the model (``control/cpu_fit.py``)."""
        assert self.cpu_refit is not None
        event = self.cpu_refit.feed(cpu_terms_now(self.model, self.state.rates, self.setup.profile), batches,
                                    self.config.model.time_unit_seconds, at)
        if event is not None:
            self._rebuild()
            self.changes |= Changes(model=True)
            self._raise(event)

    def decide(self) -> None:
        """Admit new queries, choose join orders and decide when a trigger fires or the periodic interval has passed."""
        at = self.clock()
        orders, unreadable = self._read_orders()
        snapshot = Snapshot(at, self._units(at), dict(self.running), dict(self.changed_at), self.changes, dict(self.desired),
                            orders, unreadable, self.applier.transient_memory if isinstance(self.applier, LiveApplier) else None)
        tick = decide(self.setup, self.model, self.state, snapshot, timer=time.perf_counter)
        self.state, self.model, self.changes = tick.state, tick.model, Changes()
        self._admitted(tick, at)
        for failure in tick.failures:
            self._fail(failure.kind, failure.message, failure.query, failure.error)
        if tick.decision is not None:
            self._decided(tick)

    def _admitted(self, tick: Tick, at: datetime) -> None:
        for query in tick.removed:
            self.running.pop(query, None)
            self.metrics.forget(query)
        statuses: list[tuple[str, str, str | None]] = []
        events: list[EventRecord] = []
        for verdict in tick.admissions:
            query, status = verdict.query, "active" if verdict.admitted else "rejected"
            if verdict.admitted:
                # A re-admission goes to the alert hooks like the rejection did: the same people are told.
                readmitted = query in tick.readmitted
                self.emit("query_admitted", "info", verdict.reason, query, {"readmitted": True} if readmitted else None,
                          notice=readmitted, into=events)
            else:
                self.emit("query_rejected", "warning", verdict.reason, query,
                          {"memory_shortfall_bytes": verdict.memory_shortfall, "cpu_shortfall": verdict.cpu_shortfall},
                          into=events)
            statuses.append((query, status, verdict.reason))
        if statuses:  # one transaction for a fleet's verdicts, not two per query
            self._record("status", lambda: self.store.record_admissions(statuses, events, at))

    def _decided(self, tick: Tick) -> None:
        """Record the decision with its estimates, write the desired settings, hand the changes to the applying side."""
        record, rows = tick.decision, list(tick.estimates)
        assert record is not None and tick.guarded is not None and tick.staging is not None

        def write() -> None:
            self.store.record_estimates(record.at, rows, self.store.record_decision(record))

        self._record("decision", write)
        self.metrics.decision(record.duration_ms / 1e3)
        recommended = {**self.running, **{query: decided for query, (_in_force, decided) in tick.changes.items()}}
        for query, settings in recommended.items():
            self.metrics.recommend(query, settings)
        self.log.info("decision_made", policy=record.policy, trigger=record.trigger, feasible=record.feasible,
                      weighted_qos=round(record.weighted_qos, 6), changes=len(tick.desired), dry_run=record.dry_run,
                      duration_ms=round(record.duration_ms, 3), decision=record.id)
        for event in tick.events:
            self._raise(event, policy=record.policy)
        self.counters["decisions"] += 1
        recommend = self.fleet.recommend
        desired = not_asked_yet([replace(row, recommend_only=True) if row.query in recommend else row for row in tick.desired],
                                self.desired)
        if desired:
            self.desired.update({row.query: row for row in desired})
            self._record("desired", lambda: self.store.write_desired(desired))
        for row in desired:
            if row.query in recommend:
                self.emit("recommendation", "info", f"recommended plan version {row.plan_version} for {row.query!r}: "
                          f"{Words(self.config.model.time_unit_seconds, self.labels).settings(row.settings.as_json())}; its application runs in recommend mode and "
                          "applies nothing", row.query, {"plan_version": row.plan_version, "settings": row.settings.as_json()},
                          alert=False)

    def report(self, event: EventRecord) -> None:
        """Log, record and (for warnings and errors) alert an event an adapter made, e.g. a lossy restart."""
        self.emit(event.kind, event.severity, event.message, event.query, dict(event.details or {}))

    def query_terminated(self, query: str, error: str) -> None:
        """A Spark query stopped with an error (the Spark adapter reports it here); logged, recorded and alerted."""
        self.counters["query_errors"] += 1
        self.emit("query_terminated", "error", f"Spark query {query!r} terminated with an error: {error}", query,
                    {"error": self.config.redact(error)})

    def estimate_memory(self, settings: dict[str, QuerySettings]) -> tuple[float, dict[str, float]]:
        """The memory (total, per query) with ``settings`` in force now; the coordinator stages with it.

        The model's estimates corrected by the measurements (``control/feedback.py``); the total is at least the state
        measured last, so staging keeps to the headroom there really is."""
        problem = feedback.corrected(self.problem, self.state.feedback, self.setup.feedback)
        total, per_query = memory_of(problem, settings, self.model.current_d(self.state.rates))
        measured = self.state.feedback.measured_total
        return (total if measured is None else max(total, measured)), per_query

    # --- housekeeping --------------------------------------------------------------------------

    def housekeeping(self) -> None:
        at = self.clock()
        cutoff = at - timedelta(days=self.config.store.retention_days)
        history = at - timedelta(days=self.config.store.history_retention_days)

        def prune() -> None:
            removed = self.store.prune(cutoff, history)
            self.log.info("store_pruned", removed=sum(removed.values()), tables=removed, older_than=cutoff.isoformat(),
                          history_older_than=history.isoformat())

        self._record("prune", prune)

    def applications_gone(self) -> None:
        """Mark ``armd.agent`` applications silent for ``store.application_timeout_seconds`` gone (their queries removed)."""
        if not isinstance(self.store, Applications):
            return  # a store without applications (the SQL store has them from revision 0008)
        at, timeout = self.clock(), self.config.store.application_timeout_seconds

        try:
            gone = self.store.mark_gone_applications(timeout, at)
        except TemporaryError as exc:  # the store is away: the next run looks again
            self.log.warning("store_unavailable", step="applications_gone", error=self.config.redact(str(exc)))
            return
        for app in gone:
            self.emit("application_gone", "warning", f"application {app!r} stopped reporting for more than {timeout:g} s; "
                      "it is marked gone and its queries are removed", None, {"app": app})

    def flush(self, force: bool = False) -> bool:
        """Write the backlog (while the store is down, at most every ``outbox.RETRY_SECONDS``); True when it is empty."""
        return self.outbox.flush(force)

    # --- recording, events and failures --------------------------------------------------------

    def _record(self, kind: str, write: Callable[[], Any]) -> None:
        self.outbox.put(kind, write)

    def note(self, kind: str, message: str, details: dict[str, Any] | None = None) -> None:
        """Record an informational event (the daemon started, stopped, …)."""
        self.emit(kind, "info", message, None, details)

    def _raise(self, event: EventRecord, **fields: Any) -> None:
        """An event the cycle returned: logged, recorded and alerted like the controller's own."""
        self.emit(event.kind, event.severity, event.message, event.query, dict(event.details), **fields)

    def emit(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
             *, alert: bool = True, notice: bool = False, into: list[EventRecord] | None = None, **fields: Any) -> None:
        """Log (with ``fields`` bound, e.g. ``policy``, ``migration``), record (or append to ``into``, for the caller to
        record with others) and — when it is a warning or an error, or a ``notice`` — alert."""
        event = EventRecord(self.clock(), kind, severity, self.config.redact(message), query, json_safe(details or {}))
        getattr(self.log, severity)(kind, query=query, message=event.message, **{k: v for k, v in fields.items() if v is not None})
        if into is not None:
            into.append(event)
        else:
            self._record("event", lambda: self.store.record_event(event))
        if (alert and (severity != "info" or kind in RESOLVES)) or notice:  # an info that ends a condition resolves its alert
            self.alerts.alert(event)

    def _fail(self, kind: str, message: str, query: str | None, exc: Exception) -> None:
        self.counters["query_errors" if query else "errors"] += 1
        self.emit(kind, "error", message, query, {"error_type": type(exc).__name__})


def joined(own: Observation, reported: Observation, own_streams: set[str]) -> Observation:
    """The daemon's own statistics and what the applications reported, as one observation (a stream the configuration
    names is measured by the daemon's own source)."""
    return replace(own, streams=[*own.streams, *(s for s in reported.streams if s.stream not in own_streams)],
                   queries=[*own.queries, *reported.queries], batches=[*own.batches, *reported.batches])
