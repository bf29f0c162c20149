"""Adaptation delays (paper 001 §4.2) against the paper's own worked experiments."""

from armd.costmodel.characteristics import Stream
from armd.costmodel.delays import Delay, granularity_change, window_change


def test_window_reduction_matches_figure_7() -> None:
    """§5.1: windows cut from 60 s to 30 s at t = 80 s show at 110 s and are complete at 140 s."""
    assert window_change(80, 60, 30) == Delay(110, 140)


def test_window_growth_matches_figure_7() -> None:
    """§5.1: windows set back from 30 s to 60 s at t = 150 s show at 180 s and are complete at 210 s."""
    assert window_change(150, 30, 60) == Delay(180, 210)


def test_granularity_change_completes_after_one_lifetime() -> None:
    """d < l: the old aggregates expire within one element lifetime l = 600."""
    assert granularity_change(1000, Stream(2.0, 600.0, 1.0)) == Delay(1000, 1600)


def test_granularity_change_is_immediate_when_state_holds_one_element() -> None:
    """d ≥ l: every element in the state has already expired at the next arrival."""
    assert granularity_change(1000, Stream(50.0, 20.0, 1.0)) == Delay(1000, 1000)
    assert granularity_change(5, Stream.empty(10.0)) == Delay(5, 5)
