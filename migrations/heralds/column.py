"""Heralds carried in a column of the stream's own rows (paper 002 §II, issue 19 item 2).

A source that cannot interleave punctuation objects with its tuples (a file,
a Kafka topic, a Spark DataFrame: every row has the same columns) can still
carry heralds in-stream: one column of its rows holds a herald on the row
where it starts and nothing (None) on every other row. The configuration
names that column per stream (``[managed.NAME] heralds``). A herald in a cell
applies from its own row on: ``{"a": [0, 99], "count": 50}`` covers that row
and the 49 after it, ``{"a": [0, 99], "seconds": 30}`` the rows whose event
time lies in ``[its row's time, + 30)``. Ranges are closed, ``null`` for an
unbounded end, exactly as the store's ``heralds`` rows and ``armd herald
add`` give them (``record.check_range``). A cell may be a mapping or its
JSON text.

``HeraldColumn.split`` turns a batch into the "beside the batch" form that
``Partitioner.feed(rows, heralds)`` takes (a count of ``None`` first: most
batches carry no herald). A cell that is no herald is not applied (a
missed herald costs only time, a wrong one breaks results): it is kept in
``refused`` with its one-line reason and the stream goes on.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

from .herald import Herald
from .patterns import Range
from .record import InvalidHerald, check_range

LIFESPANS = ("count", "seconds")


def parse_cell(cell: Any, ts: float | None) -> Herald:
    """One non-empty herald cell as a core ``Herald``; ``ts`` is its row's event time (for ``seconds``).

    Raises ``InvalidHerald`` with one line naming what is wrong and what is allowed."""
    if isinstance(cell, (str, bytes)):
        try:
            cell = json.loads(cell)
        except ValueError:
            raise InvalidHerald(f"a herald cell is a JSON object, got {cell[:60]!r}") from None
    if not isinstance(cell, Mapping):
        raise InvalidHerald(f'a herald cell is an object of attribute ranges and one lifespan, e.g. {{"a": [0, 99], "count": 50}}, got {cell!r}')
    lives = [k for k in LIFESPANS if cell.get(k) is not None]
    if len(lives) != 1:
        raise InvalidHerald(f"a herald cell has exactly one lifespan, count or seconds, got {sorted(lives) or 'none'}")
    life = cell[lives[0]]
    patterns = {}
    for name, bounds in cell.items():
        if name in LIFESPANS:
            continue
        check_range(name, bounds)
        low, high = bounds
        patterns[name] = Range(-math.inf if low is None else low, math.inf if high is None else high)
    if not patterns:
        raise InvalidHerald("a herald cell needs at least one attribute range, e.g. \"a\": [0, 99]")
    if lives[0] == "count":
        if isinstance(life, bool) or not isinstance(life, int) or life < 1:
            raise InvalidHerald(f"a herald cell's count is a whole number of rows >= 1, got {life!r}")
        return Herald.of(patterns, count=life)
    if isinstance(life, bool) or not isinstance(life, (int, float)) or not 0 < life < math.inf:
        raise InvalidHerald(f"a herald cell's seconds are a positive finite number, got {life!r}")
    if ts is None:
        raise InvalidHerald("a herald cell with seconds needs the stream's event time column")
    return Herald.of(patterns, time=life, ts=ts)


class HeraldColumn:
    """Reads the heralds of one stream's herald column; ``index`` and ``ts_index`` are row positions."""

    def __init__(self, index: int, *, ts_index: int | None = None) -> None:
        self.index = index
        self.ts_index = ts_index
        self.read = 0
        """Heralds found in the column."""
        self.refused: list[str] = []
        """One line per cell that was no herald (not applied)."""

    def split(self, rows: Sequence[Sequence[Any]]) -> list[tuple[int, Herald]]:
        """The heralds in this batch's column, as ``(position, herald)`` in row order: ``feed(rows, marks)``."""
        i = self.index
        cells = [row[i] for row in rows]
        if cells.count(None) == len(cells):  # most batches carry none
            return []
        marks: list[tuple[int, Herald]] = []
        for at in [j for j, cell in enumerate(cells) if cell is not None]:
            ts = rows[at][self.ts_index] if self.ts_index is not None else None
            try:
                marks.append((at, parse_cell(cells[at], ts)))
                self.read += 1
            except InvalidHerald as exc:
                self.refused.append(f"row {at} of the batch: {exc}")
        return marks
