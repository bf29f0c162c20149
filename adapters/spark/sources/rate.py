"""Spark's ``rate-micro-batch`` source: a counter whose batch k is stamped startTimestamp + k × advanceMillisPerBatch.

Spark's offset is ``{"offset": N, "timestamp": T}``: the next row is value N
and every later row has a timestamp ≥ T ms, while every row read so far has
an earlier one (when ``advanceMillisPerBatch`` > 0). So the position is T.
The source has no starting-offset option; its rows are a pure function of
(value, batch), so a run started with ``startTimestamp = T`` and every value
shifted by N (``armd_add``, applied by ``read_source``) reads exactly the rows
the old run would read from that offset on: same values, same timestamps.
The query's event time must be the ``timestamp`` column.
"""

from __future__ import annotations

from typing import Any, Mapping

import json

from .base import ADD_KEY, OldRun, SourceContractError, Start, parse_offset, text, without

KIND = "rate-micro-batch"


def _number(stream: str, options: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int:
    raw = text(options, key)
    if raw is None:
        if default is None:
            raise SourceContractError(f"stream {stream!r} ({KIND}): option {key!r} is required")
        return default
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise SourceContractError(f"stream {stream!r} ({KIND}): option {key!r} must be a whole number >= {minimum}, "
                                  f"got {raw!r}")
    return value


class RateMicroBatchAdapter:
    kind = KIND

    def check(self, stream: str, options: Mapping[str, Any]) -> None:
        _number(stream, options, "rowsPerBatch", None, 1)
        _number(stream, options, "startTimestamp", 0, 0)
        if _number(stream, options, "advanceMillisPerBatch", 1000, 0) == 0:
            raise SourceContractError(
                f"stream {stream!r} ({KIND}): advanceMillisPerBatch = 0 stamps every row with the same time, so its "
                "offsets cannot be placed in event time; GenMig needs advanceMillisPerBatch >= 1")

    def _offset(self, stream: str, old: OldRun) -> tuple[int, int]:
        doc = parse_offset(stream, old.end_offset, KIND)
        try:
            return int(doc["offset"]), int(doc["timestamp"])
        except (KeyError, TypeError, ValueError):
            raise SourceContractError(f"stream {stream!r} ({KIND}): end offset {str(old.end_offset)[:80]!r} is not "
                                      '{"offset": N, "timestamp": MS}') from None

    def position(self, stream: str, options: Mapping[str, Any], old: OldRun) -> float:
        self.check(stream, options)
        return self._offset(stream, old)[1] / 1000.0

    def start(self, stream: str, options: Mapping[str, Any], old: OldRun, position: float) -> Start:
        value, timestamp = self._offset(stream, old)
        added = json.loads(text(options, ADD_KEY) or "{}")  # a run that was itself started by a migration
        shift = int(added.get("value", 0)) + value
        return Start({**without(options, "startTimestamp", ADD_KEY), "startTimestamp": str(timestamp),
                      ADD_KEY: json.dumps({"value": shift})},
                     f"startTimestamp {timestamp} ms, values from {shift}")
