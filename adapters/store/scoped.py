"""The store as one applying side sees it: desired and actual rows of its own queries only.

Why: several applying sides share one store — the daemon's reconciler for
the queries of its configuration, and each ``armd.agent`` application's for
the queries it registered. Each must put into force (and restore, and
advance migrations of) only its own queries; every other call passes
through to the store unchanged. A store that can (``reads_by_query``)
is asked for the own rows only, so a thousand applications do not each
read every query's row every round.
"""

from __future__ import annotations

from typing import Any, Callable

from armd.control.ports import ActualState, DesiredSettings, QuerySettings


class ScopedStore:
    def __init__(self, store: Any, queries: Callable[[], set[str] | frozenset[str]]) -> None:
        self.store, self._queries = store, queries

    def desired_settings(self) -> dict[str, DesiredSettings]:
        mine = self._queries()
        rows = self.store.desired_settings(queries=mine) if getattr(self.store, "reads_by_query", False) else self.store.desired_settings()
        return {q: d for q, d in rows.items() if q in mine}

    def actual_states(self) -> dict[str, ActualState]:
        mine = self._queries()
        rows = self.store.actual_states(queries=mine) if getattr(self.store, "reads_by_query", False) else self.store.actual_states()
        return {q: a for q, a in rows.items() if q in mine}

    def open_migrations(self) -> list[dict[str, Any]]:
        mine = self._queries()
        return [m for m in self.store.open_migrations() if m.get("query") in mine]

    def current_settings(self) -> dict[str, QuerySettings]:
        mine = self._queries()
        return {q: s for q, s in self.store.current_settings().items() if q in mine}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)
