"""The statistics port's domains: each bad value is taken out and named; good observations pass unchanged."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from armd.control.ports import Observation, QueryMetrics, StreamStats
from armd.control.statistics import screen

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def stream(name: str = "clicks", rows: int = 10, interval: float = 1.0, rate: float = 10.0, d: float = 100.0, **kw) -> StreamStats:
    return StreamStats(name, rows, interval, rate, d, **kw)


def test_a_good_observation_passes_unchanged() -> None:
    observation = Observation(AT, (stream(), stream("idle", 0, 1.0, 0.0, math.inf)),
                              (QueryMetrics("q", 0, 0), QueryMetrics("p", 5, 320, {"f": 0.25}, {"a,b": 1.0})))
    screened = screen(observation)
    assert screened.observation is observation and screened.rejected == ()


@pytest.mark.parametrize("changes, field", [
    ({"rate": math.nan}, "rate_per_second"),
    ({"rate": -1.0}, "rate_per_second"),
    ({"rate": 0.0}, "rate_per_second"),          # rows arrived at rate 0
    ({"rate": math.inf}, "rate_per_second"),
    ({"d": 0.0}, "d"),
    ({"d": -3.0}, "d"),
    ({"d": math.nan}, "d"),
    ({"d": math.inf}, "d"),                      # inf only when nothing arrived
    ({"rows": -1}, "rows"),
    ({"interval": math.nan}, "interval_seconds"),
    ({"l": 0.0}, "l"),
    ({"g": math.inf}, "g"),
])
def test_a_stream_with_a_value_outside_its_domain_is_dropped_and_named(changes, field) -> None:
    screened = screen(Observation(AT, (stream(**changes), stream("other"))))
    assert [s.stream for s in screened.observation.streams] == ["other"]
    assert [(r.subject, r.name, r.field) for r in screened.rejected] == [("stream", "clicks", field)]


@pytest.mark.parametrize("metrics, field", [
    (QueryMetrics("q", selectivities={"f": 5.0, "g": 0.5}), "selectivities.f"),
    (QueryMetrics("q", selectivities={"f": 0.0, "g": 0.5}), "selectivities.f"),
    (QueryMetrics("q", selectivities={"f": math.nan, "g": 0.5}), "selectivities.f"),
    (QueryMetrics("q", pair_selectivities={"a,b": -0.1, "b,c": 0.5}), "pair_selectivities.a,b"),
    (QueryMetrics("q", state_rows=-4, state_bytes=0), "state_rows"),
    (QueryMetrics("q", state_rows=3, state_bytes=math.inf), "state_bytes"),
    (QueryMetrics("q", state_rows=3, state_bytes=0), "state_bytes"),  # rows held in no bytes
    (QueryMetrics("q", state_rows=3, state_bytes=-1), "state_bytes"),
    (QueryMetrics("q", bytes_per_row={"agg": math.nan}), "bytes_per_row.agg"),
    (QueryMetrics("q", bytes_per_row={"agg": 0.0}), "bytes_per_row.agg"),
    (QueryMetrics("q", group_models={"agg": (5.0, -1.0)}), "group_models.agg"),
    (QueryMetrics("q", group_models={"agg": (math.inf, 0.0)}), "group_models.agg"),
])
def test_a_query_value_outside_its_domain_is_taken_out_the_rest_kept(metrics, field) -> None:
    screened = screen(Observation(AT, (stream(),), (metrics,)))
    [rejection] = screened.rejected
    assert (rejection.subject, rejection.name, rejection.field) == ("query", "q", field)
    [kept] = screened.observation.queries
    assert set(kept.selectivities) <= {"g"} and set(kept.pair_selectivities) <= {"b,c"}
    assert not kept.bytes_per_row and not kept.group_models
    assert all(v is None or (math.isfinite(v) and v >= 0) for v in (kept.state_rows, kept.state_bytes))
    assert screened.observation.streams == (stream(),)


def test_rejections_are_plain_json() -> None:
    [rejection] = screen(Observation(AT, (stream(d=math.nan),))).rejected
    assert rejection.as_json() == {"subject": "stream", "name": "clicks", "field": "d", "value": "nan", "reason": "finite and > 0"}


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**20))


@given(rate=values, d=values, sel=values, state=values)
def test_nothing_outside_the_domains_survives(rate, d, sel, state) -> None:
    observation = Observation(AT, (StreamStats("s", 3, 1.0, rate, d),),
                              (QueryMetrics("q", state_rows=None, state_bytes=state, selectivities={"n": sel}),))
    kept = screen(observation).observation
    for s in kept.streams:
        assert math.isfinite(s.rate_per_second) and s.rate_per_second > 0 and math.isfinite(s.d) and s.d > 0
    for q in kept.queries:
        assert all(0 < v <= 1 for v in q.selectivities.values())
        assert q.state_bytes is None or (math.isfinite(q.state_bytes) and q.state_bytes >= 0)


def test_the_controller_drops_bad_statistics_counts_and_raises_an_event(tmp_path) -> None:
    from support.fakes import cycle, make

    controller, store, _applier, alerts, clock = make(tmp_path)
    real = controller.source.observe

    def bad(at):
        observation = real(at)
        streams = tuple(s if i else StreamStats(s.stream, s.rows, s.interval_seconds, math.nan, -1.0)
                        for i, s in enumerate(observation.streams))
        queries = tuple(QueryMetrics(q.query, q.state_rows, q.state_bytes, {"x": 5.0}) for q in observation.queries)
        return Observation(observation.at, streams, queries, observation.batches)

    controller.source.observe = bad
    cycle(controller, clock)
    cycle(controller, clock)
    assert controller.counters["statistics_rejected"] == 2
    events = [e for e in store.of("event") if e.kind == "statistics_rejected"]
    assert len(events) == 2 and events[0].severity == "warning" and alerts.events
    for observation in store.of("observation"):
        assert all(math.isfinite(s.rate_per_second) and s.d > 0 for s in observation.streams)
        assert all(not q.selectivities for q in observation.queries)
    assert "x" not in controller.state.selectivities.smoothed
