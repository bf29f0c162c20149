"""Measured inputs of stateful operators (``costmodel/inputs.py``) and the per-window group model in the evaluators.

Hand-worked values for the group model from slides and from a fit, the
edges where nothing can be learnt, bytes per row and smoothing; then the
plan format's ``{"base", "growth"}`` groups, evaluated by the scalar and the
vectorised evaluator alike, against a constant count at the same window.
"""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from armd.costmodel.batch import BatchPlan
from armd.costmodel.evaluate import estimate
from armd.costmodel.inputs import GroupModel, Smoothed, fit_group_model, per_row
from armd.costmodel.plan import PlanError, parse_plan


def test_group_model_from_slides_follows_the_overlap_formula() -> None:
    # n1 = 10 keys per 2 s slide, 40 % seen in the previous slide: n(k slides) = 10 + (k - 1)·10·0.6
    model = GroupModel.from_slides(10, 0.4, 2.0)
    for k in (1, 2, 5):
        assert model.at(2.0 * k) == pytest.approx(10 + (k - 1) * 6)
    assert GroupModel.from_slides(5, 1.0, 3.0) == GroupModel(5.0, 0.0)  # a fixed key set: constant
    with pytest.raises(ValueError, match="overlap"):
        GroupModel.from_slides(5, 1.5, 3.0)


def test_fit_recovers_drifting_keys_from_spans_and_keeps_a_fixed_key_set_constant() -> None:
    rng = random.Random(3)
    # auctions: 8 alive at any time, 0.5 new per second; distinct counts with ±2 % noise
    points = [(w, (8 + 0.5 * w) * (1 + rng.uniform(-0.02, 0.02))) for w in (1, 2, 3, 4, 6, 8) for _ in range(5)]
    model = fit_group_model(points)
    assert model is not None
    assert model.base == pytest.approx(8, rel=0.08) and model.growth == pytest.approx(0.5, rel=0.08)
    assert model.at(20) == pytest.approx(18, rel=0.05)
    fixed = fit_group_model([(w, 5.0) for w in (1, 2, 3)])
    assert fixed.base == pytest.approx(5) and fixed.growth == pytest.approx(0, abs=1e-9)


def test_fit_needs_a_positive_span_and_takes_one_span_as_constant() -> None:
    assert fit_group_model([]) is None
    assert fit_group_model([(0.0, 3), (2.0, math.nan)]) is None
    assert fit_group_model([(2.0, 4), (2.0, 6)]) == GroupModel(5.0, 0.0)
    # a decreasing count cannot give a negative growth
    assert fit_group_model([(1.0, 9), (2.0, 8), (3.0, 7)]).growth == 0.0


def test_model_never_drops_below_one_group_and_scales_its_time_unit() -> None:
    assert GroupModel(0.0, 0.0).at(10) == 1.0
    assert GroupModel(2.0, 3.0).scaled(1000.0).at(4000.0) == pytest.approx(14.0)  # 3 per s = 0.003 per ms


def test_bytes_per_row_is_weighted_by_rows_and_skips_empty_states() -> None:
    assert per_row([(1000, 10), (500, 0), (3000, 10)]) == pytest.approx(200.0)
    assert per_row([(10, 0)]) is None
    assert per_row([(math.inf, 5)]) is None


def test_smoothing_takes_the_first_value_then_moves_by_alpha_and_keeps_it_without_news() -> None:
    smooth = Smoothed(alpha=0.5)
    assert smooth.update("op", 400.0) == 400.0
    assert smooth.update("op", 200.0) == 300.0
    assert smooth.update("op", None) == 300.0
    assert smooth.update("other", None) is None
    assert smooth.model("agg", GroupModel(4.0, 2.0)) == GroupModel(4.0, 2.0)
    assert smooth.model("agg", GroupModel(8.0, 0.0)) == GroupModel(6.0, 1.0)
    with pytest.raises(ValueError):
        Smoothed(alpha=0)


def _plan(groups, w: float = 10_000.0, profile_constants: dict | None = None) -> dict:
    return {
        "streams": {"bids": {"d": 50.0, "g": 1, "size": 1}},
        "constants": {"aggregate_size": 1, "watermark_delay": 2000.0, "trigger_interval": 1000.0, **(profile_constants or {})},
        "queries": {"q": {"op": "aggregate", "id": "agg", "groups": groups, "inputs": [
            {"op": "granularity", "id": "g", "g": 2000.0, "inputs": [
                {"op": "window", "id": "w", "w": w, "inputs": [{"op": "source", "stream": "bids"}]}]}]}},
    }


@pytest.mark.parametrize("profile", ["paper", "spark"])
@pytest.mark.parametrize("w", [4000.0, 10_000.0, 30_000.0])
def test_a_group_model_evaluates_as_its_count_at_the_logical_window(profile: str, w: float) -> None:
    model = GroupModel(5.0, 0.25 / 1000)  # 5 alive, a new one every 4 s (time unit: ms)
    plan = parse_plan(_plan(model.as_plan(), w))
    # the same plan with the count the model gives at the window (+ 1 source granule of 1 ms); under spark averaged
    # over the live windows' ages: the window less w²/(2·held), held = w + D + T + d + 1 = w + 3051 ms
    held = w + 3051.0
    at = w + 1 if profile == "paper" else (w + 1) - (w + 1) ** 2 / (2 * held)
    fixed = dataclasses.replace(plan, nodes={**plan.nodes, "agg": dataclasses.replace(
        plan.nodes["agg"], groups=model.at(at), group_growth=None)})
    by_model, by_count = estimate(plan, profile), estimate(fixed, profile)
    assert by_model.total.cpu == pytest.approx(by_count.total.cpu, rel=1e-12)
    if profile == "paper":
        assert by_model.total.memory == pytest.approx(by_count.total.memory, rel=1e-12)
    else:  # measured keys are the keys a window holds: each has its row in every live window (held / slide of them)
        assert by_model.total.memory == pytest.approx(model.at(at) * held / 2000.0, rel=1e-12)
        # the declared keys, an element each every 7.5 · 50 ms, are in every window
        assert by_count.total.memory == pytest.approx(by_model.total.memory, rel=1e-3)
    result = BatchPlan.compile(plan, profile).evaluate()
    assert float(result.total_memory) == pytest.approx(by_model.total.memory, rel=1e-9)
    assert float(result.total_cpu) == pytest.approx(by_model.total.cpu, rel=1e-9)


def test_groups_grow_with_the_window_in_both_evaluators() -> None:
    plan = parse_plan(_plan({"base": 5, "growth": 0.001}))
    batch = BatchPlan.compile(plan, "spark")
    w = np.array(batch.w, dtype=float).reshape(-1, 1).repeat(3, axis=1)  # (N, K): three window sizes
    w[batch.node_ids.index("w")] = [5000.0, 10_000.0, 20_000.0]
    memory = np.asarray(batch.evaluate(w=w).total_memory).ravel()
    assert memory[0] < memory[1] < memory[2]
    constant = BatchPlan.compile(parse_plan(_plan(5)), "spark")
    w_c = np.array(constant.w, dtype=float).reshape(-1, 1).repeat(3, axis=1)
    w_c[constant.node_ids.index("w")] = [5000.0, 10_000.0, 20_000.0]
    assert (memory > np.asarray(constant.evaluate(w=w_c).total_memory).ravel()).all()


@pytest.mark.parametrize("groups, message", [
    ({"base": 1}, "base"), ({"base": -1, "growth": 1}, "base and growth"), ({"base": 0, "growth": 0}, "not both 0"),
    ({"base": 1, "growth": "x"}, "finite number"), (2.5, "whole number"),
])
def test_bad_group_models_are_refused_with_what_is_allowed(groups, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse_plan(_plan(groups))


def test_measured_inputs_replace_the_plans_groups_and_sizes_node_by_node() -> None:
    from armd.costmodel.inputs import apply_measured

    doc = {
        "streams": {"a": {"d": 100.0, "g": 1, "size": 1}, "b": {"d": 100.0, "g": 1, "size": 1}},
        "constants": {"aggregate_size": 1, "watermark_delay": 1000.0, "trigger_interval": 1000.0},
        "queries": {
            "agg": _plan(5)["queries"]["q"] | {"id": "agg"},
            "j": {"op": "join", "id": "j", "sel": 0.2, "inputs": [
                {"op": "window", "id": "wa", "w": 2000.0, "inputs": [{"op": "source", "stream": "a"}]},
                {"op": "window", "id": "wb", "w": 2000.0, "inputs": [{"op": "source", "stream": "b"}]}]},
        },
    }
    doc["streams"]["bids"] = {"d": 50.0, "g": 1, "size": 1}
    plan = parse_plan(doc)
    rows = estimate(apply_measured(plan, {"agg": GroupModel(5.0, 0.0)}, {}, 0.001), "spark").nodes  # one byte a row
    measured = apply_measured(plan, {"agg": GroupModel(5.0, 0.0)}, {"agg": 380.0, "j": 250.0, "gone": 1.0}, 0.001)
    nodes = estimate(measured, "spark").nodes
    assert nodes["agg"].memory == pytest.approx(rows["agg"].memory * 380.0)
    assert nodes["j"].memory == pytest.approx(rows["j"].memory * 250.0)
    assert measured.nodes["agg"].group_growth == 0.0 and measured.query_nodes("j")[-1] == "j"
    drifting = apply_measured(plan, {"agg": GroupModel(5.0, 0.5)}, {}, 0.001)  # 0.5 per second = 0.0005 per ms
    assert drifting.nodes["agg"].group_growth == pytest.approx(0.0005)
    assert BatchPlan.compile(measured, "spark").evaluate().total_memory == pytest.approx(estimate(measured, "spark").total.memory)
