"""What the read commands (``status``, ``explain``, ``history``, the live view) add to the store's own rows.

The store answers in its own terms — model time units, node ids, the tables
one by one. People need a dry run's recommendations next to the settings in
force, the CPU Spark measured next to the model's, and one timeline; this
module gathers those so each command stays a few lines of wiring.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from armd.adapters.store import SqlStore

from .config import Config
from .cpu import RECENT_SECONDS, busy_fractions
from .history import in_seconds, timeline
from .names import node_labels
from .render import Words


def words(config: Config) -> Words:
    return Words(config.model.time_unit_seconds, node_labels(config.plan))


def recommended(store: SqlStore) -> dict[str, dict[str, Any]]:
    """A dry run's desired settings per query (what armd would apply), as JSON."""
    return {q: d.settings.as_json() for q, d in store.desired_settings().items() if d.recommend_only}


def busy(store: SqlStore) -> dict[str, float]:
    """Each query's measured share of wall time in Spark micro-batches over the last ``RECENT_SECONDS``."""
    since = datetime.now(timezone.utc) - timedelta(seconds=RECENT_SECONDS)
    return busy_fractions(store.calibration_data(since)["batches"])


def managed_status(store: SqlStore) -> dict[str, Any]:
    """``store.status()`` without the queries removed from the configuration, with recommendations and measured CPU."""
    data = store.status()
    data["queries"] = [q for q in data["queries"] if q["status"] != "removed"]
    advice, measured = recommended(store), busy(store)
    for query in data["queries"]:
        query["recommended"] = advice.get(query["name"])
        query["measured_busy_fraction"] = measured.get(query["name"])
    return data


def history(store: SqlStore, config: Config, since: datetime | None, limit: int, query: str | None) -> dict[str, Any]:
    """The ``history --json`` document: the merged ``timeline`` and the store's ``decisions`` and ``events``."""
    # One decision more than shown: the settings before the oldest one shown.
    decisions = [in_seconds(d, config.model.time_unit_seconds) for d in store.decisions(since, limit + 1)]
    events = store.events(since, limit, query=query)
    return {"timeline": timeline(decisions, events, query=query, limit=limit), "decisions": decisions[:limit],
            "events": events}
