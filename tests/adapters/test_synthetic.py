"""The synthetic source: deterministic Poisson arrivals on a rate schedule."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from armd.adapters.synthetic import Schedule, SyntheticSource, WindowTap

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def source(seed: int = 7, **schedules: Schedule) -> SyntheticSource:
    return SyntheticSource(schedules or {"a": Schedule(100.0)}, seed, 0.001, START, {"a": 10.0})


def test_schedule_steps_and_bursts():
    schedule = Schedule(10.0, steps=[(5.0, 20.0)], bursts=[(8.0, 2.0, 3.0)])
    assert [schedule.rate_at(t) for t in (0, 4.99, 5, 8, 9.99, 10)] == [10, 10, 20, 60, 60, 20]
    # ∫ over [4, 11): 1 s at 10, 3 s at 20, 2 s at 60, 1 s at 20
    assert schedule.expected(4, 11) == pytest.approx(10 + 60 + 120 + 20)


def test_same_seed_same_arrivals_whatever_the_observation_intervals():
    one, other = source(), source()
    whole = one.arrivals("a", 0, 30)
    pieces = np.concatenate([other.arrivals("a", t, t + 0.7) for t in np.arange(0, 30, 0.7)])
    np.testing.assert_array_equal(whole, pieces[pieces < 30])
    assert not np.array_equal(whole, source(seed=8).arrivals("a", 0, 30))


def test_rates_follow_the_schedule():
    src = source(a=Schedule(100.0, bursts=[(50.0, 50.0, 4.0)]))
    quiet, burst = len(src.arrivals("a", 0, 50)), len(src.arrivals("a", 50, 100))
    # Poisson counts: 5,000 and 20,000 expected, standard deviations about 71 and 141.
    assert abs(quiet - 5000) < 400 and abs(burst - 20000) < 800


def test_observe_reports_rate_and_d_in_model_time_units():
    src = source()
    first = src.observe(START + timedelta(seconds=10))
    (stats,) = first.streams
    assert stats.interval_seconds == 10 and stats.rows == len(src.arrivals("a", 0, 10))
    assert stats.rate_per_second == pytest.approx(stats.rows / 10)
    assert stats.d == pytest.approx(1 / (stats.rate_per_second * 0.001))  # milliseconds between arrivals
    second = src.observe(START + timedelta(seconds=15))
    assert second.streams[0].interval_seconds == 5


def test_silent_stream_has_infinite_d():
    src = source(a=Schedule(0.0))
    assert math.isinf(src.observe(START + timedelta(seconds=3)).streams[0].d)


def test_state_follows_the_applied_window():
    src = SyntheticSource({"a": Schedule(100.0)}, 1, 0.001, START, {"a": 10.0}, {"q": [WindowTap("a", "w", 2000.0)]})
    at = START + timedelta(seconds=20)
    (before,) = src.observe(at).queries
    assert before.state_rows == len(src.arrivals("a", 18, 20)) and before.state_bytes == before.state_rows * 10
    src.set_window("q", "w", 10000.0)
    (after,) = src.observe(at).queries
    assert after.state_rows == len(src.arrivals("a", 10, 20)) > before.state_rows


def test_an_applied_drop_rate_keeps_about_one_minus_p_of_the_state_and_always_the_same_arrivals():
    src = SyntheticSource({"a": Schedule(200.0)}, 3, 0.001, START, {"a": 10.0}, {"q": [WindowTap("a", "w", 10000.0)]})
    at = START + timedelta(seconds=30)
    (full,) = src.observe(at).queries
    src.set_drop_rate("q", 0.4)
    (shed,) = src.observe(at).queries
    assert shed.state_rows == pytest.approx(0.6 * full.state_rows, rel=0.1)  # ~2000 arrivals: σ ≈ 1.6 %
    kept = src.arrivals("a", 20, 30, drop=0.4)
    assert set(kept) <= set(src.arrivals("a", 20, 30)) and len(kept) == shed.state_rows
    assert src.arrivals("a", 20, 25, drop=0.4).tolist() == kept[kept < 25].tolist()  # the same ones, however asked
    src.set_drop_rate("q", 0.0)
    assert src.observe(at).queries[0].state_rows == full.state_rows
