"""Which estimates of the settings in force are worth a row: a change, or a row grown old.

Why: the cycle estimates every admitted query at every observation. With a
thousand agent queries observed each second that is a thousand rows a
second, nearly all repeating the row before (the rates hardly move), and
the store's largest cost. A query's row is written when its estimate moves
by more than ``relative`` from the last row written for it, and at least
every ``every_seconds`` (so ``status``, SQL and plots never show an
estimate older than that); the total is one more row like a query's.
Decisions record their own estimates in full, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from .ports import EstimateRow

RELATIVE = 0.01
EVERY_SECONDS = 10.0


@dataclass
class EstimateLog:
    relative: float = RELATIVE
    every_seconds: float = EVERY_SECONDS
    last: dict[str | None, tuple[float, EstimateRow]] = field(default_factory=dict)
    """Per query (None: the total), when its last row was written (seconds) and the row."""

    def due(self, rows: Sequence[EstimateRow], at_seconds: float) -> list[EstimateRow]:
        """The rows to write now, of ``rows`` estimated at ``at_seconds``; they count as written."""
        out = []
        for row in rows:
            written = self.last.get(row.query)
            if written is None or at_seconds - written[0] >= self.every_seconds or self._moved(written[1], row):
                self.last[row.query] = (at_seconds, row)
                out.append(row)
        return out

    def _moved(self, old: EstimateRow, new: EstimateRow) -> bool:
        return any(abs(b - a) > self.relative * abs(a) for a, b in ((old.memory_bytes, new.memory_bytes), (old.cpu, new.cpu)))
