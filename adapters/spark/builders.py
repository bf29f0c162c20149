"""Builders of armd's demo query shapes, in the form managed queries use (``builder(spark, params)``).

They serve the demo (``make run`` with Spark), the tests and the accuracy
measurements, and show a user how to write a builder: read every setting
from ``params`` (windows and slides in seconds by plan node id), take the
sources from ``params.extra["sources"]`` (stream name → ``armd-synthetic``
options) and wrap filters, joins and aggregations with the ``observed_*``
helpers so that armd can measure them.

``params.extra`` keys used here: ``sources`` (required), ``nodes`` (the
builder's node names ``w``, ``agg``, ``f``, ``j`` → plan node ids, see
``QueryParams.node``), ``delay_seconds``
(watermark delay, default 0), ``left``/``right`` (join streams, default the
first two sources), ``keys_only`` (join: also equate keys, default true).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .managed import QueryParams
from .observed import observed_filter, observed_groups, observed_join
from .source import FORMAT


def interval(seconds: float) -> str:
    """A Spark interval string for ``seconds`` (whole milliseconds)."""
    ms = int(round(float(seconds) * 1000))
    if ms <= 0:
        raise ValueError(f"an interval must be at least 1 ms, got {seconds!r} seconds")
    return f"{ms} milliseconds"


def synthetic(spark: SparkSession, params: QueryParams, stream: str) -> DataFrame:
    """The ``armd-synthetic`` stream named ``stream`` with the options in ``params.extra["sources"]``."""
    sources = params.extra.get("sources") or {}
    if stream not in sources:
        raise LookupError(f"params.extra['sources'] has no stream {stream!r}; it has: {', '.join(sorted(sources)) or 'none'}")
    options = {"stream": stream, **{k: str(v) for k, v in sources[stream].items()}}
    return spark.readStream.format(FORMAT).options(**options).load()


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


def windowed_count(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Count per key over a sliding window: node ``w`` (size, slide), node ``agg`` (group-by key)."""
    stream = params.extra.get("stream") or _first_stream(params)
    df = synthetic(spark, params, stream).withWatermark("event_time", _delay(params))
    df = observed_groups(df, params.node("agg"), "key")
    return df.groupBy(_window(params, "w", 10.0, 1.0), "key").agg(F.count(F.lit(1)).alias("n"))


def granular_average(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Scalar average of ``value > threshold`` rows over a window ``w`` sliding by the granularity; filter node ``f``."""
    stream = params.extra.get("stream") or _first_stream(params)
    df = synthetic(spark, params, stream).withWatermark("event_time", _delay(params))
    df = observed_filter(df, params.node("f"), F.col("value") > F.lit(float(params.extra.get("threshold", 0.0))))
    return df.groupBy(_window(params, "w", 10.0, 1.0)).agg(F.avg("value").alias("avg_value"), F.count(F.lit(1)).alias("n"))


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


def three_way_join(spark: SparkSession, params: QueryParams) -> DataFrame:
    """Streams a ⋈ b ⋈ c on equal keys, each pair within R of a's event time (R the size of window node ``w``).

    Joins ``j1`` (a with b) and ``j2`` (that with c), in the order of
    ``params.join_order`` (default the first three sources). Both joins are
    stream-stream joins: Spark keeps a's and b's rows in the first one and
    the first join's results and c's rows in the second, each until the
    watermark rules out further partners.
    """
    names = list(params.join_order or [_first_stream(params, i) for i in range(3)])
    span = params.window("w", 5.0)
    delay = _delay(params)
    sides = []
    for i, name in enumerate(names):
        df = synthetic(spark, params, name).withWatermark("event_time", delay)
        sides.append(df.select(F.col("event_time").alias(f"t{i}"), F.col("key").alias(f"k{i}"), F.col("value").alias(f"v{i}")))
    within = F.expr(f"INTERVAL {interval(span)}")

    def near(i: int) -> Any:
        return (F.col(f"k{i}") == F.col("k0")) & (F.col(f"t{i}") >= F.col("t0") - within) & (F.col(f"t{i}") <= F.col("t0") + within)

    # Spark allows one event-time column per stream: the first join's result goes on with a's.
    first = observed_join(sides[0], sides[1], params.node("j1"), near(1), validity_seconds=2 * span).drop("t1")
    return observed_join(first, sides[2], params.node("j2"), near(2), validity_seconds=2 * span)
