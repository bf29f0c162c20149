"""The micro-batch multi-modal join equals the plain join and an all-pairs oracle on random streams, heralds and cuts."""

from __future__ import annotations

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
