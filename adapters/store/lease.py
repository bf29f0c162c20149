"""The lease on the store: one store, one active daemon.

Why: two daemons on one store both observed, decided and applied, doubling
observations and interleaving decisions. The active daemon holds a row of
the ``leases`` table and renews it several times per ``lease_seconds``;
another daemon takes the row only once it has expired (its holder stopped,
crashed, or lost the store for longer than the lease), or after the holder
released it at a clean stop.

Taking and renewing are single statements whose row count says who won, so
they are atomic on SQLite (one writer at a time) and PostgreSQL (the
``UPDATE … WHERE expires_at < now`` re-checks its condition on the row it
waited for): an update of the row when it is ours or expired, else an insert
that does nothing when a row exists. Times are the daemons' clocks (UTC);
hosts sharing a store must agree on the time to well within the lease.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from armd.adapters.store import models as m

CONTROL_LOOP = "control-loop"
"""The lease every daemon needs before it observes, decides or applies anything."""


def holder_id() -> str:
    """``host:pid:uuid``: names this process to an operator, and differs across restarts of one pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Holding:
    """Who holds a lease and until when; ``ours`` when it is the caller."""

    holder: str
    acquired_at: datetime
    expires_at: datetime
    ours: bool

    @property
    def host(self) -> str:
        return self.holder.split(":")[0]

    @property
    def pid(self) -> str:
        parts = self.holder.split(":")
        return parts[1] if len(parts) > 1 else "?"

    def describe(self) -> str:
        """``armd on HOST (pid N) until TIME``."""
        return f"armd on {self.host} (pid {self.pid}) until {self.expires_at.isoformat(timespec='seconds')}"


def acquire(session: Session, name: str, holder: str, at: datetime, seconds: float, *, take_expired: bool = True) -> Holding:
    """Take or renew lease ``name`` for ``holder`` until ``at + seconds``; the holding afterwards says whether it is ours.

    With ``take_expired`` false only a renewal happens (the row must still be ours, expired or not).
    """
    expires = at + timedelta(seconds=seconds)
    lease = m.Lease.__table__
    mine = lease.c.holder == holder
    condition = (mine | (lease.c.expires_at < at)) if take_expired else mine
    updated = session.execute(
        update(lease).where(lease.c.name == name, condition)
        .values(holder=holder, acquired_at=case((mine, lease.c.acquired_at), else_=at), renewed_at=at, expires_at=expires)
    ).rowcount
    if updated == 0 and take_expired:
        dialect = session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        inserted = session.execute(  # RETURNING, not rowcount: psycopg reports -1 for an INSERT … ON CONFLICT
            insert(lease).values(name=name, holder=holder, acquired_at=at, renewed_at=at, expires_at=expires)
            .on_conflict_do_nothing(index_elements=["name"]).returning(lease.c.name)
        ).first()
        updated = 1 if inserted is not None else 0
    row = session.execute(select(m.Lease).where(m.Lease.name == name)).scalar_one_or_none()
    if row is None:  # a renewal of a lease someone released or deleted
        return Holding("", at, at, False)
    return Holding(row.holder, row.acquired_at, row.expires_at, updated == 1 and row.holder == holder)


def release(session: Session, name: str, holder: str) -> bool:
    """Give lease ``name`` up at a clean stop, so a standby takes over at once; False when it was not ours any more."""
    return bool(session.execute(delete(m.Lease).where(m.Lease.name == name, m.Lease.holder == holder)).rowcount)
