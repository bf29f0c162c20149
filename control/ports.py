"""The narrow interfaces the control loop talks through.

The controller (``daemon/controller.py``) only ever sees these: a statistics
source, an applier, a metadata store, an alert sink and, for multi-way joins
run by JISC, a join-order publisher. The entry point
wires concrete ones (the synthetic source or Spark, the SQL store, the hooks
of the configuration); tests wire recording ones. Records are plain frozen
dataclasses so every port can be implemented without importing the others.

Times are timezone-aware UTC ``datetime``s at the ports; the cost model's
own time unit (``model.time_unit_seconds`` in the configuration) only
appears in values that say so (``d``, window sizes, granularities).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from armd.migrations.genmig import Migration


@dataclass(frozen=True)
class StreamStats:
    """What one observation interval showed of one source stream."""

    stream: str
    rows: int
    """Elements that arrived in the interval."""
    interval_seconds: float
    rate_per_second: float
    d: float
    """Mean inter-arrival time in model time units (``inf`` when nothing arrived)."""
    l: float | None = None
    """Mean validity in model time units, when the source knows it."""
    g: float | None = None
    """Granularity in model time units, when the source knows it."""
    event_end: datetime | None = None
    """The newest event time the interval's rows reached, when the source says (readers of one stream at different
    positions: ``costmodel.measured.StreamFrontier``)."""


@dataclass(frozen=True)
class QueryMetrics:
    """Measured state and selectivities of one running query."""

    query: str
    state_rows: int | None = None
    state_bytes: int | None = None
    selectivities: Mapping[str, float] = field(default_factory=dict)
    """Measured selectivity per plan node id."""
    pair_selectivities: Mapping[str, float] = field(default_factory=dict)
    """A JISC join's measured key-match selectivity per pair of its streams, keyed "a,b" (names sorted)."""
    group_models: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Per aggregation node, the smoothed groups in a window of w seconds as (base, growth): base + growth·w."""
    bytes_per_row: Mapping[str, float] = field(default_factory=dict)
    """Per stateful node, the smoothed bytes per state row (memoryUsedBytes / numRowsTotal)."""
    herald_skips: Mapping[str, float] = field(default_factory=dict)
    """Per select or join node run with heralds (paper 002), the fraction in [0, 1] of its evaluation work heralds
    let it skip in the interval: a select's input tuples skipped or passed, a join's probe work in empty pairs."""


@dataclass(frozen=True)
class BatchProgress:
    """One micro-batch of an engine query, as the engine reported it (Spark's progress event)."""

    query: str
    """The armd query."""
    run_id: str
    """The engine's id of the query run (a restart or migration starts a new run)."""
    batch_id: int
    at: datetime
    """When the batch started."""
    input_rows: int
    batch_ms: int
    """Wall-clock duration of the batch."""
    durations_ms: Mapping[str, int] = field(default_factory=dict)
    """Duration per phase (Spark's ``durationMs``)."""
    event_min: datetime | None = None
    event_max: datetime | None = None
    watermark: datetime | None = None
    state_rows: int = 0
    """Σ numRowsTotal over the state operators."""
    state_bytes: int = 0
    """Σ memoryUsedBytes over the state operators."""
    rows_dropped_by_watermark: int = 0
    operators: Sequence[Mapping[str, Any]] = ()
    """Per state operator: name, rows_total, rows_updated, memory_bytes, rows_dropped_by_watermark, custom."""
    plan_version: int | None = None


@dataclass(frozen=True)
class Observation:
    at: datetime
    streams: Sequence[StreamStats]
    queries: Sequence[QueryMetrics] = ()
    batches: Sequence[BatchProgress] = ()
    """Engine batches that completed in the interval (empty for sources without an engine)."""


class StatsSource(Protocol):
    """Where statistics come from (the synthetic source, later Spark)."""

    def observe(self, at: datetime) -> Observation:
        """Statistics of the interval since the previous call (the first call covers the time since start)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class QuerySettings:
    """The values a decision gives one query."""

    fw: float
    """Window fraction in [0, 1]."""
    fg: float
    """Granularity fraction in [0, 1]."""
    windows: Mapping[str, float]
    """Window size per window node id, in model time units."""
    granularity: float | None
    """Granularity of the query's granularity nodes, in model time units (None: no knob)."""
    qos: float
    """Achieved QoS fraction in [0, 1]."""
    drop_rate: float = 0.0
    """Probability of dropping each input element before the windows (load shedding); 0: none."""

    def as_json(self) -> dict[str, Any]:
        return {"fw": self.fw, "fg": self.fg, "windows": dict(self.windows), "granularity": self.granularity, "qos": self.qos,
                "drop_rate": self.drop_rate}


@runtime_checkable
class Applier(Protocol):
    """Puts new settings into force (a migration adapter plugs in here).

    An applier that finishes within ``apply`` and holds nothing extra (a
    restart drops the old state, the simulated windows just change) offers
    only this. What more an applier can do it says by implementing the
    protocols below, which the reconciler and the coordinator check with
    ``isinstance``: ``LiveApplier`` (a migration that goes on after
    ``apply``, GenMig), ``SupersedingApplier`` (drops such a migration for a
    newer change) and ``ResumableApplier`` (continues a stored migration
    after a restart of the daemon).
    """

    name: str

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        """Apply ``new`` to ``query``; returns the migration strategy used.

        Raises ``control.errors.NotReady`` when a precondition that time
        brings is missing, ``PermanentError`` when retrying cannot help;
        anything else counts as temporary.
        """
        ...


@runtime_checkable
class LiveApplier(Applier, Protocol):
    """An applier whose migrations run on after ``apply`` (GenMig: both plans side by side until T_split has passed).

    Every transition of a live migration is reported to the coordinator
    (the ``on_transition`` the wiring gives the applier), which records it.
    """

    def advance(self) -> Sequence[Migration]:
        """Move every live migration on by what its runs show now; returns those still in progress."""
        ...

    def running_migrations(self) -> Sequence[Migration]:
        """The live migrations in progress, without advancing them."""
        ...

    def transient_memory(self, query: str, old: QuerySettings, new: QuerySettings, new_memory: float) -> float:
        """Extra bytes held while a migration of ``query`` from ``old`` to ``new`` runs (``new_memory``: the cost
        model's estimate of the new settings); staging keeps the sum within the memory bound (``policies/staging.py``)."""
        ...


@runtime_checkable
class SupersedingApplier(LiveApplier, Protocol):
    """A live applier that can drop a migration still running so that a newer change starts at once.

    Without it a change decided while a query migrates waits until that
    migration is done: under GenMig a whole window of the new plan and the
    watermark delay, longer when the application runs behind. A burst's
    deeper cut then holds the old plan's state all that time.
    """

    def supersede(self, query: str) -> bool:
        """Roll back ``query``'s running migration if no result is lost by it (the old run answers alone again);
        whether it did. The rollback is reported as a ``rolled_back`` transition."""
        ...


@runtime_checkable
class ResumableApplier(Applier, Protocol):
    """An applier that continues a migration the daemon left open when it stopped."""

    def resume(self, migration: Migration) -> None:
        """Go on with ``migration`` (read back from the store); raises when it cannot (its runs' checkpoints gone)."""
        ...


@dataclass(frozen=True)
class DesiredSettings:
    """What the control cycle wants one query to run with: the contract between deciding and applying.

    The cycle writes one row per query after every decision that changes
    something (through guardrails and staging); the reconciler reads the rows
    and applies each ``plan_version`` it has not applied yet. Nothing else
    passes from the deciding side to the applying side, so the reconciler can
    run in another process (a user's Spark application) against the same store.
    """

    query: str
    plan_version: int
    """Increases by one with every change the cycle asks of this query; the reconciler applies each version once."""
    settings: QuerySettings
    join_order: Any = None
    """A JISC join's order (a ``migrations.join`` order) when the cycle chooses it, else None."""
    may_start: bool = True
    """False while staging holds the change back: its migration's extra state would break the bound with those in progress."""
    recommend_only: bool = False
    """A dry run's recommendation: shown, never applied."""
    decision_id: str | None = None
    """The decision that asked for it (an id the cycle generated)."""
    at: datetime | None = None
    reason: Mapping[str, Any] = field(default_factory=dict)
    """Why, for the record the reconciler writes when it applies the row: under ``join_order`` the join-order policy's
    choice (old and new order, both orders' costs, the rates and pair selectivities it used, its reason)."""


ACTUAL_PHASES = ("steady", "migrating", "retrying", "failed")
"""``steady``: the version in force is the one desired; ``migrating``: a live migration runs; ``retrying``: the last attempt
failed for a reason that may pass; ``failed``: a permanent error (or too many attempts), the query needs a person."""


@dataclass(frozen=True)
class ActualState:
    """What the reconciler reports one query runs with, and how its latest change goes."""

    query: str
    plan_version: int
    """The desired version in force (0: the configured settings, nothing applied yet)."""
    settings: QuerySettings | None
    phase: str
    """One of ``ACTUAL_PHASES``."""
    join_order: Any = None
    migration_state: str | None = None
    """A live migration's state (``migrations.genmig``: planned, running, draining, done, failed)."""
    target_version: int | None = None
    """The version being applied (migrating or retrying)."""
    attempts: int = 0
    """Failed attempts at ``target_version`` so far."""
    error: str | None = None
    retry_at: datetime | None = None
    extra_state_bytes: float | None = None
    """What the migration in progress holds beyond the query's steady state (its transient cost)."""
    at: datetime | None = None
    """When the version in force was put in force (a later report on the same version keeps it)."""


class JoinOrders(Protocol):
    """Where the daemon publishes the join order of the multi-way joins JISC runs (a control file on Spark).

    An order is a stream name or a pair of orders (``migrations.join``).
    The running query reads the published plan at every micro-batch and
    switches each key lazily (JISC), so publishing is the whole migration.
    """

    def queries(self) -> Sequence[str]:
        """The queries whose join order the daemon chooses."""
        ...

    def current(self, query: str) -> tuple[int, Any]:
        """The plan in force: (epoch, order); epoch 0 and the configured order until one was published."""
        ...

    def publish(self, query: str, epoch: int, order: Any) -> None:
        """Put ``order`` into force under ``epoch`` (larger than the current one). Raises on failure."""
        ...


@dataclass(frozen=True)
class StreamRow:
    name: str
    size_bytes: float
    g: float
    configured_d: float


@dataclass(frozen=True)
class QueryRow:
    name: str
    spec: Mapping[str, Any]
    """The query's plan document, as in the configuration."""
    qos: Mapping[str, Any]
    """{"window": [min, max] | None, "windows": {node: [min, max]}, "granularity": [coarse, fine] | None}."""
    weight: float


@dataclass(frozen=True)
class NodeRow:
    query: str
    node_id: str
    op: str
    inputs: Sequence[str]
    params: Mapping[str, Any]


@dataclass(frozen=True)
class EstimateRow:
    query: str | None
    """None for the total over all queries (shared nodes counted once)."""
    memory_bytes: float
    cpu: float


@dataclass(frozen=True)
class DecisionRecord:
    at: datetime
    policy: str
    trigger: str
    """Why a decision was due (the re-decision trigger's reason)."""
    feasible: bool
    dry_run: bool
    applied: bool
    weighted_qos: float
    reason: str
    estimated_memory_bytes: float
    estimated_cpu: float
    duration_ms: float
    inputs: Mapping[str, Any]
    """Bounds, stream d values, queries considered — everything needed to explain the decision."""
    outputs: Mapping[str, Any]
    """Per-query settings, guardrail effects (held, limited, forced), trajectory, policy details."""
    id: str | None = None
    """The client-generated id (``control.records.new_id``) later records name it by, e.g. ``DesiredSettings.decision_id``;
    also kept in ``outputs["decision_id"]``, so a store without a column for it keeps it too."""


@dataclass(frozen=True)
class EventRecord:
    at: datetime
    kind: str
    """Stable event name, e.g. ``query_rejected``, ``query_failed``, ``config_reload_failed``."""
    severity: str
    """``info``, ``warning`` or ``error``."""
    message: str
    query: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


class Store(Protocol):
    """The metadata store the daemon records into (``adapters/store``)."""

    def sync_config(self, streams: Sequence[StreamRow], queries: Sequence[QueryRow], nodes: Sequence[NodeRow], at: datetime) -> None:
        """Upsert streams, queries (status ``pending`` when new) and plan nodes; queries no longer configured become ``removed``."""
        ...

    def set_query_status(self, query: str, status: str, at: datetime, reason: str | None = None) -> None:
        """``pending``, ``active``, ``rejected``, ``failed`` or ``removed``."""
        ...

    def set_query_settings(self, query: str, settings: QuerySettings, at: datetime) -> None: ...

    def current_settings(self) -> dict[str, QuerySettings]:
        """Settings in force per query (queries never applied are absent); read back at start."""
        ...

    def record_observation(self, observation: Observation) -> None: ...

    def record_estimates(self, at: datetime, rows: Sequence[EstimateRow], decision_id: int | None = None) -> None: ...

    def record_decision(self, record: DecisionRecord) -> int: ...

    def record_event(self, event: EventRecord) -> int: ...

    def record_admissions(self, statuses: Sequence[tuple[str, str, str | None]], events: Sequence[EventRecord],
                          at: datetime) -> None:
        """Admission verdicts — (query, status, reason) each, as ``set_query_status`` — and their events, in one
        transaction (a fleet's thousand queries arrive together); an unknown query refuses them all."""
        ...

    def record_migration(
        self, query: str, strategy: str, state: str, at: datetime, split_time: float | None = None,
        details: Mapping[str, Any] | None = None, uid: str | None = None,
    ) -> int:
        """A migration started; ``uid`` is the id armd generated for it, so later updates can name it before this returns."""
        ...

    def update_migration(
        self, id: int | str, state: str, at: datetime, *, finished: bool = False, lost: int | None = None,
        duplicated: int | None = None, differing: int | None = None, details: Mapping[str, Any] | None = None,
    ) -> None:
        """Move a migration on; ``id`` is the row's id or the ``uid`` it was recorded with."""
        ...

    def open_migrations(self) -> list[dict[str, Any]]:
        """Unfinished migrations (``id``, ``query``, ``strategy``, ``state``, ``details``), oldest first; read back at start."""
        ...

    def write_desired(self, rows: Sequence[DesiredSettings]) -> None:
        """Upsert the desired settings of the queries in ``rows`` (one row per query; a query not given keeps its row)."""
        ...

    def desired_settings(self) -> dict[str, DesiredSettings]:
        """The desired settings per query (queries the cycle never decided on are absent)."""
        ...

    def write_actual(self, state: ActualState) -> None:
        """Upsert what one query actually runs with (the reconciler's report)."""
        ...

    def actual_states(self) -> dict[str, ActualState]:
        """The reconciler's latest report per query."""
        ...

    def prune(self, older_than: datetime, history_older_than: datetime | None = None) -> dict[str, int]:
        """Delete observations, batches and estimates older than ``older_than``, and decisions, events and finished
        migrations older than ``history_older_than``; returns how many rows per table."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Applications(Protocol):
    """A store that also registers ``armd.agent`` applications (the SQL store from revision 0008)."""

    def mark_gone_applications(self, timeout_seconds: float, at: datetime) -> list[str]:
        """Applications silent for more than ``timeout_seconds`` become ``gone``, their queries removed; returns them."""
        ...


class AlertSink(Protocol):
    def alert(self, event: EventRecord) -> None:
        """Deliver an event; never raises (a failing hook is logged by the sink)."""
        ...
