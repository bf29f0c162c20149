"""Source adapters: GenMig on any replayable source (docs/genmig.md, "Writing a source GenMig can migrate").

A builder reads each of its streams with ``read_source(spark, params,
stream)`` from ``params.extra["sources"][stream]``: the reader's options,
its ``format`` (default ``armd-synthetic``) and armd's own keys
(``base.RESERVED``). GenMig asks ``adapter_for(options)`` where the old run
stands and how the new one starts; one module per kind:

=================== =========================== ============================================ ======
kind                position (event time)       the new run                                  replay
=================== =========================== ============================================ ======
armd-synthetic      end offset's event_ms       starting_seconds at it                       yes
rate-micro-batch    end offset's timestamp      startTimestamp at it, values shifted         no
json/csv/parquet/orc eventTime.max of the run   rereads the directory, rows from it on       yes
kafka               eventTime.max of the run    startingOffsets = the end offsets            no
declared Python DS  the class maps the offset   its starting option = the end offset         no
=================== =========================== ============================================ ======

A source that replays (``base.Replaying``) can start the new run a window
before the position, so that T_split lies just past it (``genmig.py``).

Anything else (``socket``, ``rate``, an undeclared data source) raises
``SourceContractError``.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .base import (ADD_KEY, DATA_SOURCE_KEY, EVENT_TIME_KEY, FORMAT_KEY, RESERVED, SCHEMA_KEY, SINCE_KEY, OldRun,
                   Replaying, SourceAdapter, SourceContractError, Start, replays, text)
from .declared import DeclaredAdapter
from .files import FORMATS as FILE_FORMATS
from .files import FileAdapter
from .kafka import KafkaAdapter
from .rate import RateMicroBatchAdapter
from .synthetic import KIND as SYNTHETIC
from .synthetic import SyntheticAdapter

__all__ = ["OldRun", "Replaying", "SourceAdapter", "SourceContractError", "Start", "adapter_for", "check_sources",
           "read_source", "replays", "source_format"]

_ADAPTERS: dict[str, SourceAdapter] = {SYNTHETIC: SyntheticAdapter(), "rate-micro-batch": RateMicroBatchAdapter(),
                                       "kafka": KafkaAdapter(), **{f: FileAdapter() for f in FILE_FORMATS}}
REFUSED = {
    "socket": "not replayable: a new run cannot read again what the old one read",
    "rate": "its rows are stamped with the wall clock of the run that reads them, so a new run cannot replay them; "
            "use rate-micro-batch",
    "memory": "not replayable across runs",
}
KNOWN = (*_ADAPTERS, "a Python data source declaring the contract (data_source = 'module:Class')")


def source_format(options: Mapping[str, Any]) -> str:
    return (text(options, FORMAT_KEY) or SYNTHETIC).strip()


def adapter_for(stream: str, options: Mapping[str, Any]) -> SourceAdapter:
    """The adapter of a stream's source, checked; ``SourceContractError`` (one line) when GenMig cannot migrate it."""
    fmt = source_format(options)
    if text(options, DATA_SOURCE_KEY):
        adapter: SourceAdapter = DeclaredAdapter()
    elif fmt.lower() in REFUSED:
        raise SourceContractError(f"stream {stream!r}: GenMig cannot migrate a {fmt!r} source: {REFUSED[fmt.lower()]}")
    elif fmt.lower() in _ADAPTERS:
        adapter = _ADAPTERS[fmt.lower()]
    else:
        raise SourceContractError(f"stream {stream!r}: GenMig does not know source format {fmt!r}; it migrates "
                                  f"{', '.join(KNOWN)}")
    adapter.check(stream, options)
    return adapter


def check_sources(sources: Mapping[str, Mapping[str, Any]]) -> None:
    """Every stream of a query meets the contract (``SourceContractError`` for the first that does not)."""
    for stream, options in sources.items():
        adapter_for(stream, options)


def read_source(spark: Any, sources: Mapping[str, Mapping[str, Any]], stream: str) -> Any:
    """The streaming DataFrame of ``stream`` as GenMig may start it: the reader with armd's keys applied."""
    from pyspark.sql import functions as F

    if stream not in sources:
        raise LookupError(f"params.extra['sources'] has no stream {stream!r}; it has: {', '.join(sorted(sources)) or 'none'}")
    options = sources[stream]
    fmt = source_format(options)
    reader = spark.readStream.format(fmt)
    if text(options, SCHEMA_KEY):
        reader = reader.schema(text(options, SCHEMA_KEY))
    spark_options = {str(k): str(v) for k, v in options.items() if str(k).lower() not in RESERVED}
    if fmt == SYNTHETIC:
        spark_options.setdefault("stream", stream)
    df = reader.options(**spark_options).load()
    since = text(options, SINCE_KEY)
    if since is not None:
        column = text(options, EVENT_TIME_KEY) or "event_time"
        df = df.filter(F.col(column) >= F.timestamp_seconds(F.lit(float(since))))
    for column, n in json.loads(text(options, ADD_KEY) or "{}").items():
        df = df.withColumn(column, F.col(column) + F.lit(int(n)))
    return df
