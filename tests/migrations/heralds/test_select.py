"""The multi-modal select equals the plain select on every random stream, herald and lifespan."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.heralds import atoms, chunks, punctuated_stream

from armd.migrations.heralds import Action, Herald, MultiModalSelect, Partitioner, Range, conjunction
from armd.migrations.heralds.select import regular_select, strip_heralds

POSITION = {"a": 0, "b": 1, "ts": 2}
NAMES = ("a", "b")
STREAMS = given(
    st.integers(0, 10**6),
    st.integers(0, 120),
    st.integers(0, 25),
    st.lists(atoms(NAMES), min_size=1, max_size=4),
    st.lists(st.integers(1, 13), max_size=3),
)
"""A punctuated stream (seed, rows, heralds), a select predicate and the batch sizes it is fed in."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@STREAMS
def test_select_with_heralds_equals_the_plain_select(seed, n, heralds, predicate, sizes) -> None:
    stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    partitioner = Partitioner(POSITION, ts="ts")
    select = MultiModalSelect(predicate, POSITION)
    out = []
    for batch in chunks(stream, sizes):
        for part in partitioner.feed(batch):
            result = select.process(part)
            if result is not None:
                assert result.pid == part.pid, "the select keeps partition ids"
                out.extend(result.rows)
        select.release(partitioner.closed)
    assert out == regular_select(strip_heralds(stream), predicate, POSITION)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@STREAMS
def test_a_batch_selected_at_once_equals_its_slices_selected_one_by_one(seed, n, heralds, predicate, sizes) -> None:
    stream = punctuated_stream(seed, n, heralds=heralds, time_share=0.4, slack=0.5)
    one, batch = MultiModalSelect(predicate, POSITION), MultiModalSelect(predicate, POSITION)
    partitioner = Partitioner(POSITION, ts="ts")
    for chunk in chunks(stream, sizes):
        parts = partitioner.feed(chunk)
        expected = [q for q in map(one.process, parts) if q is not None]
        one.release(partitioner.closed)
        got = batch.process_all(parts, partitioner.closed)
        assert [(q.pid, q.herald, list(q.rows)) for q in got] == [(q.pid, q.herald, list(q.rows)) for q in expected]
        assert batch.control.keys() == one.control.keys()
    assert batch.tuples == one.tuples and batch.decisions == one.decisions and batch.partitions == one.partitions


def test_one_select_serves_three_logical_plans_by_partition_id() -> None:
    select = MultiModalSelect(conjunction(("a", ">=", 25), ("a", "<=", 32), ("b", "<", 5)), POSITION)
    partitioner = Partitioner(POSITION)
    stream = [
        Herald.of({"a": Range(25, 28), "b": Range.below(0)}, count=2), (25, -1, 0), (28, -3, 1),  # pass
        Herald.of({"a": Range(40, 50)}, count=2), (41, 0, 2), (49, 9, 3),  # skip
        Herald.of({"a": Range(26, 30)}, count=2), (27, 9, 4), (29, 1, 5),  # evaluate b < 5 only
        (31, 2, 6),  # anonymous: everything evaluated
    ]
    parts = partitioner.feed(stream)
    out = [select.process(p) for p in parts]
    assert [o.pid if o else None for o in out] == [1, None, 3, 0]
    assert [list(o.rows) for o in out if o] == [[(25, -1, 0), (28, -3, 1)], [(29, 1, 5)], [(31, 2, 6)]]
    assert sorted(select.scopes().values()) == [[1], [2], [3]]
    assert select.tuples == {Action.PASS: 2, Action.SKIP: 2, Action.EVALUATE: 3}
    select.release(partitioner.closed)
    assert set(select.control) == set()


def test_decisions_are_cached_by_the_herald_patterns() -> None:
    select = MultiModalSelect(conjunction(("a", "<", 10)), POSITION)
    partitioner = Partitioner(POSITION)
    for _ in range(5):
        for part in partitioner.feed([Herald.of({"a": Range(0, 3)}, count=1), (1, 0, 0)]):
            select.process(part)
    assert select.decisions == 1


def test_the_decision_cache_is_bounded_for_heralds_that_never_recur(monkeypatch) -> None:
    import armd.migrations.heralds.select as select_module

    monkeypatch.setattr(select_module, "DECISION_CACHE", 3)
    select = MultiModalSelect(conjunction(("a", "<", 10)), POSITION)
    partitioner = Partitioner(POSITION)
    for i in range(10):
        for part in partitioner.feed([Herald.of({"a": Range(0, i)}, count=1), (0, 0, 0)]):
            assert select.process(part) is not None
    assert select.decisions == 10 and len(select._decided) <= 3


def test_a_decision_is_made_once_per_projection_on_the_predicates_attributes() -> None:
    select = MultiModalSelect(conjunction(("a", "<", 20)), POSITION)
    stream = []
    for j in range(6):  # six distinct heralds, all silent on a: one PredSAT run, the full predicate for each
        stream.append(Herald.of({"b": Range(0, 90 + j)}, count=3))
        stream += [(j * 10, 5, 3 * j), (j * 10 + 1, 6, 3 * j + 1), (j * 10 + 2, 7, 3 * j + 2)]
    stream.append(Herald.of({"a": Range(0, 9), "b": Range(0, 90)}, count=2))  # a herald that proves a < 20
    stream += [(3, 1, 30), (4, 1, 31)]
    partitioner = Partitioner(POSITION)
    out = [r for p in partitioner.feed(stream) if (q := select.process(p)) is not None for r in q.rows]
    assert out == regular_select(strip_heralds(stream), conjunction(("a", "<", 20)), POSITION)
    assert select.decisions == 2
    assert select.tuples == {Action.EVALUATE: 18, Action.PASS: 2}
