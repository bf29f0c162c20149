"""Measured herald skip fractions in the cycle's model: smoothed as shares of work left, screened at the port."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from armd.control.model import EVALUATED_FLOOR, evaluated_shares, with_herald_measures
from armd.control.ports import Observation, QueryMetrics
from armd.control.statistics import screen
from armd.costmodel.plan import parse_plan

PLAN = parse_plan({
    "streams": {"R": {"d": 2, "size": 64}},
    "queries": {"q": {"op": "aggregate", "inputs": [
        {"op": "select", "id": "s", "sel": 0.2, "heralds": {"skip": 0.1, "partition": 20, "overhead": 3},
         "inputs": [{"op": "window", "id": "w", "w": 100, "inputs": [{"op": "source", "stream": "R"}]}]}]}},
})


def test_skip_fractions_become_shares_of_work_left_and_all_skipped_still_counts() -> None:
    assert evaluated_shares({"s": 0.25, "t": 0.0, "u": 1.0}) == {"s": 0.75, "t": 1.0, "u": EVALUATED_FLOOR}


def test_the_measured_share_replaces_the_declared_skip_and_keeps_the_declared_overhead() -> None:
    measured = with_herald_measures(PLAN, {"s": 0.4, "w": 0.5, "gone": 0.5})
    effect = measured.nodes["s"].heralds
    assert effect.skip == pytest.approx(0.6) and (effect.partition, effect.overhead) == (20, 3)
    assert measured.nodes["w"] == PLAN.nodes["w"]  # a window takes no heralds; an unknown node is ignored


def test_a_skip_fraction_outside_0_1_is_rejected_at_the_port_and_0_is_kept() -> None:
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    observation = Observation(at, (), (QueryMetrics("q", herald_skips={"s": 0.0, "t": 1.5, "u": float("nan")}),))
    screened, rejected = screen(observation)
    assert dict(screened.queries[0].herald_skips) == {"s": 0.0}
    assert sorted(r.field for r in rejected) == ["herald_skips.t", "herald_skips.u"]
    assert all(r.reason == "in [0, 1]" for r in rejected)
