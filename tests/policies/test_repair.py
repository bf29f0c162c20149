"""fit_exactly: a setting over the bounds is scaled down to the largest common factor that fits."""

from __future__ import annotations

import json

import numpy as np
from support import REPO
import pytest

from armd.costmodel.plan import parse_plan
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS
from armd.policies.repair import fit_exactly

PLAN = REPO / "config" / "plans" / "example.json"


@pytest.fixture(scope="module")
def problem() -> Problem:
    qos = {"clicks_per_view": QueryQoS(window=(1000, 60000)), "clicks_per_second": QueryQoS(granularity=(10000, 1000))}
    return Problem(parse_plan(json.loads(PLAN.read_text())), qos)


def test_a_fitting_setting_is_returned_unchanged(problem):
    ones = np.ones(3)
    fw, fg, outcome, t = fit_exactly(problem, Bounds(1e9, 1e9), ones, ones)
    assert t == 1.0 and fw is ones and outcome.fits(Bounds(1e9, 1e9))


@pytest.mark.parametrize("memory", [60_000, 150_000, 250_000])
def test_an_oversized_setting_is_scaled_to_the_largest_factor_that_fits(problem, memory):
    bounds = Bounds(memory, 1e9)
    ones = np.ones(3)
    fw, fg, outcome, t = fit_exactly(problem, bounds, ones, ones)
    assert 0 < t < 1 and outcome.fits(bounds)
    np.testing.assert_allclose(fw, t) and np.testing.assert_allclose(fg, t)
    above = problem.evaluate(ones * (t + 1e-3), ones * (t + 1e-3))
    assert not above.fits(bounds)


def test_nothing_fits_gives_the_minimum(problem):
    fw, fg, outcome, t = fit_exactly(problem, Bounds(100, 1e9), np.ones(3), np.ones(3))
    assert t == 0 and not fw.any() and not fg.any() and not outcome.fits(Bounds(100, 1e9))
