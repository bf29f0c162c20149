"""Managed queries on real Spark: builders, runs on their own checkpoints, the lossy naive-restart applier."""

from __future__ import annotations

import math
import time

import pytest
from support.spark import progress_listener, spark  # noqa: F401
from structlog.testing import capture_logs

from armd.adapters.spark.managed import (
    ManagedSpec, NaiveRestartApplier, QueryManager, QueryParams, armd_query_name, load_builder,
)
from armd.adapters.spark.measure import sources
from armd.adapters.spark.sinks import BatchSink, MemorySink
from armd.control.ports import EventRecord, QuerySettings

WINDOWED_COUNT = "armd.adapters.spark.builders:windowed_count"


class FailingSink(BatchSink):
    def write_batch(self, df, query, batch_id, plan_version) -> None:
        raise RuntimeError("the sink is broken")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("builders_without_colon", "must be 'module:function'"),
        ("no_such_module_xyz:build", "cannot import module 'no_such_module_xyz'"),
        ("armd.adapters.spark.builders:nope", "has no attribute 'nope'"),
        ("armd.adapters.spark.builders:EMITS", "is not callable"),
    ],
)
def test_bad_builder_names_what_is_wrong(ref: str, message: str) -> None:
    with pytest.raises(LookupError, match=message):
        load_builder(ref)


def test_spark_query_names_map_back_to_armd_queries() -> None:
    assert armd_query_name("clicks_per_key@12") == "clicks_per_key"
    assert armd_query_name("someone_elses_query") is None
    assert armd_query_name(None) is None
    with pytest.raises(ValueError, match="contain no '@'"):
        ManagedSpec("a@b", WINDOWED_COUNT, MemorySink())


def test_params_take_settings_in_model_units() -> None:
    params = QueryParams(windows={"w": 10.0, "v": 3.0}, slides={"v": 0.5}, granularity=2.0)
    settings = QuerySettings(fw=0.5, fg=1.0, windows={"w": 4000.0}, granularity=1000.0, qos=0.7)
    new = params.with_settings(settings, 0.001)
    assert new.windows == {"w": 4.0, "v": 3.0} and new.granularity == 1.0
    assert new.slide("w", 9.0) == 1.0 and new.slide("v", 9.0) == 0.5


def test_naive_restart_applies_new_windows_on_a_fresh_checkpoint(spark, progress_listener, tmp_path) -> None:  # noqa: F811
    start = math.floor(time.time()) - 3600
    sink = MemorySink()
    manager = QueryManager(spark, tmp_path / "checkpoints")
    extra = {"sources": sources({"clicks": 20.0}, start=start, seconds=12, batch_seconds=4, keys=3), "delay_seconds": 0}
    manager.register(ManagedSpec("wc", WINDOWED_COUNT, sink, QueryParams(windows={"w": 4.0}, granularity=4.0, extra=extra)))
    events: list[EventRecord] = []
    applier = NaiveRestartApplier(manager, 0.001, on_event=events.append)
    try:
        manager.start("wc").processAllAvailable()
        first_checkpoint = manager.get("wc").checkpoint
        assert first_checkpoint is not None and first_checkpoint.exists()
        new = QuerySettings(fw=0.0, fg=1.0, windows={"w": 2000.0}, granularity=2000.0, qos=0.5)
        with capture_logs() as logs:
            assert applier.apply("wc", None, new) == "naive-restart"
        managed = manager.get("wc")
        assert managed.params.version == 1 and managed.params.windows["w"] == 2.0 and managed.params.granularity == 2.0
        assert managed.checkpoint != first_checkpoint and not first_checkpoint.exists()
        managed.query.processAllAvailable()  # type: ignore[union-attr]
    finally:
        manager.stop_all()
    lengths = {(r["plan_version"], (r["window"]["end"] - r["window"]["start"]).total_seconds()) for r in sink.rows("wc")}
    assert lengths == {(0, 4.0), (1, 2.0)}
    [event] = events
    assert event.kind == "naive_restart" and event.details["lossy"] is True and "lossy" in event.message
    assert [entry for entry in logs if entry["event"] == "naive_restart"][0]["lossy"] is True
    with pytest.raises(LookupError, match="no managed query 'nope'; registered: wc"):
        applier.apply("nope", None, new)


def test_the_first_apply_starts_the_query_without_a_lossy_restart(spark, progress_listener, tmp_path) -> None:  # noqa: F811
    manager = QueryManager(spark, tmp_path / "checkpoints")
    extra = {"sources": sources({"clicks": 5.0}, start=time.time() - 100, seconds=4, batch_seconds=4), "nodes": {"w": "q_w"}}
    manager.register(ManagedSpec("wc", WINDOWED_COUNT, MemorySink(), QueryParams(extra=extra)))
    events: list[EventRecord] = []
    applier = NaiveRestartApplier(manager, 1.0, on_event=events.append)
    try:
        with capture_logs() as logs:
            applier.apply("wc", None, QuerySettings(fw=1.0, fg=1.0, windows={"q_w": 3.0}, granularity=1.0, qos=1.0))
        managed = manager.get("wc")
        assert managed.running and managed.params.version == 0 and managed.params.window("w", 99.0) == 3.0
    finally:
        manager.stop_all()
    assert events == [] and [entry["event"] for entry in logs] == ["query_started"]


def test_keep_hook_changes_between_batches_of_a_running_query(spark, progress_listener, tmp_path) -> None:  # noqa: F811
    sink = MemorySink()
    manager = QueryManager(spark, tmp_path / "checkpoints")
    extra = {"sources": {"clicks": {**sources({"clicks": 50.0}, start=time.time() - 1, seconds=1e9, batch_seconds=1)["clicks"],
                                    "end_seconds": ""}}}
    manager.register(ManagedSpec("live", "support.builders:passthrough", sink, QueryParams(extra=extra)))
    try:
        manager.start("live")
        assert progress_listener.wait_for(lambda: len(sink.batch_ids("live")) >= 2 and sink.rows("live"), 60)
        manager.get("live").writer.keep = lambda df: df.limit(0)  # type: ignore[union-attr]
        switched = max(sink.batch_ids("live"))
        assert progress_listener.wait_for(lambda: max(sink.batch_ids("live")) >= switched + 3, 60)
    finally:
        manager.stop_all()
    late = [r for r in sink.rows("live") if r["batch_id"] > switched + 1]
    assert sink.rows("live") and not late


def test_a_failing_query_calls_the_termination_hook(spark, progress_listener, tmp_path) -> None:  # noqa: F811
    failed = []
    progress_listener.add_termination_hook(failed.append)
    manager = QueryManager(spark, tmp_path / "checkpoints")
    extra = {"sources": sources({"clicks": 5.0}, start=time.time() - 100, seconds=4, batch_seconds=4)}
    manager.register(ManagedSpec("broken", "support.builders:passthrough", FailingSink(), QueryParams(extra=extra)))
    query = manager.start("broken")
    with pytest.raises(Exception, match="the sink is broken"):
        query.awaitTermination(60)
    assert progress_listener.wait_for(lambda: any(f.query == "broken" for f in failed), 30)
    [info] = [f for f in failed if f.query == "broken"]
    assert info.spark_name == "broken@0" and "the sink is broken" in (info.exception or "")
    manager.stop_all()


@pytest.fixture
def flaky_source():
    """The test source, pickled by value: Spark's Python workers cannot import the tests' ``support`` package."""
    from pyspark import cloudpickle
    from support import flaky_source

    cloudpickle.register_pickle_by_value(flaky_source)
    yield flaky_source
    cloudpickle.unregister_pickle_by_value(flaky_source)


def test_a_run_that_fails_while_its_sources_start_is_started_again(spark, flaky_source, tmp_path, monkeypatch) -> None:  # noqa: F811
    """A transient start-up failure (here: the test source's, declared transient) gets a fresh run; hooks ignore it."""
    from armd.adapters.spark import managed as managed_module

    monkeypatch.setattr(managed_module, "TRANSIENT_START_ERRORS", (flaky_source.MESSAGE,))
    manager = QueryManager(spark, tmp_path / "checkpoints")
    extra = {"counter": str(tmp_path / "starts"), "failures": 1}
    manager.register(ManagedSpec("flaky", flaky_source.flaky, MemorySink(), QueryParams(extra=extra)))
    with capture_logs() as logs:
        query = manager.start("flaky")
    try:
        # Spark may create the reader of the run that started more than once (planning, first batch): at least 2.
        assert query.isActive and int((tmp_path / "starts").read_text()) >= 2
        assert [e["attempt"] for e in logs if e["event"] == "query_start_retried"] == [1]
        assert not manager.failed_at_start(str(query.runId))
        assert len(list((tmp_path / "checkpoints" / "flaky").iterdir())) == 1  # the failed run's checkpoint is gone
    finally:
        manager.stop_all()


def test_a_run_that_keeps_failing_while_its_sources_start_raises_one_clear_error(spark, flaky_source, tmp_path) -> None:  # noqa: F811
    from armd.adapters.spark.managed import StartError

    manager = QueryManager(spark, tmp_path / "checkpoints")
    extra = {"counter": str(tmp_path / "starts"), "failures": 5}
    manager.register(ManagedSpec("flaky", flaky_source.flaky, MemorySink(), QueryParams(extra=extra)))
    with pytest.raises(StartError, match=r"query 'flaky' failed while Spark initialised its sources \(attempt 1 of 3\)"):
        manager.start("flaky")  # not a transient error: no second attempt
    assert (tmp_path / "starts").read_text() == "1"
