"""The micro-batch multi-modal join equals the plain join and an all-pairs oracle on random streams, heralds and cuts."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.heralds import atoms, punctuated_stream

from armd.migrations.heralds import Herald, JoinAction, Partitioner, Range, conjunction, regular_join
from armd.migrations.heralds.batchjoin import BatchJoin, MultiModalBatchJoin, time_batches
from armd.migrations.heralds.select import strip_heralds

POSITION = {"a": 0, "b": 1, "ts": 2}
JOIN_ATTRIBUTES = ("L.a", "L.b", "R.a", "R.b")


def all_pairs(left, right, predicate, window):
    def holds(l, r):
        values = {"L.a": l[0], "L.b": l[1], "R.a": r[0], "R.b": r[1]}
        return all(a.holds(values) for a in predicate)

    return sorted((l, r) for l in left for r in right if abs(l[2] - r[2]) < window and holds(l, r))


def run(left_stream, right_stream, predicate, window, bounds):
    join = MultiModalBatchJoin(predicate, POSITION, POSITION, window=window)
    plain = BatchJoin(predicate, POSITION, POSITION, window=window)
    lp, rp = Partitioner(POSITION, ts="ts"), Partitioner(POSITION, ts="ts")
    out, plain_out = [], []
    for lb, rb in zip(time_batches(left_stream, 2, bounds), time_batches(right_stream, 2, bounds)):
        for chunk in join.process(lp.feed(lb), rp.feed(rb)):
            out.extend(chunk.pairs)
        plain_out.extend(plain.process(strip_heralds(lb), strip_heralds(rb)))
    return out, plain_out, join


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10**6),
    st.integers(0, 60),
    st.integers(0, 60),
    st.integers(0, 15),
    st.lists(atoms(JOIN_ATTRIBUTES), min_size=1, max_size=4),
    st.sampled_from([0.5, 1.0, 3.0, 10.0, 1000.0]),
    st.lists(st.floats(0, 80, allow_nan=False), max_size=6).map(sorted),
)
def test_batch_join_with_heralds_equals_the_plain_join_and_the_oracle(seed, n, m, heralds, predicate, window, bounds) -> None:
    left_stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    right_stream = punctuated_stream(seed + 1, m, heralds=heralds, time_share=0.4, slack=0.5)
    left, right = strip_heralds(left_stream), strip_heralds(right_stream)
    out, plain_out, _ = run(left_stream, right_stream, predicate, window, bounds)
    expected = all_pairs(left, right, predicate, window)
    assert sorted(out) == expected
    assert sorted(plain_out) == expected
    assert sorted(regular_join(left, right, predicate, POSITION, POSITION, window=window)) == expected


def test_skipped_pairs_cost_no_probe_and_chunks_carry_both_heralds() -> None:
    # L.a <= R.b: L's second partition (a >= 100) is provably empty against R (b <= 50)
    predicate = conjunction(("L.a", "<=", "R.b"))
    low, high, rb = (Herald.of({"a": Range(0, 10)}, count=2), Herald.of({"a": Range(100, 200)}, count=2),
                     Herald.of({"b": Range(20, 50)}, count=4))
    left = [low, (1, 0, 0.0), (2, 0, 1.0), high, (150, 0, 2.0), (160, 0, 3.0)]
    right = [rb, (0, 30, 0.5), (0, 40, 1.5), (0, 20, 2.5), (0, 50, 3.5)]
    out, plain_out, join = run(left, right, predicate, 100.0, [2.0])
    assert sorted(out) == sorted(plain_out) == all_pairs(strip_heralds(left), strip_heralds(right), predicate, 100.0)
    assert len(out) == 8
    # one lookup per slice and run of the other side, whatever their sizes; PredSAT once per pair of heralds
    assert join.met == {JoinAction.PASS: 2, JoinAction.SKIP: 1}  # a ≤ 10 ≤ 20 ≤ b: pass; a ≥ 100 > 50 ≥ b: skip
    assert join.decisions == 2


def recurring_stream(rnd, partitions: int, pool: list[dict[str, Range]], offset: float) -> list:
    """Count-herald partitions of 1–6 rows (a, b, ts), each herald drawn from ``pool`` and its rows inside it."""
    out, ts = [], offset
    for _ in range(partitions):
        patterns = rnd.choice(pool)
        size = rnd.randint(1, 6)
        out.append(Herald.of(patterns, count=size))
        for _ in range(size):
            a, b = (rnd.randint(int(patterns[x].low), int(patterns[x].high)) if x in patterns else rnd.randint(-3, 3) for x in "ab")
            out.append((a, b, ts))
            ts += 1.0
    return out


def run_both(left_stream, right_stream, predicate, window, bounds):
    """The join with its whole-batch path and the same join with that path turned off, side by side."""
    fast = MultiModalBatchJoin(predicate, POSITION, POSITION, window=window)
    slow = MultiModalBatchJoin(predicate, POSITION, POSITION, window=window)
    slow._all_whole = lambda *args: False
    taken = []
    whole = fast._all_whole
    fast._all_whole = lambda *args: taken.append(whole(*args)) or taken[-1]
    out = {id(fast): [], id(slow): []}
    for join in (fast, slow):
        lp, rp = Partitioner(POSITION), Partitioner(POSITION)
        for lb, rb in zip(time_batches(left_stream, 2, bounds), time_batches(right_stream, 2, bounds)):
            for chunk in join.process(lp.feed(lb), rp.feed(rb)):
                out[id(join)].extend(chunk.pairs)
                assert chunk.left is None or isinstance(chunk.left, tuple)
    return fast, slow, out[id(fast)], out[id(slow)], taken


pool_ranges = st.sampled_from([Range(-3, 3), Range(-3, 0), Range(0, 3), Range(1, 2), Range(-1, -1)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10**6),
    st.lists(atoms(JOIN_ATTRIBUTES), min_size=1, max_size=3),
    st.lists(st.dictionaries(st.sampled_from("ab"), pool_ranges), min_size=1, max_size=3),
    st.lists(st.dictionaries(st.sampled_from("ab"), pool_ranges), min_size=1, max_size=3),
    st.sampled_from([2.0, 5.0, 20.0]),
    st.integers(2, 12),
)
def test_the_whole_batch_path_equals_the_slice_by_slice_path(seed, predicate, left_pool, right_pool, window, span) -> None:
    rnd = random.Random(seed)
    left_stream = recurring_stream(rnd, 40, left_pool, 0.0)
    right_stream = recurring_stream(rnd, 40, right_pool, 0.5)
    end = max(r[2] for r in left_stream + right_stream if not isinstance(r, Herald))
    bounds = [float(b) for b in range(span, int(end) + 1, span)]
    fast, slow, fast_out, slow_out, _ = run_both(left_stream, right_stream, predicate, window, bounds)
    expected = all_pairs(strip_heralds(left_stream), strip_heralds(right_stream), predicate, window)
    assert sorted(fast_out) == sorted(slow_out) == expected
    for f, s in zip(fast.sides, slow.sides):
        assert f.rows == s.rows and f.ts == s.ts
        assert f.runs == s.runs
    assert (fast.met, fast.skip_counts, fast.dropped, fast.decisions) == (slow.met, slow.skip_counts, slow.dropped, slow.decisions)


def test_heralds_that_prove_nothing_take_the_whole_batch_path_once_their_pairs_are_known() -> None:
    rnd = random.Random(3)
    pool = [{"a": Range(-3, 3 - j)} for j in range(3)]
    left_stream, right_stream = recurring_stream(rnd, 60, pool, 0.0), recurring_stream(rnd, 60, pool, 0.5)
    predicate = conjunction(("L.a", "<=", "R.a"))
    fast, _, fast_out, slow_out, taken = run_both(left_stream, right_stream, predicate, 10.0, [float(b) for b in range(10, 400, 10)])
    assert sorted(fast_out) == sorted(slow_out)
    assert taken.count(True) > len(taken) / 2 and taken[-4:] == [True] * 4
