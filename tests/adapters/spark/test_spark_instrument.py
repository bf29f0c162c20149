"""armd's own measurements inserted into a user's query (``instrument.py``) and what they feed.

One real run of ``drifting_count`` — a filter, then a count per auction id
whose auctions drift (5 alive at a time, each for 10 s) — written with no
``observe()`` at all: the inserted metrics arrive in the progress, give the
filter's selectivity, the aggregation's bytes per state row and a group
model whose count grows with the window as the auctions do (5 + 0.5·w).
Builders that observe by hand keep their labels and get nothing twice.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone

import pytest
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark import builders
from armd.adapters.spark.derive import derive_builder, plan_document
from armd.adapters.spark.instrument import instrument
from armd.adapters.spark.listener import SparkStats
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.spark.measure import sources
from armd.adapters.spark.observed import parse_observation_name
from armd.adapters.spark.sinks import MemorySink
from armd.control.measured import MeasuredInputs
from armd.costmodel.inputs import GroupModel
from armd.costmodel.plan import parse_plan

SECONDS, BATCH, KEYS, LIFE = 24, 2, 5, 10.0


@pytest.fixture(scope="module")
def drifting(spark, progress_listener, tmp_path_factory):  # noqa: F811
    start = math.floor(time.time()) - 7200
    bids = sources({"bids": 20.0}, start=start, seconds=SECONDS, batch_seconds=BATCH, keys=KEYS)
    manager = QueryManager(spark, tmp_path_factory.mktemp("checkpoints"))
    spec = ManagedSpec("drift", "armd.adapters.spark.builders:drifting_count", MemorySink(), QueryParams(
        windows={"w": 6.0}, slides={"w": 2.0},
        extra={"sources": bids, "delay_seconds": 1, "life_seconds": LIFE, "min_value": 0.5}))
    manager.register(spec)
    # the plan as the daemon derives it (from the instrumented query); its map turns labels into node ids
    derived = derive_builder(spark, spec.builder, "drift", spec.params, time_unit_seconds=0.001)
    stats = SparkStats(progress_listener, 0.001, queries=["drift"], stateful=manager.stateful, nodes={"drift": derived.nodes})
    try:
        query = manager.start("drift")
        query.processAllAvailable()
        assert progress_listener.wait_for_run(query, 60), "progress did not arrive"
        observation = stats.observe(datetime.now(timezone.utc))
        instrumented = manager.get("drift").instrumented
        records = [r for r in progress_listener.records("drift") if r.run_id == str(query.runId)]
    finally:
        manager.stop_all()
    return {"observation": observation, "instrumented": instrumented, "records": records, "stats": stats, "derived": derived}


def test_the_inserted_metrics_arrive_in_the_progress_of_a_query_without_observe(drifting) -> None:
    assert drifting["instrumented"].error is None
    assert drifting["instrumented"].probes == {"agg1": "Aggregate", "f1": "Filter"}
    assert drifting["instrumented"].stateful == ["agg1"]
    names = {name for r in drifting["records"] for name in r.observed}
    assert {"armd:filter:f1:in", "armd:filter:f1:out", "armd:groups:agg1:in"} <= names
    busy = [r for r in drifting["records"] if r.input_rows > 0]
    assert busy and all(r.observed["armd:filter:f1:in"]["rows"] == r.input_rows for r in busy)


def test_they_feed_selectivity_bytes_per_row_and_a_group_model(drifting) -> None:
    (metrics,) = drifting["observation"].queries
    assert metrics.selectivities["drift.f1"] == pytest.approx(0.5, abs=0.06)  # value uniform in [0, 1), kept > 0.5
    last = drifting["records"][-1].state_operators[0]
    assert metrics.bytes_per_row["drift.agg1"] > 50
    assert metrics.bytes_per_row["drift.agg1"] == pytest.approx(last.memory_bytes / last.rows_total, rel=0.5)
    base, growth = metrics.group_models["drift.agg1"]
    # 5 auctions alive, one new every LIFE / KEYS = 2 s: n(w) = 5 + 0.5·w (a filter keeps half the bids, so
    # auctions with no bid left in a short span are missed: the base may come out a little low)
    assert growth == pytest.approx(KEYS / LIFE, rel=0.2)
    assert base == pytest.approx(KEYS, rel=0.3)


def test_the_measured_groups_grow_with_the_window_as_modelled(drifting) -> None:
    """Distinct auctions over 4 s and 16 s of the real run against the model fitted on all spans."""
    model = GroupModel(*drifting["observation"].queries[0].group_models["drift.agg1"])
    points = drifting["stats"]._sketches.points(drifting["records"][-1].run_id, "agg1")
    for w in (4.0, 16.0):
        near = [n for span, n in points if span == pytest.approx(w)]
        assert near, f"no measured span of {w} s"
        assert sum(near) / len(near) == pytest.approx(model.at(w), rel=0.15)
    assert model.at(16.0) > 1.6 * model.at(4.0)


def test_the_measurements_reach_the_derived_plan_under_its_node_ids(drifting) -> None:
    """The derived plan's ids and the measurements' keys are the same; the cycle's model takes them."""
    derived, (metrics,) = drifting["derived"], drifting["observation"].queries
    assert derived.nodes.items() >= {"f1": "drift.f1", "agg1": "drift.agg1"}.items()
    plan = parse_plan(plan_document([derived]))
    assert set(metrics.selectivities) | set(metrics.group_models) | set(metrics.bytes_per_row) <= set(plan.nodes)
    inputs = MeasuredInputs(0.2).observe(plan, [metrics], ["drift"], 0.001)
    agg = inputs.apply(plan, 0.001).nodes["drift.agg1"]
    base, growth = metrics.group_models["drift.agg1"]
    assert (agg.groups, agg.group_growth, agg.size) == (pytest.approx(base), pytest.approx(growth / 1000),
                                                        pytest.approx(metrics.bytes_per_row["drift.agg1"]))


def test_builders_that_observe_by_hand_keep_their_labels_and_get_nothing_twice(spark) -> None:  # noqa: F811
    clicks = sources({"clicks": 10.0}, start=0.0, seconds=10, batch_seconds=1, keys=KEYS)
    params = QueryParams(windows={"w": 4.0}, slides={"w": 2.0}, extra={"sources": clicks, "min_value": 0.2, "distinct": True})
    result = instrument(builders.windowed_count(spark, params))
    assert result.error is None
    assert result.stateful == ["agg", "dd1"]  # pre-order: the aggregation above the deduplication
    plan = result.frame._jdf.queryExecution().analyzed().toString()
    observed = [parse_observation_name(line.split("CollectMetrics ")[1].split(",")[0])
                for line in plan.splitlines() if "CollectMetrics " in line]
    kinds = sorted((o.kind, o.node, o.role) for o in observed if o is not None)
    assert kinds == [("filter", "dd1", "in"), ("filter", "dd1", "out"), ("filter", "f", "in"), ("filter", "f", "out"),
                     ("groups", "agg", "in")]
