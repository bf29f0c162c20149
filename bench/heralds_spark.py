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


def join_case(drop: float, repeats: int, seed: int, session, directory: str, *, per_stream: int = 20_000,
              piece_s: int = 50, keys: int = 1_000) -> dict:
    """armd's two-way join on Spark with the heralds' mode table against the same join without it, same input.

    Streams A and B, ``per_stream`` tuples each at 20 per second, in pieces of ``piece_s`` seconds. Every
    piece of B holds keys in [0, keys) and every piece of A too, except a fraction ``drop`` of A's pieces
    whose keys lie in [keys, 2·keys): each piece carries a time herald saying which (join data skipping
    finds those A tuples joinless against B's heralds). The mode table is published before the query
    starts; each run is the wall time until every file is processed, median of the repeats, the two
    variants alternating; the result counts must be equal (the oracle)."""
    import json
    from pathlib import Path

    from armd.adapters.spark.jisc import jisc_join
    from armd.adapters.spark.jisc_heralds import write_modes
    from armd.migrations.heralds import Herald, Range
    from armd.migrations.join.herald_modes import skip_spans

    rnd = random.Random(seed)
    base_ms = 1_800_000_000_000
    pieces = -(-per_stream // (20 * piece_s))
    far = {i for i, flag in enumerate(dropped_flags(rnd, pieces, drop)) if flag}
    rows = []
    for i in range(per_stream * 2):
        stream, t_ms = "AB"[i % 2], (i // 2) * 50
        piece = t_ms // (piece_s * 1000)
        offset = keys if stream == "A" and piece in far else 0
        rows.append((stream, offset + rnd.randrange(keys), i, base_ms + t_ms))
    end_ms = rows[-1][3] + 3_600_000
    source = Path(directory) / f"join-{drop}"
    source.mkdir(parents=True)
    for f in range(4):
        part = rows[f * len(rows) // 4:(f + 1) * len(rows) // 4]
        (source / f"part-{f}.json").write_text("".join(
            json.dumps({"s": s, "k": k, "id": i, "t": t / 1000}) + "\n" for s, k, i, t in part))
    (source / "part-9.json").write_text("".join(
        json.dumps({"s": s, "k": -1 - j, "id": -1 - j, "t": end_ms / 1000}) + "\n" for j, s in enumerate("AB")))
    heralds = {s: [Herald.of({"k": Range(keys, 2 * keys - 1) if s == "A" and p in far else Range(0, keys - 1)},
                             time=piece_s * 1000, ts=float(base_ms + p * piece_s * 1000)) for p in range(pieces)]
               for s in "AB"}
    skip = skip_spans(heralds, {"A": "k", "B": "k"}, 10_000)
    modes = Path(directory) / f"modes-{drop}.json"
    write_modes(modes, 1, {s: [(int(a), int(b)) for a, b in iv] for s, iv in skip.items()})
    skipped = sum(1 for s, _, _, t in rows if any(a <= t < b for a, b in skip[s]))

    def run(with_heralds: bool, rep: int) -> tuple[float, int]:
        events = session.readStream.schema("s string, k long, id long, t double").option("maxFilesPerTrigger", 1)
        events = events.json(str(source)).withColumn("t", F.timestamp_seconds("t"))
        joined = jisc_join({s: events.where(events.s == s) for s in "AB"}, key="k", time="t", id="id",
                           window_ms=10_000, control_path=str(Path(directory) / "plan.json"),
                           modes_path=str(modes) if with_heralds else None, watermark_delay="2 seconds")
        name = f"heralds_join_{int(drop * 10)}_{int(with_heralds)}_{rep}"
        started = time.perf_counter()
        query = (joined.writeStream.format("memory").queryName(name).outputMode("append")
                 .option("checkpointLocation", str(Path(directory) / name)).start())
        try:
            query.processAllAvailable()
            elapsed = time.perf_counter() - started
        finally:
            query.stop()
        return elapsed, session.table(name).count()

    from pyspark.sql import functions as F

    plain_times, herald_times, counts = [], [], set()
    for rep in range(repeats):
        for with_heralds in ((False, True) if rep % 2 == 0 else (True, False)):
            elapsed, count = run(with_heralds, rep)
            (herald_times if with_heralds else plain_times).append(elapsed)
            counts.add(count)
    p, h = statistics.median(plain_times), statistics.median(herald_times)
    return {
        "operator": "armd's join on Spark",
        "heralds": "time spans, mode table",
        "drop_rate": drop,
        "tuples": len(rows),
        "tuples_skipped": skipped,
        "results": min(counts),
        "without_heralds_s": round(p, 3),
        "with_heralds_s": round(h, 3),
        "time_ratio": round(h / p, 4),
        "oracle_ok": len(counts) == 1,
    }


if __name__ == "__main__":  # python bench/heralds_spark.py --join [--repeats N]: the join cases alone, as JSON
    import argparse
    import json
    import sys
    import tempfile

    parser = argparse.ArgumentParser(description="armd's join on Spark with and without the heralds' mode table")
    parser.add_argument("--join", action="store_true", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--drops", default="0.0,0.9")
    args = parser.parse_args()
    from armd.adapters.spark.session import build_session

    spark_session = build_session("local[2]", "armd-bench-heralds-join", shuffle_partitions=2, state_store="rocksdb")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cases = [join_case(float(d), args.repeats, args.seed, spark_session, tmp) for d in args.drops.split(",")]
    finally:
        spark_session.stop()
    for c in cases:
        print(json.dumps(c), file=sys.stderr)
    print(json.dumps({"cases": cases,
                      "spark_join_time_ratio_at_drop_0_9": next((c["time_ratio"] for c in cases if c["drop_rate"] == 0.9), None),
                      "oracle_ok": all(c["oracle_ok"] for c in cases)}, indent=1))
