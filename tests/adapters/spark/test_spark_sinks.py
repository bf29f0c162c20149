"""Sinks on foreachBatch: every batch written once however often it is replayed, and a live filter hook."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa
from pyspark.sql import functions as F
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.sinks import MemorySink, ParquetSink, SqlSink, before


def batch(spark, n: int, offset: int = 0):  # noqa: F811
    """A small batch shaped like a windowed count: (window struct, key, n)."""
    rows = [(datetime(2026, 1, 1, 0, 0, i), datetime(2026, 1, 1, 0, 0, i + 10), offset + i, i * 10) for i in range(n)]
    df = spark.createDataFrame(rows, "start timestamp, end timestamp, key long, n long")
    return df.select(F.struct("start", "end").alias("window"), "key", "n")


def test_memory_sink_replaces_a_replayed_batch(spark) -> None:  # noqa: F811
    sink = MemorySink()
    writer = sink.writer("q", plan_version=2)
    writer(batch(spark, 3), 0)
    writer(batch(spark, 3), 0)  # Spark replays batch 0 after a failure
    writer(batch(spark, 2, offset=100), 1)
    rows = sink.rows("q")
    assert len(rows) == 5 and sink.batch_ids("q") == [0, 1]
    sink.writer("q", plan_version=3)(batch(spark, 1), 0)  # a new run's batch 0 is another batch
    assert len(sink.rows("q")) == 6 and sink.batch_ids("q", plan_version=3) == [0]
    assert {r["plan_version"] for r in rows} == {2}


def test_keep_hook_is_read_at_every_batch(spark) -> None:  # noqa: F811
    sink = MemorySink()
    writer = sink.writer("old")
    writer(batch(spark, 5), 0)
    writer.keep = before("window.end", datetime(2026, 1, 1, 0, 0, 12))  # GenMig: results up to T_split only
    writer(batch(spark, 5), 1)
    writer.keep = None
    writer(batch(spark, 5), 2)
    per_batch = [len([r for r in sink.rows("old") if r["batch_id"] == b]) for b in (0, 1, 2)]
    assert per_batch == [5, 3, 5]


def test_a_filter_is_set_from_a_batch_on_only_if_no_later_batch_has_been_written(spark) -> None:  # noqa: F811
    """GenMig places T_split from some batch's progress; a later batch already written unfiltered may hold results past it."""
    writer = MemorySink().writer("old")
    split = before("window.end", datetime(2026, 1, 1, 0, 0, 12))
    assert writer.keep_from(split, after_batch=0) and writer.keep is split  # nothing written yet
    writer.keep = None
    writer(batch(spark, 5), 0)
    writer(batch(spark, 5), 1)
    assert writer.last_batch_id == 1
    assert not writer.keep_from(split, after_batch=0) and writer.keep is None
    assert writer.keep_from(split, after_batch=1) and writer.keep is split


def test_parquet_sink_partitions_by_plan_version_and_overwrites_batches(spark, tmp_path) -> None:  # noqa: F811
    sink = ParquetSink(tmp_path / "out")
    sink.writer("q", 0)(batch(spark, 3), 0)
    sink.writer("q", 0)(batch(spark, 3), 0)
    sink.writer("q", 1)(batch(spark, 2, offset=100), 1)
    assert (tmp_path / "out" / "plan_version=1" / "query=q" / "batch_id=1").is_dir()
    back = spark.read.parquet(str(tmp_path / "out"))
    counts = {(r["plan_version"], r["batch_id"]): r["count"] for r in back.groupBy("plan_version", "batch_id").count().collect()}
    assert counts == {(0, 0): 3, (1, 1): 2}


def test_sql_sink_deletes_and_inserts_a_batch_in_one_transaction(spark, tmp_path) -> None:  # noqa: F811
    url = f"sqlite:///{tmp_path / 'results.db'}"
    sink = SqlSink(url, "clicks_per_key")
    writer = sink.writer("q", 3)
    writer(batch(spark, 4), 7)
    writer(batch(spark, 4), 7)
    writer(batch(spark, 1, offset=50), 8)
    rows = sink.read("q")
    assert [(r["batch_id"], r["row"]) for r in rows] == [(7, 0), (7, 1), (7, 2), (7, 3), (8, 0)]
    sink.writer("q", 4)(batch(spark, 2), 7)  # a restarted run (new plan version) counts batches from 0 again
    assert len(sink.read("q")) == 7
    assert rows[0]["window_start"] == datetime(2026, 1, 1, 0, 0, 0) and rows[0]["plan_version"] == 3
    engine = sa.create_engine(url)
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:  # the unique key guards (query, batch, row)
        conn.execute(sa.text("INSERT INTO clicks_per_key (query, plan_version, batch_id, row) VALUES ('q', 3, 7, 0)"))
    engine.dispose()
    sink.close()


def test_sql_sink_rejects_a_batch_of_another_shape(spark, tmp_path) -> None:  # noqa: F811
    sink = SqlSink(f"sqlite:///{tmp_path / 'r.db'}", "t")
    sink.writer("q")(batch(spark, 1), 0)
    with pytest.raises(ValueError, match="has no column"):
        sink.writer("q")(spark.createDataFrame([(1,)], "other long"), 1)
    sink.close()


def test_a_batch_writer_pickles_for_spark_connect(tmp_path) -> None:
    """Spark Connect pickles the foreachBatch function into the server's Python: the writer must survive it, filter included."""
    from pyspark import cloudpickle

    from armd.adapters.spark.sinks import BatchWriter

    writer = BatchWriter(ParquetSink(tmp_path), "q", 3, keep=before("window.end", 10.0))
    copy = cloudpickle.loads(cloudpickle.dumps(writer))
    assert (copy.query, copy.plan_version, copy.sink.root) == ("q", 3, tmp_path) and copy.keep is not None
    copy.keep = None  # the copy's lock works and is its own
    assert writer.keep is not None


def test_a_shared_batch_writer_hands_its_filter_to_the_copy_spark_connect_runs(spark, tmp_path) -> None:  # noqa: F811
    """Over Spark Connect the query runs a pickled copy of the writer in the server's Python: a filter set on the
    client's writer must reach the copy's next batch, and the copy's batch ids must reach the client's keep_from."""
    from pyspark import cloudpickle

    from armd.adapters.spark.shared_writer import SharedBatchWriter

    client = SharedBatchWriter(ParquetSink(tmp_path / "out"), "old", 0, tmp_path / "board")
    server = cloudpickle.loads(cloudpickle.dumps(client))
    server(batch(spark, 5), 0)
    split = before("window.end", datetime(2026, 1, 1, 0, 0, 12))
    assert client.last_batch_id == 0 and client.keep_from(split, after_batch=0)
    server(batch(spark, 5), 1)  # filtered: windows ending before 12 s only
    assert not client.keep_from(split, after_batch=0)  # batch 1 reached the sink: the split must be placed again
    client.keep = None
    server(batch(spark, 5), 2)
    back = spark.read.parquet(str(tmp_path / "out"))
    per_batch = {r["batch_id"]: r["count"] for r in back.groupBy("batch_id").count().collect()}
    assert per_batch == {0: 5, 1: 3, 2: 5} and client.batches == 3 and client.last_batch_id == 2
