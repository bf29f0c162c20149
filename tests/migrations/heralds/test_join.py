"""The multi-modal join equals the plain join and an all-pairs oracle on random streams and heralds."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.heralds import atoms, punctuated_stream

from armd.migrations.heralds import Herald, JoinAction, MultiModalJoin, Partitioner, Range, conjunction, regular_join
from armd.migrations.heralds.join import merged_events
from armd.migrations.heralds.select import strip_heralds

POSITION = {"a": 0, "b": 1, "ts": 2}
JOIN_ATTRIBUTES = ("L.a", "L.b", "R.a", "R.b")


def all_pairs(left, right, predicate, window):
    def holds(l, r):
        values = {"L.a": l[0], "L.b": l[1], "R.a": r[0], "R.b": r[1]}
        return all(a.holds(values) for a in predicate)

    return sorted((l, r) for l in left for r in right if abs(l[2] - r[2]) < window and holds(l, r))


def run(left_stream, right_stream, predicate, window):
    join = MultiModalJoin(predicate, POSITION, POSITION, window=window)
    lp, rp = Partitioner(POSITION, ts="ts"), Partitioner(POSITION, ts="ts")
    out = []
    for _, side, pid, patterns, row in merged_events(lp.feed(left_stream), rp.feed(right_stream), (2, 2)):
        out.extend(join.insert(side, pid, patterns, row))
    return out, join


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10**6),
    st.integers(0, 60),
    st.integers(0, 60),
    st.integers(0, 15),
    st.lists(atoms(JOIN_ATTRIBUTES), min_size=1, max_size=4),
    st.sampled_from([0.5, 1.0, 3.0, 10.0, 1000.0]),
)
def test_join_with_heralds_equals_the_plain_join_and_the_oracle(seed, n, m, heralds, predicate, window) -> None:
    left_stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    right_stream = punctuated_stream(seed + 1, m, heralds=heralds, time_share=0.4, slack=0.5)
    left, right = strip_heralds(left_stream), strip_heralds(right_stream)
    out, _ = run(left_stream, right_stream, predicate, window)
    plain = regular_join(left, right, predicate, POSITION, POSITION, window=window)
    assert sorted(out) == sorted(plain) == all_pairs(left, right, predicate, window)


def test_section_4_partition_pairs_skip_pass_and_evaluate() -> None:
    # L.a < R.b ∧ R.b > 1000 with h1: a > 2000, h2: a < 500 on L and h3: b > 2000, h4: b < 1500 on R
    predicate = conjunction(("L.a", "<", "R.b"), ("R.b", ">", 1000))
    h = {
        1: Herald.of({"a": Range.above(2000)}, count=2),
        2: Herald.of({"a": Range.below(500)}, count=2),
        3: Herald.of({"b": Range.above(2000)}, count=2),
        4: Herald.of({"b": Range.below(1500)}, count=2),
    }
    left = [h[1], (2500, 0, 0), (2600, 0, 1), h[2], (100, 0, 2), (200, 0, 3)]
    right = [h[3], (0, 2500, 0.5), (0, 3000, 1.5), h[4], (0, 1200, 2.5), (0, 900, 3.5)]
    out, join = run(left, right, predicate, window=100)
    assert sorted(out) == all_pairs(strip_heralds(left), strip_heralds(right), predicate, 100)
    modes = {k: v[0] for k, v in join.control.items()}
    assert modes[(1, 2)] is JoinAction.SKIP  # S1[h1] with S2[h4]: skipped
    assert modes[(2, 1)] is JoinAction.PASS  # S1[h2] with S2[h3]: Cartesian product
    assert modes[(2, 2)] is JoinAction.EVALUATE


def test_a_tuple_its_own_herald_rules_out_is_neither_probed_nor_stored() -> None:
    predicate = conjunction(("L.a", "<", "R.b"), ("R.b", "<", 800))
    left = [Herald.of({"a": Range(900, 950)}, count=3), (900, 0, 0), (910, 0, 1), (920, 0, 2)]
    right = [(0, 700, 0.5)]
    out, join = run(left, right, predicate, window=10)
    assert out == [] and join.dropped == 3 and not join.runs[0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10**6),
    st.integers(0, 50),
    st.integers(0, 50),
    st.integers(0, 12),
    st.lists(atoms(("a", "b")), min_size=1, max_size=2),
    st.lists(atoms(JOIN_ATTRIBUTES), min_size=1, max_size=3),
)
def test_a_select_passes_partition_ids_on_to_the_join(seed, n, m, heralds, select_predicate, predicate) -> None:
    from armd.migrations.heralds import MultiModalSelect
    from armd.migrations.heralds.select import regular_select

    left_stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    right_stream = punctuated_stream(seed + 1, m, heralds=heralds, time_share=0.4, slack=0.5)
    select = MultiModalSelect(select_predicate, POSITION)
    selected = [p for p in map(select.process, Partitioner(POSITION, ts="ts").feed(right_stream)) if p is not None]
    join = MultiModalJoin(predicate, POSITION, POSITION, window=3.0)
    out = []
    for _, side, pid, patterns, row in merged_events(Partitioner(POSITION, ts="ts").feed(left_stream), selected, (2, 2)):
        join.insert(side, pid, patterns, row, out)
    right = regular_select(strip_heralds(right_stream), select_predicate, POSITION)
    assert sorted(out) == all_pairs(strip_heralds(left_stream), right, predicate, 3.0)
