"""Tables of the metadata store as SQLAlchemy declarative models.

These describe the schema at the newest revision so that ``SqlStore`` can
read and write it with typed rows; the schema itself is created and changed
only by the Alembic revisions in ``schema/versions`` (a change here needs a
new revision there). The views are not models: they are created by the
revisions with dialect-specific SQL and read through the ``Table`` objects at
the end of this module.

All times are timezone-aware UTC. SQLite has no time zone type, so
``UtcDateTime`` stores naive UTC there and gives back aware UTC everywhere.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

QUERY_STATUSES = ("pending", "active", "rejected", "failed", "removed")
SEVERITIES = ("info", "warning", "error")


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime`` on both SQLite and PostgreSQL; naive values are refused."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} given to the metadata store; pass a timezone-aware UTC datetime")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UtcDateTime, dict[str, Any]: JSON, list[Any]: JSON}


class Stream(Base):
    __tablename__ = "streams"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    size_bytes: Mapped[float] = mapped_column(Float)
    g: Mapped[float] = mapped_column(Float)
    configured_d: Mapped[float] = mapped_column(Float)
    last_d: Mapped[float | None] = mapped_column(Float)
    last_rate_per_second: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[datetime]


class Query(Base):
    __tablename__ = "queries"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'active', 'rejected', 'failed', 'removed')", name="ck_queries_status"),
    )

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    spec: Mapped[dict[str, Any]]
    qos: Mapped[dict[str, Any]]
    weight: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text)
    settings: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    qos_fraction: Mapped[float | None] = mapped_column(Float)
    settings_changed_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    app: Mapped[str | None] = mapped_column(String(200))
    """The ``armd.agent`` application that registered the query (revision 0008); NULL for the daemon's configured ones."""


class Application(Base):
    """A user's Spark application governed through ``armd.agent`` (revision 0008)."""

    __tablename__ = "applications"
    __table_args__ = (
        CheckConstraint("mode IN ('apply', 'recommend')", name="ck_applications_mode"),
        CheckConstraint("status IN ('running', 'stopped', 'gone')", name="ck_applications_status"),
    )

    app: Mapped[str] = mapped_column(String(200), primary_key=True)
    host: Mapped[str] = mapped_column(String(300))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="running")


class PlanNode(Base):
    __tablename__ = "plan_nodes"

    query: Mapped[str] = mapped_column(String(200), ForeignKey("queries.name", ondelete="CASCADE"), primary_key=True)
    node_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    op: Mapped[str] = mapped_column(String(50))
    inputs: Mapped[list[Any]]
    params: Mapped[dict[str, Any]]


class ObservationRow(Base):
    """One source stream (``stream`` set) or one query (``query`` set) in one observation interval."""

    __tablename__ = "observations"
    __table_args__ = (
        Index("ix_observations_at", "at"),
        Index("ix_observations_query_at", "query", "at"),
        Index("ix_observations_stream_at", "stream", "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    stream: Mapped[str | None] = mapped_column(String(200))
    query: Mapped[str | None] = mapped_column(String(200))
    rows: Mapped[int | None] = mapped_column(BigInteger)
    interval_seconds: Mapped[float | None] = mapped_column(Float)
    rate_per_second: Mapped[float | None] = mapped_column(Float)
    d: Mapped[float | None] = mapped_column(Float)
    l: Mapped[float | None] = mapped_column(Float)  # the paper's name for validity
    g: Mapped[float | None] = mapped_column(Float)
    state_rows: Mapped[int | None] = mapped_column(BigInteger)
    state_bytes: Mapped[int | None] = mapped_column(BigInteger)
    selectivities: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    pair_selectivities: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    measured_inputs: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    """A query's ``group_models`` ({node: [base, growth]}) and ``bytes_per_row`` ({node: bytes}) (revision 0009)."""
    event_end: Mapped[datetime | None]
    """Stream rows: the newest event time the interval's rows reached, when the source says (revision 0010)."""


class BatchRow(Base):
    """One micro-batch of a query run on the engine (Spark's progress event), as the listener received it."""

    __tablename__ = "batches"
    __table_args__ = (Index("ix_batches_at", "at"), Index("ix_batches_query_at", "query", "at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    query: Mapped[str] = mapped_column(String(200))
    run_id: Mapped[str] = mapped_column(String(64))
    plan_version: Mapped[int | None]
    batch_id: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[datetime]
    input_rows: Mapped[int] = mapped_column(BigInteger)
    batch_ms: Mapped[int] = mapped_column(BigInteger)
    event_min: Mapped[datetime | None]
    event_max: Mapped[datetime | None]
    watermark: Mapped[datetime | None]
    state_rows: Mapped[int] = mapped_column(BigInteger)
    state_bytes: Mapped[int] = mapped_column(BigInteger)
    rows_dropped_by_watermark: Mapped[int] = mapped_column(BigInteger)
    durations_ms: Mapped[dict[str, Any]]
    operators: Mapped[list[Any]]


class Decision(Base):
    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_at", "at"), Index("ux_decisions_uid", "uid", unique=True),
                      Index("ix_decisions_trigger_code", "trigger_code"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uid: Mapped[str | None] = mapped_column(String(36))
    """The id armd generated for the decision (``DecisionRecord.id``, revision 0005); desired settings and migrations name it."""
    at: Mapped[datetime]
    policy: Mapped[str] = mapped_column(String(100))
    trigger: Mapped[str] = mapped_column(Text)
    trigger_code: Mapped[str | None] = mapped_column(String(40))
    """``trigger`` as a code that can be grouped (``triggers.py``, revision 0007)."""
    feasible: Mapped[bool] = mapped_column(Boolean)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    applied: Mapped[bool] = mapped_column(Boolean)
    weighted_qos: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    estimated_memory_bytes: Mapped[float] = mapped_column(Float)
    estimated_cpu: Mapped[float] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    inputs: Mapped[dict[str, Any]]
    outputs: Mapped[dict[str, Any]]


class Estimate(Base):
    """Estimated cost of one query (``query`` NULL: the total over all queries)."""

    __tablename__ = "estimates"
    __table_args__ = (Index("ix_estimates_at", "at"), Index("ix_estimates_query_at", "query", "at"),
                      Index("ix_estimates_decision_id", "decision_id"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    decision_id: Mapped[int | None] = mapped_column(ForeignKey("decisions.id", ondelete="SET NULL"))
    query: Mapped[str | None] = mapped_column(String(200))
    memory_bytes: Mapped[float] = mapped_column(Float)
    cpu: Mapped[float] = mapped_column(Float)


class Migration(Base):
    __tablename__ = "migrations"
    __table_args__ = (Index("ix_migrations_query", "query"), Index("ix_migrations_finished_at", "finished_at"),
                      Index("ux_migrations_uid", "uid", unique=True))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uid: Mapped[str | None] = mapped_column(String(36))
    """The id armd generated when the migration began (revision 0005), by which it updates the row."""
    query: Mapped[str] = mapped_column(String(200))
    strategy: Mapped[str] = mapped_column(String(50))
    state: Mapped[str] = mapped_column(String(50))
    split_time: Mapped[datetime | None]
    started_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    lost: Mapped[int | None] = mapped_column(BigInteger)
    duplicated: Mapped[int | None] = mapped_column(BigInteger)
    differing: Mapped[int | None] = mapped_column(BigInteger)
    details: Mapped[dict[str, Any]]


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (Index("ix_events_at", "at"), Index("ix_events_query_at", "query", "at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(String(100))
    severity: Mapped[str] = mapped_column(String(16))
    query: Mapped[str | None] = mapped_column(String(200))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]]


class Lease(Base):
    """Who may run the control loop on this store: one row per lease name, renewed by its holder (revision 0004)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(300))
    """``host:pid:uuid`` of the daemon that holds it."""
    acquired_at: Mapped[datetime]
    renewed_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class DesiredSettingsRow(Base):
    """What the control cycle wants one query to run with (``control.ports.DesiredSettings``)."""

    __tablename__ = "desired_settings"

    query: Mapped[str] = mapped_column(String(200), primary_key=True)
    plan_version: Mapped[int] = mapped_column(BigInteger)
    settings: Mapped[dict[str, Any]]
    join_order: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    may_start: Mapped[bool] = mapped_column(Boolean)
    recommend_only: Mapped[bool] = mapped_column(Boolean)
    decision_id: Mapped[str | None] = mapped_column(String(64))
    at: Mapped[datetime | None]
    reason: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    """Why (``DesiredSettings.reason``): the join-order policy's choice, recorded with the migration when applied."""


class ActualStateRow(Base):
    """What the reconciler reports one query runs with (``control.ports.ActualState``)."""

    __tablename__ = "actual_states"
    __table_args__ = (
        CheckConstraint("phase IN ('steady', 'migrating', 'retrying', 'failed')", name="ck_actual_states_phase"),
    )

    query: Mapped[str] = mapped_column(String(200), primary_key=True)
    plan_version: Mapped[int] = mapped_column(BigInteger)
    settings: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    phase: Mapped[str] = mapped_column(String(16))
    join_order: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    migration_state: Mapped[str | None] = mapped_column(String(50))
    target_version: Mapped[int | None] = mapped_column(BigInteger)
    attempts: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    retry_at: Mapped[datetime | None]
    extra_state_bytes: Mapped[float | None] = mapped_column(Float)
    at: Mapped[datetime | None]


class HeraldRow(Base):
    """A herald announced through the store (revision 0007): a range per attribute for a lifespan (paper 002)."""

    __tablename__ = "heralds"
    __table_args__ = (
        CheckConstraint(
            "(lifespan_count IS NULL AND lifespan_seconds > 0) OR (lifespan_seconds IS NULL AND lifespan_count > 0)",
            name="ck_heralds_one_lifespan",
        ),
        Index("ix_heralds_stream_starts_at", "stream", "starts_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    stream: Mapped[str] = mapped_column(String(200))
    patterns: Mapped[dict[str, Any]]
    """Attribute → ``[low, high]``, closed, ``null`` for an unbounded end."""
    lifespan_count: Mapped[int | None] = mapped_column(BigInteger)
    lifespan_seconds: Mapped[float | None] = mapped_column(Float)
    starts_at: Mapped[datetime]
    created_at: Mapped[datetime]
    source: Mapped[str] = mapped_column(String(50))


# The views, for reading only; created by the Alembic revisions, never by metadata.create_all.
views = MetaData()

query_overview = Table(
    "query_overview",
    views,
    Column("name", String),
    Column("status", String),
    Column("status_reason", Text),
    Column("weight", Float),
    Column("settings", JSON),
    Column("qos_fraction", Float),
    Column("settings_changed_at", UtcDateTime),
    Column("estimated_memory_bytes", Float),
    Column("estimated_cpu", Float),
    Column("estimated_at", UtcDateTime),
    Column("measured_state_bytes", BigInteger),
    Column("measured_state_rows", BigInteger),
    Column("measured_at", UtcDateTime),
)
