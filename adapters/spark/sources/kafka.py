"""Kafka: the new run starts at the old run's end offsets (UNTESTED against a broker: none can run here).

Spark writes a Kafka source's ``endOffset`` as ``{"topic": {"partition":
offset, …}, …}`` — the next offset to read per partition — which is exactly
the JSON ``startingOffsets`` takes; a new run on a fresh checkpoint with it
reads every record the old run has not. Kafka offsets say nothing of event
time, so the position is the largest event time the old run has read
(``eventTime.max``; the query needs a watermark): every record it read lies
at or before it, every later one is the new run's. Options that would start
elsewhere (``startingTimestamp``, ``startingOffsetsByTimestamp``) are dropped
for the new run.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .base import OldRun, SourceContractError, Start, parse_offset, progress_position, text, without

KIND = "kafka"
SUBSCRIPTIONS = ("subscribe", "subscribePattern", "assign")
STARTING = ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy")


def starting_offsets(stream: str, end_offset: str | Mapping[str, Any] | None) -> str:
    """``startingOffsets`` JSON from a Kafka source's ``endOffset`` in a query's progress; validated."""
    doc = parse_offset(stream, end_offset, KIND)
    shape = '{"topic": {"partition": offset}}'
    if not isinstance(doc, Mapping) or not doc:
        raise SourceContractError(f"stream {stream!r} ({KIND}): end offset {str(end_offset)[:80]!r} is not {shape}")
    out: dict[str, dict[str, int]] = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, Mapping) or not partitions:
            raise SourceContractError(f"stream {stream!r} ({KIND}): topic {topic!r} in the end offset has no partitions")
        try:
            out[str(topic)] = {str(int(p)): int(o) for p, o in partitions.items()}
        except (TypeError, ValueError):
            raise SourceContractError(f"stream {stream!r} ({KIND}): topic {topic!r}: partitions and offsets must be "
                                      f"whole numbers, got {partitions!r}") from None
        if any(o < 0 for o in out[str(topic)].values()):
            raise SourceContractError(f"stream {stream!r} ({KIND}): topic {topic!r}: end offsets must be >= 0 (Spark "
                                      f"writes resolved offsets), got {partitions!r}")
    return json.dumps(out, sort_keys=True)


class KafkaAdapter:
    kind = KIND

    def check(self, stream: str, options: Mapping[str, Any]) -> None:
        if sum(text(options, k) is not None for k in SUBSCRIPTIONS) != 1:
            raise SourceContractError(f"stream {stream!r} ({KIND}): give exactly one of {', '.join(SUBSCRIPTIONS)}")

    def position(self, stream: str, options: Mapping[str, Any], old: OldRun) -> float:
        starting_offsets(stream, old.end_offset)
        return progress_position(stream, KIND, old)

    def start(self, stream: str, options: Mapping[str, Any], old: OldRun, position: float) -> Start:
        offsets = starting_offsets(stream, old.end_offset)
        return Start({**without(options, *STARTING), "startingOffsets": offsets}, f"startingOffsets {offsets}")
