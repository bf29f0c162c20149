"""Adaptation delays of paper 001 §4.2: when a setting change shows in the state.

Stateful operators only forget elements when they expire, so a smaller
window or a coarser granularity frees memory with a delay. A policy uses these
functions to predict when the bounds will hold again after a decision. Times
are application time; ``at`` is the instant the change is applied.
"""

from __future__ import annotations

from typing import NamedTuple

from .characteristics import Stream


class Delay(NamedTuple):
    starts: float
    """First instant at which the change is visible in the state."""
    complete: float
    """Instant from which the state is fully at its new steady size."""


def granularity_change(at: float, aggregation_input: Stream) -> Delay:
    """A granularity change ahead of an aggregation with input (d, l, g).

    It starts at once and is complete after one element lifetime l, when the
    last aggregate built at the old granularity has expired; when d ≥ l the
    state holds at most one element and the change is complete at once.
    """
    if aggregation_input.is_empty or aggregation_input.d >= aggregation_input.l:
        return Delay(at, at)
    return Delay(at, at + aggregation_input.l)


def window_change(at: float, old_length: float, new_length: float) -> Delay:
    """A window whose elements' validity changes from old_length to new_length.

    Elements admitted before the change keep their old validity, so the
    effect starts after the shorter of the two lengths and is complete after
    the longer one (e.g. 60 s → 30 s at t: starts at t + 30 s, complete at
    t + 60 s).
    """
    return Delay(at + min(old_length, new_length), at + max(old_length, new_length))
