"""A user's Python data source (``pyspark.sql.datasource.DataSource``) that declares the GenMig contract.

armd cannot know what an unknown source's offsets mean, so such a source
is refused unless its class says, with two attributes:

* ``armd_offset_event_time(offset) -> float`` (a static or class method):
  for an offset its stream reader returns, the epoch seconds t such that
  every row before the offset has an event time < t and every row from it
  on has one >= t (offsets *are* event time, or map onto it monotonically).
* ``armd_starting_offset_option`` (a string): the name of the reader option
  that, given an offset's JSON, makes a new reader start there
  (``initialOffset`` returns it) and read the same rows the old one would.

The position is the event time of the old run's end offset; the new run
starts at that offset. The class is named by the stream's ``data_source``
option, ``"module:Class"``, and its ``name()`` must be the stream's format.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from ..managed import load_builder
from .base import DATA_SOURCE_KEY, FORMAT_KEY, OldRun, SourceContractError, Start, parse_offset, text

EVENT_TIME = "armd_offset_event_time"
STARTING = "armd_starting_offset_option"


def declaring_class(stream: str, options: Mapping[str, Any]) -> Any:
    """The data source class named by ``data_source``, checked to declare the contract."""
    ref = text(options, DATA_SOURCE_KEY)
    fmt = text(options, FORMAT_KEY)
    try:
        cls = load_builder(str(ref))
    except LookupError as exc:
        raise SourceContractError(f"stream {stream!r}: data_source: {exc}") from None
    name = cls.name() if callable(getattr(cls, "name", None)) else None
    if name != fmt:
        raise SourceContractError(f"stream {stream!r}: data source {ref!r} is named {name!r}, not the stream's "
                                  f"format {fmt!r}")
    missing = [a for a in (EVENT_TIME, STARTING) if getattr(cls, a, None) is None]
    if missing or not callable(getattr(cls, EVENT_TIME)) or not isinstance(getattr(cls, STARTING), str):
        raise SourceContractError(
            f"stream {stream!r}: data source {ref!r} does not declare the GenMig contract ({EVENT_TIME}(offset) -> epoch "
            f"seconds and {STARTING} = 'option name'; see docs/genmig.md, 'Writing a source GenMig can migrate')")
    return cls


class DeclaredAdapter:
    kind = "python data source"

    def check(self, stream: str, options: Mapping[str, Any]) -> None:
        declaring_class(stream, options)

    def position(self, stream: str, options: Mapping[str, Any], old: OldRun) -> float:
        cls = declaring_class(stream, options)
        offset = parse_offset(stream, old.end_offset, self.kind)
        try:
            seconds = float(getattr(cls, EVENT_TIME)(offset))
        except Exception as exc:  # noqa: BLE001 - user code: any failure is a broken contract
            raise SourceContractError(f"stream {stream!r}: {cls.__name__}.{EVENT_TIME}({offset!r}) failed: "
                                      f"{type(exc).__name__}: {exc}") from None
        if not math.isfinite(seconds):
            raise SourceContractError(f"stream {stream!r}: {cls.__name__}.{EVENT_TIME} gave {seconds!r}, not epoch seconds")
        return seconds

    def start(self, stream: str, options: Mapping[str, Any], old: OldRun, position: float) -> Start:
        cls = declaring_class(stream, options)
        offset = json.dumps(parse_offset(stream, old.end_offset, self.kind), sort_keys=True)
        option = getattr(cls, STARTING)
        return Start({**{str(k): str(v) for k, v in options.items()}, option: offset}, f"{option} = {offset}")
