"""What GenMig needs of a source, and the adapters' shared vocabulary.

GenMig (docs/genmig.md) starts the new plan beside the old one and splits
the results at T_split, computed in the *data's* event time. That is only
exact when armd can answer two questions for a source, and each source kind
answers them its own way (one module per kind in this package):

1. Where is the old run? Its *position*: an event time p (epoch seconds)
   such that every element the old run has read so far lies at or before p.
2. How does the new run start there? It must see every element later than
   p, which it then owns (T_split − window > p); elements at or before p
   only feed results before T_split, which the new run's filter drops.

A source that can also *replay* (``Replaying``: read again from any event
time, the synthetic source and files) lets the new run start one reach
(its window) before p instead: T_split is then p + 1 unit, and the old run
stops as soon as its watermark passes p + 1 rather than a whole window later.

A source that cannot answer both (``socket`` is not replayable; offsets that
say nothing of event time; a user source that declares nothing) is refused
with a ``SourceContractError`` — one line naming the source and what is
allowed — before any migration, never migrated wrongly.

A source is described by its options, as a builder reads it through
``read_source`` (``params.extra["sources"][stream]``): Spark's reader
options plus the keys in ``RESERVED``, which armd keeps for itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

FORMAT_KEY = "format"
"""The Spark format of a stream (``armd-synthetic`` when absent)."""
DATA_SOURCE_KEY = "data_source"
"""``module:Class`` of a user's Python data source that declares the GenMig contract (``declared``)."""
EVENT_TIME_KEY = "event_time_column"
"""The column that holds a row's event time (file sources)."""
SCHEMA_KEY = "schema"
"""A DDL schema for readers that need one (the file source)."""
SINCE_KEY = "armd_since_seconds"
"""Set by GenMig on a new run: rows with an earlier event time are dropped as they are read."""
ADD_KEY = "armd_add"
"""Set by GenMig on a new run: JSON ``{column: n}``, n added to the column of every row read (a counter's shift)."""
RESERVED = (FORMAT_KEY, DATA_SOURCE_KEY, EVENT_TIME_KEY, SCHEMA_KEY, SINCE_KEY, ADD_KEY)


class SourceContractError(ValueError):
    """A source GenMig cannot migrate exactly; the message is one line naming the source and what is allowed."""


@dataclass(frozen=True)
class Start:
    """How a new run reads its stream so that it sees every element after the old run's position."""

    options: Mapping[str, str]
    """The stream's options for the new run (reader options and ``RESERVED`` keys)."""
    note: str = ""
    """What the adapter did, for the migration's record."""


@dataclass(frozen=True)
class OldRun:
    """What the adapters may read of the old run: one source's progress in its latest batch, and the run's max event time."""

    end_offset: str | None
    """``sources[i].endOffset`` of the latest batch (JSON text as Spark writes it)."""
    max_event_time: float | None = None
    """Largest event time (epoch seconds) of any row the run has read, from ``eventTime.max`` of all its batches."""
    description: str = ""
    """``sources[i].description``."""


class SourceAdapter(Protocol):
    """One kind of source, as GenMig sees it."""

    kind: str

    def check(self, stream: str, options: Mapping[str, Any]) -> None:
        """Raise ``SourceContractError`` when GenMig cannot migrate a query that reads these options."""

    def position(self, stream: str, options: Mapping[str, Any], old: OldRun) -> float:
        """Epoch seconds at or after which every element the old run has read lies; ``SourceContractError`` if unknown."""

    def start(self, stream: str, options: Mapping[str, Any], old: OldRun, position: float) -> Start:
        """The options of the new run's reader for this stream."""


class Replaying(SourceAdapter, Protocol):
    """A source whose new run can start at any earlier event time and read the very elements the old run read."""

    def replay(self, stream: str, options: Mapping[str, Any], since: float, until: float | None = None) -> Start:
        """The options of a new run that sees every element with an event time at or after ``since`` (epoch seconds).

        ``until``: the old run's position; the elements up to it are there already, so a source that paces its
        batches reads them in the first one (a backlog, as a real trigger reads it), not at the live pace.
        """


def replays(adapter: SourceAdapter) -> bool:
    """Whether ``adapter`` can start a new run before the old run's position (``Replaying``)."""
    return callable(getattr(adapter, "replay", None))


@dataclass(frozen=True)
class Contract:
    """A summary of how a kind meets the contract, for ``armd check-config`` and the docs."""

    kind: str
    position: str
    start: str
    extra: Mapping[str, str] = field(default_factory=dict)


def parse_offset(stream: str, offset: str | Mapping[str, Any] | None, kind: str) -> Any:
    """An offset as JSON-decoded value, or a ``SourceContractError`` naming the stream and the source kind."""
    if offset is None:
        raise SourceContractError(f"stream {stream!r} ({kind}): the old run's progress has no end offset yet")
    if not isinstance(offset, str):
        return offset
    try:
        return json.loads(offset)
    except json.JSONDecodeError:
        raise SourceContractError(f"stream {stream!r} ({kind}): end offset {offset[:80]!r} is not JSON") from None


def text(options: Mapping[str, Any], key: str) -> str | None:
    """An option as Spark would see it (case-insensitive key), or None."""
    for k, v in options.items():
        if str(k).lower() == key.lower():
            return None if v is None else str(v)
    return None


def without(options: Mapping[str, Any], *keys: str) -> dict[str, str]:
    """The options minus ``keys`` (case-insensitive), values as strings."""
    lowered = {k.lower() for k in keys}
    return {str(k): str(v) for k, v in options.items() if str(k).lower() not in lowered}


def progress_position(stream: str, kind: str, old: OldRun) -> float:
    """The position of a source whose offsets say nothing of event time: the run's largest event time read."""
    if old.max_event_time is None:
        raise SourceContractError(
            f"stream {stream!r} ({kind}): the old run reports no eventTime.max; GenMig places this source by the "
            "largest event time read, so the query must set a watermark (withWatermark) on its event-time column")
    return float(old.max_event_time)
