"""The daemon's side of the store's lease: take it at the start (or stand by for it), renew it, give it up at the stop.

Why a module of its own: one store, one active daemon is a rule with its own
timing (renew ``LEASE_RENEWALS`` times per ``store.lease_seconds``, poll as
often in standby; a lease whose holder was killed on this host is taken at
once) and its own messages, kept apart from the wiring in
``service.py``. The atomic take and renew are the store's
(``adapters/store/lease.py``).
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import datetime, timezone
from typing import Any

from armd.adapters.store import SqlStore, StoreError
from armd.adapters.store.lease import Holding, holder_id

LEASE_RENEWALS = 3
"""The lease is renewed this many times per ``store.lease_seconds``, so two missed renewals still keep it."""


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class LeaseHeld(Exception):
    """Another daemon holds the store's lease; the message names it."""


class Lease:
    def __init__(self, store: SqlStore, seconds: float, log: Any) -> None:
        self.store, self.seconds, self.log = store, seconds, log
        self.holder = holder_id()
        self.expires: datetime | None = None

    @property
    def renew_every(self) -> float:
        return self.seconds / LEASE_RENEWALS

    def take(self, standby: bool, stop: threading.Event) -> bool:
        """Take the lease, or raise ``LeaseHeld``; with ``standby`` wait for it (False: ``stop`` was set first)."""
        waiting_for: Holding | None = None
        while True:
            try:
                held: Holding | None = self.store.acquire_lease(self.holder, utcnow(), self.seconds)
            except StoreError as exc:
                if not standby:
                    raise
                self.log.warning("store_unavailable", step="lease", error=str(exc))
                held = None
            if held is not None and not held.ours and _dead_here(held):
                # Its holder was killed (kill -9, a crash) on this very host: waiting out the lease would only delay the
                # restart that a supervisor or a person just asked for.
                self.store.release_lease(held.holder)
                self.log.warning("lease_taken_over", holder=self.holder, previous=held.holder,
                                 message=f"the store's lease was held by armd on this host (pid {held.pid}), which is gone; taken over")
                continue
            if held is not None and held.ours:
                self.expires = held.expires_at
                if waiting_for is not None:  # a plain start says whose lease it is in ``daemon_started``
                    self.log.warning("lease_taken_over", holder=self.holder, previous=waiting_for.holder,
                                     message=f"took over the store's lease from {waiting_for.describe()}")
                return True
            if held is not None and not standby:
                raise LeaseHeld(f"the store is held by {held.describe()}; stop it, or start this one with --standby")
            if held is not None and (waiting_for is None or waiting_for.holder != held.holder):
                self.log.info("standby_waiting", holder=held.holder, message=f"standing by: the store is held by {held.describe()}")
                waiting_for = held
            if stop.wait(self.renew_every):
                return False

    def renew(self) -> Holding | None:
        """Extend the lease; returns who holds it instead when it is not ours any more (None: still ours, or unknown)."""
        now = utcnow()
        try:
            held = self.store.renew_lease(self.holder, now, self.seconds)
        except StoreError as exc:
            if self.expires is not None and now > self.expires:
                self.log.warning("lease_expired", error=str(exc), message="the store's lease lapsed while the store was "
                                 "unavailable; another daemon may take over, and this one stops when it sees that")
                self.expires = None
            return None
        if held.ours:
            self.expires = held.expires_at
            return None
        return held

    def release(self) -> None:
        """Give the lease up at a clean stop, so a standby takes over at once."""
        self.store.release_lease(self.holder)


def _dead_here(held: Holding) -> bool:
    """Whether ``held``'s holder ran on this host and its process is gone."""
    if held.host != socket.gethostname() or not held.pid.isdigit() or int(held.pid) == os.getpid():
        return False
    try:
        os.kill(int(held.pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False
