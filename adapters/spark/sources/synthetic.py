"""armd's own ``armd-synthetic`` source: offsets are event time after the ``start`` origin.

Position: the end offset's ``event_ms`` after the origin — the source reads
[a, b) per batch, so every element read lies before it. Start: the new run
reads from that offset (``starting_seconds``); the source draws the same
rows for every reader, so it sees exactly the elements after the position.
Replay: the same, from any earlier event time (the origin at the earliest);
the rows up to the old run's position are there already, so the new run
reads them in its first batch (``catch_up_seconds``) rather than at the
pace ``max_seconds_per_batch`` sets for live rows.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..source import SourceOptionError, SourceOptions, offset_seconds, offset_stream
from .base import RESERVED, OldRun, SourceContractError, Start, without

KIND = "armd-synthetic"


class SyntheticAdapter:
    kind = KIND

    def _parsed(self, stream: str, options: Mapping[str, Any]) -> SourceOptions:
        try:
            return SourceOptions.parse({"stream": stream, **without(options, *RESERVED)})
        except SourceOptionError as exc:
            raise SourceContractError(f"stream {stream!r}: {exc}") from None

    def check(self, stream: str, options: Mapping[str, Any]) -> None:
        self._parsed(stream, options)

    def position(self, stream: str, options: Mapping[str, Any], old: OldRun) -> float:
        seconds = offset_seconds(old.end_offset)
        if seconds is None or offset_stream(old.end_offset) != stream:
            raise SourceContractError(f"stream {stream!r} ({KIND}): end offset {str(old.end_offset)[:80]!r} is not this "
                                      "stream's event-time offset")
        return self._parsed(stream, options).start + seconds

    def start(self, stream: str, options: Mapping[str, Any], old: OldRun, position: float) -> Start:
        return self.replay(stream, options, position)

    def replay(self, stream: str, options: Mapping[str, Any], since: float, until: float | None = None) -> Start:
        origin = self._parsed(stream, options).start
        starting = max(0.0, since - origin)
        start = {**without(options, "starting_seconds", "catch_up_seconds"), "starting_seconds": repr(starting)}
        if until is None or until <= since:
            return Start(start, f"reads from {starting:g} s after the origin")
        backlog = until - origin
        return Start({**start, "catch_up_seconds": repr(backlog)},
                     f"reads from {starting:g} s after the origin, up to {backlog:g} s in its first batch")
