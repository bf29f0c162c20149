"""What an application tells the store about itself: its registration, its queries' specs, its progress each round.

Why a module of its own: this is the agent's half of the store contract
(docs/agent.md, "The store is the contract"), and it needs no Spark: the
``Agent`` calls it with what Spark reported, and ``bench/fleet.py``'s
simulated applications call the very same code with generated progress, so
the daemon is measured on what real agents write.
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

    def register(self, at: datetime, host: str | None = None, pid: int | None = None) -> None:
        apps.register_application(self.store, self.app, host or socket.gethostname(), os.getpid() if pid is None else pid,
                                  self.mode, at)

    def add_query(self, name: str, spec: Mapping[str, Any], weight: float, qos: Mapping[str, Any], at: datetime) -> None:
        apps.register_queries(self.store, self.app, [apps.AgentQueryRow(name, dict(spec), weight, dict(qos))], at)

    def report(self, at: datetime, observation: Observation) -> None:
        """The application is alive; the progress of the round (if any) goes to ``observations`` and ``batches``."""
        progress = observation.batches or observation.queries or observation.streams
        apps.seen(self.store, self.app, at, observation if progress else None)

    def stopped(self, at: datetime) -> None:
        apps.stopped(self.store, self.app, at)
