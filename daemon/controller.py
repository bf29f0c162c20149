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

Until the reconciler reads the desired settings from the store, ``apply``
puts decided settings into force and ``_put_join_orders_in_force``
publishes desired JISC join orders (never a dry run's recommendation).

Time: the ports carry UTC datetimes; the cycle gets ``now`` in the cost
model's time unit, counted from the daemon's start, so cool-downs and
predicted trajectories use the same unit as window sizes.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import numpy as np

from armd.adapters.store import StoreUnavailable
from armd.control.cycle import Changes, JoinOrderChange, Snapshot, Tick, decide, initial_state, observe, orders_for_model
from armd.control.errors import TemporaryError
from armd.control.model import build_model, fractions_of
from armd.control.outbox import Outbox
from armd.control.records import json_safe
from armd.control.statistics import screen
from armd.migrations.genmig import Migration
from armd.policies.problem import Problem
from armd.policies.staging import Staging, stage

from .config import Config
from .metrics import NoMetrics
from .setup import config_rows, setup_of
from armd.control.ports import AlertSink, Applier, DesiredSettings, EventRecord, JoinOrders, QuerySettings, StatsSource, Store


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class PendingChanges:
    decision_id: str | None
    changes: dict[str, tuple[QuerySettings | None, QuerySettings]]
    """To apply at the next apply step."""
    later: dict[str, tuple[QuerySettings | None, QuerySettings]] = field(default_factory=dict)
    """Staged for after the migrations in progress have finished (their extra state would break the bound)."""


class Controller:
    def __init__(self, config: Config, store: Store, source: StatsSource, applier: Applier, alerts: AlertSink, log: Any,
                 clock: Callable[[], datetime] = utcnow, metrics: Any = None, join_orders: JoinOrders | None = None) -> None:
        self.store, self.source, self.applier, self.alerts, self.log, self.clock = store, source, applier, alerts, log, clock
        self.join_orders = join_orders
        self.metrics = metrics if metrics is not None else NoMetrics()
        self.started = clock()
        self.counters: Counter[str] = Counter()
        self.outbox = Outbox(clock, log)
        self.changed_at: dict[str, float] = {}
        self.pending: PendingChanges | None = None
        self._open_migrations: dict[str, tuple[dict[str, int], dict[str, Any], dict[str, Any]]] = {}
        """Migrations the applier still runs (live ones finish after ``apply``): the row's id holder, its details, a summary."""
        self.changes = Changes(queries=True)
        """What moved since the last decision; the next decision step hands it to the cycle."""
        self._publishing: dict[str, JoinOrderChange] = {}
        """Desired JISC join orders not yet put into force (interim: the reconciler will publish them)."""
        self.state = initial_state(config.triggers.alpha, config.triggers.threshold)
        self.desired: dict[str, DesiredSettings] = self._read("read_desired", "desired_settings")
        self._install(config)
        self._record("sync_config", lambda at=self.clock(): self.store.sync_config(*config_rows(config), at))
        self.running: dict[str, QuerySettings] = self._read("read_settings", "current_settings")
        for query, settings in self.running.items():
            self.metrics.qos(query, settings.qos)

    # --- configuration -----------------------------------------------------------------------

    def _install(self, config: Config) -> None:
        """Take ``config``: the cycle's setup and the cost model rebuilt with the measurements so far."""
        self.config = config
        self.setup = setup_of(config, join_orders=self.join_orders is not None)
        orders, _unreadable = self._read_orders()
        self.model = build_model(self.setup, self.state.selectivities.smoothed, orders_for_model(orders, self.desired),
                                 self.state.pair_selectivities)
        self.metrics.bounds(config.bounds.memory, config.bounds.cpu)

    def reload(self, config: Config) -> None:
        """Switch to a new, already validated configuration."""
        old = self.config
        queries_changed = old.plan_doc != config.plan_doc or dict(old.qos) != dict(config.qos)
        self.changes |= Changes(queries=queries_changed, bounds=old.bounds != config.bounds)
        self.state = self.state.reconfigured(
            config.triggers.alpha, config.triggers.threshold, {n for n, node in config.plan.nodes.items() if node.sel is not None},
            {q for q, m in config.managed.items() if m.join_order is not None}, keep_policy_state=old.policy == config.policy)
        self._install(config)
        if queries_changed:
            self._record("sync_config", lambda at=self.clock(): self.store.sync_config(*config_rows(config), at))
        self._event("config_reloaded", "info", f"configuration reloaded (queries changed: {queries_changed}, "
                    f"bounds changed: {self.changes.bounds})", None)

    def reject_reload(self, message: str) -> None:
        """A reload that could not be taken: the old configuration stays."""
        self._event("config_reload_failed", "error", f"configuration not reloaded, the old one stays: {message}", None)

    def _read(self, step: str, method: str) -> dict[str, Any]:
        """What the store holds (settings in force, desired settings), read back at start; nothing while it is down."""
        read = getattr(self.store, method, None)  # SqlStore gains desired_settings with revision 0005 (the apply half)
        try:
            return dict(read()) if read is not None else {}
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

    # --- the views the applying side reads ------------------------------------------------------

    @property
    def full_problem(self) -> Problem:
        return self.model.full

    @property
    def plan_d(self) -> np.ndarray:
        return self.model.plan_d

    @property
    def admitted(self) -> list[str]:
        return self.state.admitted(self.model)

    @property
    def problem(self) -> Problem:
        return self.model.problem_of(self.admitted)

    def _units(self, at: datetime) -> float:
        """``at`` in model time units since the daemon started."""
        return (at - self.started).total_seconds() / self.config.model.time_unit_seconds

    # --- the cycle ---------------------------------------------------------------------------------

    def tick(self) -> None:
        """One cycle: observe, then decide (and write the desired settings)."""
        self.observe()
        self.decide()

    def observe(self) -> None:
        """Read the statistics, fold them into the cycle's state, record them with the estimate of the settings in force."""
        at = self.clock()
        try:
            observation = self.source.observe(at)
        except Exception as exc:  # noqa: BLE001 - the source is outside armd; the loop must go on
            self._fail("statistics_failed", f"reading statistics failed: {exc}", None, exc)
            return
        observation, rejected = screen(observation)  # values outside their domain never reach the model or the store
        if rejected:
            self.counters["statistics_rejected"] += 1
            self._event("statistics_rejected", "warning", f"{len(rejected)} statistics outside their domain were dropped: " + "; ".join(
                f"{r.subject} {r.name} {r.field} = {r.as_json()['value']} (must be {r.reason})" for r in rejected[:5]), None,
                {"rejected": [r.as_json() for r in rejected]})
        observed = observe(self.setup, self.model, self.state, observation, at=at, now=self._units(at), running=self.running,
                           changed_at=self.changed_at, migrating=frozenset(self._open_migrations))
        self.state = observed.state
        self._record("observation", lambda: self.store.record_observation(observation))
        if observed.estimates:
            rows = observed.estimates
            self._record("estimates", lambda: self.store.record_estimates(at, rows))
            self.metrics.estimates(rows)
        self.counters["observations"] += 1
        if observed.measured:
            self.metrics.measured(observed.measured)
        for event in observed.events:
            self._raise(event)

    def decide(self) -> None:
        """Admit new queries, choose join orders and decide when a trigger fires or the periodic interval has passed."""
        at = self.clock()
        orders, unreadable = self._read_orders()
        snapshot = Snapshot(at, self._units(at), dict(self.running), dict(self.changed_at), self.changes, dict(self.desired),
                            orders, unreadable, getattr(self.applier, "transient_memory", None))
        tick = decide(self.setup, self.model, self.state, snapshot, timer=time.perf_counter)
        self.state, self.model, self.changes = tick.state, tick.model, Changes()
        self._admitted(tick, at)
        for failure in tick.failures:
            self._fail(failure.kind, failure.message, failure.query, failure.error)
        if tick.decision is not None:
            self._decided(tick)
        self._put_join_orders_in_force()

    def _admitted(self, tick: Tick, at: datetime) -> None:
        for query in tick.removed:
            self.running.pop(query, None)
        for verdict in tick.admissions:
            query, status = verdict.query, "active" if verdict.admitted else "rejected"
            if verdict.admitted:
                self._event("query_admitted", "info", verdict.reason, query)
            else:
                self._event("query_rejected", "warning", verdict.reason, query,
                            {"memory_shortfall_bytes": verdict.memory_shortfall, "cpu_shortfall": verdict.cpu_shortfall})
            self._record("status", lambda q=query, s=status, r=verdict.reason: self.store.set_query_status(q, s, at, r))

    def _decided(self, tick: Tick) -> None:
        """Record the decision with its estimates, write the desired settings, hand the changes to the applying side."""
        record, rows = tick.decision, list(tick.estimates)
        assert record is not None and tick.guarded is not None and tick.staging is not None

        def write() -> None:
            self.store.record_estimates(record.at, rows, self.store.record_decision(record))

        self._record("decision", write)
        self.metrics.decision(record.duration_ms / 1e3)
        self.log.info("decision_made", policy=record.policy, trigger=record.trigger, feasible=record.feasible,
                      weighted_qos=round(record.weighted_qos, 6), changes=len(tick.desired), dry_run=record.dry_run,
                      duration_ms=round(record.duration_ms, 3), decision=record.id)
        for event in tick.events:
            self._raise(event, policy=record.policy)
        self.counters["decisions"] += 1
        if tick.desired:
            self.desired.update({row.query: row for row in tick.desired})
            if hasattr(self.store, "write_desired"):  # SqlStore gains it with revision 0005 (the apply half)
                self._record("desired", lambda desired=tick.desired: self.store.write_desired(desired))
        if tick.guarded.apply:
            self._publishing.update({c.query: c for c in tick.join_orders})
            if tick.changes:
                staging = tick.staging
                self.pending = PendingChanges(record.id, {q: tick.changes[q] for q in staging.now},
                                              {q: tick.changes[q] for q in staging.later})

    def report(self, event: EventRecord) -> None:
        """Log, record and (for warnings and errors) alert an event an adapter made, e.g. a lossy restart."""
        self._event(event.kind, event.severity, event.message, event.query, dict(event.details or {}))

    def query_terminated(self, query: str, error: str) -> None:
        """A Spark query stopped with an error (the Spark adapter reports it here); logged, recorded and alerted."""
        self.counters["query_errors"] += 1
        self._event("query_terminated", "error", f"Spark query {query!r} terminated with an error: {error}", query,
                    {"error": self.config.redact(error)})

    # --- the applying side (interim: the reconciler and the coordinator replace it) ------------------

    def _put_join_orders_in_force(self) -> None:
        """Publish each desired JISC join order (interim, until the reconciler does): publishing is the whole migration.

        The query switches each key at its next tuple (JISC), so the
        migration is recorded as started and finished at once. One that
        fails is reported and tried again at the next decision step.
        """
        for query, change in list(self._publishing.items()):
            row = self.desired.get(query)
            if row is None or row.recommend_only or row.join_order != change.new:
                del self._publishing[query]  # superseded (or a recommendation): nothing to publish
                continue
            if not row.may_start:
                continue
            try:
                self.join_orders.publish(query, change.epoch, change.new)  # type: ignore[union-attr]
            except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
                self._fail("join_order_failed", f"putting the join order of {query!r} into force failed: {exc}", query, exc)
                continue
            del self._publishing[query]
            at = self.clock()

            def record(q: str = query, doc: dict[str, Any] = dict(change.details)) -> None:
                row_id = self.store.record_migration(q, "jisc", "done", at, details=doc)
                self.store.update_migration(row_id, "done", at, finished=True)

            self._record("migration", record)
            self.metrics.migration("done")
            self._event("join_order_changed", "info", change.message, query, dict(change.details))

    def current_d(self) -> np.ndarray:
        return self.model.current_d(self.state.rates)

    def _running_fractions(self) -> tuple[np.ndarray, np.ndarray]:
        return fractions_of(self.problem, self.running)

    def _stage(self, changes: dict[str, tuple[QuerySettings | None, QuerySettings]], held: float,
               per_query: dict[str, dict[str, Any]]) -> Staging:
        """Which changes migrate now: the applier's extra state while a migration runs must fit the memory bound."""
        transient = getattr(self.applier, "transient_memory", None)
        extra = {}
        for query, (old, new) in changes.items():
            estimate = per_query.get(query, {}).get("estimated_memory_bytes", 0.0)
            extra[query] = 0.0 if transient is None or old is None else float(transient(query, old, new, estimate))
        return stage(held, extra, self.config.bounds.memory)

    def _staged_event(self, staging: Staging) -> None:
        if staging.later or staging.over_bound:
            bound = self.config.bounds.memory
            message = (f"migrations of {', '.join(staging.later)} wait until those of {', '.join(staging.now)} have finished: "
                       f"running them together would hold more than the memory bound {bound:,.0f} B"
                       if staging.later else "")
            if staging.over_bound:
                message = (f"the migration of {staging.now[0]} holds {staging.peak_memory:,.0f} B while it runs, over the memory "
                           f"bound {bound:,.0f} B; no smaller step exists, so it runs alone" + (f"; {message}" if message else ""))
            self._event("migrations_staged", "warning" if staging.over_bound else "info", message, None, staging.as_json())

    # --- apply --------------------------------------------------------------------------------

    def apply(self) -> None:
        pending, self.pending = self.pending, None
        if self._open_migrations:
            self._migrating()  # lets a live-migrating applier advance (and report) its migrations
        if pending is None:
            return
        if not pending.changes and pending.later:
            if self._migrating():
                self.pending = pending  # the staged migrations wait for those in progress
                return
            pending = self._restage(pending)
        at = self.clock()
        now = self._units(at)
        retry: dict[str, tuple[QuerySettings | None, QuerySettings]] = {}
        waiting = dict(pending.later)
        for query, (old, new) in pending.changes.items():
            if query not in self.admitted:
                continue
            if query in self._open_migrations:  # its last change is still migrating: this one follows when it is done
                waiting[query] = (self.running.get(query), new)
                continue
            migration: dict[str, int] = {}
            details = {"old": old.as_json() if old else None, "new": new.as_json(), "decision_id": pending.decision_id}
            self._record("migration", lambda q=query, m=migration, d=details: m.setdefault(
                "id", self.store.record_migration(q, self.applier.name, "running", at, details=d)))
            summary = {"applier": self.applier.name, "decision_id": pending.decision_id, "windows": dict(new.windows),
                       "granularity": new.granularity}
            self._event("migration_started", "info", f"migration of {query!r} started ({self.applier.name})", query,
                        summary, migration=migration.get("id"))
            self.metrics.migration("started")
            self._open_migrations[query] = (migration, details, summary)
            try:
                strategy = self.applier.apply(query, old, new)
            except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
                self._open_migrations.pop(query, None)
                error = self.config.redact(str(exc))
                self._finish_migration(migration, "failed", {**details, "error": error})
                self.metrics.migration("failed")
                # Recorded as an error; the alert for this failure is the apply_failed event right after it.
                self._event("migration_failed", "error", f"migration of {query!r} failed: {error}", query,
                            {**summary, "error": error}, alert=False, migration=migration.get("id"))
                self._fail("apply_failed", f"applying settings to {query!r} failed: {exc}", query, exc)
                retry[query] = (old, new)
                continue
            if query in self._migrating():
                self.log.info("migration_running", query=query, migration=migration.get("id"), strategy=strategy)
            elif self._open_migrations.pop(query, None) is not None:
                self._finish_migration(migration, "done", {**details, "strategy": strategy})
                self.metrics.migration("done")
                self._event("migration_finished", "info", f"migration of {query!r} finished ({strategy})", query,
                            {**summary, "strategy": strategy}, migration=migration.get("id"))
            self.running[query] = new
            self.changed_at[query] = now
            self.metrics.qos(query, new.qos)
            self._record("settings", lambda q=query, s=new: self.store.set_query_settings(q, s, at))
            self.log.info("settings_applied", query=query, migration=migration.get("id"), strategy=strategy,
                          windows=dict(new.windows), granularity=new.granularity, qos=round(new.qos, 6))
            self.counters["applied"] += 1
        if self.pending is None and (retry or waiting):
            self.pending = PendingChanges(pending.decision_id, retry, waiting)

    def migration_transition(self, record: Any) -> None:
        """A live-migrating applier moved a migration (``migrations.genmig.Migration``) to another state."""
        opened = self._open_migrations.get(record.query)
        if opened is None:
            return
        migration, details, summary = opened
        at, state = self.clock(), record.state
        details = {**details, "live": record.as_record()}
        if not record.final:
            self._record("migration", lambda: self.store.update_migration(migration["id"], state, at, details=details))
            self.log.info("migration_" + state, query=record.query, migration=migration.get("id"), t_split=record.t_split)
            return
        del self._open_migrations[record.query]
        done = state == "done"
        self._finish_migration(migration, "done" if done else "failed", details)
        self.metrics.migration("done" if done else "failed")
        note = record.history[-1][2] if record.history else ""
        self._event("migration_finished" if done else "migration_failed", "info" if done else "error",
                    f"migration of {record.query!r} {'finished' if done else 'failed'} ({record.strategy}){': ' + note if note else ''}",
                    record.query, {**summary, "strategy": record.strategy, "t_split": record.t_split},
                    migration=migration.get("id"))

    def resume_migrations(self) -> tuple[str, ...]:
        """After a restart: hand every unfinished live migration in the store back to the applier.

        Returns the queries whose migration goes on (the daemon must not start
        them anew). A migration that cannot be resumed (no live state stored,
        an applier without ``resume``, its runs' checkpoints gone) is closed as
        failed with the reason; its query then starts like any other.
        """
        try:
            rows = self.store.open_migrations()
        except StoreUnavailable as exc:
            self.log.warning("store_unavailable", step="read_open_migrations", error=str(exc))
            return ()
        resume = getattr(self.applier, "resume", None)
        resumed = []
        for row in rows:
            query, details = row["query"], dict(row.get("details") or {})
            migration = {"id": row["id"]}
            summary = {"applier": self.applier.name, "decision_id": details.get("decision_id")}
            try:
                if "live" not in details or resume is None:
                    raise ValueError("the daemon stopped while it ran and it left no state to go on from")
                record = Migration.from_record(details["live"])
                resume(record)
            except Exception as exc:  # noqa: BLE001 - one migration that cannot go on must not stop the daemon
                error = self.config.redact(f"{exc}")
                self._finish_migration(migration, "failed", {**details, "error": f"not resumed: {error}"})
                self.metrics.migration("failed")
                self._event("migration_failed", "error", f"migration of {query!r} could not be resumed after a restart: {error}",
                            query, {**summary, "error": error}, migration=row["id"])
                continue
            self._open_migrations[query] = (migration, details, summary)
            resumed.append(query)
            self._event("migration_resumed", "info", f"migration of {query!r} resumed in state {record.state} "
                        f"(T_split {record.t_split})", query, {**summary, "state": record.state}, migration=row["id"])
        return tuple(resumed)

    def _migrating(self) -> tuple[str, ...]:
        """Queries whose migration the applier still runs (appliers that finish within ``apply`` have none)."""
        in_progress = getattr(self.applier, "migrating", None)
        return tuple(in_progress()) if in_progress is not None else ()

    def _restage(self, pending: PendingChanges) -> PendingChanges:
        """Stage the waiting changes again, on the estimates of the settings now in force."""
        problem, stream_d = self.problem, self.current_d()
        fw, fg = self._running_fractions()
        held = float(problem.evaluate(fw, fg, stream_d, with_qos=False).total_memory)
        index = {q: i for i, q in enumerate(problem.queries)}
        waiting = [q for q in pending.later if q in index]
        for q in waiting:
            fw[index[q]], fg[index[q]] = pending.later[q][1].fw, pending.later[q][1].fg
        target = problem.evaluate(fw, fg, stream_d, with_qos=False)
        per_query = {q: {"estimated_memory_bytes": float(target.query_memory[index[q]])} for q in waiting}
        staging = self._stage({q: pending.later[q] for q in waiting}, held, per_query)
        self._staged_event(staging)
        return PendingChanges(pending.decision_id, {q: pending.later[q] for q in staging.now},
                              {q: pending.later[q] for q in staging.later})

    def _finish_migration(self, migration: dict[str, int], state: str, details: dict[str, Any]) -> None:
        at = self.clock()
        # The record may still sit in the backlog; the update runs after it, in order.
        self._record("migration", lambda: self.store.update_migration(migration["id"], state, at, finished=True, details=details))


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

    def _raise(self, event: EventRecord, **fields: Any) -> None:
        """An event the cycle returned: logged, recorded and alerted like the controller's own."""
        self._event(event.kind, event.severity, event.message, event.query, dict(event.details), **fields)

    def _event(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
               *, alert: bool = True, **fields: Any) -> None:
        """Log (with ``fields`` bound, e.g. ``policy``, ``migration``), record and — when it is a warning or an error — alert."""
        event = EventRecord(self.clock(), kind, severity, self.config.redact(message), query, json_safe(details or {}))
        getattr(self.log, severity)(kind, query=query, message=event.message, **{k: v for k, v in fields.items() if v is not None})
        self._record("event", lambda: self.store.record_event(event))
        if severity != "info" and alert:
            self.alerts.alert(event)

    def _fail(self, kind: str, message: str, query: str | None, exc: Exception) -> None:
        self.counters["query_errors" if query else "errors"] += 1
        self._event(kind, "error", message, query, {"error_type": type(exc).__name__})
