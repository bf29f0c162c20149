"""The agent's rounds keep a fixed cadence: an application reports every ``poll_seconds`` however long a round takes."""

from __future__ import annotations

import threading

from armd.agent.pace import Pacer


class Clock:
    """Seconds that pass only when the test (a round's work) or a wait says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Wake:
    """``threading.Event`` whose waits pass on the fake clock; ``notify_after`` wakes the next wait early."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.early = clock, None

    def wait(self, seconds: float) -> bool:
        if self.early is not None and self.early < seconds:
            self.clock.now += self.early
            self.early = None
            return True
        self.clock.now += seconds
        return False

    def clear(self) -> None:
        pass

    def set(self) -> None:
        pass


def rounds(work: list[float], notify: dict[int, float] | None = None) -> list[float]:
    """When each round starts, given how long each takes (and a notification heard ``notify[i]`` s into wait ``i``)."""
    clock = Clock()
    pacer = Pacer(1.0, threading.Event(), clock=clock)
    pacer.wake = wake = Wake(clock)  # type: ignore[assignment]
    starts = []
    for i, seconds in enumerate(work):
        wake.early = (notify or {}).get(i)
        assert pacer.next()
        starts.append(round(clock.now - 100.0, 3))
        clock.now += seconds
    return starts


def test_rounds_start_every_interval_however_long_each_takes():
    assert rounds([0.4, 0.4, 0.4, 0.4]) == [1.0, 2.0, 3.0, 4.0]  # not 1.0, 2.4, 3.8, 5.2


def test_a_round_that_overran_is_followed_at_once_and_a_long_stall_does_not_burst():
    assert rounds([1.3, 0.1, 0.1]) == [1.0, 2.3, 3.0]  # late once, then back on the cadence
    assert rounds([5.0, 0.1, 0.1]) == [1.0, 6.0, 7.0]  # not four rounds in a row to catch up


def test_a_notified_round_comes_in_between_and_leaves_the_cadence():
    assert rounds([0.1, 0.1, 0.1], notify={1: 0.2}) == [1.0, 1.3, 2.0]


def test_a_stopped_pacer_says_so():
    stopped = threading.Event()
    pacer = Pacer(0.01, stopped)
    pacer.stop()
    assert pacer.next() is False
