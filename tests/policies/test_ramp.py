"""The trend test that tells a ramp: significant on a rising Poisson stream well before the level test, silent on a
steady one and on a falling one."""

from __future__ import annotations

import numpy as np
import pytest

from armd.policies.ramp import rising, trend


def counts(rates: list[float], seed: int = 1) -> tuple[tuple[float, float], ...]:
    draws = np.random.default_rng(seed).poisson(rates)
    return tuple((float(i + 1), float(c)) for i, c in enumerate(draws))


def test_a_steady_stream_shows_no_significant_trend():
    for rate in (2.0, 50.0, 500.0):
        points = counts([rate] * 600, seed=int(rate))
        ps = [trend(points[:k], 20.0) for k in range(10, 601)]
        assert min(t.p for t in ps if t is not None) > 1e-4  # what ``ForecastRules.trend_significance`` is set to


def test_a_ramp_is_significant_within_twenty_seconds_and_a_fall_never():
    ramp = [50.0] * 60 + [50.0 + 1.25 * i for i in range(60)]  # the plant's ramp ×4 over two minutes, its first minute
    points = counts(ramp, seed=7)
    first = next(k for k in range(10, len(points) + 1) if "s" in rising({"s": points[:k]}, 20.0, 1e-4))
    assert 60 < first <= 80
    falling = counts([200.0 - 1.25 * i for i in range(120)], seed=7)
    assert all("s" not in rising({"s": falling[:k]}, 20.0, 1e-4) for k in range(10, 121))


def test_too_few_points_give_no_test():
    assert trend(counts([50.0] * 5), 20.0) is None
    assert trend((), 20.0) is None
    assert trend(tuple((float(i), 0.0) for i in range(20)), 20.0) is None  # no arrivals: nothing to test


def test_the_fitted_line_says_where_a_linear_ramp_is_and_will_be():
    points = tuple((float(t), 50.0 + 1.25 * t) for t in range(30))  # noiseless: 1.25 arrivals/s per second
    found = trend(points, 20.0)
    assert found is not None
    assert found.level == pytest.approx(50.0 + 1.25 * 29)
    assert found.ahead(32.0) == pytest.approx(50.0 + 1.25 * 61)
