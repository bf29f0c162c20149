"""The migration cost models (GenMig, restart, Moving State, Parallel Track) and their price in QoS units."""

from __future__ import annotations

import pytest

from armd.policies import migration_cost as mc


def test_genmig_runs_both_plans_for_the_new_window_the_watermark_delay_and_two_triggers():
    cost = mc.genmig(new_window_seconds=10.0, watermark_delay_seconds=2.0, trigger_seconds=1.0, old_state_bytes=50_000)
    assert (cost.duration_seconds, cost.extra_state_bytes, cost.output_gap_seconds) == (14.0, 50_000, 0.0)


def test_a_restart_holds_nothing_extra_and_leaves_a_gap_of_the_new_window():
    cost = mc.restart(8.0)
    assert (cost.extra_state_bytes, cost.output_gap_seconds) == (0.0, 8.0)


def test_moving_state_recomputes_each_unmatched_state_from_its_inputs():
    """003 equation 1: λ_A λ_B W² (T_j + T_s σ); the setup (matching, moving) comes on top; the output pauses."""
    one = mc.Recompute(rate_a=100.0, rate_b=50.0, selectivity=0.1)
    cost = mc.moving_state(2.0, [one], join_seconds=1e-6, insert_seconds=1e-5)
    assert cost.duration_seconds == pytest.approx(100 * 50 * 4 * (1e-6 + 1e-5 * 0.1))
    assert cost.output_gap_seconds == cost.duration_seconds and cost.extra_state_bytes == 0
    bigger = mc.moving_state(4.0, [one, one], join_seconds=1e-6, insert_seconds=1e-5, old_operators=3, new_operators=3,
                             match_seconds=1e-6, cursor_seconds=1e-6)
    assert bigger.duration_seconds == pytest.approx(2 * 4 * cost.duration_seconds + 4 * 9 * 1e-6 + 2 * 3 * 1e-6)


@pytest.mark.parametrize("height, windows", [(1, 1), (2, 2), (5, 2)])
def test_parallel_track_runs_both_boxes_for_one_window_per_level_at_most_two(height, windows):
    cost = mc.parallel_track(3.0, height, old_state_bytes=1_000, old_processing=10.0)
    assert cost.duration_seconds == 3.0 * windows and cost.extra_state_bytes == 1_000
    assert cost.extra_processing == 10.0 * 3.0 * windows and cost.output_gap_seconds == 0
    with pytest.raises(ValueError, match="≥ 1"):
        mc.parallel_track(3.0, 0, 0, 0)


def test_the_price_is_extra_state_as_a_share_of_the_bound_times_seconds_plus_the_gap():
    exchange = mc.Exchange(qos_per_bound_second=0.01, qos_per_gap_second=0.002)
    assert exchange.price(mc.genmig(10.0, 0.0, 0.0, 50_000), memory_bound=100_000) == pytest.approx(0.01 * 0.5 * 10)
    assert exchange.price(mc.restart(10.0), memory_bound=100_000) == pytest.approx(0.002 * 10)
    assert exchange.price(mc.instant(), 1.0) == 0 and mc.Exchange().free and not exchange.free
    with pytest.raises(ValueError, match="≥ 0"):
        mc.Exchange(qos_per_bound_second=-1)
