"""Builders that only tests use, referenced as ``support.builders:NAME`` (a test module cannot be named: pytest imports
test modules under generated names)."""

from __future__ import annotations

import functools
import time

from pyspark.sql import DataFrame, SparkSession

from armd.adapters.spark.builders import windowed_count
from armd.adapters.spark.managed import QueryParams


def passthrough(spark: SparkSession, params: QueryParams) -> DataFrame:
    """A stateless builder: the source rows as they come."""
    from armd.adapters.spark.builders import synthetic

    return synthetic(spark, params, "clicks")


@functools.wraps(windowed_count)
def windowed_count_or_unstartable(spark: SparkSession, params: QueryParams) -> DataFrame:
    """``windowed_count``, except that a plan with ``fail_start`` (seconds) fails after that long, as a run does that a
    cluster gives up on after its attempts; ``wraps`` keeps the hints GenMig reads from the builder (reference point)."""
    if params.extra.get("fail_start"):
        time.sleep(float(params.extra["fail_start"]))
        raise RuntimeError("this plan cannot start (the test's unstartable plan)")
    return windowed_count(spark, params)
