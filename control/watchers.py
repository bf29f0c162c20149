"""The measurement watchers: what an operator must hear about what armd measures.

Each watcher compares one observation with what armd expects and says when
a condition starts and when it ends, once each, never on every observation:

* ``watch_streams`` — ``statistics_stale`` once a stream has delivered no
  rows for ``limit`` observations, ``statistics_fresh`` when it delivers
  again;
* ``watch_bound`` — ``bound_exceeded`` when the measured state passes the
  memory bound, ``bound_restored`` when it is back within;
* ``watch_estimates`` — ``estimate_mismatch`` per query whose measured
  state is off its estimate by more than a factor (again only after it was
  back within the factor).

They are pure: the caller keeps the returned ``WatchState`` for the next
observation and raises (logs, records, alerts) the returned events.
docs/operations.md lists the events.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Collection, Mapping, Sequence

from .ports import EventRecord


@dataclass(frozen=True)
class WatchState:
    idle: Mapping[str, int] = field(default_factory=dict)
    """Observations in a row without rows, per stream."""
    stale: frozenset[str] = frozenset()
    over_bound: bool = False
    estimate_off: frozenset[str] = frozenset()


def watch_streams(state: WatchState, at: datetime, streams: Sequence[str], arrived: Collection[str], limit: int,
                  observe_seconds: float) -> tuple[WatchState, list[EventRecord]]:
    """``statistics_stale`` / ``statistics_fresh`` for the ``streams`` given those that ``arrived`` (delivered rows)."""
    idle, stale, events = dict(state.idle), set(state.stale), []
    for stream in streams:
        if stream in arrived:
            idle[stream] = 0
            if stream in stale:
                stale.discard(stream)
                events.append(EventRecord(at, "statistics_fresh", "info", f"stream {stream!r} delivers rows again", None,
                                          {"stream": stream}))
            continue
        idle[stream] = idle.get(stream, 0) + 1
        if idle[stream] >= limit and stream not in stale:
            stale.add(stream)
            events.append(EventRecord(
                at, "statistics_stale", "warning", f"no rows from stream {stream!r} for {limit} observations "
                f"({limit * observe_seconds:g} s); its rate and every estimate that uses it are stale", None,
                {"stream": stream, "intervals": limit}))
    return replace(state, idle=idle, stale=frozenset(stale)), events


def watch_bound(state: WatchState, at: datetime, measured: Mapping[str, float], bound: float) -> tuple[WatchState, list[EventRecord]]:
    """``bound_exceeded`` / ``bound_restored`` for the measured state per query (bytes)."""
    total = sum(measured.values())
    over = total > bound
    events = []
    if over and not state.over_bound:
        events.append(EventRecord(at, "bound_exceeded", "warning", f"measured state {total:,.0f} B is over the memory bound "
                                  f"{bound:,.0f} B", None,
                                  {"measured_state_bytes": total, "memory_bound_bytes": bound, "queries": dict(measured)}))
    elif state.over_bound and not over:
        events.append(EventRecord(at, "bound_restored", "info", f"measured state {total:,.0f} B is within the memory bound "
                                  f"{bound:,.0f} B again", None, {"measured_state_bytes": total, "memory_bound_bytes": bound}))
    return replace(state, over_bound=over), events


def watch_estimates(state: WatchState, at: datetime, measured: Mapping[str, float], estimated: Mapping[str, float],
                    factor: float, comparable: Collection[str]) -> tuple[WatchState, list[EventRecord]]:
    """``estimate_mismatch`` per query in ``comparable`` whose measured state is off its estimate by more than ``factor``.

    ``comparable``: the queries whose steady state the estimate describes
    (their windows have been open for their size, no live migration runs);
    the others are neither raised nor cleared.
    """
    off, events = set(state.estimate_off), []
    for query, value in measured.items():
        estimate = estimated.get(query)
        if query not in comparable or not estimate or estimate <= 0:
            continue
        ratio = value / estimate
        mismatch = not (1 / factor <= ratio <= factor)
        if mismatch and query not in off:
            events.append(EventRecord(
                at, "estimate_mismatch", "warning", f"measured state {value:,.0f} B of {query!r} is {ratio:.3g} × its "
                f"estimated memory {estimate:,.0f} B (tolerated: a factor of {factor:g})", query,
                {"measured_state_bytes": value, "estimated_memory_bytes": estimate, "ratio": ratio, "factor": factor}))
        if mismatch:
            off.add(query)
        else:
            off.discard(query)
    return replace(state, estimate_off=frozenset(off)), events
