"""The armd-synthetic streaming source: options, schedule-following counts, replayable rows on real Spark."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.source import (Arrivals, SourceOptionError, SourceOptions, SyntheticStreamReader, read_synthetic,
                                        schedule_json)
from armd.adapters.synthetic import Schedule, SyntheticSource

SCHEDULE = Schedule(40.0, steps=((20.0, 10.0),), bursts=((5.0, 5.0, 3.0),))
START = 1_700_000_000.0


def options(**extra: str) -> dict[str, str]:
    return {"stream": "clicks", "start": repr(START), "schedule": json.dumps(schedule_json(SCHEDULE)), **extra}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"stream": ""}, "option 'stream' is required"),
        ({"start": "yesterday"}, "option 'start' must be epoch seconds or ISO-8601"),
        ({"start": "2026-01-01T00:00:00"}, "with a timezone"),
        ({"schedule": "{"}, "option 'schedule' is not valid JSON"),
        ({"schedule": '{"rate_per_second": 5, "peaks": []}'}, "unknown key(s) ['peaks']"),
        ({"schedule": '{"rate_per_second": -1}'}, "must be finite and >= 0"),
        ({"keys": "0"}, "option 'keys' must be a whole number >= 1"),
        ({"key_distribution": "normal"}, "'key_distribution' must be one of uniform, zipf"),
        ({"speed": "0"}, "option 'speed' must be a finite number > 0"),
        ({"rows_per_second": "5"}, "unknown option(s) ['rows_per_second']"),
        ({"all_streams": "orders"}, "must include the stream 'clicks'"),
    ],
)
def test_bad_options_name_the_option_and_what_is_allowed(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SourceOptionError) as caught:
        SourceOptions.parse(options(**extra))
    assert message in str(caught.value)


def test_options_round_trip_and_iso_start() -> None:
    parsed = SourceOptions.parse(options(keys="7", key_distribution="zipf", zipf_exponent="1.2", end_seconds="30",
                                         max_seconds_per_batch="4", catch_up_seconds="26.5"))
    assert SourceOptions.parse(parsed.as_options()) == parsed
    assert SourceOptions.parse(options(start="2023-11-14T22:13:20Z")).start == START


def test_a_backlog_is_read_in_one_batch_and_live_rows_at_the_simulated_trigger() -> None:
    """A replaying run's rows up to the old run's position are there already (``catch_up_seconds``): one batch reads
    them, as a real trigger would; after them ``max_seconds_per_batch`` paces the batches again."""
    reader = SyntheticStreamReader(SourceOptions.parse(options(
        speed="1000", end_seconds="60", starting_seconds="10", max_seconds_per_batch="4", catch_up_seconds="26.5")))
    first = reader.initialOffset()
    assert first["event_ms"] == 10_000
    caught_up = reader.latestOffset(first)
    assert caught_up["event_ms"] == 26_500
    assert reader.latestOffset(caught_up)["event_ms"] == 30_500
    paced = SyntheticStreamReader(SourceOptions.parse(options(speed="1000", end_seconds="60", max_seconds_per_batch="4")))
    assert paced.latestOffset({"stream": "clicks", "event_ms": 10_000})["event_ms"] == 14_000


def test_arrival_times_are_the_synthetic_sources_own() -> None:
    """Same seed, same stream position among all streams: the same arrival times as the daemon's source."""
    parsed = SourceOptions.parse(options(all_streams="orders,clicks", seed="9"))
    daemon_source = SyntheticSource({"orders": Schedule(1.0), "clicks": SCHEDULE}, 9, 0.001, None)  # type: ignore[arg-type]
    times = np.concatenate([t for t, _, _ in Arrivals(parsed).between(0, 12_000)])
    assert np.array_equal(times, daemon_source.arrivals("clicks", 0.0, 12.0))


def test_counts_follow_the_schedule() -> None:
    arrivals = Arrivals(SourceOptions.parse(options()))
    for a, b in ((0, 5), (5, 10), (10, 20), (20, 60)):
        expected = SCHEDULE.expected(a, b)
        assert abs(arrivals.count(a, b) - expected) <= 4 * math.sqrt(expected), (a, b)


def test_zipf_keys_are_skewed_and_uniform_are_not() -> None:
    def key_counts(**extra: str) -> np.ndarray:
        arrivals = Arrivals(SourceOptions.parse(options(keys="10", **extra)))
        keys = np.concatenate([k for _, k, _ in arrivals.between(0, 60_000)])
        assert keys.min() >= 0 and keys.max() < 10
        return np.bincount(keys, minlength=10)

    zipf, uniform = key_counts(key_distribution="zipf", zipf_exponent="1.5"), key_counts()
    assert zipf[0] > 3 * zipf[9] and zipf[0] == zipf.max()
    assert uniform.max() < 2 * uniform.min()


def test_two_queries_from_the_same_offset_see_identical_rows(spark) -> None:  # noqa: F811
    """Replayable: different batch sizes, same offsets → the same rows, and exactly the generator's rows."""
    start = math.floor(time.time()) - 3600
    schedule = Schedule(30.0, bursts=((8.0, 2.0, 4.0),))
    common = dict(start=start, keys=4, element_bytes=16, starting_seconds=3, end_seconds=12, seed=5)
    seen = []
    for batch_seconds in (3, 9):
        df = read_synthetic(spark, "clicks", schedule, max_seconds_per_batch=batch_seconds, **common)
        rows: list = []
        query = df.writeStream.foreachBatch(lambda d, _b, rows=rows: rows.extend(d.collect())).start()
        query.processAllAvailable()
        query.stop()
        seen.append(sorted((r.event_time.timestamp(), r.key, r.value, r.payload) for r in rows))
    assert seen[0] == seen[1]
    parsed = SourceOptions.parse({"stream": "clicks", "start": repr(float(start)),
                                  "schedule": json.dumps(schedule_json(schedule)), "keys": "4", "seed": "5"})
    expected = Arrivals(parsed).count(3, 12)
    assert len(seen[0]) == expected
    assert abs(expected - schedule.expected(3, 12)) <= 4 * math.sqrt(schedule.expected(3, 12))
    times = [t - start for t, *_ in seen[0]]
    assert min(times) >= 3 and max(times) < 12
    assert all(payload == "x" * 16 for *_, payload in seen[0])
