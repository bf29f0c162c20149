"""The measurement watchers: each condition is raised once when it starts and once when it ends, never per observation."""

from __future__ import annotations

from datetime import datetime, timezone

from armd.control.watchers import WatchState, watch_bound, watch_estimates, watch_streams

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_stream_without_rows_is_stale_once_after_the_limit_and_fresh_when_it_delivers_again():
    state, kinds = WatchState(), []
    for _ in range(5):
        state, events = watch_streams(state, AT, ("a", "b"), {"a"}, 3, 2.0)
        kinds += [(e.kind, e.details["stream"]) for e in events]
    assert kinds == [("statistics_stale", "b")] and state.stale == {"b"} and state.idle["b"] == 5
    state, events = watch_streams(state, AT, ("a", "b"), {"a", "b"}, 3, 2.0)
    assert [(e.kind, e.severity) for e in events] == [("statistics_fresh", "info")] and state.idle["b"] == 0
    assert not state.stale


def test_the_stale_message_says_how_long_in_seconds():
    state = WatchState(idle={"b": 2})
    _, (event,) = watch_streams(state, AT, ("b",), set(), 3, 2.0)
    assert "for 3 observations (6 s)" in event.message and event.severity == "warning" and event.at == AT


def test_the_bound_is_exceeded_once_and_restored_once():
    state, events = watch_bound(WatchState(), AT, {"q": 600.0, "r": 500.0}, 1000.0)
    assert [e.kind for e in events] == ["bound_exceeded"] and events[0].details["measured_state_bytes"] == 1100.0
    state, events = watch_bound(state, AT, {"q": 700.0, "r": 500.0}, 1000.0)
    assert events == [] and state.over_bound
    state, events = watch_bound(state, AT, {"q": 600.0}, 1000.0)
    assert [e.kind for e in events] == ["bound_restored"] and not state.over_bound


def test_an_estimate_mismatch_is_raised_per_query_once_and_again_only_after_it_was_back_within_the_factor():
    measured, estimated = {"q": 10.0, "r": 100.0}, {"q": 100.0, "r": 100.0}
    state, events = watch_estimates(WatchState(), AT, measured, estimated, 2.0, {"q", "r"})
    assert [(e.kind, e.query) for e in events] == [("estimate_mismatch", "q")] and events[0].details["ratio"] == 0.1
    state, events = watch_estimates(state, AT, measured, estimated, 2.0, {"q", "r"})
    assert events == []
    state, _ = watch_estimates(state, AT, {"q": 60.0}, estimated, 2.0, {"q"})
    state, events = watch_estimates(state, AT, {"q": 300.0}, estimated, 2.0, {"q"})
    assert [(e.kind, e.query) for e in events] == [("estimate_mismatch", "q")]


def test_queries_without_a_steady_state_or_an_estimate_are_left_alone():
    state = WatchState(estimate_off=frozenset({"q"}))
    state, events = watch_estimates(state, AT, {"q": 100.0, "r": 1.0, "s": 1.0}, {"q": 100.0, "s": 0.0}, 2.0, {"r", "s"})
    assert events == [] and state.estimate_off == {"q"}  # q migrates (not comparable): neither raised nor cleared
