"""CPU as Spark measured it, to show beside the cost model's estimate.

The cost model estimates CPU in cost units per model time unit, which mean
seconds only after ``armd calibrate``. What Spark measures is plainer: how
long each micro-batch took (``batches.batch_ms``). The share of wall time a
query spent in its micro-batches — its busy fraction — is what an operator
compares with the cores they gave Spark: 0.5 is half of one task slot kept
busy, above 1 several in parallel.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Mapping, Sequence

RECENT_SECONDS = 300.0
"""``status`` and ``explain`` measure over the last five minutes of batches."""


def busy_fractions(batches: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per query: seconds in micro-batches / wall seconds from the start of its first batch to its last one's end.

    A query needs two batches or more (one batch has no span to divide by).
    """
    result = {}
    for query, rows in batch_seconds(batches).items():
        if len(rows) < 2:
            continue
        span = (rows[-1][0] - rows[0][0]).total_seconds() + rows[0][1]
        if span > 0:
            result[query] = sum(seconds for _, seconds in rows) / span
    return result


def batch_seconds(batches: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[datetime, float]]]:
    """Per query, (when, seconds) of each micro-batch that has both, in time order."""
    by_query: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for b in batches:
        if b.get("at") is not None and b.get("batch_ms") is not None:
            by_query[b["query"]].append((b["at"], float(b["batch_ms"]) / 1000.0))
    return {query: sorted(rows) for query, rows in by_query.items()}
