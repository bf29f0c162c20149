"""Spark's file source (a directory of JSON, CSV, Parquet or ORC files being appended).

Its offsets (``{"logOffset": n}``) number the source's own file log in the
checkpoint and say nothing of event time, so the position is the largest
event time the old run has read (``eventTime.max`` over its batches; the
query needs a watermark). Which files hold the elements after it cannot be
told from file names or modification times (a file may mix old and new
rows; ``maxFileAge`` and ``latestFirst`` only skip by file age), so the new
run lists the whole directory like a fresh query and keeps only rows at or
after the position (``armd_since_seconds`` on ``event_time_column``, applied
by ``read_source`` as the rows are read). Every element after the position
is in the directory (nothing is deleted: ``cleanSource`` must stay ``off``),
so the new run sees all of them; older rows are dropped before any state,
and only feed results before T_split anyway. The cost is one scan of the
directory's files at the migration (at ``maxFilesPerTrigger`` files per batch
when it is set: the new run reaches the position only after that many batches).
Replay is the same scan keeping rows from an earlier time on.
"""

from __future__ import annotations

from typing import Any, Mapping

from .base import EVENT_TIME_KEY, SINCE_KEY, OldRun, SourceContractError, Start, progress_position, text

FORMATS = ("json", "csv", "parquet", "orc")


class FileAdapter:
    kind = "files"

    def check(self, stream: str, options: Mapping[str, Any]) -> None:
        fmt = text(options, "format")
        if not text(options, "path"):
            raise SourceContractError(f"stream {stream!r} ({fmt} files): option 'path' (the directory) is required")
        if not text(options, EVENT_TIME_KEY):
            raise SourceContractError(f"stream {stream!r} ({fmt} files): option {EVENT_TIME_KEY!r} is required: GenMig "
                                      "places file rows in event time by that column")
        clean = (text(options, "cleanSource") or "off").lower()
        if clean != "off":
            raise SourceContractError(f"stream {stream!r} ({fmt} files): cleanSource = {clean!r} removes files that were "
                                      "read, so a new run cannot replay them; GenMig needs cleanSource = 'off'")

    def position(self, stream: str, options: Mapping[str, Any], old: OldRun) -> float:
        self.check(stream, options)
        return progress_position(stream, f"{text(options, 'format')} files", old)

    def start(self, stream: str, options: Mapping[str, Any], old: OldRun, position: float) -> Start:
        return self.replay(stream, options, position)

    def replay(self, stream: str, options: Mapping[str, Any], since: float, until: float | None = None) -> Start:
        return Start({**{str(k): str(v) for k, v in options.items()}, SINCE_KEY: repr(since)},
                     f"rereads {text(options, 'path')} keeping rows from {since!r} on")
