"""armd's own ``armd-synthetic`` source: offsets are event time after the ``start`` origin.

Position: the end offset's ``event_ms`` after the origin — the source reads
[a, b) per batch, so every element read lies before it. Start: the new run
reads from that offset (``starting_seconds``); the source draws the same
rows for every reader, so it sees exactly the elements after the position.
Replay: the same, from any earlier event time (the origin at the earliest).
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

    def replay(self, stream: str, options: Mapping[str, Any], since: float) -> Start:
        starting = max(0.0, since - self._parsed(stream, options).start)
        return Start({**without(options, "starting_seconds"), "starting_seconds": repr(starting)},
                     f"reads from {starting:g} s after the origin")
