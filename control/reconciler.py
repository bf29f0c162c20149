"""The reconciler: puts the desired settings the control cycle wrote into force, and reports what runs.

Why: deciding and applying are two halves that meet only in the store.
The cycle writes ``DesiredSettings`` per query; every tick the reconciler
reads them and, for each query whose desired ``plan_version`` is newer than
the one in force, that may start (staging) and is not a dry run's
recommendation, applies it through the applier (settings) and the
join-order publisher (a JISC join's order), then writes the ``ActualState``
back. So the reconciler can later run inside a user's Spark application,
against the same store, with nothing else shared. A query still migrating
takes its next version once that migration is done, unless the version
holds less state than the one the migration moves to by construction (a
window cut deeply, nothing larger) and the applier can roll the migration
back without losing a result (``SupersedingApplier``): a burst's deeper cut
then starts at once.

Errors say whether a retry helps (``control.errors``): ``NotReady`` is
retried quietly at the next tick; a ``TemporaryError`` or anything
unexpected is retried with exponential backoff (``[apply]``: from
``retry_initial_seconds``, or the error's ``retry_after`` when longer,
doubling up to ``retry_max_seconds``) at most ``max_attempts`` times; a
``PermanentError`` or the last attempt marks the query ``failed`` (actual
phase and query status), with an ``apply_failed`` alert, and the other
queries go on. A failed query is tried again only for a newer desired
version.

Pure: ports only, the clock passed in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

from armd.migrations.join import order_text

from .coordinator import ApplyPorts, Coordinator, OpenMigration
from .model import holds_no_more, same_settings
from .errors import NotReady, PermanentError, TemporaryError
from .ports import ActualState, DesiredSettings, JoinOrders, LiveApplier, QuerySettings, SupersedingApplier


SUPERSEDING_CUT = 0.75
"""A change supersedes a running migration only if it cuts one of the target's windows to this fraction or less:
each supersession restarts the new run, which a sliver (4.2 → 4.0 s) does not pay back."""


@dataclass(frozen=True)
class RetryPolicy:
    """``[apply]`` of the configuration."""

    initial_seconds: float = 1.0
    max_seconds: float = 60.0
    max_attempts: int = 20

    def delay(self, attempts: int, hint: float = 0.0) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt (``hint``: the error's ``retry_after``)."""
        backoff = min(self.max_seconds, self.initial_seconds * 2 ** max(0, attempts - 1))
        return max(backoff, hint)


class Reconciler:
    def __init__(self, ports: ApplyPorts, coordinator: Coordinator, retry: RetryPolicy = RetryPolicy(),
                 join_orders: JoinOrders | None = None) -> None:
        self.ports, self.coordinator, self.retry, self.join_orders = ports, coordinator, retry, join_orders
        self.counters: Counter[str] = Counter()
        self._unreadable = False
        self.released: set[tuple[str, int]] = set()
        """Held-back versions (``may_start`` False) that restaging let start once the migrations before them finished."""

    def reconfigure(self, memory_bound: float, retry: RetryPolicy, redact: Callable[[str], str]) -> None:
        """A reloaded configuration: new memory bound for staging, retry limits, redaction."""
        self.coordinator.memory_bound, self.retry = memory_bound, retry
        self.ports.redact = redact

    # --- start ----------------------------------------------------------------------------------

    def restore(self) -> tuple[str, ...]:
        """After a (re)start: read the actual states, resume open migrations, start every other query with its settings in force.

        Returns the queries whose migration was resumed. Settings recorded
        before actual states existed (``Store.current_settings``) count as
        version 0 in force.
        """
        ports = self.ports
        self.coordinator.load()
        try:
            for query, settings in ports.store.current_settings().items():
                if query not in self.coordinator.actual:
                    self.coordinator.report(ActualState(query, 0, settings, "steady", at=ports.clock()))
        except TemporaryError as exc:
            ports.log.warning("store_unavailable", step="read_settings", error=str(exc))
        resumed = self.coordinator.resume()
        for query, state in sorted(self.coordinator.actual.items()):
            if query in resumed or state.settings is None:
                continue
            if state.phase == "migrating":  # its migration could not go on (closed as failed): it starts anew
                self.coordinator.report(replace(state, phase="steady", migration_state=None, target_version=None,
                                                extra_state_bytes=None))
            try:
                ports.applier.apply(query, None, state.settings)
            except Exception as exc:  # noqa: BLE001 - one query that cannot start must not stop the others
                self.counters["query_errors"] += 1
                ports.emit("apply_failed", "error", f"starting {query!r} with its settings in force failed: {exc}", query,
                           {"error_type": type(exc).__name__})
        return resumed

    # --- the tick -------------------------------------------------------------------------------

    def tick(self) -> None:
        """Apply every desired version that is due; one query's failure never stops the others."""
        ports, at = self.ports, self.ports.clock()
        if ports.store_down():
            return
        try:
            desired = ports.store.desired_settings()
        except TemporaryError as exc:
            if not self._unreadable:  # said once per outage; the record queue reports the outage itself
                ports.log.warning("desired_settings_unreadable", error=str(exc))
            self._unreadable = True
            return
        self._unreadable = False
        busy = set(self.coordinator.in_progress())
        due: list[DesiredSettings] = []
        held: dict[str, DesiredSettings] = {}
        for query, wanted in sorted(desired.items()):
            actual = self.coordinator.actual.get(query)
            if not self._due(wanted, actual, at):
                continue
            if query in busy:  # a query still migrating takes its next change after, unless that is a deeper cut
                if not self._supersede(query, wanted):
                    continue
                busy.discard(query)
            if wanted.may_start or (query, wanted.plan_version) in self.released:
                due.append(wanted)
            else:
                held[query] = wanted
        if held and not busy and not due:  # the held-back ones wait for every change before them
            staging = self.coordinator.restage({q: (self._in_force(q), d.settings) for q, d in held.items()})
            self.released |= {(q, held[q].plan_version) for q in staging.now}
            due = [held[q] for q in staging.now]
        for wanted in due:
            self._apply(wanted, at)

    def _supersede(self, query: str, wanted: DesiredSettings) -> bool:
        """Roll back the query's running migration for ``wanted`` if that holds no more state than the migration's
        target by construction (``holds_no_more``: no window larger, no finer granularity, no lower drop rate) and
        cuts one of its windows by ``SUPERSEDING_CUT`` at least: a cut decided while a migration runs (a burst's
        second, deeper one, often with a coarser slide) then starts at once, from the old run, instead of holding
        the old plan's state until the running migration is done. Anything else waits. Only where the applier can
        drop a migration without losing a result, and the state before it began is known (not one resumed after a
        restart)."""
        applier, opened = self.ports.applier, self.coordinator.open.get(query)
        target = self.coordinator.actual.get(query)
        if (not isinstance(applier, SupersedingApplier) or opened is None or opened.before is None or target is None
                or wanted.join_order is not None or not holds_no_more(target.settings, wanted.settings)):
            return False
        old = dict(target.settings.windows)  # type: ignore[union-attr]
        if not any(w <= SUPERSEDING_CUT * old[n] for n, w in wanted.settings.windows.items()):
            return False
        try:
            superseded = applier.supersede(query)
        except Exception as exc:  # noqa: BLE001 - the running migration goes on; the change waits for it as before
            self.ports.log.warning("supersede_failed", query=query, error=self.ports.redact(f"{type(exc).__name__}: {exc}"))
            return False
        if superseded:
            self.ports.log.info("migration_superseded", query=query, plan_version=wanted.plan_version,
                                windows=dict(wanted.settings.windows), target_windows=dict(target.settings.windows))
        return superseded

    def _due(self, wanted: DesiredSettings, actual: ActualState | None, at: datetime) -> bool:
        if wanted.recommend_only or wanted.plan_version <= (actual.plan_version if actual else 0):
            return False
        if actual is None or actual.target_version != wanted.plan_version:
            return True  # a newer version than the one that failed or waits: a fresh start
        if actual.phase == "failed":
            return False  # needs a person, or a newer desired version
        return actual.phase != "retrying" or actual.retry_at is None or at >= actual.retry_at

    def _in_force(self, query: str) -> QuerySettings | None:
        actual = self.coordinator.actual.get(query)
        return actual.settings if actual else None

    # --- one change -----------------------------------------------------------------------------

    def _apply(self, wanted: DesiredSettings, at: datetime) -> None:
        ports, query, new = self.ports, wanted.query, wanted.settings
        actual = self.coordinator.actual.get(query)
        old = actual.settings if actual else None
        opened = self.coordinator.begin(query, wanted.plan_version, old, new, wanted.decision_id, at, before=actual)
        try:
            if wanted.join_order is not None and self.join_orders is not None:
                self._publish(wanted, at)
            strategy = None
            if not same_settings(old, new):  # its row is written once it started, or failed (not when it was not ready)
                strategy = ports.applier.apply(query, old, new)
        except NotReady as exc:
            self._not_ready(opened, actual, wanted, exc)
            return
        except Exception as exc:  # noqa: BLE001 - one query's failure must not stop the others
            self._failed(opened, actual, wanted, exc, at)
            return
        extra = None
        if query in self.coordinator.in_progress():
            ports.log.info("migration_running", query=query, migration=opened.ref, strategy=strategy)
            extra = self._extra_state(query, old, new)
        elif strategy is not None:
            self.coordinator.close(opened, "done", {**opened.details, "strategy": strategy},
                                   event=("migration_finished", "info", f"migration of {query!r} finished ({strategy})"))
        else:
            self.coordinator.discard(opened)  # only a join order changed: its publication is the migration
        live = self.coordinator.open.get(query)
        self.coordinator.report(ActualState(
            query, wanted.plan_version, new, "migrating" if extra is not None else "steady", join_order=wanted.join_order,
            migration_state=live.live.state if live is not None and live.live is not None else None,
            target_version=wanted.plan_version if extra is not None else None, extra_state_bytes=extra, at=at))
        if actual is not None and actual.phase == "failed":
            ports.record("status", lambda: ports.store.set_query_status(query, "active", at, "desired settings applied again"))
        ports.metrics.qos(query, new.qos)
        ports.record("settings", lambda: ports.store.set_query_settings(query, new, at))
        ports.log.info("settings_applied", query=query, migration=opened.ref, strategy=strategy or "unchanged",
                       plan_version=wanted.plan_version, windows=dict(new.windows), granularity=new.granularity,
                       qos=round(new.qos, 6))
        self.released.discard((query, wanted.plan_version))
        self.counters["applied"] += 1

    def _extra_state(self, query: str, old: QuerySettings | None, new: QuerySettings) -> float:
        applier, estimate = self.ports.applier, self.coordinator.estimate
        if old is None or estimate is None or not isinstance(applier, LiveApplier):
            return 0.0
        in_force = {q: s.settings for q, s in self.coordinator.actual.items() if s.settings is not None}
        new_memory = float(estimate({**in_force, query: new})[1].get(query, 0.0))
        return float(applier.transient_memory(query, old, new, new_memory))

    def _publish(self, wanted: DesiredSettings, at: datetime) -> None:
        """Put a JISC join's order into force: publishing is the whole migration (each key switches at its next tuple).

        Recorded as a finished ``jisc`` migration and a ``join_order_changed``
        event, with the policy's reasons the cycle put into the desired row.
        """
        assert self.join_orders is not None
        query, order = wanted.query, wanted.join_order
        epoch, current = self.join_orders.current(query)
        if _plain(current) == _plain(order):
            return
        self.join_orders.publish(query, epoch + 1, order)
        why = dict(wanted.reason.get("join_order", {}))
        details = {**why, "old_order": _plain(current), "new_order": _plain(order), "epoch": epoch + 1,
                   "decision_id": wanted.decision_id}

        def record() -> None:
            row = self.ports.store.record_migration(query, "jisc", "done", at, details=details)
            self.ports.store.update_migration(row, "done", at, finished=True)

        self.ports.record("migration", record)
        self.ports.metrics.migration("done")
        reason = f": {why['reason']}" if why.get("reason") else ""
        self.ports.emit("join_order_changed", "info", f"join order of {query!r} changed to {order_text(order)} "
                        f"(epoch {epoch + 1}, JISC){reason}", query, details)

    def _not_ready(self, opened: OpenMigration, actual: ActualState | None, wanted: DesiredSettings, exc: NotReady) -> None:
        """Expected: the next tick tries again; said once per version, never alerted."""
        ports = self.ports
        if opened.recorded:  # it had started (a join order published): its row is closed, the retry opens another
            self.coordinator.close(opened, "failed", {**opened.details, "error": f"not ready: {exc}"})
        else:
            self.coordinator.discard(opened)
        if actual is not None and actual.target_version == wanted.plan_version and actual.phase == "retrying":
            return
        ports.log.info("apply_waiting", query=wanted.query, plan_version=wanted.plan_version, reason=ports.redact(str(exc)))
        base = actual or ActualState(wanted.query, 0, None, "steady")
        self.coordinator.report(replace(base, phase="retrying", target_version=wanted.plan_version,
                                        error=ports.redact(f"not ready: {exc}"), retry_at=None))

    def _failed(self, opened: OpenMigration, actual: ActualState | None, wanted: DesiredSettings, exc: Exception,
                at: datetime) -> None:
        ports, query = self.ports, wanted.query
        error = ports.redact(str(exc))
        self.counters["query_errors"] += 1
        self.coordinator.close(opened, "failed", {**opened.details, "error": error},
                               # Recorded as an error; the alert, if any, is the apply_failed when the query gives up.
                               event=("migration_failed", "error", f"migration of {query!r} failed: {error}"), alert=False)
        attempts = (actual.attempts if actual is not None and actual.target_version == wanted.plan_version else 0) + 1
        base = actual or ActualState(query, 0, None, "steady")
        details = {"error_type": type(exc).__name__, "attempts": attempts, "plan_version": wanted.plan_version}
        if isinstance(exc, PermanentError) or attempts >= self.retry.max_attempts:
            why = "a permanent error" if isinstance(exc, PermanentError) else f"{attempts} failed attempts"
            self.coordinator.report(replace(base, phase="failed", target_version=wanted.plan_version, attempts=attempts,
                                            error=error, retry_at=None))
            reason = f"applying plan version {wanted.plan_version} failed ({why}): {error}"
            ports.record("status", lambda: ports.store.set_query_status(query, "failed", at, reason))
            ports.emit("apply_failed", "error", f"applying settings to {query!r} failed ({why}); the query is marked failed "
                       f"until a newer decision: {exc}", query, details)
            return
        delay = self.retry.delay(attempts, exc.retry_after if isinstance(exc, TemporaryError) else 0.0)
        retry_at = at + timedelta(seconds=delay)
        self.coordinator.report(replace(base, phase="retrying", target_version=wanted.plan_version, attempts=attempts,
                                        error=error, retry_at=retry_at))
        ports.emit("apply_retrying", "warning", f"applying settings to {query!r} failed (attempt {attempts} of "
                   f"{self.retry.max_attempts}), retried in {delay:g} s: {exc}", query,
                   {**details, "retry_in_seconds": delay}, alert=False)


def _plain(order: Any) -> Any:
    """A join order as plain lists (tuples and lists compare alike)."""
    if isinstance(order, (list, tuple)):
        return [_plain(o) for o in order]
    if isinstance(order, Mapping):
        return {k: _plain(v) for k, v in order.items()}
    return order
