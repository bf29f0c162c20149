"""SparkStats over real progress events: d per stream, state, selectivities, groups, and the model mapping."""

from __future__ import annotations

import json
import math
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.listener import ProgressListener, SparkStats
from armd.adapters.spark.mapping import window_aggregation_rows
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.spark.measure import sources
from armd.adapters.spark.sinks import MemorySink
from armd.adapters.spark.source import Arrivals, SourceOptions

SECONDS = 15
JOIN_SECONDS = 9
BATCH = 3
KEYS = 5
B = "armd.adapters.spark.builders:"


@pytest.fixture(scope="module")
def observed(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Three queries run one after the other over 15 s of event time in 3 s batches; then one observation of all of them."""
    start = math.floor(time.time()) - 3600
    clicks = sources({"clicks": 20.0}, start=start, seconds=SECONDS, batch_seconds=BATCH, keys=KEYS)
    pair = sources({"a": 10.0, "b": 10.0}, start=start, seconds=JOIN_SECONDS, batch_seconds=BATCH, keys=KEYS)
    manager = QueryManager(spark, tmp_path_factory.mktemp("checkpoints"))
    specs = [
        ManagedSpec("wc", B + "windowed_count", MemorySink(),
                    QueryParams(windows={"w": 4.0}, slides={"w": 1.0}, extra={"sources": clicks, "delay_seconds": 1})),
        ManagedSpec("avg", B + "granular_average", MemorySink(),
                    QueryParams(windows={"w": 4.0}, slides={"w": 2.0}, extra={"sources": clicks, "threshold": 0.5})),
        ManagedSpec("join", B + "range_join", MemorySink(),
                    QueryParams(windows={"w": 2.0}, extra={"sources": pair, "delay_seconds": 1})),
    ]
    stats = SparkStats(progress_listener, 0.001, queries=[s.name for s in specs])
    try:
        runs = []
        for spec in specs:  # one after the other: on two cores that is faster than side by side
            manager.register(spec)
            runs.append(manager.start(spec.name))
            runs[-1].processAllAvailable()
        for query in runs:
            assert progress_listener.wait_for_run(query, 60), f"progress of {query.name} did not arrive"
        observation = stats.observe(datetime.now(timezone.utc))
        groups = dict(stats.groups)
        records = {s.name: progress_listener.records(s.name) for s in specs}
        second = stats.observe(datetime.now(timezone.utc))
    finally:
        manager.stop_all()
    return {"observation": observation, "second": second, "records": records, "groups": groups,
            "clicks": clicks, "pair": pair}


def test_d_per_stream_from_event_time_and_rows(observed) -> None:
    streams = {s.stream: s for s in observed["observation"].streams}
    assert set(streams) == {"clicks", "a", "b"}
    for name, options, seconds in (("clicks", observed["clicks"]["clicks"], SECONDS), ("a", observed["pair"]["a"], JOIN_SECONDS),
                                   ("b", observed["pair"]["b"], JOIN_SECONDS)):
        parsed = SourceOptions.parse({"stream": name, **{k: str(v) for k, v in options.items()}})
        exact_ms = seconds / Arrivals(parsed).count(0, seconds) * 1000
        assert streams[name].d == pytest.approx(exact_ms, rel=0.1), name
    assert streams["clicks"].rate_per_second == pytest.approx(20, rel=0.2)
    assert observed["second"].streams == ()  # nothing new since the first observation


def test_each_stream_says_how_far_in_event_time_its_rows_reached(observed) -> None:
    """The newest event of the furthest batch: where the stream's readers were (a daemon tells a lagging reader by it)."""
    streams = {s.stream: s for s in observed["observation"].streams}
    start = int(observed["clicks"]["clicks"]["start"])
    last_second = datetime.fromtimestamp(start + SECONDS - 1, timezone.utc)  # rows are drawn per second of event time
    assert last_second <= streams["clicks"].event_end < last_second + timedelta(seconds=1)
    assert streams["a"].event_end == streams["b"].event_end  # one query reads both
    assert streams["a"].event_end < datetime.fromtimestamp(start + JOIN_SECONDS, timezone.utc)


def test_state_selectivities_and_groups(observed) -> None:
    metrics = {m.query: m for m in observed["observation"].queries}
    assert set(metrics) == {"wc", "avg", "join"}
    assert all(m.state_rows > 0 and m.state_bytes > 0 for m in metrics.values())
    assert metrics["avg"].selectivities["f"] == pytest.approx(0.5, abs=0.1)
    # Equal keys among 5 uniform keys: the paper's join selectivity is 1/5.
    assert metrics["join"].selectivities["j"] == pytest.approx(1 / KEYS, rel=0.3)
    assert observed["groups"]["wc"]["agg"] == KEYS


def test_sliding_window_state_matches_the_mapping(observed) -> None:
    """count per key, w=4, slide=1, delay=1, T=3: rows ≈ keys × (w + D + T + 1/r)/slide (docs/spark-mapping.md)."""
    records = [r for r in observed["records"]["wc"] if r.batch_id >= 3 and r.input_rows > 0]
    assert records, json.dumps([r.batch_id for r in observed["records"]["wc"]])
    mean = sum(r.state_rows for r in records) / len(records)
    assert mean == pytest.approx(window_aggregation_rows(4, 1, 1, BATCH, 20, KEYS), rel=0.1)
    assert all(op.memory_bytes > 0 for r in records for op in r.state_operators)


def test_every_batch_of_the_interval_is_in_the_observation(observed) -> None:
    batches = observed["observation"].batches
    for name, records in observed["records"].items():
        mine = [b for b in batches if b.query == name]
        assert [b.batch_id for b in mine] == [r.batch_id for r in records], name
        assert all(b.plan_version == 0 and b.batch_ms >= 0 for b in mine)
        last = mine[-1]
        assert (last.state_rows, last.state_bytes) == (records[-1].state_rows, records[-1].state_bytes)
        assert last.operators and {"name", "rows_total", "memory_bytes", "rows_dropped_by_watermark", "custom"} <= set(last.operators[0])
        assert last.input_rows == records[-1].input_rows and last.event_max == records[-1].event_max
    assert sum(b.input_rows for b in batches if b.query == "wc") > 0
    assert observed["second"].batches == ()


def test_a_migrating_query_holds_the_state_of_both_its_runs() -> None:
    """While GenMig runs the old and the new plan, the query's measured state is both runs' together."""
    listener = ProgressListener()

    def progress(run: str, version: int, rows: int, size: int) -> None:
        doc = {"name": f"q@{version}", "runId": run, "batchId": 1, "timestamp": "2026-11-22T10:00:00.000Z",
               "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": rows, "memoryUsedBytes": size}]}
        listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=json.dumps(doc))))

    for run, version in (("old", 0), ("new", 1)):
        listener.onQueryStarted(SimpleNamespace(runId=run, name=f"q@{version}"))
    progress("old", 0, 10, 1000)
    assert listener.held("q") == (10, 1000)
    progress("new", 1, 4, 300)
    progress("old", 0, 12, 1100)
    assert listener.held("q") == (16, 1400)
    listener.onQueryTerminated(SimpleNamespace(runId="old", id="x", exception=None))
    assert listener.held("q") == (4, 300) and listener.held("other") is None


def test_pairwise_selectivities_of_a_jisc_join_after_its_warm_up() -> None:
    """sel(a, b) = pairs·T / ((l_a + l_b)·n_a·n_b) over the warm batches; the first 2W seconds of a run are left out."""
    listener = ProgressListener()
    listener.onQueryStarted(SimpleNamespace(runId="r", name="q@0"))
    name = "armd:pairs:q_w:tuples:10.0"  # W = 5 s

    def batch(n: int, start_s: int, counts: dict[str, int | None]) -> None:
        offsets = {s: ({"stream": s, "event_ms": start_s * 1000}, {"stream": s, "event_ms": (start_s + 10) * 1000}) for s in "abc"}
        doc = {"name": "q@0", "runId": "r", "batchId": n, "timestamp": "2026-11-22T10:00:00.000Z",
               "eventTime": {"min": iso(start_s), "max": iso(start_s + 10)},
               "sources": [{"description": "armd-synthetic", "startOffset": lo, "endOffset": hi, "numInputRows": 1}
                           for lo, hi in offsets.values()],
               "observedMetrics": {name: counts}}
        listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=json.dumps(doc))))

    stats = SparkStats(listener, 1.0, queries=["q"])
    batch(0, 0, {"a": 100, "b": 50, "c": 9, "a,b": 9999, "a,c": 9, "b,c": None})  # filling: left out
    batch(1, 10, {"a": 20, "b": 10, "c": 5, "a,b": 40, "a,c": 0, "b,c": 0})
    batch(2, 20, {"a": 20, "b": 10, "c": 5, "a,b": 40, "a,c": 0, "b,c": None})
    (metrics,) = stats.observe(datetime.now(timezone.utc)).queries
    # T = 20 s over the two warm batches; no pair at all counts as half a pair
    assert metrics.pair_selectivities == pytest.approx({"a,b": 80 * 20 / (10 * 40 * 20), "a,c": 0.5 * 20 / (10 * 40 * 10),
                                                        "b,c": 0.5 * 20 / (10 * 20 * 10)})


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(1_800_000_000 + seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_measurements_arrive_under_plan_node_ids_through_the_one_label_map() -> None:
    """armd's labels (f1, agg1) and a builder's own ids reach the port as plan node ids; unmapped labels stay as they are."""
    listener = ProgressListener()
    listener.onQueryStarted(SimpleNamespace(runId="r", name="q@0"))
    stats = SparkStats(listener, 1.0, queries=["q"], stateful=lambda q: ("agg1", "dd1"),
                       nodes={"q": {"f1": "q.f1", "agg1": "q.agg1", "dd1": "q.dd1", "f": "q.f"}})
    for n in range(3):
        doc = {"name": "q@0", "runId": "r", "batchId": n, "timestamp": "2026-11-22T10:00:00.000Z",
               "eventTime": {"min": iso(10 * n), "max": iso(10 * n + 10)},
               "sources": [{"description": "armd-synthetic", "startOffset": {"stream": "a", "event_ms": n * 10_000},
                            "endOffset": {"stream": "a", "event_ms": (n + 1) * 10_000}, "numInputRows": 100}],
               "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": 10, "memoryUsedBytes": 4000},
                                  {"operatorName": "dedupe", "numRowsTotal": 10, "memoryUsedBytes": 1000}],
               "observedMetrics": {"armd:filter:f1:in": {"rows": 100}, "armd:filter:f1:out": {"rows": 25},
                                   "armd:filter:q.f:in": {"rows": 100}, "armd:filter:q.f:out": {"rows": 50},
                                   "armd:filter:f9:in": {"rows": 100}, "armd:filter:f9:out": {"rows": 10}}}
        listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=json.dumps(doc))))
    (metrics,) = stats.observe(datetime.now(timezone.utc)).queries
    assert metrics.selectivities == pytest.approx({"q.f1": 0.25, "q.f": 0.5, "f9": 0.1})
    assert metrics.bytes_per_row == pytest.approx({"q.agg1": 400.0, "q.dd1": 100.0})
    assert stats.node_id("q", "f1") == "q.f1" and stats.node_id("other", "f1") == "f1"
