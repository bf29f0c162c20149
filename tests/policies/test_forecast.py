"""Rate forecasts with Holt's method at the horizon of the adaptation delay (paper 001 §4.4)."""

from __future__ import annotations

import numpy as np
import pytest

from armd.policies.forecast import ForecastRules, RateHistory, forecast


def ramp(rng, start=100.0, slope=4.0, n=60, spacing=1.0):
    """Poisson counts of a rate rising linearly, observed every ``spacing`` seconds (rates per second)."""
    times = np.arange(n) * spacing
    return tuple((float(t), rng.poisson((start + slope * t) * spacing) / spacing) for t in times)


@pytest.mark.parametrize("spacing", [1.0, 2.0])
def test_a_linear_ramp_is_forecast_within_a_few_percent_at_the_horizon(spacing):
    rng = np.random.default_rng(11)
    points = ramp(rng, spacing=spacing)
    last = points[-1][0]
    truth = 100.0 + 4.0 * (last + 20.0)
    ahead = forecast(points, 20.0)
    assert ahead.method == "holt" and ahead.rate == pytest.approx(truth, rel=0.05)
    assert points[-1][1] < truth * 0.9  # the last measurement alone would be well under


def test_a_steady_rate_is_forecast_steady():
    rng = np.random.default_rng(5)
    points = tuple((float(t), float(rng.poisson(200))) for t in range(60))
    assert forecast(points, 20.0).rate == pytest.approx(200.0, rel=0.05)


def test_short_history_falls_back_to_the_last_value():
    assert forecast(((0.0, 5.0), (1.0, 7.0)), 30.0).rate == 7.0 and forecast(((0.0, 5.0),), 30.0).method == "last"
    assert forecast((), 30.0) is None


def test_the_history_is_bounded_and_keeps_the_latest():
    history = RateHistory(limit=3)
    for t in range(10):
        history = history.add(float(t), {"s": float(t), "bad": float("nan")})
    assert history.points["s"] == ((7.0, 7.0), (8.0, 8.0), (9.0, 9.0)) and "bad" not in history.points


@pytest.mark.parametrize("kwargs, words", [({"horizon_seconds": -1.0}, "≥ 0"), ({"min_history": 2}, "≥ 4"),
                                           ({"history": 5, "min_history": 10}, "≤ history")])
def test_rules_out_of_their_domain_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        ForecastRules(**kwargs)


def test_a_step_forgets_the_history_so_no_trend_is_fitted_across_it():
    """Holt fitted across a ×4 step sees a steep trend and forecasts far above the new level (350 for 200); after ``restart``
    the forecast is the new level."""
    points = tuple((float(t), 50.0) for t in range(30)) + tuple((float(t), 200.0) for t in range(30, 33))
    history = RateHistory(60, {"s": points, "other": points})
    assert forecast(history.points["s"], 32.0).rate > 300.0
    history = history.restart({"s"}).add(33.0, {"s": 200.0})
    assert forecast(history.points["s"], 32.0) == pytest.approx(forecast(((33.0, 200.0),), 32.0))
    assert history.points["other"] == points
