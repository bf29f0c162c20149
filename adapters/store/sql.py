"""``SqlStore``: the daemon's ``Store`` port on SQLite or PostgreSQL.

It exists so that everything armd observes, estimates, decides and migrates
ends up as rows a person can query with plain SQL (see
docs/metadata-schema.md), and so that the CLI can print the same without
talking to the daemon.

A database that cannot be reached is an ordinary, temporary condition for a
daemon: every method turns connection-level failures into
``StoreUnavailable`` (after a short bounded retry), never a driver
traceback, so the caller can buffer what it wanted to record and try again;
a record the database will never accept becomes ``RecordRejected``
(``classify.py`` holds the rules). No call blocks longer than the call
timeout: SQLite's busy timeout, PostgreSQL's connect, statement and lock
timeouts and TCP keepalives are all set from it, so a lock held by someone
else or a server that stopped answering costs one bounded wait, not a step.
Credentials never appear in a message: URLs are shown through ``redact_url``.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, Text, bindparam, cast, create_engine, delete, event, func, insert, select, text, true, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session

from armd.adapters.store import lease as leases
from armd.adapters.store import models as m
from armd.adapters.store.classify import UPGRADE_HINT, classify, one_line
from armd.adapters.store.listen import CHANNEL as DESIRED_CHANNEL
from armd.adapters.store.errors import SchemaOutdated, StoreError, StoreLost, StoreUnavailable
from armd.adapters.store.sqlite_file import FileIdentity, sqlite_path
from armd.adapters.store.triggers import trigger_code
from armd.migrations.heralds.record import HeraldRecord, InvalidHerald, from_json
from armd.control.ports import (ACTUAL_PHASES, ActualState, DecisionRecord, DesiredSettings, EstimateRow, EventRecord, NodeRow,
                                Observation, QueryRow, QuerySettings, StreamRow)

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
CALL_TIMEOUT_SECONDS = 5.0
NOTIFY_PAYLOAD_CHARS = 7000
"""PostgreSQL refuses a notification payload of 8000 bytes or more; the query names are a hint, cut short."""
"""The default bound of one store call (``store.call_timeout_seconds``)."""

OnRetry = Callable[[int, float, str], None]
"""``on_retry(attempt, delay_seconds, message)``: attempt ``attempt`` failed, the next comes after ``delay_seconds``."""

T = TypeVar("T")

# A method that loses its connection mid-way tries again this often, after these pauses.
_CALL_RETRY_DELAYS = (0.1, 0.3)


def redact_url(url: str) -> str:
    """``url`` with its password and credential query parameters replaced by ``***`` (unparseable text is returned with everything between ``:`` and ``@`` hidden)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        head, sep, tail = url.rpartition("@")
        if not sep or "://" not in head:
            return url
        scheme, _, userinfo = head.partition("://")
        user = userinfo.split(":", 1)[0]
        return f"{scheme}://{user}:***@{tail}"
    hidden = {name: ("***" if _CREDENTIAL_PARAMETER.search(name) else value) for name, value in parsed.query.items()}
    return parsed.set(query=hidden).render_as_string(hide_password=True).replace("%2A%2A%2A", "***")


_CREDENTIAL_PARAMETER = re.compile(r"pass|pwd|secret|token|key|auth|credential", re.IGNORECASE)
"""A query parameter named like this holds a credential (``?password=…``): ``redact_url`` hides its value."""


def _json_value(value: Any) -> Any:
    """``value`` as plain JSON: non-finite floats become ``None``, datetimes ISO strings, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    # PostgreSQL rejects NaN/Infinity in JSON, and so do most readers of it.
    return json.dumps(_json_value(value), allow_nan=False, default=str)


def _row_dict(row: Any, columns: Iterable[str] | None = None) -> dict[str, Any]:
    if hasattr(row, "_mapping"):
        mapping = dict(row._mapping)
    else:
        mapping = {c: getattr(row, c) for c in (columns or row.__table__.columns.keys())}
    return {k: _json_value(v) for k, v in mapping.items()}


def _measured_inputs(metrics: QueryMetrics) -> dict[str, Any] | None:
    """What an agent's daemon needs of a query's measured model inputs, as JSON (``None`` when nothing was measured)."""
    doc = {"group_models": {n: list(m) for n, m in metrics.group_models.items()},
           "bytes_per_row": dict(metrics.bytes_per_row)}
    return _json_value(doc) if doc["group_models"] or doc["bytes_per_row"] else None


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} given to the metadata store; pass a timezone-aware UTC datetime")
    return value.astimezone(timezone.utc)


class SqlStore:
    """The metadata store on one database URL (``sqlite:///path`` or ``postgresql+psycopg://…``).

    Create it with ``SqlStore.open(url)``. Methods are safe to call from one
    thread at a time per store; each runs in its own transaction.
    """

    def __init__(self, engine: Engine, url: str, call_timeout_seconds: float = CALL_TIMEOUT_SECONDS) -> None:
        self._engine = engine
        self.url_redacted = redact_url(url)
        self.call_timeout_seconds = call_timeout_seconds
        self._file: FileIdentity | None = None
        """For a SQLite file: which file was opened, checked before every call (see ``sqlite_file.py``)."""
        self.lost: str | None = None
        self._parsed_settings: dict[str, QuerySettings] = {}
        """``actual_states``: settings parsed, by their JSON text."""
        """Why the SQLite file is no longer the one opened; once set, every call raises ``StoreLost``."""

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        url: str,
        *,
        retries: int = 5,
        backoff_seconds: float = 0.5,
        on_retry: OnRetry | None = None,
        call_timeout_seconds: float = CALL_TIMEOUT_SECONDS,
        must_exist: bool = False,
    ) -> SqlStore:
        """Create the engine and check that the database answers.

        A connection failure is retried ``retries`` times (so ``retries + 1``
        attempts) after ``backoff_seconds``, doubling each time;
        ``on_retry(attempt, delay, message)`` is called before each pause.
        After the last attempt it raises ``StoreUnavailable``. A URL that
        names no usable database or driver raises ``StoreError`` at once.
        No call of the store blocks longer than ``call_timeout_seconds``.
        With ``must_exist`` (the read commands) a SQLite file that does not
        exist raises ``StoreError`` instead of being created empty.
        """
        path = sqlite_path(url)
        if must_exist and path is not None and not path.exists():
            raise StoreError(f"no metadata store at {str(path)!r}: the file does not exist; it is created by "
                             f"'armd db upgrade --config …' or 'armd run', check store.url")
        engine = cls._create_engine(url, call_timeout_seconds)
        store = cls(engine, url, call_timeout_seconds)
        attempt = 0
        while True:
            attempt += 1
            try:
                with engine.connect() as conn:
                    # Reading the schema makes SQLite look at the file: one that is not a database fails here, at once.
                    conn.execute(text("SELECT count(*) FROM sqlite_master" if path is not None else "SELECT 1"))
                if path is not None:
                    store._file = FileIdentity.of(path)
                return store
            except DBAPIError as exc:
                if path is not None and "not a database" in str(exc.orig).lower():
                    engine.dispose()
                    raise StoreError(f"the metadata store at {store.url_redacted} is not a SQLite database ({one_line(exc)}); "
                                     f"check store.url, or move the file away and run armd db upgrade") from None
                message = f"cannot connect to the metadata store at {store.url_redacted}: {one_line(exc)}"
                if attempt > retries:
                    engine.dispose()
                    raise StoreUnavailable(f"{message} (gave up after {attempt} attempt{'s' if attempt > 1 else ''})") from None
                delay = backoff_seconds * 2 ** (attempt - 1)
                if on_retry is not None:
                    on_retry(attempt, delay, message)
                time.sleep(delay)

    @staticmethod
    def _create_engine(url: str, call_timeout_seconds: float = CALL_TIMEOUT_SECONDS) -> Engine:
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise StoreError(f"metadata store URL {redact_url(url)!r} is not a database URL; expected e.g. sqlite:///armd.db or postgresql+psycopg://user:password@host:5432/db") from None
        backend = parsed.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise StoreError(f"metadata store URL {redact_url(url)!r}: the database must be sqlite or postgresql, not {backend!r}")
        connect_args: dict[str, Any] = {}
        if backend == "postgresql":
            if parsed.drivername == "postgresql":
                # The bare scheme means psycopg2 to SQLAlchemy; armd ships psycopg 3.
                parsed = parsed.set(drivername="postgresql+psycopg")
            connect_args.update(_postgres_bounds(call_timeout_seconds, parsed.query))
        else:
            connect_args["timeout"] = call_timeout_seconds  # sqlite3's busy timeout, also while connecting
        try:
            engine = create_engine(
                parsed,
                pool_pre_ping=True,
                pool_timeout=call_timeout_seconds,
                json_serializer=_dumps,
                connect_args=connect_args,
            )
        except (NoSuchModuleError, ModuleNotFoundError) as exc:
            raise StoreError(f"metadata store URL {redact_url(url)!r}: no driver for it is installed ({exc})") from None
        if backend == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas(call_timeout_seconds))
        return engine

    def close(self) -> None:
        self._engine.dispose()

    # -------------------------------------------------------------- plumbing

    def _call(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn`` in one transaction; a lost connection is retried briefly (within the call timeout).

        Raises ``StoreUnavailable`` (the record may wait), ``RecordRejected``
        (it never will be accepted) or ``TableMissing`` (both a wait and an
        upgrade hint), never a driver exception; see ``classify.py``.
        """
        self._check_file()
        started = time.monotonic()
        where = f"metadata store at {self.url_redacted}"
        for attempt in range(len(_CALL_RETRY_DELAYS) + 1):
            try:
                with Session(self._engine) as session, session.begin():
                    return fn(session)
            except Exception as exc:
                error, retry = classify(exc, where)
                if error is None:
                    raise
                delay = _CALL_RETRY_DELAYS[attempt] if attempt < len(_CALL_RETRY_DELAYS) else None
                if not retry or delay is None or time.monotonic() - started + delay >= self.call_timeout_seconds:
                    raise error from None
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _check_file(self) -> None:
        """Raise ``StoreLost`` when the SQLite file was deleted or replaced since it was opened (and from then on)."""
        if self.lost is None and self._file is not None:
            why = self._file.changed()
            if why is not None:
                self.lost = f"the metadata store's file {str(self._file.path)!r} was {why} while armd ran"
                self._engine.dispose()  # let go of the old inode; nothing is written into it any more
        if self.lost is not None:
            raise StoreLost(f"{self.lost}; records wait in memory — restore the file (or run armd db upgrade) and restart armd")

    # ---------------------------------------------------------------- schema

    @staticmethod
    def _alembic_config() -> Config:
        config = Config()
        config.set_main_option("script_location", str(SCHEMA_DIR))
        return config

    @classmethod
    def head_revision(cls) -> str:
        """The schema revision this armd needs."""
        head = ScriptDirectory.from_config(cls._alembic_config()).get_current_head()
        assert head is not None, "the armd package ships no schema revisions"
        return head

    def schema_revision(self) -> str | None:
        """The database's schema revision (``None``: never upgraded)."""

        def read(session: Session) -> str | None:
            return MigrationContext.configure(session.connection()).get_current_revision()

        return self._call(read)

    def upgrade(self) -> None:
        """Bring the schema to ``head_revision()`` (creates everything on an empty database)."""

        def run(session: Session) -> None:
            connection = session.connection()
            if connection.dialect.name == "postgresql":
                connection.execute(text("SET LOCAL statement_timeout = 0"))  # rewriting a large table may take a while
            config = self._alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

        self._call(run)

    def require_current_schema(self) -> None:
        """Raise ``SchemaOutdated`` unless the database is at ``head_revision()``."""
        current, head = self.schema_revision(), self.head_revision()
        if current != head:
            shown = current if current is not None else "none (no armd tables yet)"
            raise SchemaOutdated(
                f"metadata store at {self.url_redacted} has schema revision {shown}, this armd needs {head}: {UPGRADE_HINT}"
            )

    # ------------------------------------------------------- Store protocol

    def sync_config(self, streams: Sequence[StreamRow], queries: Sequence[QueryRow], nodes: Sequence[NodeRow], at: datetime) -> None:
        at = _utc(at)
        configured = {q.name for q in queries}
        for node in nodes:
            if node.query not in configured:
                raise ValueError(f"plan node {node.node_id!r} belongs to query {node.query!r}, which is not among the configured queries")

        def run(session: Session) -> None:
            known_streams = {s.name: s for s in session.scalars(select(m.Stream))}
            for row in streams:
                stream = known_streams.pop(row.name, None)
                if stream is None:
                    session.add(m.Stream(name=row.name, size_bytes=row.size_bytes, g=row.g, configured_d=row.configured_d, updated_at=at))
                else:
                    stream.size_bytes, stream.g, stream.configured_d, stream.updated_at = row.size_bytes, row.g, row.configured_d, at
            for gone in known_streams.values():
                session.delete(gone)

            # Queries an armd.agent application registered (app set) are the application's, not the configuration's.
            known = {q.name: q for q in session.scalars(select(m.Query).where(m.Query.app.is_(None)))}
            for row in queries:
                spec, qos = _json_value(row.spec), _json_value(row.qos)
                query = known.pop(row.name, None)
                if query is None:
                    session.add(m.Query(name=row.name, spec=spec, qos=qos, weight=row.weight, status="pending", created_at=at, updated_at=at))
                    continue
                query.spec, query.qos, query.weight, query.updated_at = spec, qos, row.weight, at
                if query.status == "removed":
                    # Back in the configuration: a new query as far as anything running is concerned.
                    query.status, query.status_reason = "pending", None
                    query.settings, query.qos_fraction, query.settings_changed_at = None, None, None
            for gone in known.values():
                if gone.status != "removed":
                    gone.status, gone.status_reason, gone.updated_at = "removed", "no longer in the configuration", at
            session.flush()

            if configured:
                session.execute(delete(m.PlanNode).where(m.PlanNode.query.in_(configured)))
            if nodes:
                session.execute(
                    insert(m.PlanNode),
                    [
                        {"query": n.query, "node_id": n.node_id, "op": n.op, "inputs": list(n.inputs), "params": _json_value(n.params)}
                        for n in nodes
                    ],
                )

        self._call(run)

    def set_query_status(self, query: str, status: str, at: datetime, reason: str | None = None) -> None:
        if status not in m.QUERY_STATUSES:
            raise ValueError(f"query status {status!r} is not one of {', '.join(m.QUERY_STATUSES)}")
        at = _utc(at)

        def run(session: Session) -> None:
            result = session.execute(
                update(m.Query).where(m.Query.name == query).values(status=status, status_reason=reason, updated_at=at)
            )
            if result.rowcount == 0:
                raise KeyError(f"no query {query!r} in the metadata store; sync_config must record it first")

        self._call(run)

    def set_query_settings(self, query: str, settings: QuerySettings, at: datetime) -> None:
        at = _utc(at)

        def run(session: Session) -> None:
            result = session.execute(
                update(m.Query)
                .where(m.Query.name == query)
                .values(settings=_json_value(settings.as_json()), qos_fraction=settings.qos, settings_changed_at=at, updated_at=at)
            )
            if result.rowcount == 0:
                raise KeyError(f"no query {query!r} in the metadata store; sync_config must record it first")

        self._call(run)

    def current_settings(self) -> dict[str, QuerySettings]:
        def run(session: Session) -> dict[str, QuerySettings]:
            rows = session.execute(
                select(m.Query.name, m.Query.settings).where(m.Query.settings.is_not(None), m.Query.status != "removed")
            )
            return {name: _settings(doc) for name, doc in rows if doc is not None}

        return self._call(run)

    def record_observation(self, observation: Observation) -> None:
        values = observation_values(observation)
        self._call(lambda session: write_observation(session, values))

    def record_estimates(self, at: datetime, rows: Sequence[EstimateRow], decision_id: int | None = None) -> None:
        at = _utc(at)
        values = [{"at": at, "decision_id": decision_id, "query": r.query, "memory_bytes": r.memory_bytes, "cpu": r.cpu} for r in rows]

        def run(session: Session) -> None:
            if values:
                session.execute(insert(m.Estimate.__table__), values)

        self._call(run)

    def record_decision(self, record: DecisionRecord) -> int:
        return self._insert(
            m.Decision,
            at=_utc(record.at), policy=record.policy, trigger=record.trigger, trigger_code=trigger_code(record.trigger),
            feasible=record.feasible,
            dry_run=record.dry_run, applied=record.applied, weighted_qos=record.weighted_qos, reason=record.reason,
            estimated_memory_bytes=record.estimated_memory_bytes, estimated_cpu=record.estimated_cpu,
            duration_ms=record.duration_ms, inputs=_json_value(record.inputs), outputs=_json_value(record.outputs),
            uid=record.id,
        )

    def record_admissions(self, statuses: Sequence[tuple[str, str, str | None]], events: Sequence[EventRecord],
                          at: datetime) -> None:
        """Admission verdicts and their events in one transaction: one statement per table, not one commit per query."""
        at = _utc(at)
        for _query, status, _reason in statuses:
            if status not in m.QUERY_STATUSES:
                raise ValueError(f"query status {status!r} is not one of {', '.join(m.QUERY_STATUSES)}")
        for event in events:
            if event.severity not in m.SEVERITIES:
                raise ValueError(f"event severity {event.severity!r} is not one of {', '.join(m.SEVERITIES)}")
        table = m.Query.__table__
        values = [{"b_name": q, "status": status, "status_reason": reason, "updated_at": at} for q, status, reason in statuses]
        rows = [{"at": _utc(e.at), "kind": e.kind, "severity": e.severity, "query": e.query, "message": e.message,
                 "details": _json_value(e.details)} for e in events]
        names = {q for q, _status, _reason in statuses}

        def run(session: Session) -> None:
            if values:
                known = set(session.scalars(select(table.c.name).where(table.c.name.in_(sorted(names)))))
                if known != names:
                    raise KeyError(f"no quer{'y' if len(names - known) == 1 else 'ies'} {', '.join(sorted(names - known))} "
                                   "in the metadata store; sync_config must record them first")
                session.execute(update(table).where(table.c.name == bindparam("b_name")), values)
            if rows:
                session.execute(insert(m.Event.__table__), rows)

        self._call(run)

    def record_event(self, event: EventRecord) -> int:
        if event.severity not in m.SEVERITIES:
            raise ValueError(f"event severity {event.severity!r} is not one of {', '.join(m.SEVERITIES)}")
        return self._insert(
            m.Event,
            at=_utc(event.at), kind=event.kind, severity=event.severity, query=event.query,
            message=event.message, details=_json_value(event.details),
        )

    def prune(self, older_than: datetime, history_older_than: datetime | None = None) -> dict[str, int]:
        """Delete what grows with time: rows removed per table.

        Observations, batches and estimates before ``older_than``; decisions,
        events and finished migrations before ``history_older_than`` (default
        ``older_than``), except the latest decision, which ``status`` and
        ``explain`` show. Estimates of a pruned decision lose the link
        (``decision_id`` becomes NULL, through the foreign key).
        """
        cutoff = _utc(older_than)
        history = _utc(history_older_than) if history_older_than is not None else cutoff

        def run(session: Session) -> dict[str, int]:
            latest = select(func.max(m.Decision.id)).scalar_subquery()
            statements = {
                "observations": delete(m.ObservationRow).where(m.ObservationRow.at < cutoff),
                "batches": delete(m.BatchRow).where(m.BatchRow.at < cutoff),
                "estimates": delete(m.Estimate).where(m.Estimate.at < cutoff),
                "events": delete(m.Event).where(m.Event.at < history),
                "migrations": delete(m.Migration).where(m.Migration.finished_at < history),
                "decisions": delete(m.Decision).where(m.Decision.at < history, m.Decision.id != latest),
            }
            return {table: int(session.execute(stmt).rowcount or 0) for table, stmt in statements.items()}

        return self._call(run)

    # ----------------------------------------------------------------- lease

    def acquire_lease(self, holder: str, at: datetime, seconds: float, name: str = leases.CONTROL_LOOP) -> leases.Holding:
        """Take lease ``name`` when it is free, expired or already ours (see ``lease.py``); the holding says who has it."""
        return self._call(lambda session: leases.acquire(session, name, holder, _utc(at), seconds))

    def renew_lease(self, holder: str, at: datetime, seconds: float, name: str = leases.CONTROL_LOOP) -> leases.Holding:
        """Extend our lease to ``at + seconds``; ``ours`` is False when another daemon holds it now (or nobody does)."""
        return self._call(lambda session: leases.acquire(session, name, holder, _utc(at), seconds, take_expired=False))

    def release_lease(self, holder: str, name: str = leases.CONTROL_LOOP) -> bool:
        """Give our lease up (a clean stop); False when it was not ours any more."""
        return self._call(lambda session: leases.release(session, name, holder))

    # ------------------------------------------------------------ migrations

    def record_migration(
        self,
        query: str,
        strategy: str,
        state: str,
        at: datetime,
        split_time: datetime | None = None,
        details: Mapping[str, Any] | None = None,
        uid: str | None = None,
    ) -> int:
        """A plan migration of ``query`` started at ``at``; returns its id for ``update_migration`` (which takes ``uid`` too)."""
        at = _utc(at)
        return self._insert(
            m.Migration,
            query=query, strategy=strategy, state=state, started_at=at, updated_at=at,
            split_time=_utc(split_time) if split_time is not None else None, details=_json_value(details or {}), uid=uid,
        )

    def update_migration(
        self,
        id: int | str,
        state: str,
        at: datetime,
        *,
        finished: bool = False,
        lost: int | None = None,
        duplicated: int | None = None,
        differing: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Move migration ``id`` (its row id, or the ``uid`` it was recorded with) to ``state``; ``finished`` closes it.
        Counts and details left ``None`` keep their values."""
        at = _utc(at)
        values: dict[str, Any] = {"state": state, "updated_at": at}
        if finished:
            values["finished_at"] = at
        for key, value in (("lost", lost), ("duplicated", duplicated), ("differing", differing)):
            if value is not None:
                values[key] = value

        def run(session: Session) -> None:
            migration = (session.scalars(select(m.Migration).where(m.Migration.uid == id)).first() if isinstance(id, str)
                         else session.get(m.Migration, id))
            if migration is None:
                raise KeyError(f"no migration with id {id} in the metadata store")
            for key, value in values.items():
                setattr(migration, key, value)
            if details is not None:
                migration.details = {**migration.details, **_json_value(details)}

        self._call(run)

    def open_migrations(self) -> list[dict[str, Any]]:
        """Migrations not finished yet (oldest first), with their details: what a restarted daemon resumes."""

        def run(session: Session) -> list[dict[str, Any]]:
            rows = session.scalars(select(m.Migration).where(m.Migration.finished_at.is_(None))
                                   .order_by(m.Migration.started_at, m.Migration.id))
            return [_row_dict(r, _MIGRATION_COLUMNS) for r in rows]

        return self._call(run)

    # ------------------------------------------------- desired and actual

    def write_desired(self, rows: Sequence[DesiredSettings]) -> None:
        """Upsert one ``desired_settings`` row per query in ``rows``; other queries keep theirs."""
        values = [{"query": r.query, "plan_version": int(r.plan_version), "settings": _json_value(r.settings.as_json()),
                   "join_order": _json_value(r.join_order), "may_start": bool(r.may_start),
                   "recommend_only": bool(r.recommend_only),
                   "decision_id": None if r.decision_id is None else str(r.decision_id),
                   "at": _utc(r.at) if r.at is not None else None, "reason": _json_value(dict(r.reason))} for r in rows]
        queries = ",".join(sorted({r.query for r in rows}))

        def run(session: Session) -> None:
            _upsert(session, m.DesiredSettingsRow, values)
            if values and session.connection().dialect.name == "postgresql":  # heard at the commit (adapters/store/listen.py)
                session.execute(text("SELECT pg_notify(:channel, :queries)"),
                                {"channel": DESIRED_CHANNEL, "queries": queries[:NOTIFY_PAYLOAD_CHARS]})

        self._call(run)

    @property
    def engine_url(self) -> Any:
        """The SQLAlchemy URL of the database (with its password: for a second connection of armd's own)."""
        return self._engine.url

    reads_by_query = True
    """``desired_settings`` and ``actual_states`` take ``queries=`` (an application reads its own rows only)."""

    def desired_settings(self, queries: Iterable[str] | None = None) -> dict[str, DesiredSettings]:
        table = m.DesiredSettingsRow.__table__  # plain rows, not ORM objects: the daemon reads a thousand each tick
        wanted = select(table)
        if queries is not None:
            wanted = wanted.where(table.c.query.in_(sorted(queries)))

        def run(session: Session) -> dict[str, DesiredSettings]:
            return {r.query: DesiredSettings(r.query, int(r.plan_version), _settings(r.settings), r.join_order, bool(r.may_start),
                                             bool(r.recommend_only), r.decision_id, r.at, r.reason or {})
                    for r in session.execute(wanted)}

        return self._call(run)

    def write_actual(self, state: ActualState) -> None:
        """Upsert the query's ``actual_states`` row."""
        if state.phase not in ACTUAL_PHASES:
            raise ValueError(f"actual phase {state.phase!r} is not one of {', '.join(ACTUAL_PHASES)}")
        value = {"query": state.query, "plan_version": int(state.plan_version),
                 "settings": None if state.settings is None else _json_value(state.settings.as_json()), "phase": state.phase,
                 "join_order": _json_value(state.join_order), "migration_state": state.migration_state,
                 "target_version": state.target_version, "attempts": int(state.attempts), "error": state.error,
                 "retry_at": _utc(state.retry_at) if state.retry_at is not None else None,
                 "extra_state_bytes": state.extra_state_bytes, "at": _utc(state.at) if state.at is not None else None}
        self._call(lambda session: _upsert(session, m.ActualStateRow, [value]))

    def actual_states(self, queries: Iterable[str] | None = None) -> dict[str, ActualState]:
        # Plain rows, the settings as JSON text parsed once per distinct text: the daemon reads a thousand rows each
        # observation, and they hardly change.
        wanted = select(*_ACTUAL_COLUMNS)
        if queries is not None:
            wanted = wanted.where(m.ActualStateRow.__table__.c.query.in_(sorted(queries)))
        parsed = self._parsed_settings
        if len(parsed) > SETTINGS_CACHE:
            parsed.clear()

        def settings(doc: str | None) -> QuerySettings | None:
            if doc is None:
                return None
            if doc not in parsed:
                parsed[doc] = _settings(json.loads(doc))
            return parsed[doc]

        def run(session: Session) -> dict[str, ActualState]:
            return {r.query: ActualState(
                r.query, int(r.plan_version), settings(r.settings), r.phase, None if r.join_order is None else json.loads(r.join_order),
                r.migration_state, None if r.target_version is None else int(r.target_version), int(r.attempts), r.error,
                r.retry_at, r.extra_state_bytes, r.at) for r in session.execute(wanted)}

        return self._call(run)

    # ----------------------------------------------------------------- reads

    def status(self) -> dict[str, Any]:
        """Every query with its settings, latest estimate and measurement; totals; the last decision; open migrations."""

        def run(session: Session) -> dict[str, Any]:
            view = m.query_overview
            queries = [
                _row_dict(row)
                for row in session.execute(
                    select(
                        view.c.name, view.c.status, view.c.status_reason, view.c.weight, view.c.settings,
                        view.c.qos_fraction, view.c.estimated_memory_bytes, view.c.estimated_cpu,
                        view.c.measured_state_bytes, view.c.measured_state_rows, view.c.settings_changed_at,
                    ).order_by(view.c.name)
                )
            ]
            total = session.execute(
                select(m.Estimate.memory_bytes, m.Estimate.cpu, m.Estimate.at)
                .where(m.Estimate.query.is_(None))
                .order_by(m.Estimate.at.desc(), m.Estimate.id.desc())
                .limit(1)
            ).first()
            measured = session.scalar(
                select(func.sum(view.c.measured_state_bytes)).where(view.c.status != "removed")
            )
            return {
                "queries": queries,
                "total": {
                    "estimated_memory_bytes": _json_value(total.memory_bytes) if total else None,
                    "estimated_cpu": _json_value(total.cpu) if total else None,
                    "estimated_at": _json_value(total.at) if total else None,
                    "measured_state_bytes": int(measured) if measured is not None else None,
                },
                "last_decision": _last_decision(session),
                "migrations": [
                    _row_dict(r, _MIGRATION_COLUMNS)
                    for r in session.scalars(
                        select(m.Migration).where(m.Migration.finished_at.is_(None)).order_by(m.Migration.started_at, m.Migration.id)
                    )
                ],
            }

        return self._call(run)

    def decisions(self, since: datetime | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Decisions at or after ``since``, newest first, at most ``limit``."""

        def run(session: Session) -> list[dict[str, Any]]:
            stmt = select(m.Decision).order_by(m.Decision.at.desc(), m.Decision.id.desc()).limit(limit)
            if since is not None:
                stmt = stmt.where(m.Decision.at >= _utc(since))
            return [_row_dict(r, _DECISION_COLUMNS) for r in session.scalars(stmt)]

        return self._call(run)

    def events(self, since: datetime | None = None, limit: int = 50, *, query: str | None = None) -> list[dict[str, Any]]:
        """Events at or after ``since`` (of ``query`` only, when given), newest first, at most ``limit``."""

        def run(session: Session) -> list[dict[str, Any]]:
            stmt = select(m.Event).order_by(m.Event.at.desc(), m.Event.id.desc()).limit(limit)
            if since is not None:
                stmt = stmt.where(m.Event.at >= _utc(since))
            if query is not None:
                stmt = stmt.where(m.Event.query == query)
            return [_row_dict(r, _EVENT_COLUMNS) for r in session.scalars(stmt)]

        return self._call(run)

    def last_decision(self) -> dict[str, Any] | None:
        return self._call(_last_decision)

    def query(self, name: str) -> dict[str, Any] | None:
        """The query's row with its ``plan_nodes`` (ordered by node id), or ``None`` when unknown."""

        def run(session: Session) -> dict[str, Any] | None:
            row = session.get(m.Query, name)
            if row is None:
                return None
            result = _row_dict(row, _QUERY_COLUMNS)
            nodes = session.scalars(select(m.PlanNode).where(m.PlanNode.query == name).order_by(m.PlanNode.node_id))
            result["plan_nodes"] = [_row_dict(n, ("node_id", "op", "inputs", "params")) for n in nodes]
            return result

        return self._call(run)

    def series(self, since: datetime | None = None) -> dict[str, list[dict[str, Any]]]:
        """Time series for plots, oldest first, at or after ``since``.

        ``observations``: per query and interval, ``at``, ``query``, ``state_bytes`` (measured);
        ``estimates``: the settings in force at the rates of the moment (rows outside a decision),
        ``at``, ``query`` (None: the total), ``memory_bytes``, ``cpu``;
        ``decisions``: ``at``, ``id``, ``trigger``, ``feasible``, ``applied``, ``dry_run``,
        ``estimated_memory_bytes``, ``estimated_cpu``, ``bounds`` (as the decision saw them);
        ``migrations``: ``id``, ``query``, ``strategy``, ``state``, ``started_at``, ``finished_at``,
        ``qos`` (the QoS fraction the migration put in force, from its details).
        Times are timezone-aware UTC ``datetime``s.
        """
        cutoff = _utc(since) if since is not None else None

        def after(column: Any) -> Any:
            return column >= cutoff if cutoff is not None else true()

        def run(session: Session) -> dict[str, list[dict[str, Any]]]:
            o, e, d, mg = m.ObservationRow, m.Estimate, m.Decision, m.Migration
            observations = session.execute(
                select(o.at, o.query, o.state_bytes).where(o.query.is_not(None), after(o.at)).order_by(o.at, o.id)
            )
            estimates = session.execute(
                select(e.at, e.query, e.memory_bytes, e.cpu).where(e.decision_id.is_(None), after(e.at)).order_by(e.at, e.id)
            )
            decisions = session.scalars(select(d).where(after(d.at)).order_by(d.at, d.id))
            migrations = session.scalars(select(mg).where(after(mg.started_at)).order_by(mg.started_at, mg.id))
            return {
                "observations": [dict(r._mapping) for r in observations],
                "estimates": [dict(r._mapping) for r in estimates],
                "decisions": [
                    {"at": r.at, "id": r.id, "trigger": r.trigger, "feasible": r.feasible, "applied": r.applied,
                     "dry_run": r.dry_run, "estimated_memory_bytes": r.estimated_memory_bytes,
                     "estimated_cpu": r.estimated_cpu, "bounds": dict((r.inputs or {}).get("bounds") or {})}
                    for r in decisions
                ],
                "migrations": [
                    {"id": r.id, "query": r.query, "strategy": r.strategy, "state": r.state, "started_at": r.started_at,
                     "finished_at": r.finished_at, "qos": ((r.details or {}).get("new") or {}).get("qos")}
                    for r in migrations
                ],
            }

        return self._call(run)

    def calibration_data(self, since: datetime | None = None) -> dict[str, Any]:
        """What ``armd calibrate`` fits, at or after ``since``: every recorded engine batch (``query``,
        ``run_id``, ``batch_id``, ``at``, ``batch_ms``, ``event_max``, ``state_rows``, ``state_bytes``; by run, in
        batch order) and the mean measured d per stream (``stream_d``, model time units)."""
        cutoff = _utc(since) if since is not None else None

        def run(session: Session) -> dict[str, Any]:
            b, o = m.BatchRow, m.ObservationRow
            batches = session.execute(
                select(b.query, b.run_id, b.batch_id, b.at, b.batch_ms, b.event_max, b.state_rows, b.state_bytes)
                .where(b.at >= cutoff if cutoff is not None else true()).order_by(b.run_id, b.batch_id, b.id)
            )
            rates = session.execute(
                select(o.stream, func.avg(o.d)).where(o.stream.is_not(None), o.rows > 0,
                                                      o.at >= cutoff if cutoff is not None else true()).group_by(o.stream)
            )
            return {"batches": [dict(r._mapping) for r in batches],
                    "stream_d": {stream: float(d) for stream, d in rates if d is not None and math.isfinite(d)}}

        return self._call(run)

    def add_herald(self, record: HeraldRecord) -> int:
        """Announce a herald on ``record.stream``; returns its id (the row anyone can read with SQL)."""
        return self._insert(
            m.HeraldRow,
            stream=record.stream, patterns=record.patterns_json(), lifespan_count=record.count,
            lifespan_seconds=record.seconds, starts_at=_utc(record.starts_at), created_at=_utc(record.starts_at),
            source=record.source,
        )

    def heralds(
        self, stream: str | None = None, *, since: int = 0, invalid: Callable[[int, str], None] | None = None
    ) -> list[HeraldRecord]:
        """Heralds in the store (of ``stream`` only, when given; with an id above ``since`` only, so a reader
        polling the table reads only what is new), oldest first.

        A row SQL wrote that is no herald raises ``InvalidHerald`` naming its id, or, when ``invalid`` is
        given, is skipped and handed to it as ``(id, one-line reason)``: one bad row then does not hold back
        the stream's other heralds."""

        def run(session: Session) -> list[Any]:
            stmt = select(m.HeraldRow).where(m.HeraldRow.id > since).order_by(m.HeraldRow.id)
            if stream is not None:
                stmt = stmt.where(m.HeraldRow.stream == stream)
            return [(r.id, r.stream, r.patterns, r.starts_at, r.lifespan_count, r.lifespan_seconds, r.source)
                    for r in session.scalars(stmt)]

        out = []
        for id, name, patterns, starts_at, count, seconds, source in self._call(run):
            try:  # checked outside the call: a row that is no herald is the writer's mistake, not the database's
                out.append(HeraldRecord(name, from_json(patterns), starts_at, count=count, seconds=seconds, source=source, id=id))
            except InvalidHerald as exc:
                if invalid is None:
                    raise InvalidHerald(f"heralds row {id}: {exc}") from None
                invalid(id, f"heralds row {id}: {exc}")
        return out

    def mark_gone_applications(self, timeout_seconds: float, at: datetime) -> list[str]:
        """``control.ports.Applications``: see ``applications.mark_gone``."""
        from armd.adapters.store import applications  # it imports this module

        return applications.mark_gone(self, timeout_seconds, at)

    # -------------------------------------------------------------- helpers

    def transact(self, fn: Callable[[Session], T]) -> T:
        """Run ``fn(session)`` in one transaction with this store's timeouts and error kinds (for modules of tables
        that keep their own queries, e.g. ``applications.py``)."""
        return self._call(fn)

    def _insert(self, model: Any, **values: Any) -> int:
        """Insert one row of ``model``; returns its id."""

        def run(session: Session) -> int:
            return int(session.execute(insert(model).values(**values).returning(model.id)).scalar_one())

        return self._call(run)

    def __repr__(self) -> str:
        return f"SqlStore({self.url_redacted!r})"


_ACTUAL_COLUMNS = tuple(cast(c, Text).label(c.name) if c.name in ("settings", "join_order") else c
                        for c in m.ActualStateRow.__table__.columns)
"""``actual_states`` columns, the JSON ones as their text."""
SETTINGS_CACHE = 100_000
"""Distinct settings texts kept parsed (a thousand queries with a few versions each); beyond, parsed afresh."""
_DECISION_COLUMNS = tuple(m.Decision.__table__.columns.keys())
_EVENT_COLUMNS = tuple(m.Event.__table__.columns.keys())
_MIGRATION_COLUMNS = tuple(m.Migration.__table__.columns.keys())
_QUERY_COLUMNS = tuple(m.Query.__table__.columns.keys())


def _last_decision(session: Session) -> dict[str, Any] | None:
    row = session.scalars(select(m.Decision).order_by(m.Decision.at.desc(), m.Decision.id.desc()).limit(1)).first()
    return _row_dict(row, _DECISION_COLUMNS) if row is not None else None


ObservationValues = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]
"""An observation as rows of ``observations``, rows of ``batches`` and updates of ``streams`` (``observation_values``)."""


def observation_values(observation: Observation) -> ObservationValues:
    """The rows ``record_observation`` writes (built before the transaction: a naive time is refused at once)."""
    at = _utc(observation.at)
    rows: list[dict[str, Any]] = [
        {
            "at": at, "stream": s.stream, "query": None, "rows": s.rows, "interval_seconds": s.interval_seconds,
            "rate_per_second": s.rate_per_second, "d": s.d, "l": s.l, "g": s.g,
            "state_rows": None, "state_bytes": None, "selectivities": None, "pair_selectivities": None,
            "measured_inputs": None, "event_end": s.event_end and _utc(s.event_end),
        }
        for s in observation.streams
    ]
    rows += [
        {
            "at": at, "stream": None, "query": q.query, "rows": None, "interval_seconds": None,
            "rate_per_second": None, "d": None, "l": None, "g": None,
            "state_rows": q.state_rows, "state_bytes": q.state_bytes, "selectivities": _json_value(q.selectivities),
            "pair_selectivities": _json_value(dict(q.pair_selectivities)) if q.pair_selectivities else None,
            "measured_inputs": _measured_inputs(q), "event_end": None,
        }
        for q in observation.queries
    ]
    batches = [
        {
            "query": b.query, "run_id": b.run_id, "plan_version": b.plan_version, "batch_id": b.batch_id,
            "at": _utc(b.at), "input_rows": b.input_rows, "batch_ms": b.batch_ms,
            "event_min": b.event_min and _utc(b.event_min), "event_max": b.event_max and _utc(b.event_max),
            "watermark": b.watermark and _utc(b.watermark), "state_rows": b.state_rows, "state_bytes": b.state_bytes,
            "rows_dropped_by_watermark": b.rows_dropped_by_watermark, "durations_ms": _json_value(dict(b.durations_ms)),
            "operators": _json_value([dict(op) for op in b.operators]),
        }
        for b in observation.batches
    ]
    streams = [{"stream_name": s.stream, "last_d": s.d, "last_rate_per_second": s.rate_per_second, "updated_at": at}
               for s in observation.streams]
    return rows, batches, streams


_STREAM_SEEN = update(m.Stream.__table__).where(m.Stream.__table__.c.name == bindparam("stream_name"))
"""Sets the columns each parameter set names (``last_d``, ``last_rate_per_second``, ``updated_at``)."""


def write_observation(session: Session, values: ObservationValues) -> None:
    """Write ``observation_values`` in the caller's transaction: one statement per table (Core, not ORM objects —
    a thousand agent queries write ~2000 rows a second)."""
    rows, batches, streams = values
    if rows:
        session.execute(insert(m.ObservationRow.__table__), rows)
    if batches:
        session.execute(insert(m.BatchRow.__table__), batches)
    if streams:  # the configured streams' last measurement; an agent's streams have no row here and change nothing
        session.execute(_STREAM_SEEN, streams)


def _upsert(session: Session, model: Any, values: Sequence[dict[str, Any]]) -> None:
    """Insert or replace rows of a table keyed by ``query`` (the same on SQLite and PostgreSQL): one statement for all
    rows (``INSERT … ON CONFLICT (query) DO UPDATE``), not a read per row, since the daemon writes a thousand at once."""
    if not values:
        return
    table = model.__table__
    dialect = session.connection().dialect.name
    upsert = (pg_insert if dialect == "postgresql" else sqlite_insert)(table)
    last = {value["query"]: value for value in values}  # a query given twice: the later row wins, as row by row
    by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for value in last.values():  # one statement per set of columns given (columns left out keep their values)
        by_columns.setdefault(tuple(sorted(value)), []).append(value)
    for columns, rows in by_columns.items():
        statement = upsert.on_conflict_do_update(index_elements=[table.c.query],
                                                 set_={c: upsert.excluded[c] for c in columns if c != "query"})
        session.execute(statement, rows)


def _settings(doc: Mapping[str, Any]) -> QuerySettings:
    return QuerySettings(
        fw=float(doc["fw"]),
        fg=float(doc["fg"]),
        windows={str(k): float(v) for k, v in doc.get("windows", {}).items()},
        granularity=float(doc["granularity"]) if doc.get("granularity") is not None else None,
        qos=float(doc["qos"]),
        drop_rate=float(doc.get("drop_rate", 0.0)),  # absent in rows written before load shedding
    )


def _sqlite_pragmas(call_timeout_seconds: float) -> Callable[[Any, Any], None]:
    """WAL (readers never wait for the writer), foreign keys, and a busy timeout of one call's bound."""
    busy_ms = max(1, int(call_timeout_seconds * 1000))

    def pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    return pragmas


def _postgres_bounds(call_timeout_seconds: float, query: Mapping[str, Any]) -> dict[str, Any]:
    """libpq settings that bound every call: connecting, each statement, each lock wait, a peer that went silent.

    Values the URL sets itself (``?connect_timeout=…``, ``?options=…``) are kept.
    """
    ms = max(1, int(call_timeout_seconds * 1000))
    bounds: dict[str, Any] = {
        "connect_timeout": max(2, math.ceil(call_timeout_seconds)),  # libpq's minimum is 2 s
        "options": f"-c statement_timeout={ms} -c lock_timeout={ms}",
        "keepalives": 1,
        "keepalives_idle": max(1, int(call_timeout_seconds)),
        "keepalives_interval": 1,
        "keepalives_count": 3,
        "tcp_user_timeout": ms,
    }
    return {key: value for key, value in bounds.items() if key not in query}
