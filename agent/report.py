"""What an application tells the store about itself: its registration, its queries' specs, its progress each round.

Why a module of its own: this is the agent's half of the store contract
(docs/agent.md, "The store is the contract"), and it needs no Spark: the
``Agent`` calls it with what Spark reported, and ``bench/fleet.py``'s
simulated applications call the very same code with generated progress, so
the daemon is measured on what real agents write.

A round with progress writes it with ``last_seen_at`` in one transaction.
A round without touches ``last_seen_at`` only every ``IDLE_TOUCH_SECONDS``
(5 s): that UPDATE, a transaction of its own, was most of what an idle
round cost, and the daemon marks an application gone only after
``[store] application_timeout_seconds`` of silence (60 s by default: twelve
touches in one timeout). A daemon configured with a timeout under about
three touches (15 s) risks marking an idle, living application gone.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any, Mapping

from armd.adapters.store import applications as apps
from armd.adapters.store.sql import SqlStore
from armd.control.ports import Observation, QuerySettings

from .settings import Range

IDLE_TOUCH_SECONDS = 5.0
"""Without progress, ``last_seen_at`` is touched at most this often (module docstring)."""


def query_spec(plan: Any, mode: str, windows: Mapping[str, Range], slides: Mapping[str, Range], settings: QuerySettings,
               time_unit_seconds: float) -> dict[str, Any]:
    """The ``queries.spec`` of one agent query: its plan (``agent.plan.PlanInfo``), the ranges allowed, the start settings."""
    return {"plan": plan.document, "plan_source": plan.source, "nodes": dict(plan.nodes), "mode": mode,
            "windows": {n: r.as_json() for n, r in windows.items()},
            "slides": {n: r.as_json() for n, r in slides.items()},
            "initial": settings.as_json(), "time_unit_seconds": time_unit_seconds}


class Reporter:
    """One application's writes: ``register`` at start, ``add_query`` per query, ``report`` every round."""

    def __init__(self, store: SqlStore, app: str, mode: str) -> None:
        self.store, self.app, self.mode = store, app, mode
        self._touched: datetime | None = None
        """When ``last_seen_at`` was last written (``None``: not yet, or a write may have failed)."""

    def register(self, at: datetime, host: str | None = None, pid: int | None = None) -> None:
        self._touched = None
        apps.register_application(self.store, self.app, host or socket.gethostname(), os.getpid() if pid is None else pid,
                                  self.mode, at)

    def add_query(self, name: str, spec: Mapping[str, Any], weight: float, qos: Mapping[str, Any], at: datetime) -> None:
        apps.register_queries(self.store, self.app, [apps.AgentQueryRow(name, dict(spec), weight, dict(qos))], at)

    def report(self, at: datetime, observation: Observation) -> None:
        """The application is alive; the progress of the round (if any) goes to ``observations`` and ``batches``.
        Without progress, only every ``IDLE_TOUCH_SECONDS``."""
        progress = observation.batches or observation.queries or observation.streams
        if not progress and self._touched is not None and 0 <= (at - self._touched).total_seconds() < IDLE_TOUCH_SECONDS:
            return
        self._touched = None
        apps.seen(self.store, self.app, at, observation if progress else None)
        self._touched = at

    def stopped(self, at: datetime) -> None:
        apps.stopped(self.store, self.app, at)
