"""A select planned per span of event time: overlapping heralds merge, contradicting ones are not trusted."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from armd.migrations.heralds import Herald, Range, SelectReasoner, Verdict, conjunction
from armd.migrations.heralds.spans import spans

SELECT = conjunction((200, "<=", "a"), ("a", "<", 400))


def test_overlapping_heralds_merge_and_adjacent_equal_spans_join() -> None:
    heralds = [
        Herald.of({"a": Range(0, 350)}, time=20, ts=0.0),
        Herald.of({"a": Range(250, 999)}, time=20, ts=10.0),  # with the first: 250..350 on [10, 20) → implied
        Herald.of({"a": Range(500, 999)}, time=10, ts=40.0),
        Herald.of({"a": Range(600, 700)}, time=10, ts=50.0),  # skip on [40, 60), one span
        Herald.of({"a": Range(0, 10)}, time=10, ts=70.0),
        Herald.of({"a": Range(20, 30)}, time=10, ts=75.0),  # contradicts on [75, 80): left to the full predicate
    ]
    got = [(s.start, s.end, s.verdict) for s in spans(heralds, SelectReasoner(SELECT))]
    assert got == [
        (0.0, 10.0, Verdict.UNKNOWN), (10.0, 20.0, Verdict.IMPLIED), (20.0, 30.0, Verdict.UNKNOWN),
        (40.0, 60.0, Verdict.UNSATISFIABLE), (70.0, 75.0, Verdict.UNSATISFIABLE), (80.0, 85.0, Verdict.UNSATISFIABLE),
    ]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 6))
def test_planned_select_equals_the_plain_select_on_truthful_rows(seed, n) -> None:
    rnd = random.Random(seed)
    heralds = []
    for _ in range(n):
        low = rnd.randrange(0, 900)
        heralds.append(Herald.of({"a": Range(low, low + rnd.randrange(0, 300))}, time=rnd.randrange(1, 40), ts=float(rnd.randrange(0, 100))))
    plan = spans(heralds, SelectReasoner(SELECT))
    for t in [x / 2 for x in range(0, 300)]:
        covering = [h for h in heralds if h.ts <= t < h.ts + h.lifespan.value]
        low = max([h.range("a").low for h in covering], default=0)
        high = min([h.range("a").high for h in covering], default=999)
        if low > high:
            continue  # no truthful row can exist here
        span = next((s for s in plan if s.start <= t < s.end), None)
        for a in {low, high, (low + high) // 2, 200, 399, 400}:
            if not low <= a <= high:
                continue
            truth = 200 <= a < 400
            if span is None:
                continue
            if span.verdict is Verdict.UNSATISFIABLE:
                assert not truth
            elif span.verdict is Verdict.IMPLIED:
                assert truth
            else:
                assert all(x.holds({"a": a}) for x in span.residual) == truth
