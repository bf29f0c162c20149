"""The plan an application registers: its node ids key the windows, and its watermark delay reaches GenMig."""

from __future__ import annotations

from armd.adapters.spark.managed import QueryParams
from armd.agent.plan import PlanInfo


def test_a_derived_plan_gives_its_node_ids_and_its_smallest_watermark_delay():
    params = QueryParams(windows={"clicks.w": 60.0}, extra={"nodes": {"w": "clicks.w"}})
    applied = PlanInfo({"queries": {}}, "derived", {"w": "clicks.agg1.w"}, delay_seconds=2.0).apply(params)
    assert applied.windows == {"clicks.agg1.w": 60.0}
    assert applied.extra["delay_seconds"] == 2.0 and applied.extra["nodes"]["w"] == "clicks.agg1.w"


def test_a_delay_the_application_gives_wins_and_a_plan_file_adds_none():
    params = QueryParams(windows={"w": 60.0}, extra={"delay_seconds": 5.0})
    assert PlanInfo(None, "derived", {}, delay_seconds=2.0).apply(params).extra["delay_seconds"] == 5.0
    assert "delay_seconds" not in PlanInfo({"queries": {}}, "file:plan.toml").apply(QueryParams(windows={"w": 60.0})).extra
