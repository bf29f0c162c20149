"""``bench/heralds.py --spark``: the herald-aware select inside Spark against the plain select, same data, same run."""

from __future__ import annotations

import random
import statistics
import time

from heralds import SELECT, dropped_flags

from armd.migrations.heralds import Herald, Range, SelectReasoner

SPARK_ROWS = 1_000_000
SPARK_SPAN = 10_000


def case(drop: float, repeats: int, seed: int, session, directory: str) -> dict:
    """The herald-aware select inside Spark (``adapters/spark/heralds.py``), against the plain select, same data.

    A Parquet table of ``SPARK_ROWS`` rows (a, b, t), sorted by t (one row per second), in spans of
    ``SPARK_SPAN`` rows; a fraction ``drop`` of the spans hold a ∈ [500, 999] and carry a time herald
    saying so (select data skipping), the others a herald a ∈ [0, 999] that proves nothing. Each run is
    the wall time of the query's one action (count and sum of b over σ: 200 ≤ a < 400), median of the
    repeats, plain and herald runs alternating; the two results must be equal (the oracle)."""
    from pyspark.sql import functions as F

    from armd.adapters.spark.heralds import column, herald_select
    from armd.migrations.heralds.spans import spans

    rnd = random.Random(seed)
    count = SPARK_ROWS // SPARK_SPAN
    dropped = [i for i, flag in enumerate(dropped_flags(rnd, count, drop)) if flag]
    path = f"{directory}/spark-{drop}"
    span = F.floor(F.col("id") / SPARK_SPAN)
    noise = F.pmod(F.hash(F.col("id"), F.lit(seed)), 1000)
    (session.range(SPARK_ROWS)
        .select(F.when(span.isin(dropped), 500 + F.pmod(noise, 500)).otherwise(noise).alias("a"),
                F.pmod(F.col("id"), 100).alias("b"), F.col("id").cast("double").alias("t"))
        .coalesce(1).write.option("parquet.block.size", 256 * 1024).mode("overwrite").parquet(path))
    heralds = [Herald.of({"a": Range(500, 999) if i in dropped else Range(0, 999)}, time=SPARK_SPAN, ts=float(i * SPARK_SPAN))
               for i in range(count)]
    plan = spans(heralds, SelectReasoner(SELECT))
    df = session.read.parquet(path)

    def plain():
        return df.where(column(SELECT)).agg(F.count("*"), F.sum("b")).collect()[0]

    def herald():
        return herald_select(df, plan, SELECT, "t").agg(F.count("*"), F.sum("b")).collect()[0]

    plain(), herald()  # warm the JVM's code for both
    plain_times, herald_times = [], []
    for _ in range(repeats):
        for fn, times in ((plain, plain_times), (herald, herald_times)):
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
            if fn is plain:
                plain_out = result
            else:
                herald_out = result
    p, h = statistics.median(plain_times), statistics.median(herald_times)
    return {
        "operator": "select on Spark",
        "heralds": "time spans",
        "drop_rate": drop,
        "tuples": SPARK_ROWS,
        "spans": len(plan),
        "results": plain_out[0],
        "without_heralds_s": round(p, 4),
        "with_heralds_s": round(h, 4),
        "time_ratio": round(h / p, 4),
        "oracle_ok": tuple(plain_out) == tuple(herald_out),
    }
