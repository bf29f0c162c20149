"""Triggers: smoothing as a time window, and rate changes that count only when the counts make them significant."""

from __future__ import annotations

import numpy as np
import pytest

from armd.policies.triggers import EXACT_UP_TO, ArrivalTracker, Counts, RateTracker, TriggerRules, rate_change_p, window_of_alpha

RULES = TriggerRules(window_seconds=5.0, threshold=0.2, significance=0.001)


def poisson(tracker: ArrivalTracker, rng: np.random.Generator, rates: dict[str, float], seconds: float) -> ArrivalTracker:
    return tracker.observe({s: (int(rng.poisson(r * seconds)), seconds) for s, r in rates.items()})


def warmed(rng, rates, seconds=1.0, rules=RULES, n=20):
    tracker = ArrivalTracker(rules)
    for _ in range(n):
        tracker = poisson(tracker, rng, rates, seconds)
    return tracker.decide_with()


@pytest.mark.parametrize("rate", [2.0, 20.0, 500.0])
def test_poisson_noise_at_a_steady_rate_never_triggers(rate):
    rng = np.random.default_rng(7)
    tracker = warmed(rng, {"s": rate})
    fired = 0
    for _ in range(1000):
        tracker = poisson(tracker, rng, {"s": rate}, 1.0)
        fired += bool(tracker.drifted())
    assert fired == 0


def test_the_threshold_alone_fires_on_the_noise_of_a_slow_stream():
    """The counterfactual of the test above: without the significance test, 2 arrivals per second cross 20 % often."""
    rng = np.random.default_rng(7)
    loose = TriggerRules(window_seconds=5.0, threshold=0.2, significance=1.0)
    tracker = warmed(rng, {"s": 2.0}, rules=loose)
    fired = 0
    for _ in range(200):
        tracker = poisson(tracker, rng, {"s": 2.0}, 1.0)
        fired += bool(tracker.drifted())
    assert fired > 20


@pytest.mark.parametrize("rate", [20.0, 500.0])
def test_a_doubling_rate_triggers_within_a_few_observations(rate):
    rng = np.random.default_rng(3)
    tracker = warmed(rng, {"s": rate})
    for step in range(1, 6):
        tracker = poisson(tracker, rng, {"s": 2 * rate}, 1.0)
        if tracker.drifted():
            break
    else:
        pytest.fail("a ×2 rate did not trigger within 5 observations")
    assert step <= 4
    assert tracker.smoothed["s"] < tracker.decided["s"] / 1.2  # d fell: the rate rose


@pytest.mark.parametrize("interval", [0.25, 1.0, 2.5])
def test_the_window_means_the_same_smoothing_whatever_the_observation_interval(interval):
    """A step of the rate reaches the same share of its size after the same seconds, observed every 0.25, 1 or 2.5 s."""
    tracker = ArrivalTracker(TriggerRules(window_seconds=5.0))
    tracker = tracker.observe({"s": (1000 * 20, 20.0)})  # long history at 1000/s
    for _ in range(round(5.0 / interval)):
        tracker = tracker.observe({"s": (round(2000 * interval), interval)})  # 5 s at 2000/s
    rate = 1.0 / tracker.smoothed["s"]
    assert rate == pytest.approx(1000 + 1000 * (1 - np.exp(-1)), rel=1e-9)


def test_selectivities_are_smoothed_over_the_window_in_seconds():
    a = RateTracker.of(TriggerRules(window_seconds=4.0)).observe({"n": 0.1}, 1.0)
    fine = a
    for _ in range(4):
        fine = fine.observe({"n": 0.5}, 0.5)
    coarse = a.observe({"n": 0.5}, 2.0)
    assert fine.smoothed["n"] == pytest.approx(coarse.smoothed["n"])


def test_intervals_without_arrivals_lower_the_rate_and_few_counts_keep_the_last_d():
    tracker = ArrivalTracker(TriggerRules(window_seconds=2.0)).observe({"s": (0, 1.0)})
    assert "s" not in tracker.smoothed  # not one arrival yet: no rate
    tracker = tracker.observe({"s": (10, 1.0)})
    before = tracker.smoothed["s"]
    assert tracker.observe({"s": (0, 1.0)}).smoothed["s"] > before


def test_the_rate_test_is_the_exact_conditional_poisson_test():
    assert rate_change_p(Counts(20, 5.0), Counts(20, 5.0)) == pytest.approx(1.0)
    assert rate_change_p(Counts(40, 5.0), Counts(20, 5.0)) < 1e-6
    assert rate_change_p(Counts(2.4, 5.0), Counts(2, 5.0)) > 0.1
    assert rate_change_p(Counts(0, 5.0), Counts(0, 5.0)) == 1.0


def test_the_old_alpha_becomes_its_window():
    assert window_of_alpha(1.0, 1.0) == 0.0
    assert 1 - np.exp(-1.0 / window_of_alpha(0.3, 1.0)) == pytest.approx(0.3)
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        window_of_alpha(0.0, 1.0)


@pytest.mark.parametrize("kwargs, words", [({"window_seconds": -1}, "≥ 0"), ({"threshold": 0}, "> 0"),
                                           ({"significance": 0}, r"\(0, 1\]")])
def test_rules_out_of_their_domain_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        TriggerRules(**kwargs)


def test_a_step_restarts_the_estimate_so_the_first_decision_uses_the_new_rate():
    """A ×4 step: smoothed over 5 s the rate a second in would be about ×1.5; the step restarts the estimate at once."""
    rng = np.random.default_rng(3)
    tracker = warmed(rng, {"s": 50.0})
    tracker = poisson(tracker, rng, {"s": 200.0}, 1.0)
    assert tracker.stepped == frozenset({"s"}) and tracker.fell == frozenset()
    assert 1.0 / tracker.smoothed["s"] == pytest.approx(200.0, rel=0.15)
    assert tracker.drifted() == frozenset({"s"})
    tracker = poisson(tracker.decide_with(), rng, {"s": 200.0}, 1.0)
    assert tracker.stepped == frozenset()
    tracker = poisson(tracker.decide_with(), rng, {"s": 50.0}, 1.0)  # and back: a step down
    assert tracker.stepped == tracker.fell == frozenset({"s"})


def test_noise_and_a_ramp_never_restart_and_without_the_test_nothing_does():
    rng = np.random.default_rng(5)
    tracker = warmed(rng, {"s": 50.0})
    for i in range(120):  # ×4 over 2 minutes in 24 steps, decided on as it goes
        tracker = poisson(tracker, rng, {"s": 50.0 * (1 + 3 * (i // 5 + 1) / 24)}, 1.0)
        assert not tracker.stepped
        if tracker.drifted():
            tracker = tracker.decide_with()
    untested = warmed(rng, {"s": 50.0}, rules=TriggerRules(window_seconds=5.0, significance=1.0))
    assert not poisson(untested, rng, {"s": 200.0}, 1.0).stepped


def test_an_hour_of_poisson_noise_makes_no_step():
    rng = np.random.default_rng(11)
    tracker = warmed(rng, {"a": 50.0, "b": 20.0})
    steps = 0
    for _ in range(3600):
        tracker = poisson(tracker, rng, {"a": 50.0, "b": 20.0}, 1.0)
        steps += len(tracker.stepped)
    assert steps == 0


def test_counts_beyond_the_exact_test_get_its_normal_approximation():
    """A counter gone wrong (2**64 rows) must not break the cycle; large counts agree with the exact test's verdict."""
    huge = rate_change_p(Counts(2.0**64, 1.0), Counts(10.0, 1.0))
    assert huge == 0.0
    steady = rate_change_p(Counts(EXACT_UP_TO, 1.0), Counts(EXACT_UP_TO, 1.0))
    assert steady > 0.9
    shifted = rate_change_p(Counts(EXACT_UP_TO * 1.01, 1.0), Counts(EXACT_UP_TO, 1.0))
    assert shifted < 1e-6
