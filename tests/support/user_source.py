"""A user's own replayable source, written as a user would: not armd's, event time starting in 2031.

``Ticks`` is a ``pyspark.sql.datasource.DataSource`` with a streaming
reader. Its offsets are ``{"tick": n, "event_ms": t}``: tick n holds a few
rows stamped ``origin + n × tick_seconds``, the same rows for whoever reads
them. It declares the GenMig contract (docs/genmig.md, "Writing a source
GenMig can migrate"): ``armd_offset_event_time`` reads an offset's event
time, ``armd_starting_offset_option`` names the option that starts a reader
at an offset. ``Undeclared`` is the same source without the declaration.

Options: ``origin`` (epoch seconds of tick 0's event time), ``tick_seconds``,
``wall_start`` (epoch seconds at which tick 0 becomes available; the ticks
then come ``ticks_per_second`` per wall-clock second, so that every run
sees the stream at the same pace), ``end_tick`` (no ticks from it on),
``max_ticks_per_batch``, ``startingOffset``.
"""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timezone
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from armd.adapters.spark.builders import genmig_hints, interval
from armd.adapters.spark.managed import QueryParams
from armd.adapters.spark.sources import read_source

KEYS = 4


def tick_rows(n: int) -> list[int]:
    """The keys of tick n's rows: one to three of them, the same for every reader."""
    return [(n * 31 + j * 17) % KEYS for j in range(1 + n % 3)]


class _Ticks(InputPartition):
    def __init__(self, first: int, end: int) -> None:
        self.first, self.end = first, end


class TicksReader(DataSourceStreamReader):
    def __init__(self, options: dict) -> None:
        self.origin = float(options["origin"])
        self.tick = float(options.get("tick_seconds", "0.5"))
        self.wall_start = float(options["wall_start"])
        self.pace = float(options.get("ticks_per_second", "8"))
        self.end = int(options.get("end_tick", "80"))
        self.per_batch = int(options.get("max_ticks_per_batch", "4"))
        self.starting = options.get("startingOffset")

    def _offset(self, n: int) -> dict:
        return {"tick": n, "event_ms": int(round((self.origin + n * self.tick) * 1000))}

    def initialOffset(self) -> dict:
        return json.loads(self.starting) if self.starting else self._offset(0)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        now = min(self.end, max(0, math.floor((time.time() - self.wall_start) * self.pace)))
        if start is not None:
            now = max(int(start["tick"]), min(now, int(start["tick"]) + self.per_batch))
        return self._offset(now)

    def partitions(self, start: dict, end: dict) -> list:
        return [_Ticks(int(start["tick"]), int(end["tick"]))] if end["tick"] > start["tick"] else []

    def read(self, partition: Any) -> Iterator[tuple]:
        for n in range(partition.first, partition.end):
            at = datetime.fromtimestamp(self.origin + n * self.tick, tz=timezone.utc)
            for key in tick_rows(n):
                yield (at, key)

    def commit(self, end: dict) -> None:
        pass


class Undeclared(DataSource):
    """The ticks, without saying how its offsets map to event time."""

    @classmethod
    def name(cls) -> str:
        return "ticks"

    def schema(self) -> str:
        return "event_time timestamp, key bigint"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TicksReader(dict(self.options))


class Ticks(Undeclared):
    """The ticks, declaring the GenMig contract."""

    armd_starting_offset_option = "startingOffset"

    @staticmethod
    def armd_offset_event_time(offset: dict) -> float:
        return offset["event_ms"] / 1000.0


@genmig_hints("window.end")
def count_per_key(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Count per key over a sliding window of the ticks (window node ``w``), watermark ``delay_seconds``."""
    sources = params.extra["sources"]
    declared = Ticks if "Ticks" in str(sources["ticks"].get("data_source", "")) else Undeclared
    spark.dataSource.register(declared)
    delay = interval(float(params.extra.get("delay_seconds", 1.0)))
    w, slide = params.window("w", 6.0), params.slide("w", 2.0)
    df = read_source(spark, sources, "ticks").withWatermark("event_time", delay)
    return df.groupBy(F.window("event_time", interval(w), interval(slide)), "key").agg(F.count(F.lit(1)).alias("n"))


@genmig_hints("window.end")
def own_reader(spark: SparkSession, params: QueryParams) -> DataFrame:
    """The issue's mistake: the builder reads the ticks itself (options in ``params.extra["ticks"]``), whatever
    ``params.extra["sources"]`` declares."""
    spark.dataSource.register(Ticks)
    options = {k: v for k, v in params.extra["ticks"].items() if k not in ("format", "data_source")}
    df = spark.readStream.format("ticks").options(**options).load().withWatermark("event_time", "1 second")
    return df.groupBy(F.window("event_time", "6 seconds", "2 seconds"), "key").agg(F.count(F.lit(1)).alias("n"))
