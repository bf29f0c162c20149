"""The tutorial's query (docs/tutorial.md): page views per page over a sliding window, as an armd builder."""

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from armd.adapters.spark.builders import interval, synthetic
from armd.adapters.spark.managed import QueryParams
from armd.adapters.spark.observed import observed_groups


def build(spark: SparkSession, params: QueryParams) -> DataFrame:
    views = synthetic(spark, params, "views")  # your own source here: spark.readStream.format("kafka")…
    delay = interval(params.extra.get("delay_seconds", 10))
    size, slide = params.window("w", 300), params.slide("w", 60)
    views = observed_groups(views.withWatermark("event_time", delay), params.node("agg"), "key")
    return (views.groupBy(F.window("event_time", interval(size), interval(min(slide, size))), F.col("key").alias("page"))
            .agg(F.count(F.lit(1)).alias("views")))
