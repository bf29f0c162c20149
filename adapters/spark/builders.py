"""Builders of armd's demo query shapes, in the form managed queries use (``builder(spark, params)``).

They serve the demo (``make run`` with Spark), the tests and the accuracy
measurements, and show a user how to write a builder: read every setting
from ``params`` (windows and slides in seconds by plan node id), take the
sources from ``params.extra["sources"]`` (stream name → ``armd-synthetic``
options) and wrap filters, joins and aggregations with the ``observed_*``
helpers so that armd can measure them.

Load shedding needs nothing from a builder that reads its sources with
``synthetic``: it passes each source through ``shed``, which drops the share
``params.drop_rate`` of the rows at random (a seeded ``rand() >= p`` filter)
before any window. A builder that reads its sources itself calls ``shed`` on
each of them.

``params.extra`` keys used here: ``sources`` (required), ``nodes`` (the
builder's node names ``w``, ``agg``, ``f``, ``j`` → plan node ids, see
``QueryParams.node``), ``delay_seconds``
(watermark delay, default 0), ``left``/``right`` (join streams, default the
first two sources), ``keys_only`` (join: also equate keys, default true),
and for ``windowed_count`` ``min_value`` (a filter ``value > min_value``),
``duplicate_fraction`` (that share of rows is delivered twice, as by an
at-least-once producer) and ``distinct`` (drop such duplicates), and for
``multiway_join`` ``join_control`` (its control file) and ``join_order``
(the order it starts with).

Each builder also says, through ``genmig_hints``, how GenMig splits its
results (``adapters/spark/genmig.py``): the *reference point* of a result (a
Spark SQL expression over its columns: the instant it describes), how
many windows its inputs can spread over before that point, and whether its
results are out on the watermark or as soon as their last input arrives.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .managed import QueryParams
from .observed import observed_filter, observed_groups, observed_join
from .sources import read_source

B = TypeVar("B")
EMITS = ("watermark", "arrival")


def genmig_hints(reference_point: str, span_windows: int = 1, emits: str = "watermark") -> Callable[[B], B]:
    """Declare, for GenMig, a builder's reference point, its result span (in windows of the largest size) and when
    its results are out: once the watermark has passed their reference point (``watermark``: window aggregates in
    append mode) or as soon as their last input has been read (``arrival``: inner stream-stream joins)."""
    if emits not in EMITS:
        raise ValueError(f"emits must be one of {', '.join(EMITS)}, got {emits!r}")

    def declare(builder: B) -> B:
        builder.reference_point = reference_point  # type: ignore[attr-defined]
        builder.span_windows = span_windows  # type: ignore[attr-defined]
        builder.emits = emits  # type: ignore[attr-defined]
        return builder

    return declare


def interval(seconds: float) -> str:
    """A Spark interval string for ``seconds`` (whole milliseconds)."""
    ms = int(round(float(seconds) * 1000))
    if ms <= 0:
        raise ValueError(f"an interval must be at least 1 ms, got {seconds!r} seconds")
    return f"{ms} milliseconds"


def synthetic(spark: SparkSession, params: QueryParams, stream: str) -> DataFrame:
    """The stream named ``stream`` as ``params.extra["sources"]`` describes it (``armd-synthetic`` unless it names another
    ``format``), read so that GenMig can start a new run where an old one stands (``sources.read_source``)."""
    return shed(read_source(spark, params.extra.get("sources") or {}, stream), params, stream)


def shed(df: DataFrame, params: QueryParams, stream: str) -> DataFrame:
    """``df`` without the share ``params.drop_rate`` of its rows, drawn at random; ``df`` itself when nothing sheds.

    The draw is seeded per stream (so a restart with the same rate drops the
    same share the same way per partition); each row is kept with probability 1 − p.
    """
    p = float(params.drop_rate)
    if p <= 0.0:
        return df
    return df.filter(F.rand(zlib.crc32(stream.encode())) >= F.lit(p))


def _delay(params: QueryParams) -> str:
    return f"{int(round(float(params.extra.get('delay_seconds', 0)) * 1000))} milliseconds"


def _window(params: QueryParams, node: str, size: float, slide: float) -> object:
    """Spark's ``window(event_time, w, slide)`` with the node's settings; the slide is capped at the size."""
    w = params.window(node, size)
    return F.window("event_time", interval(w), interval(min(params.slide(node, slide), w)))


def _first_stream(params: QueryParams, index: int = 0) -> str:
    names = list(params.extra.get("sources") or {})
    if len(names) <= index:
        raise LookupError(f"params.extra['sources'] needs at least {index + 1} stream(s), has {names}")
    return names[index]


@genmig_hints("window.end")
def windowed_count(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Count per key over a sliding window: node ``w`` (size, slide), node ``agg`` (group-by key).

    Optionally over a filter (node ``f``, ``value > min_value``) and with
    duplicates dropped (``distinct``: rows equal in key, event time and value
    count once; ``duplicate_fraction`` makes the source deliver some twice).
    """
    stream = params.extra.get("stream") or _first_stream(params)
    df = synthetic(spark, params, stream)
    fraction = float(params.extra.get("duplicate_fraction", 0.0))
    if fraction > 0:
        df = df.withColumn("_copy", F.explode(F.sequence(F.lit(1), F.when(F.col("value") < fraction, 2).otherwise(1)))).drop("_copy")
    df = df.withWatermark("event_time", _delay(params))
    if params.extra.get("distinct"):
        df = df.dropDuplicatesWithinWatermark(["key", "event_time", "value"])
    if params.extra.get("min_value") is not None:
        df = observed_filter(df, params.node("f"), F.col("value") > F.lit(float(params.extra["min_value"])))
    df = observed_groups(df, params.node("agg"), "key")
    return df.groupBy(_window(params, "w", 10.0, 1.0), "key").agg(F.count(F.lit(1)).alias("n"))


@genmig_hints("window.end")
def drifting_count(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Count per auction over a sliding window ``w``, auction ids drifting: written as a user would, no ``observe``.

    Each of the source's ``keys`` slots runs one auction at a time, for
    ``life_seconds`` (default 20), the slots' renewals staggered evenly; so
    ``keys`` auctions are alive at any instant and keys/life new ones appear
    per second, and a window of w seconds holds about keys·(1 + w/life)
    auctions. With ``min_value`` a filter ``value > min_value`` comes first.
    armd measures it all by itself (``instrument.py``).
    """
    stream = params.extra.get("stream") or _first_stream(params)
    keys = int(params.extra["sources"][stream].get("keys", 1))
    life = float(params.extra.get("life_seconds", 20.0))
    df = synthetic(spark, params, stream).withWatermark("event_time", _delay(params))
    if params.extra.get("min_value") is not None:
        df = df.filter(F.col("value") > F.lit(float(params.extra["min_value"])))
    epoch = F.floor((F.unix_micros("event_time") / 1e6 + F.col("key") * (life / keys)) / life)
    df = df.withColumn("auction", epoch * keys + F.col("key"))
    return df.groupBy(_window(params, "w", 10.0, 2.0), "auction").agg(F.count(F.lit(1)).alias("bids"))


@genmig_hints("window.end")
def union_count(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Count per key over a sliding window ``w`` of the union of every source (each with its watermark); no ``observe``."""
    names = list(params.extra.get("sources") or {})
    if len(names) < 2:
        raise LookupError(f"union_count needs at least two sources in params.extra['sources'], has {names}")
    sides = [synthetic(spark, params, name).withWatermark("event_time", _delay(params)) for name in names]
    df = sides[0]
    for side in sides[1:]:
        df = df.unionByName(side)
    return df.groupBy(_window(params, "w", 10.0, 2.0), "key").agg(F.count(F.lit(1)).alias("n"))


@genmig_hints("window.end")
def granular_average(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Scalar average of ``value > threshold`` rows over a window ``w`` sliding by the granularity; filter node ``f``."""
    stream = params.extra.get("stream") or _first_stream(params)
    df = synthetic(spark, params, stream).withWatermark("event_time", _delay(params))
    df = observed_filter(df, params.node("f"), F.col("value") > F.lit(float(params.extra.get("threshold", 0.0))))
    return df.groupBy(_window(params, "w", 10.0, 1.0)).agg(F.avg("value").alias("avg_value"), F.count(F.lit(1)).alias("n"))


@genmig_hints("greatest(lt, rt)", emits="arrival")
def range_join(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Stream-stream inner join ``j``: equal keys and |t_left − t_right| <= R, R the size of window node ``w``.

    In the model both inputs pass a time window of size R before the join, so
    elements whose validity intervals overlap, |t_left − t_right| < R, meet.
    """
    left_name = params.extra.get("left") or _first_stream(params, 0)
    right_name = params.extra.get("right") or _first_stream(params, 1)
    span = params.window("w", 5.0)
    delay = _delay(params)
    left = synthetic(spark, params, left_name).withWatermark("event_time", delay).select(
        F.col("event_time").alias("lt"), F.col("key").alias("lk"), F.col("value").alias("lv"))
    right = synthetic(spark, params, right_name).withWatermark("event_time", delay).select(
        F.col("event_time").alias("rt"), F.col("key").alias("rk"), F.col("value").alias("rv"))
    condition: Any = (F.col("rt") >= F.col("lt") - F.expr(f"INTERVAL {interval(span)}")) & (
        F.col("rt") <= F.col("lt") + F.expr(f"INTERVAL {interval(span)}"))
    if params.extra.get("keys_only", True):
        condition = condition & (F.col("lk") == F.col("rk"))
    return observed_join(left, right, params.node("j"), condition, validity_seconds=2 * span)


@genmig_hints("greatest(t0, t1, t2)", span_windows=2, emits="arrival")
def three_way_join(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Streams a ⋈ b ⋈ c on equal keys, b and c each within R of a's event time (R the size of window node ``w``).

    a, b, c are the first three sources; the columns of stream i are ``t{i}``,
    ``k{i}``, ``v{i}``, so the result looks the same in any join order. Joins
    ``j1`` (the first two streams of ``params.join_order``, default a, b) and
    ``j2`` (that with the third). Both joins are stream-stream joins: Spark
    keeps the first two streams' rows in the first one and the first join's
    results and the third stream's rows in the second, each until the
    watermark rules out further partners. Since b and c are only bound to a,
    two of them can lie 2R apart: a result spans two windows.
    """
    streams = [_first_stream(params, i) for i in range(3)]
    order = list(params.join_order or streams)
    if sorted(order) != sorted(streams):
        raise ValueError(f"join_order must be an order of the streams {streams}, got {order}")
    span = params.window("w", 5.0)
    delay = _delay(params)
    sides = {}
    for i, name in enumerate(streams):
        df = synthetic(spark, params, name).withWatermark("event_time", delay)
        sides[i] = df.select(F.col("event_time").alias(f"t{i}"), F.col("key").alias(f"k{i}"), F.col("value").alias(f"v{i}"))
    first, second, third = (streams.index(name) for name in order)
    within = F.expr(f"INTERVAL {interval(span)}")

    def near(i: int, j: int, distance: Any = within) -> Any:
        return (F.col(f"k{i}") == F.col(f"k{j}")) & (F.col(f"t{i}") >= F.col(f"t{j}") - distance) & (
            F.col(f"t{i}") <= F.col(f"t{j}") + distance)

    pair = near(first, second) if 0 in (first, second) else near(first, second, F.expr(f"INTERVAL {interval(2 * span)}"))
    joined = observed_join(sides[first], sides[second], params.node("j1"), pair, validity_seconds=2 * span)
    # Spark allows one event-time column per stream: the first join's result goes on with a's time (or the
    # first stream's), the other time becomes a plain column.
    plain = second if second != 0 else first
    joined = joined.withColumn(f"t{plain}", F.col(f"t{plain}") + F.expr("INTERVAL 0 milliseconds"))
    on = near(third, 0) if third != 0 else near(first, 0) & near(second, 0)
    return observed_join(joined, sides[third], params.node("j2"), on, validity_seconds=2 * span)


def multiway_join(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Every source joined on equal keys within one window (node ``w``), by JISC on Spark (``adapters/spark/jisc.py``).

    A result is one row per source, all with the same key, whose event times
    lie less than the window apart. The join order comes from the control
    file ``params.extra["join_control"]``, which the daemon rewrites when the
    join-order policy picks a better order; until it exists the order is
    ``join_order`` (a flat list means left-deep; default: left-deep in the
    order of the sources). Needs the RocksDB state store. Columns: ``key``,
    ``epoch`` (the plan that produced the result) and per stream ``s``
    ``s_id`` (the row's event time in microseconds) and ``s_time``. The
    join's tuples and pairs per stream are observed under node ``w``, from
    which the statistics source measures its pairwise key-match selectivities.
    """
    from .jisc import jisc_join

    control = params.extra.get("join_control")
    if not control:
        raise LookupError("multiway_join needs params.extra['join_control'], the path of its control file "
                          "(the daemon sets it from [managed.NAME.join_order] control)")
    names = list(params.extra.get("sources") or {})
    inputs = {name: synthetic(spark, params, name).withColumn("id", F.unix_micros("event_time")) for name in names}
    order = params.extra.get("join_order")
    return jisc_join(inputs, key="key", time="event_time", window_ms=int(round(params.window("w", 10.0) * 1000)),
                     control_path=str(control), order=order, watermark_delay=_delay(params), observe_as=params.node("w"))
