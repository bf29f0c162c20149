"""Single-process host: feed an event log through a strategy, force transitions, time it.

The host exists so that benchmarks, tests and the embedded demo drive every
strategy the same way. Events arrive in batches into the strategy's input
queue; a transition forced at tuple count c is decided once c events have
been received (that is, with the batch that brings the count to c or past
it), after the events before c are processed, so the drain of paper 004
§4.1 really pushes the rest of that batch through the old plan. The core
reads no clock: the caller passes one (the bench passes
``time.process_time`` or ``time.perf_counter``), or none to run untimed.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Callable, Sequence

from .pipeline import Order
from .strategies import Strategy


@dataclass
class HostRun:
    """What one run measured. Times are in the units of the clock passed in."""

    events: int
    elapsed: float
    emitted: int
    done_at: array = field(repr=False)
    """done_at[e]: clock reading when event e had been processed (relative to the start)."""
    switch_at: list[int]
    """Event id before which each transition took effect (after its drain)."""
    max_gap: float
    """Longest time between two deliveries of results, from the first delivery on."""
    max_gap_event: int
    """Event id at which that gap ended."""

    def throughput(self, start: int, stop: int) -> float:
        """Events per clock unit over events [start, stop)."""
        stop = min(stop, self.events)
        if stop <= start:
            return float("nan")
        t0 = self.done_at[start - 1] if start > 0 else 0.0
        span = self.done_at[stop - 1] - t0
        return (stop - start) / span if span > 0 else float("inf")

    def span_time(self, start: int, stop: int) -> float:
        stop = min(stop, self.events)
        t0 = self.done_at[start - 1] if start > 0 else 0.0
        return self.done_at[stop - 1] - t0


def run_host(
    strategy: Strategy,
    transitions: Sequence[tuple[int, Order]] = (),
    clock: Callable[[], float] | None = None,
    *,
    batch: int = 32,
) -> HostRun:
    """Run the whole log through ``strategy``; ``transitions`` are (tuple count, new order) pairs.

    The clock is read once per batch and right before and after every
    transition, never per tuple: a CPU-time reading costs a system call
    (about 4 µs on the machines here, as much as a tuple's whole join work),
    and reading it per tuple would add that to every strategy alike and hide
    how they differ. Times (``done_at``, the gaps) are therefore exact to
    within one batch; a transition's own work (a halt) is timed exactly.
    """
    if batch < 1:
        raise ValueError(f"batch must be ≥ 1, got {batch!r}")
    tick = clock if clock is not None else (lambda: 0.0)
    n = len(strategy.log)
    plan = sorted(transitions, key=lambda p: p[0])
    done_at = array("d", bytes(8 * n))
    switch_at: list[int] = []
    t0 = tick()
    recorded = 0
    seen = strategy.emitted
    last_emit: float | None = None
    max_gap, gap_event = 0.0, -1

    def mark() -> float:
        """Stamp the events processed since the last mark, and a delivery if there was one; returns the time."""
        nonlocal recorded, seen, last_emit, max_gap, gap_event
        now = tick() - t0
        upto = strategy.next_id
        while recorded < upto:
            done_at[recorded] = now
            recorded += 1
        if strategy.emitted != seen:
            seen = strategy.emitted
            if last_emit is not None and now - last_emit > max_gap:
                max_gap, gap_event = now - last_emit, upto - 1
            last_emit = now
        return now

    process = strategy.process
    queue = strategy.queue
    pop = queue.popleft
    ti = 0
    i = 0
    while i < n:
        hi = min(i + batch, n)
        queue.extend(range(i, hi))  # what Strategy.receive does, once per batch
        while ti < len(plan) and plan[ti][0] <= hi:
            while queue and queue[0] < plan[ti][0]:
                process(pop())
            mark()
            strategy.transition(plan[ti][1])
            switch_at.append(strategy.next_id)
            ti += 1
            process = strategy.process
            mark()
        while queue:
            process(pop())
        mark()
        i = hi
    strategy.finish()
    elapsed = mark()
    return HostRun(n, elapsed, strategy.emitted, done_at, switch_at, max_gap, gap_event)
