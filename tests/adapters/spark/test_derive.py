"""Plan derivation on real Spark: a corpus of streaming queries, each with its derived plan written out.

Nothing runs: every query is built on ``spark.readStream`` (the rate
source, armd's synthetic source, a JSON file source on a temporary folder)
and only its analyzed plan is read, so the corpus takes a few seconds.
"""

from __future__ import annotations

import json

import pytest
from support.spark import spark  # noqa: F401

from armd.adapters.spark.derive import DerivationError, derive, derive_builder, plan_document
from armd.adapters.spark.managed import QueryParams
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from pyspark.sql import functions as F

BUILDERS = "armd.adapters.spark.builders"
SCHEDULE = json.dumps({"rate_per_second": 10.0, "steps": [], "bursts": []})


def synthetic(spark, stream: str):  # noqa: F811
    return spark.readStream.format("armd-synthetic").options(stream=stream, start="0", schedule=SCHEDULE, keys="5").load()


def rate(spark, per_second: int = 10):  # noqa: F811
    return spark.readStream.format("rate").option("rowsPerSecond", per_second).load()


def src(stream: str) -> dict:
    return {"op": "source", "stream": stream}


def win(node_id: str, w: float, below: dict) -> dict:
    return {"op": "window", "id": node_id, "w": w, "inputs": [below]}


def slid(q: str, w: float, g: float, below: dict, name: str = "w") -> dict:
    return {"op": "granularity", "id": f"{q}.{name}.g", "g": g,
            "inputs": [win(f"{q}.{name}", w, below)]}


def agg(node_id: str, below: dict, groups: bool = True) -> dict:
    return {"op": "aggregate", "id": node_id, **({"groups": 1} if groups else {}), "inputs": [below]}


def sel(node_id: str, below: dict) -> dict:
    return {"op": "select", "id": node_id, "sel": 1.0, "inputs": [below]}


def join(node_id: str, left: dict, right: dict) -> dict:
    return {"op": "join", "id": node_id, "sel": 1.0, "inputs": [left, right]}


def ordered(node: dict) -> dict:
    """Key order does not matter in a plan; inputs order does."""
    return {k: ([ordered(c) for c in v] if k == "inputs" else v) for k, v in sorted(node.items())}


def tumbling_count_per_key(spark, tmp_path):  # noqa: F811
    df = rate(spark).withWatermark("timestamp", "2 seconds")
    return df.groupBy(F.window("timestamp", "10 seconds"), (F.col("value") % 5).alias("k")).count()


def sliding_count_per_key(spark, tmp_path):  # noqa: F811
    df = synthetic(spark, "clicks").withWatermark("event_time", "3 seconds")
    return df.groupBy(F.window("event_time", "30 seconds", "5 seconds"), "key").count()


def filter_before_scalar_average(spark, tmp_path):  # noqa: F811
    df = synthetic(spark, "clicks").withWatermark("event_time", "1 second").where("value > 0.5")
    return df.groupBy(F.window("event_time", "10 seconds", "2 seconds")).agg(F.avg("value"))


def two_way_join(spark, tmp_path):  # noqa: F811
    a = synthetic(spark, "a").withWatermark("event_time", "2 seconds").select(F.col("event_time").alias("at"), F.col("key").alias("ak"))
    b = synthetic(spark, "b").withWatermark("event_time", "2 seconds").select(F.col("event_time").alias("bt"), F.col("key").alias("bk"))
    return a.join(b, F.expr("ak = bk AND bt >= at - INTERVAL 4 SECONDS AND bt <= at + INTERVAL 4 SECONDS"))


def asymmetric_between_join(spark, tmp_path):  # noqa: F811
    clicks = synthetic(spark, "clicks").withWatermark("event_time", "1 second").select(F.col("event_time").alias("ct"), "key")
    orders = synthetic(spark, "orders").withWatermark("event_time", "1 second").select(F.col("event_time").alias("ot"), F.col("key").alias("ok"))
    # an order counts for clicks up to 10 s before it and 2 s after it
    return orders.join(clicks, F.expr("key = ok AND ct BETWEEN ot - INTERVAL 10 SECONDS AND ot + INTERVAL 2 SECONDS"))


def filter_before_join(spark, tmp_path):  # noqa: F811
    a = synthetic(spark, "a").withWatermark("event_time", "2 seconds").where(F.col("value") < 0.2) \
        .select(F.col("event_time").alias("at"), F.col("key").alias("ak"))
    b = synthetic(spark, "b").withWatermark("event_time", "2 seconds").select(F.col("event_time").alias("bt"), F.col("key").alias("bk"))
    # written the other way round: the left time bounded by the right one
    return a.join(b, (F.col("ak") == F.col("bk")) & (F.col("at") > F.col("bt") - F.expr("INTERVAL 3 SECONDS"))
                  & (F.col("at") < F.col("bt") + F.expr("INTERVAL 6 SECONDS")))


def dedup_before_aggregation(spark, tmp_path):  # noqa: F811
    df = synthetic(spark, "clicks").withWatermark("event_time", "2 seconds").dropDuplicates(["key", "event_time"])
    return df.groupBy(F.window("event_time", "20 seconds", "10 seconds"), "key").count()


def dedup_within_watermark_on_files(spark, tmp_path):  # noqa: F811
    folder = tmp_path / "orders"
    folder.mkdir()
    df = spark.readStream.schema("t timestamp, id string, shop int").json(str(folder)).withWatermark("t", "5 seconds")
    return df.dropDuplicatesWithinWatermark(["id"]).groupBy(F.window("t", "1 minute"), "shop").count()


def union_then_count(spark, tmp_path):  # noqa: F811
    a = synthetic(spark, "a").withWatermark("event_time", "2 seconds").select("event_time", "key")
    b = synthetic(spark, "b").withWatermark("event_time", "2 seconds").select("event_time", "key")
    return a.union(b).groupBy(F.window("event_time", "10 seconds", "5 seconds"), "key").count()


def chained_aggregations(spark, tmp_path):  # noqa: F811
    per_key = synthetic(spark, "clicks").withWatermark("event_time", "2 seconds") \
        .groupBy(F.window("event_time", "10 seconds"), "key").count()
    return per_key.groupBy(F.window(F.window_time("window"), "30 seconds")).agg(F.max("count"))


def projection_only(spark, tmp_path):  # noqa: F811
    folder = tmp_path / "events"
    folder.mkdir()
    df = spark.readStream.schema("t timestamp, v double").json(str(folder))
    return df.withColumn("double", F.col("v") * 2).select("t", "double").where("double > 1")


def two_rate_sources(spark, tmp_path):  # noqa: F811
    fast = rate(spark, 100).withWatermark("timestamp", "1 second").select(F.col("timestamp").alias("ft"), F.col("value").alias("fv"))
    slow = rate(spark, 5).withWatermark("timestamp", "1 second").select(F.col("timestamp").alias("st"), F.col("value").alias("sv"))
    return fast.join(slow, F.expr("fv % 5 = sv % 5 AND st BETWEEN ft - INTERVAL 500 MILLISECONDS AND ft + INTERVAL 1 SECOND"))


CORPUS = {
    tumbling_count_per_key: ({"rate": 10.0}, {"rate": 2.0},
                             agg("q.agg", slid("q", 10, 10, src("rate")))),
    sliding_count_per_key: ({"clicks": 10.0}, {"clicks": 3.0},
                            agg("q.agg", slid("q", 30, 5, src("clicks")))),
    filter_before_scalar_average: ({"clicks": 10.0}, {"clicks": 1.0},
                                   agg("q.agg", slid("q", 10, 2, sel("q.f", src("clicks"))), groups=False)),
    two_way_join: ({"a": 10.0, "b": 10.0}, {"a": 2.0, "b": 2.0},
                   join("q.j", win("q.j.left", 4, src("a")), win("q.j.right", 4, src("b")))),
    asymmetric_between_join: ({"orders": 10.0, "clicks": 10.0}, {"orders": 1.0, "clicks": 1.0},
                              join("q.j", win("q.j.left", 2, src("orders")), win("q.j.right", 10, src("clicks")))),
    filter_before_join: ({"a": 10.0, "b": 10.0}, {"a": 2.0, "b": 2.0},
                         join("q.j", win("q.j.left", 3, sel("q.f", src("a"))), win("q.j.right", 6, src("b")))),
    dedup_before_aggregation: ({"clicks": 10.0}, {"clicks": 2.0},
                               agg("q.agg", slid("q", 20, 10, sel("q.dedup", src("clicks"))))),
    dedup_within_watermark_on_files: ({"orders": 1.0}, {"orders": 5.0},
                                      agg("q.agg", slid("q", 60, 60, sel("q.dedup", src("orders"))))),
    union_then_count: ({"a": 10.0, "b": 10.0}, {"a": 2.0, "b": 2.0},
                       agg("q.agg", slid("q", 10, 5, {"op": "union", "id": "q.u", "inputs": [src("a"), src("b")]}))),
    chained_aggregations: ({"clicks": 10.0}, {"clicks": 2.0},
                           agg("q.agg", slid("q", 30, 30, agg("q.agg2", slid("q", 10, 10, src("clicks"), "w2"))), groups=False)),
    projection_only: ({"events": 1.0}, {}, sel("q.f", src("events"))),
    two_rate_sources: ({"rate": 100.0, "rate_2": 5.0}, {"rate": 1.0, "rate_2": 1.0},
                       join("q.j", win("q.j.left", 1, src("rate")), win("q.j.right", 0.5, src("rate_2")))),
}


@pytest.mark.parametrize("build", list(CORPUS), ids=[f.__name__ for f in CORPUS])
def test_corpus_query_derives_the_plan_written_out(spark, tmp_path, build) -> None:  # noqa: F811
    rates, delays, expected = CORPUS[build]
    derived = derive(build(spark, tmp_path), "q", trigger_seconds=2)
    assert ordered(derived.root) == ordered(expected)
    assert {name: s["rate"] for name, s in derived.streams.items()} == rates
    assert derived.watermark_delays == delays
    document = derived.document
    assert document["constants"]["trigger_interval"] == 2 and document["constants"]["watermark_delay"] == max(delays.values(), default=0)
    estimate(parse_plan(document), "spark")  # the derived plan is a valid plan of the cost model
    assert set(derived.operators) >= {n["id"] for n in _nodes(derived.root) if "id" in n}
    assert all(derived.operators[n] for n in derived.operators if not n.startswith("q.") or n in ("q.agg", "q.j"))


def _nodes(node: dict):
    yield node
    for child in node.get("inputs", []):
        yield from _nodes(child)


def test_corpus_has_at_least_twelve_queries() -> None:
    assert len(CORPUS) >= 12


def test_measured_parameters_are_marked_with_their_defaults(spark) -> None:  # noqa: F811
    derived = derive(filter_before_join(spark, None), "q")
    measured = {(m.where, m.param): m.default for m in derived.measured}
    assert measured == {("q.j", "sel"): 1.0, ("q.f", "sel"): 1.0, ("stream:a", "rate"): 10.0, ("stream:b", "rate"): 10.0,
                        ("stream:a", "size"): 400.0, ("stream:b", "size"): 400.0}
    counted = derive(sliding_count_per_key(spark, None), "q")
    assert ("q.agg", "groups") in {(m.where, m.param) for m in counted.measured}


def test_spark_operators_are_listed_beside_each_node(spark) -> None:  # noqa: F811
    derived = derive(sliding_count_per_key(spark, None), "q")
    assert derived.operators["q.agg"] == ["Aggregate [window, key]"]
    assert derived.operators["q.w"] == ["Expand window(30 s, 5 s) (sliding)"]
    assert derived.operators["q.clicks"][:2] == ["StreamingRelationV2 armd-synthetic stream=clicks",
                                                 "EventTimeWatermark event_time, 3 s"]


def test_builder_names_become_node_ids_prefixed_with_the_query(spark) -> None:  # noqa: F811
    params = QueryParams(extra={"sources": {"clicks": {"start": "0", "schedule": SCHEDULE, "keys": 5}},
                                "delay_seconds": 2, "min_value": 0.5})
    derived = derive_builder(spark, f"{BUILDERS}:windowed_count", "cpk", params, time_unit_seconds=0.001)
    assert derived.nodes == {"agg": "cpk.agg", "w": "cpk.w", "f": "cpk.f"}
    assert ordered(derived.root) == ordered(agg("cpk.agg", slid("cpk", 10_000, 1000, sel("cpk.f", src("clicks")))))
    assert derived.streams["clicks"] == {"rate": 0.01, "g": 1.0, "size": 400.0}  # milliseconds: 10 per 1000


def test_three_way_join_builder(spark) -> None:  # noqa: F811
    sources = {s: {"start": "0", "schedule": SCHEDULE, "keys": 5} for s in ("a", "b", "c")}
    derived = derive_builder(spark, f"{BUILDERS}:three_way_join", "t", QueryParams(extra={"sources": sources}))
    first = join("t.j1", win("t.w", 5, src("a")), win("t.w.right", 5, src("b")))
    assert ordered(derived.root) == ordered(join("t.j2", first, win("t.j2.right", 5, src("c"))))
    assert derived.nodes == {"j1": "t.j1", "j2": "t.j2", "w": "t.w"}


def test_two_queries_never_share_nodes(spark) -> None:  # noqa: F811
    one, two = (derive(sliding_count_per_key(spark, None), q) for q in ("one", "two"))
    document = plan_document([one, two])
    plan = parse_plan(document)
    assert not set(plan.query_nodes("one")) & set(plan.query_nodes("two"))


def stateful_udf(spark, tmp_path):  # noqa: F811
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key, frames, state):
        yield pd.DataFrame({"key": [key[0]], "n": [sum(len(f) for f in frames)]})

    df = synthetic(spark, "clicks")
    return df.groupBy("key").applyInPandasWithState(count, "key long, n long", "n long", "append", GroupStateTimeout.NoTimeout)


def join_without_range(spark, tmp_path):  # noqa: F811
    a = synthetic(spark, "a").select(F.col("key").alias("ak"))
    b = synthetic(spark, "b").select(F.col("key").alias("bk"))
    return a.join(b, F.col("ak") == F.col("bk"))


def session_window(spark, tmp_path):  # noqa: F811
    df = synthetic(spark, "clicks").withWatermark("event_time", "2 seconds")
    return df.groupBy(F.session_window("event_time", "5 seconds"), "key").count()


def stream_static_join(spark, tmp_path):  # noqa: F811
    shops = spark.createDataFrame([(1, "a")], "key long, name string")
    return synthetic(spark, "clicks").join(shops, "key")


def explode(spark, tmp_path):  # noqa: F811
    return synthetic(spark, "clicks").withColumn("x", F.explode(F.array(F.lit(1), F.lit(2))))


def range_beside_zero(spark, tmp_path):  # noqa: F811
    a = synthetic(spark, "a").withWatermark("event_time", "1 second").select(F.col("event_time").alias("at"))
    b = synthetic(spark, "b").withWatermark("event_time", "1 second").select(F.col("event_time").alias("bt"))
    return a.join(b, F.expr("bt BETWEEN at + INTERVAL 1 SECOND AND at + INTERVAL 5 SECONDS"))


UNSUPPORTED = {
    stateful_udf: "unsupported operator FlatMapGroupsInPandasWithState (arbitrary stateful processing",
    join_without_range: "unsupported operator Join without an event-time range",
    session_window: "unsupported operator session_window",
    stream_static_join: "(a static, non-streaming input: stream-static joins are not modelled)",
    explode: "unsupported operator Generate",
    range_beside_zero: "the range must contain 0",
}


@pytest.mark.parametrize("build", list(UNSUPPORTED), ids=[f.__name__ for f in UNSUPPORTED])
def test_unsupported_shapes_fail_with_one_line(spark, tmp_path, build) -> None:  # noqa: F811
    with pytest.raises(DerivationError) as caught:
        derive(build(spark, tmp_path), "q")
    message = str(caught.value)
    assert UNSUPPORTED[build] in message and "\n" not in message


def test_a_batch_dataframe_is_refused(spark) -> None:  # noqa: F811
    with pytest.raises(DerivationError, match="not a streaming DataFrame"):
        derive(spark.range(3), "q")
