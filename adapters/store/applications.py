"""The applications table and agent-registered queries: what ``armd.agent`` writes, what the daemon reads.

Why a module of its own: an ``armd.agent`` application and the daemon share
nothing but the store, and this is that part of the contract (revision
0008). The agent registers its application (host, pid, mode) and each query
it governs (the cost-model plan and the ranges the user allowed, in the
query's ``spec``; ``queries.app`` names the application), and touches
``last_seen_at`` each time it reports. The daemon reads the applications and
marks those silent for longer than a timeout ``gone`` (their queries
``removed``, so they leave the budget).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from armd.control.ports import Observation

from . import models as m
from .sql import SqlStore, _json_value, observation_values, write_observation

MODES = ("apply", "recommend")


@dataclass(frozen=True)
class ApplicationRow:
    app: str
    host: str
    pid: int
    started_at: datetime
    last_seen_at: datetime
    mode: str
    status: str


@dataclass(frozen=True)
class AgentQueryRow:
    """One query an application governs: its name, weight, QoS and ``spec`` (plan, ranges, initial settings)."""

    name: str
    spec: Mapping[str, Any]
    weight: float = 1.0
    qos: Mapping[str, Any] | None = None


def _utc(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise ValueError(f"naive datetime {at.isoformat()}: pass a timezone-aware UTC datetime")
    return at.astimezone(timezone.utc)


def register_application(store: SqlStore, app: str, host: str, pid: int, mode: str, at: datetime) -> None:
    """Insert or take over the application's row (a restarted application keeps its name): status ``running``."""
    if mode not in MODES:
        raise ValueError(f"application mode must be one of {', '.join(MODES)}, got {mode!r}")
    at = _utc(at)

    def run(session: Session) -> None:
        row = session.get(m.Application, app)
        if row is None:
            session.add(m.Application(app=app, host=host, pid=int(pid), started_at=at, last_seen_at=at, mode=mode,
                                      status="running"))
        else:
            row.host, row.pid, row.started_at, row.last_seen_at, row.mode, row.status = host, int(pid), at, at, mode, "running"

    store.transact(run)


def register_queries(store: SqlStore, app: str, rows: list[AgentQueryRow], at: datetime) -> None:
    """Upsert the application's queries, ``pending`` until the daemon's admission control writes its verdict
    (``active`` or ``rejected``); a query name another application or the configuration owns is refused."""
    at = _utc(at)

    def run(session: Session) -> None:
        for row in rows:
            query = session.get(m.Query, row.name)
            spec, qos = _json_value(dict(row.spec)), _json_value(dict(row.qos or {}))
            if query is None:
                session.add(m.Query(name=row.name, spec=spec, qos=qos, weight=float(row.weight), status="pending",
                                    created_at=at, updated_at=at, app=app))
                continue
            if query.app != app and query.status != "removed":
                owner = f"application {query.app!r}" if query.app else "the daemon's configuration"
                raise ValueError(f"query {row.name!r} is already registered by {owner}; query names are unique in the store")
            query.spec, query.qos, query.weight, query.app = spec, qos, float(row.weight), app
            query.status, query.status_reason, query.updated_at = "pending", None, at

    store.transact(run)


def seen(store: SqlStore, app: str, at: datetime, observation: Observation | None = None) -> None:
    """The application is alive (each report); with the round's ``observation`` written in the same transaction (one
    commit per application and round: a thousand queries report every second)."""
    at = _utc(at)
    values = observation_values(observation) if observation is not None else None

    def run(session: Session) -> None:
        session.execute(update(m.Application).where(m.Application.app == app).values(last_seen_at=at, status="running"))
        if values is not None:
            write_observation(session, values)

    store.transact(run)


def stopped(store: SqlStore, app: str, at: datetime) -> None:
    """The application stopped on purpose: its queries leave the budget at once."""
    _leave(store, app, "stopped", "the application stopped", _utc(at))


def mark_gone(store: SqlStore, timeout_seconds: float, at: datetime) -> list[str]:
    """Applications silent for more than ``timeout_seconds`` become ``gone`` and their queries ``removed``; returns them."""
    at = _utc(at)
    limit = at - timedelta(seconds=float(timeout_seconds))
    silent = store.transact(lambda s: [a for a, last in s.execute(
        select(m.Application.app, m.Application.last_seen_at).where(m.Application.status == "running"))
        if _utc(last) < limit])
    for app in silent:
        _leave(store, app, "gone", f"application stopped reporting for more than {timeout_seconds:g} s", at)
    return silent


def _leave(store: SqlStore, app: str, status: str, reason: str, at: datetime) -> None:
    def run(session: Session) -> None:
        session.execute(update(m.Application).where(m.Application.app == app).values(status=status, last_seen_at=at)
                        if status == "stopped" else update(m.Application).where(m.Application.app == app).values(status=status))
        session.execute(update(m.Query).where(m.Query.app == app, m.Query.status != "removed")
                        .values(status="removed", status_reason=reason, updated_at=at))

    store.transact(run)


def applications(store: SqlStore) -> list[ApplicationRow]:
    return store.transact(lambda s: [ApplicationRow(r.app, r.host, r.pid, r.started_at, r.last_seen_at, r.mode, r.status)
                                     for r in s.scalars(select(m.Application).order_by(m.Application.app))])


def queries_of(store: SqlStore, app: str) -> dict[str, dict[str, Any]]:
    """The application's queries: name → spec, with ``status`` and ``status_reason`` (the admission verdict's)."""
    return store.transact(lambda s: {q.name: {**(q.spec or {}), "status": q.status, "status_reason": q.status_reason}
                                     for q in s.scalars(select(m.Query).where(m.Query.app == app))})


@dataclass(frozen=True)
class GovernedQuery:
    """An agent query the daemon decides for: registered by an application that is still there, not removed."""

    name: str
    app: str
    spec: Mapping[str, Any]
    weight: float
    qos: Mapping[str, Any]
    mode: str
    """The application's mode, or the query's own (``spec["mode"]``) when it says ``recommend``."""
    status: str = "pending"


def fleet_key(store: SqlStore) -> Any:
    """What identifies the governed set cheaply — each query of a running application (with whether it waits for
    admission) and each running application's start — read every observation; the specs only when it changes
    (``governed``). On PostgreSQL the server folds the set into two digests (a thousand rows a second less for the
    daemon's Python); elsewhere it is the set itself."""
    def run(session: Session) -> Any:
        running = (m.Application.status == "running")
        if session.connection().dialect.name == "postgresql":
            return tuple(session.execute(text(PG_FLEET_KEY)).one())
        queries = session.execute(select(m.Query.name, m.Query.app, m.Query.status == "pending")
                                  .join(m.Application, m.Application.app == m.Query.app)
                                  .where(m.Query.status != "removed", running))
        starts = session.execute(select(m.Application.app, m.Application.started_at).where(running))
        return frozenset(tuple(r) for r in queries) | frozenset(("app", a, str(t)) for a, t in starts)

    return store.transact(run)


PG_FLEET_KEY = """
SELECT (SELECT count(*) || ':' || coalesce(md5(string_agg(q.name || chr(31) || q.app || chr(31) || (q.status = 'pending')::text,
                                                     chr(30) ORDER BY q.name)), '')
          FROM queries q JOIN applications a ON a.app = q.app WHERE q.status <> 'removed' AND a.status = 'running'),
       (SELECT count(*) || ':' || coalesce(md5(string_agg(a.app || chr(31) || a.started_at::text, chr(30) ORDER BY a.app)), '')
          FROM applications a WHERE a.status = 'running')
"""


def governed(store: SqlStore) -> list[GovernedQuery]:
    """Every query of a running application that is not removed, with its spec (plan, ranges) and mode."""
    def run(session: Session) -> list[GovernedQuery]:
        rows = session.execute(select(m.Query, m.Application.mode).join(m.Application, m.Application.app == m.Query.app)
                               .where(m.Query.status != "removed", m.Application.status == "running").order_by(m.Query.name))
        out = []
        for query, mode in rows:
            spec = dict(query.spec or {})
            out.append(GovernedQuery(query.name, str(query.app), spec, float(query.weight), dict(query.qos or {}),
                                     "recommend" if "recommend" in (mode, spec.get("mode")) else "apply", query.status))
        return out

    return store.transact(run)
