"""Recording fakes of the control loop's ports: an in-memory store, appliers, an alert sink and a clock.

The store fake keeps what it is given in lists and can be switched off, so
tests see every record the controller writes, in order, and what happens
while the store is down. ``make`` wires a controller on the synthetic source
and, like the daemon, the applying side (reconciler and coordinator) beside
it, talking to it only through the store; ``apply_side`` gives that side,
``use_applier`` swaps the applier of both.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from support import REPO

import structlog

from armd.adapters.store import StoreUnavailable
from armd.adapters.synthetic import Schedule, SyntheticSource
from armd.daemon.config import load_config
from armd.control.errors import NotReady, PermanentError, TemporaryError
from armd.control.reconciler import Reconciler
from armd.daemon.controller import Controller
from armd.daemon.wiring import apply_side as apply_side_of
from armd.control.ports import ActualState, DesiredSettings, QuerySettings

START = datetime(2026, 1, 1, tzinfo=timezone.utc)

CONFIG = """
[store]
url = "sqlite:///unused.db"

[bounds]
memory_bytes = {memory}
cpu = 100
reserve = 0.1

[guardrails]
dry_run = {dry_run}

[triggers]
threshold = {threshold}

[schedule]
observe_seconds = 1
decide_seconds = 10

[plan]
file = "{plan}"

[queries.clicks_per_view]
window = [1000, 60000]

[queries.clicks_per_second]
granularity = [10000, 1000]
"""

PLAN = REPO / "config" / "plans" / "example.json"


class MemoryStore:
    """Keeps every record; ``down = True`` makes every call fail like an unreachable database."""

    def __init__(self) -> None:
        self.down = False
        self.calls: list[tuple[str, object]] = []
        self.settings: dict[str, QuerySettings] = {}
        self.statuses: dict[str, str] = {}
        self.open: list[dict] = []
        """What ``open_migrations`` returns (rows a daemon that stopped left unfinished)."""
        self.desired: dict[str, DesiredSettings] = {}
        self.migration_uids: list[str | None] = []
        """The id armd generated for each migration recorded, in order."""
        self.actual: dict[str, ActualState] = {}
        self.heralds_added: list = []
        """Heralds announced (``HeraldRecord``s with their ids), in order."""
        self._ids = 0

    def _call(self, name: str, payload: object = None) -> int:
        if self.down:
            raise StoreUnavailable("database is down")
        self._ids += 1
        self.calls.append((name, payload))
        return self._ids

    def of(self, name: str) -> list[object]:
        return [payload for call, payload in self.calls if call == name]

    def sync_config(self, streams, queries, nodes, at):
        self._call("sync_config", [q.name for q in queries])

    def set_query_status(self, query, status, at, reason=None):
        self._call("status", (query, status))
        self.statuses[query] = status

    def set_query_settings(self, query, settings, at):
        self._call("settings", (query, settings))
        self.settings[query] = settings

    def current_settings(self):
        if self.down:
            raise StoreUnavailable("database is down")
        return dict(self.settings)

    def record_observation(self, observation):
        self._call("observation", observation)

    def record_estimates(self, at, rows, decision_id=None):
        self._call("estimates", (decision_id, rows))

    def record_decision(self, record):
        return self._call("decision", record)

    def record_event(self, event):
        return self._call("event", event)

    def record_admissions(self, statuses, events, at):
        for query, status, reason in statuses:
            self.set_query_status(query, status, at, reason)
        for event in events:
            self.record_event(event)

    def record_migration(self, query, strategy, state, at, split_time=None, details=None, uid=None):
        id = self._call("migration", (query, strategy, state))
        self.migration_uids.append(uid)
        self.open.append({"id": id, "uid": uid, "query": query, "strategy": strategy, "state": state,
                          "details": dict(details or {})})
        return id

    def update_migration(self, id, state, at, *, finished=False, lost=None, duplicated=None, differing=None, details=None):
        self._call("migration_update", (id, state))
        key = "uid" if isinstance(id, str) else "id"
        for row in self.open:
            if row.get(key) == id:
                row.update(state=state, details={**row["details"], **(details or {})})
        if finished:
            self.open = [row for row in self.open if row.get(key) != id]

    def open_migrations(self):
        if self.down:
            raise StoreUnavailable("database is down")
        return list(self.open)

    def write_desired(self, rows):
        self._call("desired", list(rows))
        self.desired.update({row.query: row for row in rows})

    def desired_settings(self):
        if self.down:
            raise StoreUnavailable("database is down")
        return dict(self.desired)

    def write_actual(self, state):
        self._call("actual", state)
        self.actual[state.query] = state

    def actual_states(self):
        if self.down:
            raise StoreUnavailable("database is down")
        return dict(self.actual)

    def prune(self, older_than, history_older_than=None):
        self._call("prune", older_than)
        return {}

    def add_herald(self, record):
        id = self._call("add_herald", record)
        self.heralds_added.append(replace(record, id=id))
        return id

    def heralds(self, stream=None, *, since=0, invalid=None):
        return [h for h in self.heralds_added if (stream is None or h.stream == stream) and h.id > since]

    def close(self):
        pass


class Applier:
    """Records what it applies; a query in ``failing`` raises an unexpected error, one in ``raising`` that error."""

    name = "recording"

    def __init__(self, source: SyntheticSource, failing: set[str] = frozenset(), raising: dict | None = None) -> None:
        self.source, self.failing, self.applied = source, set(failing), []
        self.raising: dict[str, BaseException] = dict(raising or {})
        self.attempts: list[str] = []

    def apply(self, query, old, new):
        self.attempts.append(query)
        if query in self.raising:
            raise self.raising[query]
        if query in self.failing:
            raise RuntimeError(f"cluster refused {query}")
        self.applied.append((query, new))
        return "direct"


def not_ready(query: str) -> NotReady:
    return NotReady(f"query {query!r} has not completed a batch yet")


def temporary(query: str, retry_after: float = 0.0) -> TemporaryError:
    return TemporaryError(f"cluster of {query!r} is busy", retry_after)


def permanent(query: str) -> PermanentError:
    return PermanentError(f"query {query!r}: its source has no event-time offsets")


class Alerts:
    def __init__(self) -> None:
        self.events = []

    def alert(self, event):
        self.events.append(event)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make(tmp_path, memory=200_000, dry_run=False, failing=(), burst=None, threshold=0.2, burst_seconds=1e9):
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=memory, dry_run=str(dry_run).lower(), plan=PLAN, threshold=threshold))
    config = load_config(path)
    schedules = {name: Schedule(s.rate_per_second) for name, s in config.source.streams.items()}
    if burst:
        stream, at, factor = burst
        base = schedules[stream].rate_per_second
        schedules[stream] = Schedule(base, bursts=[(at, burst_seconds, factor)])
    source = SyntheticSource(schedules, 1, config.model.time_unit_seconds, START)
    store, alerts, clock = MemoryStore(), Alerts(), Clock()
    applier = Applier(source, set(failing))
    controller = Controller(config, store, source, applier, alerts, structlog.get_logger(), clock)
    use_applier(controller, applier)
    return controller, store, applier, alerts, clock


_APPLY_SIDES: "weakref.WeakKeyDictionary[Controller, Reconciler]" = weakref.WeakKeyDictionary()


def use_applier(controller: Controller, applier, join_orders=None) -> Reconciler:
    """Wire the applying side on ``applier`` beside ``controller`` as the daemon does (``wiring.apply_side``);
    the controller keeps the applier for staging."""
    controller.applier = applier
    reconciler = _APPLY_SIDES[controller] = apply_side_of(controller, applier, join_orders)
    return reconciler


def apply_side(controller: Controller) -> Reconciler:
    """The applying side wired beside ``controller`` (on its applier and join orders, the first time it is asked for)."""
    if controller not in _APPLY_SIDES:
        use_applier(controller, controller.applier, controller.join_orders)
    return _APPLY_SIDES[controller]


def apply(controller: Controller) -> None:
    """One apply step of the daemon: the coordinator advances live migrations, the reconciler applies what is due."""
    reconciler = apply_side(controller)
    reconciler.coordinator.advance()
    reconciler.tick()


def cycle(controller, clock, seconds=1.0):
    clock.advance(seconds)
    controller.observe()
    controller.decide()
    apply(controller)


class LiveFake(Applier):
    """A live-migrating applier without Spark: ``apply`` of a running query starts a migration reported as running;
    each ``advance`` moves every migration one state on (running → draining → done) and reports it to ``on_transition``.
    Its migrations hold ``extra`` bytes each while they run (``transient_memory``)."""

    name = "live"

    def __init__(self, extra: float = 0.0, raising: dict | None = None) -> None:
        super().__init__(None, raising=raising)
        self.extra, self.live, self.resumed = extra, {}, []
        self.on_transition = lambda migration: None
        self.gone: set[str] = set()
        """Queries whose stored migration cannot be resumed (its checkpoints were deleted)."""

    def apply(self, query, old, new):
        from armd.migrations.genmig import Migration

        strategy = super().apply(query, old, new)
        if old is not None:
            self.live[query] = Migration(query, "genmig", {}, {}).to("running", 1.0, "started", t_split=5.0)
            self.on_transition(self.live[query])
        return strategy

    def advance(self):
        for query, m in list(self.live.items()):
            m = self.live[query] = m.to("draining" if m.state == "running" else "done", 2.0, "step")
            if m.final:
                del self.live[query]
            self.on_transition(m)
        return tuple(self.live.values())

    def running_migrations(self):
        return tuple(self.live.values())

    def transient_memory(self, query, old, new, new_memory):
        return self.extra

    def resume(self, migration):
        if migration.query in self.gone:
            raise FileNotFoundError(f"cannot resume from /ckpt/{migration.query}: it was deleted")
        self.resumed.append(migration)
        self.live[migration.query] = migration


class SupersedingFake(LiveFake):
    """A ``LiveFake`` that rolls a running migration back when asked (``supersede``), unless ``refuse``."""

    def __init__(self, extra: float = 0.0, refuse: bool = False) -> None:
        super().__init__(extra)
        self.refuse, self.superseded = refuse, []

    def supersede(self, query):
        migration = self.live.get(query)
        if self.refuse or migration is None or migration.state != "running":
            return False
        del self.live[query]
        self.superseded.append(query)
        self.on_transition(migration.to("rolled_back", 1.5, "superseded"))
        return True


class Emitted:
    """Records the applying side's events; ``alerts`` are those an alert sink would get (warnings and errors, unless not)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None, dict]] = []
        self.alerts: list[tuple[str, str | None]] = []

    def __call__(self, kind, severity, message, query, details=None, *, alert=True, **fields):
        self.events.append((kind, severity, query, {"message": message, **(details or {})}))
        if severity != "info" and alert:
            self.alerts.append((kind, query))

    def kinds(self, query=None):
        return [kind for kind, _, q, _ in self.events if query is None or q == query]


def apply_rig(applier=None, *, memory_bound=1000.0, retry=None, join_orders=None, memory_per_query=100.0):
    """The applying side alone, on the fakes: a reconciler and its coordinator over a ``MemoryStore``, records written
    at once, a recorded ``emit``, a ``Clock`` and an estimate of ``memory_per_query`` bytes per query with settings."""
    from armd.control.coordinator import ApplyPorts, Coordinator
    from armd.control.reconciler import RetryPolicy

    store, clock, emitted = MemoryStore(), Clock(), Emitted()
    applier = applier if applier is not None else Applier(None)

    def estimate(settings):
        per_query = {q: memory_per_query for q in settings}
        return sum(per_query.values()), per_query

    ports = ApplyPorts(store, applier, lambda kind, write: write(), emitted, clock, structlog.get_logger(),
                       store_down=lambda: store.down)
    coordinator = Coordinator(ports, memory_bound=memory_bound, estimate=estimate)
    reconciler = Reconciler(ports, coordinator, retry or RetryPolicy(1.0, 8.0, 4), join_orders)
    if isinstance(applier, LiveFake):
        applier.on_transition = coordinator.transition
    return reconciler, store, applier, emitted, clock
