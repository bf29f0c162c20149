"""Heralds on a side stream: a directory of JSON-lines files declared in the configuration (issue 19, item 2).

A program that knows what its data will look like (a loader that sorts by
region, a sensor gateway that knows its groups) may not be able to put
heralds into the data stream itself, nor write to armd's store. It can
append them to files instead: ``[managed.NAME] herald_sources = { clicks =
"/var/lib/feed/clicks-heralds" }`` names a directory whose files carry the
heralds of stream ``clicks``, one JSON object a line::

    {"region": [25, 32], "temp": [null, 100], "count": 5000, "starts_at": "2026-11-24T09:00:00Z"}
    {"price": [9.5, 12], "seconds": 30, "starts_at": 1795510800}

Ranges are closed, ``null`` an unbounded end; exactly one lifespan,
``count`` or ``seconds``, as in the store and the herald column
(``migrations.heralds.record``). ``starts_at`` is an ISO 8601 time with a
zone or epoch seconds; without it, a herald starts when its file was last
written (the side stream's "from now on", as ``armd herald add`` means it).

``HeraldFiles.read`` has the shape of ``SqlStore.heralds``, so the same
``StoreHeralds`` feed places side-stream heralds into each batch (by
position on the single-process host, by event time on Spark) at the next
batch after they were written, with the same rules: a count herald read
after its start went by is missed, never misplaced. Each line gets an id in
the order this reader first sees it, so a file added later, whatever its
name, comes after what was read. Files are read from where the last read
stopped, whole lines only (a line being written is read once it ends); a
line that is no herald is handed to ``invalid`` with its one-line reason and
skipped for good. Hidden files (a leading dot) are left alone, so a writer
can write one and rename it when complete.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from armd.migrations.heralds.column import LIFESPANS
from armd.migrations.heralds.record import HeraldRecord, InvalidHerald

START = "starts_at"


def _starts_at(value: Any, written: datetime) -> datetime:
    if value is None:
        return written
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return datetime.fromtimestamp(value, timezone.utc)
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            at = None
        if at is not None and at.tzinfo is not None:
            return at.astimezone(timezone.utc)
    raise InvalidHerald(f"starts_at is an ISO 8601 time with a zone or epoch seconds, got {value!r}")


def parse_line(line: str, stream: str, written: datetime, id: int) -> HeraldRecord:
    """One line of a herald file as a store-shaped record; ``InvalidHerald`` names what is wrong, in one line."""
    try:
        raw = json.loads(line)
    except ValueError:
        raise InvalidHerald(f"a herald line is a JSON object, got {line.strip()[:80]!r}") from None
    if not isinstance(raw, dict):
        raise InvalidHerald(f"a herald line is a JSON object of ranges and one lifespan, got {line.strip()[:80]!r}")
    patterns = {}
    for name, bounds in raw.items():
        if name in LIFESPANS or name == START:
            continue
        patterns[name] = tuple(bounds) if isinstance(bounds, list) else bounds  # checked by HeraldRecord
    return HeraldRecord(stream, patterns, _starts_at(raw.get(START), written), count=raw.get("count"),
                        seconds=raw.get("seconds"), source="side", id=id)


class HeraldFiles:
    """The heralds appended to the files of ``directory``, read like the store's ``heralds`` table."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._offsets: dict[str, int] = {}
        self._records: list[HeraldRecord] = []
        self._next_id = 1

    def read(self, stream: str, *, since: int = 0,
             invalid: Callable[[int, str], None] | None = None) -> list[HeraldRecord]:
        """The heralds with an id above ``since``, oldest first; ``OSError`` when the directory cannot be read.

        A line that is no herald goes to ``invalid(id, reason)``; without it, ``InvalidHerald`` is raised (as
        ``SqlStore.heralds`` does)."""
        refused: list[str] = []
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and not p.name.startswith(".")):
            self._read_file(path, stream, invalid or (lambda _id, reason: refused.append(reason)))
        self._records = [r for r in self._records if (r.id or 0) > since]  # the caller has the older ones
        if refused:
            raise InvalidHerald(refused[0])
        return list(self._records)

    def _read_file(self, path: Path, stream: str, invalid: Callable[[int, str], None]) -> None:
        offset = self._offsets.get(path.name, 0)
        if path.stat().st_size <= offset:  # nothing appended since the last batch: no need to open it
            return
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
            written = datetime.fromtimestamp(os.fstat(f.fileno()).st_mtime, timezone.utc)
        end = data.rfind(b"\n") + 1  # whole lines only: the rest is still being written
        self._offsets[path.name] = offset + end
        for line in data[:end].decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            id, self._next_id = self._next_id, self._next_id + 1
            try:
                self._records.append(parse_line(line, stream, written, id))
            except InvalidHerald as exc:
                invalid(id, f"{path.name}: {exc}")
