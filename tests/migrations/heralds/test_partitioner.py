"""The herald model on a stream: lifespans, merging into the strictest herald, partition ids."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.heralds import chunks, punctuated_stream

from armd.migrations.heralds import ANONYMOUS, Herald, HeraldConflict, HeraldViolation, Partitioner, Range
from armd.migrations.heralds.select import strip_heralds

POSITION = {"a": 0, "b": 1, "ts": 2}


def rows(part) -> list:
    return [(p.pid, list(p.rows)) for p in part]


def test_a_count_lifespan_covers_the_next_n_tuples_then_the_stream_is_anonymous() -> None:
    p = Partitioner(POSITION)
    out = p.feed([Herald.of({"a": Range(0, 9)}, count=2), (1, 0, 0), (2, 0, 1), (30, 0, 2)])
    assert rows(out) == [(1, [(1, 0, 0), (2, 0, 1)]), (ANONYMOUS, [(30, 0, 2)])]
    assert out[0].herald == (("a", Range(0, 9)),)
    assert p.closed == [1]


def test_a_time_lifespan_covers_timestamps_from_its_start_for_its_span() -> None:
    p = Partitioner(POSITION, ts="ts")
    out = p.feed([Herald.of({"a": Range(0, 9)}, time=2.0, ts=10.0), (1, 0, 10.0), (2, 0, 11.9), (30, 0, 12.0)])
    assert rows(out) == [(1, [(1, 0, 10.0), (2, 0, 11.9)]), (ANONYMOUS, [(30, 0, 12.0)])]


def test_a_new_herald_merges_with_the_one_in_force_until_either_runs_out() -> None:
    p = Partitioner(POSITION)
    out = p.feed(
        [Herald.of({"a": Range(0, 9)}, count=3), (5, 0, 0), Herald.of({"a": Range(4, 20), "b": Range.point(0)}, count=4)]
        + [(5, 0, 1), (6, 0, 2), (12, 0, 3), (13, 0, 4), (99, 0, 5)]
    )
    assert [(p.pid, p.herald) for p in out] == [
        (1, (("a", Range(0, 9)),)),
        (2, (("a", Range(4, 9)), ("b", Range.point(0)))),  # both in force: the strictest
        (3, (("a", Range(4, 20)), ("b", Range.point(0)))),  # the first ran out after its third tuple
        (ANONYMOUS, None),
    ]
    assert [len(p.rows) for p in out] == [1, 2, 2, 1]


def test_partitions_span_batches_and_keep_their_id() -> None:
    p = Partitioner(POSITION)
    first = p.feed([Herald.of({"a": Range(0, 9)}, count=3), (1, 0, 0)])
    second = p.feed([(2, 0, 1), (3, 0, 2), (40, 0, 3)])
    assert [q.pid for q in first + second] == [1, 1, ANONYMOUS]


def test_contradicting_count_heralds_are_an_error_that_names_both() -> None:
    p = Partitioner(POSITION)
    with pytest.raises(HeraldConflict, match=r"a=\[20, 30\].*a=\[0, 9\]"):
        p.feed([Herald.of({"a": Range(0, 9)}, count=5), (1, 0, 0), Herald.of({"a": Range(20, 30)}, count=5)])


def test_a_contradicted_time_herald_has_passed_and_retires() -> None:
    p = Partitioner(POSITION, ts="ts")
    out = p.feed(
        [Herald.of({"a": Range(0, 9)}, time=5, ts=0), (1, 0, 0)]
        + [Herald.of({"a": Range(20, 30)}, count=1), (25, 0, 6)]
    )
    assert [q.herald for q in out] == [(("a", Range(0, 9)),), (("a", Range(20, 30)),)]


def test_checking_catches_an_untruthful_herald() -> None:
    with pytest.raises(HeraldViolation, match="a=12"):
        Partitioner(POSITION, check=True).feed([Herald.of({"a": Range(0, 9)}, count=2), (1, 0, 0), (12, 0, 1)])


def test_lifespans_are_validated() -> None:
    with pytest.raises(ValueError, match="exactly one lifespan"):
        Herald.of({"a": Range()}, count=3, time=2)
    with pytest.raises(ValueError, match="needs the timestamp"):
        Herald.of({"a": Range()}, time=2)
    with pytest.raises(ValueError, match="whole number"):
        Herald.of({"a": Range()}, count=2.5)
    assert Herald.of({"a": Range()}, count=math.inf).patterns == ()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 80), st.integers(0, 20), st.lists(st.integers(1, 9), max_size=3))
def test_partitions_carry_every_row_once_in_order_under_a_herald_it_matches(seed, n, heralds, sizes) -> None:
    stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    p = Partitioner(POSITION, ts="ts", check=True)  # check: every row matches its partition's herald
    out = [q for batch in chunks(stream, sizes) for q in p.feed(batch)]
    assert [r for q in out for r in q.rows] == strip_heralds(stream)
    pids = [q.pid for q in out if q.pid != ANONYMOUS]
    assert pids == sorted(pids), "partition ids are handed out in stream order"
    assert all((q.pid == ANONYMOUS) == (q.herald is None) for q in out)


def test_the_creation_operator_announces_the_exact_ranges_of_each_cluster() -> None:
    from armd.migrations.heralds.creation import punctuate

    clusters = [[(3, 1, 0), (5, -2, 1)], [(9, 0, 2)]]
    stream = punctuate(clusters, ["a", "b"], POSITION)
    assert stream[0] == Herald.of({"a": Range(3, 5), "b": Range(-2, 1)}, count=2)
    out = Partitioner(POSITION, check=True).feed(stream)
    assert [list(p.rows) for p in out] == clusters
    with pytest.raises(ValueError, match="empty"):
        punctuate([[]], ["a"], POSITION)


def beside_the_batch(batch: list) -> tuple[list, list]:
    """A punctuated batch as its rows and its heralds beside them, each with the position it applies from."""
    rows = [r for r in batch if not isinstance(r, Herald)]
    marks, seen = [], 0
    for item in batch:
        if isinstance(item, Herald):
            marks.append((seen, item))
        else:
            seen += 1
    return rows, marks


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 80), st.integers(0, 20), st.lists(st.integers(1, 9), max_size=3))
def test_heralds_beside_the_batch_partition_like_punctuation_rows(seed, n, heralds, sizes) -> None:
    stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    inline, beside = Partitioner(POSITION, ts="ts"), Partitioner(POSITION, ts="ts")
    for batch in chunks(stream, sizes):
        rows, marks = beside_the_batch(batch)
        assert beside.feed(rows, marks) == inline.feed(batch)
        assert beside.closed == inline.closed


def counted_stream(seed: int, partitions: int) -> list:
    """Mostly what the benchmarks and the creation operator send: each count herald followed by exactly the rows
    it counts; at random, a herald that ends early, late or never (more rows, or a second herald arriving inside
    its count and merging), a time-based herald, a partition with no herald, and rows that are lists rather
    than tuples."""
    rnd = random.Random(seed)
    out: list = []
    ts = 0.0
    for _ in range(partitions):
        size = rnd.randint(1, 12)
        rows = []
        for _ in range(size):
            ts += 1.0
            row = (rnd.randrange(10), rnd.randrange(10), ts)
            rows.append(list(row) if rnd.random() < 0.05 else row)
        kind = rnd.random()
        if kind < 0.65:
            out.append(Herald.of({"a": Range(0, 9)}, count=size))
        elif kind < 0.75:
            out.append(Herald.of({"a": Range(0, 9)}, count=rnd.choice([max(1, size - 2), size + 3, math.inf])))
        elif kind < 0.85:
            out.append(Herald.of({"a": Range(0, 9)}, count=size))
            rows.insert(rnd.randrange(len(rows) + 1), Herald.of({"b": Range(0, 9)}, count=rnd.randint(1, 4)))
        elif kind < 0.92:
            out.append(Herald.of({"b": Range(0, 9)}, time=rnd.choice([2.0, 5.0, math.inf]), ts=ts - size + 1))
        out.extend(rows)
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 30), st.lists(st.integers(1, 40), max_size=4))
def test_counted_heralds_are_found_where_their_counts_end_and_anywhere_else(seed, partitions, sizes) -> None:
    # the punctuation path looks for the next herald where the count in force ends (and searches when it is
    # not there); heralds beside the batch need no search
    stream = counted_stream(seed, partitions)
    inline, beside, checked = Partitioner(POSITION, ts="ts"), Partitioner(POSITION, ts="ts"), Partitioner(POSITION, ts="ts", check=True)
    for batch in chunks(stream, sizes):
        rows, marks = beside_the_batch(batch)
        got = inline.feed(batch)
        assert got == beside.feed(rows, marks) == checked.feed(batch)
        assert inline.closed == beside.closed == checked.closed
        assert inline.heralds_seen == beside.heralds_seen
        assert (inline.pid, inline.next_pid, inline.in_force.merged, inline.in_force.rows_left, inline.in_force.time_left) == (
            beside.pid, beside.next_pid, beside.in_force.merged, beside.in_force.rows_left, beside.in_force.time_left)
