"""The armd SparkSession: workers on this interpreter, checked options, RocksDB state on request."""

from __future__ import annotations

import math
import os
import sys
import time

import pytest
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.spark.measure import sources
from armd.adapters.spark.session import STATE_STORES, build_session
from armd.adapters.spark.sinks import MemorySink


def test_workers_run_this_python(spark) -> None:  # noqa: F811
    assert os.environ["PYSPARK_PYTHON"] == sys.executable == os.environ["PYSPARK_DRIVER_PYTHON"]
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"state_store": "memory"}, "state_store must be one of hdfs, rocksdb"),
        ({"shuffle_partitions": 0}, "shuffle_partitions must be a whole number >= 1"),
        ({"log_level": "LOUD"}, "log_level must be one of"),
    ],
)
def test_bad_session_options_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_session(**kwargs)


def test_rocksdb_state_store_on_request(spark, progress_listener, tmp_path) -> None:  # noqa: F811
    session = build_session(state_store="rocksdb")
    try:
        assert session.conf.get("spark.sql.streaming.stateStore.providerClass") == STATE_STORES["rocksdb"]
        manager = QueryManager(session, tmp_path)
        extra = {"sources": sources({"clicks": 10.0}, start=math.floor(time.time()) - 100, seconds=4, batch_seconds=4, keys=2)}
        manager.register(ManagedSpec("rocks", "armd.adapters.spark.builders:windowed_count", MemorySink(),
                                     QueryParams(windows={"w": 2.0}, slides={"w": 1.0}, extra=extra)))
        query = manager.start("rocks")
        query.processAllAvailable()
        assert progress_listener.wait_for_run(query, 30)
        manager.stop_all()
        [record] = [r for r in progress_listener.records("rocks") if r.batch_id == 0]
        assert record.state_rows > 0
        assert any(name.startswith("rocksdb") for op in record.state_operators for name in op.custom)
    finally:
        build_session(state_store="hdfs")


def test_runtime_wires_the_ports_over_one_session(spark, tmp_path) -> None:  # noqa: F811
    from datetime import datetime, timezone

    from armd.adapters.spark.runtime import SparkRuntime

    failed: list = []
    runtime = SparkRuntime.create(checkpoint_root=tmp_path, time_unit_seconds=0.001, on_terminated=failed.append)
    try:
        assert runtime.spark is spark and runtime.applier.name == "genmig"  # the default
        assert runtime.stats.observe(datetime.now(timezone.utc)).streams == ()
    finally:
        runtime.close()
    events: list = []
    runtime = SparkRuntime.create(checkpoint_root=tmp_path, time_unit_seconds=0.001, migration="naive-restart",
                                  on_event=events.append)
    try:  # the lossy restart only by explicit choice, and said so as the daemon starts
        assert runtime.applier.name == "naive-restart"
        assert [(e.kind, e.severity, e.details["lossy"]) for e in events] == [("naive_restart_configured", "warning", True)]
    finally:
        runtime.close()
