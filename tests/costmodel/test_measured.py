"""The estimators of ``costmodel/measured.py``: d per stream, warm-up, filter, join and pairwise selectivities.

Crafted counts with values worked out by hand, the edges where an estimate
must be left out rather than guessed, and one check against a brute-force
count over a random log whose true key-match selectivity is known.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone

import pytest
from support.jisc_logs import pair_counts

from armd.costmodel.measured import (
    ArrivalPool, SelectivityCounts, StreamArrivals, StreamFrontier, WarmUp, join_selectivity, pair_selectivities, pair_selectivity,
)
from armd.migrations.join import EventLog

T0 = datetime(2026, 11, 22, 10, tzinfo=timezone.utc)


# --- d per stream ---------------------------------------------------------------------------------


def test_d_is_pooled_over_batches_as_covered_time_over_rows() -> None:
    pool = ArrivalPool()
    pool.add("b", 10, 2.0)
    pool.add("a", 10, 2.0)
    pool.add("b", 30, 2.0)  # e.g. another query reading b, or the next batch
    pool.add("idle", 0, 3.0)  # time passed, nothing came
    pool.add("unseen", 5, 0.0)  # no event time covered: nothing learnt
    assert pool.estimates(0.001) == [
        StreamArrivals("a", 10, 2.0, 5.0, 200.0),
        StreamArrivals("b", 40, 4.0, 10.0, 100.0),  # d = 4 s / 40 rows = 0.1 s = 100 ms, not the mean of 200 and 66.7
        StreamArrivals("idle", 0, 3.0, 0.0, math.inf),
    ]
    assert [e.d for e in pool.estimates(1.0)] == [0.2, 0.1, math.inf]  # in the model's time unit


def test_an_empty_pool_estimates_nothing() -> None:
    assert ArrivalPool().estimates(1.0) == []


def test_the_pool_says_how_far_in_event_time_each_stream_was_read() -> None:
    pool = ArrivalPool()
    pool.add("a", 10, 2.0, 104.0)
    pool.add("a", 10, 2.0, 102.0)  # a second reader, behind
    pool.add("b", 10, 2.0)  # a source that says nothing of event time
    assert [(e.stream, e.end) for e in pool.estimates(1.0)] == [("a", 104.0), ("b", None)]


def test_a_reader_behind_the_streams_front_repeats_the_past() -> None:
    """Two applications read one stream; one fell 16 s behind. Only the front says where the stream is now."""
    frontier = StreamFrontier()
    assert frontier.current([("views", 100.0), ("views", 84.0)]) == [True, False]
    # a tie counts; a source without event time always counts; one behind by part of a batch does not (at a step of
    # the rate, that part is the old rate)
    assert frontier.current([("views", 104.0), ("views", 104.0), ("views", 103.0), ("clicks", None)]) == [True, True, False, True]
    # a report read before the front's in the same look is judged against that front
    assert frontier.current([("views", 92.0), ("views", 112.0)]) == [False, True]
    assert frontier.front == {"views": 112.0}
    # once the reader behind leads, it counts again
    assert frontier.current([("views", 113.0)]) == [True]


# --- warm-up --------------------------------------------------------------------------------------


def test_a_run_is_warm_once_its_event_time_has_advanced_by_the_filling_time() -> None:
    warm = WarmUp()
    assert not warm.is_warm("r", T0, 10.0)  # the run's first batch
    assert not warm.is_warm("r", T0 + timedelta(seconds=9.999), 10.0)
    assert warm.is_warm("r", T0 + timedelta(seconds=10), 10.0)
    assert not warm.is_warm("r", T0 - timedelta(seconds=1), 10.0)  # the start is the first batch seen, not the minimum
    assert not warm.is_warm("other", T0 + timedelta(seconds=30), 10.0)  # each run fills on its own
    assert warm.is_warm("other", T0 + timedelta(seconds=30), 0.0)  # nothing to fill
    assert warm.is_warm("r", None, 10.0)  # a batch without event time is not held back


# --- selectivities --------------------------------------------------------------------------------


def test_join_selectivity_is_formula_4_solved_for_sel() -> None:
    assert join_selectivity(8, 10, 20, 10.0, 4.0) == pytest.approx(8 * 10 / (4 * 10 * 20))
    assert join_selectivity(0, 10, 20, 10.0, 4.0) == 0.0
    assert join_selectivity(1e6, 10, 20, 10.0, 4.0) == 1.0  # capped
    assert join_selectivity(8, 0, 20, 10.0, 4.0) is None
    assert join_selectivity(8, 10, 0, 10.0, 4.0) is None
    assert join_selectivity(8, 10, 20, 0.0, 4.0) is None


def test_pair_selectivity_counts_no_pair_as_half_a_pair_and_caps_at_one() -> None:
    assert pair_selectivity(80, 40, 20, 20.0, 10.0) == pytest.approx(80 * 20 / (10 * 40 * 20))
    assert pair_selectivity(0, 40, 10, 20.0, 10.0) == pytest.approx(0.5 * 20 / (10 * 40 * 10))
    assert pair_selectivity(10**6, 4, 2, 20.0, 10.0) == 1.0


def test_pair_selectivities_name_pairs_sorted_and_leave_out_what_they_cannot_estimate() -> None:
    counts = {"a": 40, "b": 20, "c": 10, "b,a": 80, "a,c": 0, "c,d": 5}
    assert pair_selectivities(counts, 10.0, 20.0) == pytest.approx(
        {"a,b": 80 * 20 / (10 * 40 * 20), "a,c": 0.5 * 20 / (10 * 40 * 10)})  # d saw no tuple: c,d left out
    assert pair_selectivities(counts, None, 20.0) == {}
    assert pair_selectivities(counts, 10.0, 0.0) == {}


def test_the_pairwise_estimate_recovers_the_key_match_probability_of_a_random_log() -> None:
    """Uniform keys over K values: two tuples match with probability 1/K, whatever the rates.

    Times uniform on [0, T): two tuples are less than W apart with
    probability 2W/T − (W/T)², so pairs·T / (2W·n_a·n_b) is 1/K · (1 − W/2T).
    """
    keys, window, span = 5, 10.0, 1000.0
    rng = random.Random(3)
    names = ["a", "b", "c"]
    weights = [1, 2, 3]  # different rates
    events = [(rng.choices(names, weights)[0], rng.randrange(keys), rng.uniform(0, span)) for _ in range(3000)]
    counts = pair_counts(EventLog.from_events(names, events), window)  # brute force over every pair of tuples
    sels = pair_selectivities(counts, 2 * window, span)
    assert set(sels) == {"a,b", "a,c", "b,c"}
    for pair, sel in sels.items():
        assert sel == pytest.approx(1 / keys * (1 - window / (2 * span)), rel=0.05), pair


def test_selectivity_counts_over_an_interval() -> None:
    counts = SelectivityCounts()
    counts.add_warm_batch(10.0)
    counts.add_warm_batch(5.0)
    counts.add_filter("f", "in", 30)
    counts.add_filter("f", "out", 6)
    counts.add_filter("f", "in", 10)
    counts.add_filter("f", "out", 4)
    counts.add_filter("never_out", "in", 5)  # no rows came out and none were counted: not a selectivity of 0
    counts.add_filter("no_input", "out", 0)
    counts.add_filter("no_input", "in", 0)
    counts.add_join("j", "left", 10, 4.0)
    counts.add_join("j", "right", 20, 4.0)
    counts.add_join("j", "out", 6, 4.0)
    counts.add_join("j", "out", 6)
    counts.add_join("no_validity", "left", 10)
    counts.add_join("no_validity", "right", 10)
    counts.add_join("no_validity", "out", 10)
    counts.add_join("one_sided", "left", 10, 4.0)
    counts.add_join("one_sided", "out", 0, 4.0)
    counts.add_pairs({"a": 20, "b": 10, "a,b": 40}, 10.0)
    counts.add_pairs({"a": 20, "b": 10, "a,b": 40})
    assert counts.warm_batches == 2 and counts.span == 15.0
    assert counts.selectivities() == pytest.approx({"f": 10 / 40, "j": 12 * 15 / (4 * 10 * 20)})
    assert counts.pair_selectivities() == pytest.approx({"a,b": 80 * 15 / (10 * 40 * 20)})


def test_without_warm_batches_joins_and_pairs_give_nothing_but_filters_do() -> None:
    counts = SelectivityCounts()
    counts.add_filter("f", "in", 10)
    counts.add_filter("f", "out", 5)
    counts.add_join("j", "left", 10, 4.0)
    counts.add_join("j", "right", 10, 4.0)
    counts.add_join("j", "out", 5, 4.0)
    counts.add_pairs({"a": 1, "b": 1, "a,b": 1}, 10.0)
    assert counts.warm_batches == 0
    assert counts.selectivities() == {"f": 0.5}  # T = 0: a join's rate cannot be measured
    assert counts.pair_selectivities() == {}
