"""Builders that only tests use, referenced as ``support.builders:NAME`` (a test module cannot be named: pytest imports
test modules under generated names)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from armd.adapters.spark.managed import QueryParams


def passthrough(spark: SparkSession, params: QueryParams) -> DataFrame:
    """A stateless builder: the source rows as they come."""
    from armd.adapters.spark.builders import synthetic

    return synthetic(spark, params, "clicks")
