"""The migration coordinator: the applying side's memory of migrations in progress and of what runs.

Why a module of its own: a live migration (GenMig) outlives the ``apply``
that started it. Its transitions arrive later, from the applier, on their
own cadence (``advance``), and after a restart of the daemon it must go on
from the store (``resume``). Changes that would break the memory bound if
they migrated together wait until those in progress have finished
(``restage``, with ``policies/staging.py``). The reconciler starts
migrations; this module follows them to their end and keeps the actual
state of every query (``ActualState``) that both report to the store.

Pure: it talks through the ports only (store, applier, a record queue, an
event callback, a clock passed in) and reads no clock of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Mapping, Protocol

from armd.migrations.genmig import ROLLED_BACK, Migration
from armd.policies.staging import Staging

from .errors import TemporaryError
from .desired import stage_changes as stage_with
from .desired import staged_message
from .ports import ActualState, Applier, LiveApplier, QuerySettings, ResumableApplier, Store
from .records import new_id

Record = Callable[[str, Callable[[], Any]], None]
"""``record(kind, write)``: queue a store write; writes run in order, later when the store is down (``control.outbox``)."""

Estimate = Callable[[Mapping[str, QuerySettings]], tuple[float, Mapping[str, float]]]
"""``estimate(settings)``: the cost model's memory (total, per query) with ``settings`` in force (queries absent: none)."""


class Emit(Protocol):
    def __call__(self, kind: str, severity: str, message: str, query: str | None, details: dict[str, Any] | None = None,
                 *, alert: bool = True, **fields: Any) -> None:
        """Log, record and (warnings and errors, unless ``alert`` is False) alert an event."""
        ...


class Metrics(Protocol):
    def migration(self, outcome: str) -> None: ...

    def qos(self, query: str, value: float) -> None: ...


class NoMetrics:
    def migration(self, outcome: str) -> None:
        pass

    def qos(self, query: str, value: float) -> None:
        pass


@dataclass
class ApplyPorts:
    """What the applying side talks through; the daemon wires concrete ones, tests fakes."""

    store: Store
    applier: Applier
    record: Record
    emit: Emit
    clock: Callable[[], datetime]
    log: Any
    metrics: Metrics = field(default_factory=NoMetrics)
    redact: Callable[[str], str] = str
    store_down: Callable[[], bool] = lambda: False
    """True while the record queue cannot write (reads are skipped then, so a tick keeps its pace)."""


@dataclass
class OpenMigration:
    """One migration the applying side started (or resumed) and has not seen finish."""

    query: str
    version: int
    at: datetime
    details: dict[str, Any]
    """What goes into the store row's ``details`` (old and new settings, the decision, the live record)."""
    summary: dict[str, Any]
    """What the migration's events carry."""
    ref: int | str = field(default_factory=new_id)
    """How the store finds its row: the id armd generated when it began (written with the row, so an update queued
    behind the row's creation needs no answer from the store), or the row id of a migration read back at a restart."""
    recorded: bool = False
    live: Migration | None = None
    """The live migration's latest state (None: the applier has not reported one)."""
    before: ActualState | None = None
    """The query's actual state when the migration began: what it runs again if the migration is rolled back."""


def stage_changes(changes: Mapping[str, tuple[QuerySettings | None, QuerySettings]], held: float,
                  new_memory: Mapping[str, float], applier: Applier, memory_bound: float) -> Staging:
    """Which changes migrate now: the extra state of a live applier's migrations must fit the memory bound.

    ``held``: the memory of the settings in force; ``new_memory``: the cost
    model's estimate per query of its new settings. An applier that is not
    live, and a query that does not run yet, hold nothing extra.
    """
    transient = applier.transient_memory if isinstance(applier, LiveApplier) else None
    return stage_with(changes, held, new_memory, transient, memory_bound)


class Coordinator:
    """Follows migrations from their start to their end and keeps the actual state per query."""

    def __init__(self, ports: ApplyPorts, *, memory_bound: float, estimate: Estimate | None = None) -> None:
        self.ports = ports
        self.memory_bound = memory_bound
        self.estimate = estimate
        self.actual: dict[str, ActualState] = {}
        """The latest actual state per query; this process is its only writer, the store its copy."""
        self.open: dict[str, OpenMigration] = {}

    # --- actual state ---------------------------------------------------------------------------

    def load(self) -> bool:
        """Read the actual states back from the store (at start); False when the store did not answer."""
        try:
            self.actual = dict(self.ports.store.actual_states())
        except TemporaryError as exc:
            self.ports.log.warning("store_unavailable", step="read_actual_states", error=str(exc))
            return False
        return True

    def report(self, state: ActualState) -> None:
        """Keep ``state`` as the query's actual state and write it to the store (in order with the other records)."""
        self.actual[state.query] = state
        self.ports.record("actual", lambda: self.ports.store.write_actual(state))

    def in_progress(self) -> tuple[str, ...]:
        """Queries whose live migration still runs."""
        return tuple(q for q, m in self.open.items() if m.live is not None and not m.live.final)

    # --- migrations -----------------------------------------------------------------------------

    def begin(self, query: str, version: int, old: QuerySettings | None, new: QuerySettings, decision_id: Any,
              at: datetime, before: ActualState | None = None) -> OpenMigration:
        """A migration of ``query`` to ``new`` is about to start; its row is written once it did (``started``).
        ``before``: the query's actual state now, reported again should the migration be rolled back."""
        name = self.ports.applier.name
        opened = OpenMigration(
            query, version, at,
            {"old": old.as_json() if old else None, "new": new.as_json(), "decision_id": decision_id, "plan_version": version},
            {"applier": name, "decision_id": decision_id, "windows": dict(new.windows), "granularity": new.granularity},
            before=before)
        self.open[query] = opened
        return opened

    def started(self, opened: OpenMigration) -> None:
        """Write the migration's row (state running) and say it started; once, however often called."""
        if opened.recorded:
            return
        opened.recorded = True
        ports, name = self.ports, self.ports.applier.name
        uid, details = str(opened.ref), dict(opened.details)
        ports.record("migration", lambda: ports.store.record_migration(opened.query, name, "running", opened.at, details=details,
                                                                        uid=uid))
        ports.emit("migration_started", "info", f"migration of {opened.query!r} started ({name})", opened.query,
                   opened.summary, migration=opened.ref)
        ports.metrics.migration("started")

    def discard(self, opened: OpenMigration) -> None:
        """The migration never started (the applier was not ready): nothing to record."""
        if self.open.get(opened.query) is opened and not opened.recorded:
            del self.open[opened.query]

    def close(self, opened: OpenMigration, state: str, details: Mapping[str, Any], *, event: tuple[str, str, str] | None = None,
              alert: bool = True) -> None:
        """Finish the migration's row in ``state`` (``done``/``failed``/``rolled_back``); ``event``: (kind, severity,
        message) to emit."""
        if self.open.get(opened.query) is opened:
            del self.open[opened.query]
        self.started(opened)
        at, ref = self.ports.clock(), opened.ref
        # The row may still wait in the record queue; the update runs after it, in order.
        self.ports.record("migration", lambda: self.ports.store.update_migration(ref, state, at, finished=True,
                                                                                  details=dict(details)))
        self.ports.metrics.migration(state if state in ("done", ROLLED_BACK) else "failed")
        if event is not None:
            kind, severity, message = event
            summary = {**opened.summary, **{k: v for k, v in details.items() if k in ("strategy", "t_split", "error")}}
            self.ports.emit(kind, severity, message, opened.query, summary, alert=alert, migration=ref)

    def transition(self, record: Migration) -> None:
        """A live applier moved a migration to another state (its ``on_transition``)."""
        opened = self.open.get(record.query)
        if opened is None:
            return
        self.started(opened)
        opened.live = record
        opened.details = {**opened.details, "live": record.as_record()}
        state, details, ref = record.state, opened.details, opened.ref
        if not record.final:
            at = self.ports.clock()
            self.ports.record("migration", lambda: self.ports.store.update_migration(ref, state, at, details=details))
            self.ports.log.info("migration_" + state, query=record.query, migration=ref, t_split=record.t_split)
            current = self.actual.get(record.query)
            if current is not None and current.plan_version == opened.version:
                self.report(replace(current, phase="migrating", migration_state=state))
            return
        note = record.history[-1][2] if record.history else ""
        if state == ROLLED_BACK:
            self._rolled_back(opened, record, note)
            return
        done = state == "done"
        self.close(opened, "done" if done else "failed", {**details, "strategy": record.strategy, "t_split": record.t_split},
                   event=("migration_finished" if done else "migration_failed", "info" if done else "error",
                          f"migration of {record.query!r} {'finished' if done else 'failed'} ({record.strategy})"
                          f"{': ' + note if note else ''}"))
        current = self.actual.get(record.query)
        if current is not None and current.plan_version == opened.version:
            self.report(replace(current, phase="steady" if done else "failed", migration_state=state, extra_state_bytes=None,
                                target_version=None if done else current.target_version,
                                error=None if done else self.ports.redact(note or "the live migration failed")))

    def _rolled_back(self, opened: OpenMigration, record: Migration, note: str) -> None:
        """The applier dropped the migration before the new plan wrote anything (a newer change supersedes it): the
        query runs its old settings again, as it did before the migration began (the reconciler supersedes only
        migrations it began, so that state is known)."""
        self.close(opened, ROLLED_BACK, {**opened.details, "strategy": record.strategy, "t_split": record.t_split},
                   event=("migration_rolled_back", "info", f"migration of {record.query!r} rolled back ({record.strategy})"
                          f"{': ' + note if note else ''}"))
        if opened.before is not None:
            self.report(replace(opened.before, phase="steady", migration_state=ROLLED_BACK, target_version=None,
                                attempts=0, error=None, retry_at=None, extra_state_bytes=None))

    def advance(self) -> None:
        """Let a live applier move its migrations on (the coordinator's own cadence); transitions come back through ``transition``."""
        applier = self.ports.applier
        if not self.open or not isinstance(applier, LiveApplier):
            return
        try:
            applier.advance()
        except Exception as exc:  # noqa: BLE001 - the next run tries again; one bad step must not stop the job
            self.ports.log.error("migrations_advance_failed", error=self.ports.redact(f"{type(exc).__name__}: {exc}"))

    def resume(self) -> tuple[str, ...]:
        """After a restart: hand every unfinished migration in the store back to the applier.

        Returns the queries whose migration goes on (they must not be started
        anew). A migration that cannot be resumed (no live state stored, an
        applier that cannot resume, its runs' checkpoints gone) is closed as
        failed with the reason; its query then starts like any other.
        """
        ports = self.ports
        try:
            rows = ports.store.open_migrations()
        except TemporaryError as exc:
            ports.log.warning("store_unavailable", step="read_open_migrations", error=str(exc))
            return ()
        resumed = []
        for row in rows:
            query, details = row["query"], dict(row.get("details") or {})
            if query in self.open:  # resumed by an earlier call (an agent resumes query by query as it starts them)
                continue
            actual = self.actual.get(query)
            opened = OpenMigration(query, int(details.get("plan_version") or (actual.plan_version if actual else 0)),
                                   ports.clock(), details, {"applier": ports.applier.name, "decision_id": details.get("decision_id")},
                                   ref=row.get("uid") or row["id"], recorded=True)
            try:
                if "live" not in details or not isinstance(ports.applier, ResumableApplier):
                    raise ValueError("the daemon stopped while it ran and it left no state to go on from")
                record = Migration.from_record(details["live"])
                ports.applier.resume(record)
            except Exception as exc:  # noqa: BLE001 - one migration that cannot go on must not stop the daemon
                error = ports.redact(f"{exc}")
                self.close(opened, "failed", {**details, "error": f"not resumed: {error}"},
                           event=("migration_failed", "error", f"migration of {query!r} could not be resumed after a restart: {error}"))
                continue
            opened.live = record
            self.open[query] = opened
            resumed.append(query)
            ports.emit("migration_resumed", "info", f"migration of {query!r} resumed in state {record.state} "
                       f"(T_split {record.t_split})", query, {**opened.summary, "state": record.state}, migration=opened.ref)
        return tuple(resumed)

    # --- staging --------------------------------------------------------------------------------

    def restage(self, waiting: Mapping[str, tuple[QuerySettings | None, QuerySettings]]) -> Staging:
        """Stage the changes that waited for the migrations in progress again, on the estimates of the settings now in force."""
        in_force = {q: s.settings for q, s in self.actual.items() if s.settings is not None}
        if self.estimate is None:
            held, new_memory = 0.0, {}
        else:
            held = float(self.estimate(in_force)[0])
            new_memory = self.estimate({**in_force, **{q: new for q, (_, new) in waiting.items()}})[1]
        staging = stage_changes(waiting, held, {q: float(new_memory.get(q, 0.0)) for q in waiting}, self.ports.applier,
                                self.memory_bound)
        said = staged_message(staging, self.memory_bound) if staging.now else None  # still waiting: said when decided
        if said is not None:
            self.ports.emit("migrations_staged", said[0], said[1], None, staging.as_json())
        return staging
