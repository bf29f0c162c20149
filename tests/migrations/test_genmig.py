"""GenMig's pure part: split time, which plan answers for what, the state machine, the transient cost.

The oracle test at the end is the whole idea in small: two snapshot-equivalent
plans (a sliding-window count computed two different ways), old → new at a
random moment, and the merged output equals the old plan's before T_split plus
the new plan's from it on — and equals what either plan alone gives.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from armd.migrations.genmig import (
    DONE,
    DRAINING,
    PLANNED,
    RUNNING,
    Migration,
    MigrationError,
    chained_split_time,
    emits_nothing_from,
    keep,
    old_plan_done,
    ordered_merge,
    passed_split,
    resume_step,
    shortened_split_time,
    split_time,
    transient_cost,
)


def test_split_time_is_past_everything_the_old_plan_can_refer_to():
    assert split_time({"a": 100.0, "b": 130.0}, window=60.0, epsilon=0.001) == pytest.approx(191.001)
    assert shortened_split_time(150.0, epsilon=0.001) == pytest.approx(151.001)


@pytest.mark.parametrize("bad, message", [({}, "at least one input"), ({"a": 1.0}, "window")])
def test_split_time_rejects_what_it_cannot_use(bad, message):
    with pytest.raises(MigrationError, match=message):
        split_time(bad, window=-1 if bad else 10)


def test_each_result_goes_to_exactly_one_plan():
    results = [(t, "x") for t in (9.0, 9.999, 10.0, 10.5)]
    old = keep(results, lambda r: r[0], 10.0, "old")
    new = keep(results, lambda r: r[0], 10.0, "new")
    assert old == results[:2] and new == results[2:]
    with pytest.raises(MigrationError):
        keep(results, lambda r: r[0], 10.0, "both")


def test_ordered_merge_checks_each_side():
    merged = list(ordered_merge([(1, "o"), (5, "o")], [(7, "n"), (9, "n")], lambda r: r[0], 6))
    assert [r[0] for r in merged] == [1, 5, 7, 9]
    with pytest.raises(MigrationError, match="wrong side"):
        list(ordered_merge([(8, "o")], [], lambda r: r[0], 6))


def test_a_split_after_an_earlier_one_lies_past_it_never_at_it():
    assert chained_split_time(31.0, None, 1.0) == 31.0
    assert chained_split_time(31.0, 20.0, 1.0) == 31.0  # the old run has caught up: the split as placed
    assert chained_split_time(12.0, 20.0, 1.0) == 21.0  # it has not: past the point it answers from, not at it


def test_the_old_plan_stops_once_its_watermark_passes_the_split():
    assert not old_plan_done(None, 10) and not old_plan_done(9.9, 10) and old_plan_done(10, 10)
    assert passed_split({"a": 11, "b": 10}, 10, ["a", "b"]) and not passed_split({"a": 11}, 10, ["a", "b"])


def test_state_machine_walks_planned_running_draining_done_and_resumes_from_a_record():
    m = Migration("q", "genmig", {"w": 60}, {"w": 30})
    m = m.to(RUNNING, 100.0, "new plan started", t_split=161.001, started=100.0)
    again = Migration.from_record(m.as_record())
    assert again == m
    assert resume_step(again, inputs_passed_split=False, old_watermark=None) is None
    assert resume_step(again, inputs_passed_split=True, old_watermark=None) == DRAINING
    assert resume_step(again, inputs_passed_split=False, old_watermark=150.0) is None
    assert resume_step(again, inputs_passed_split=False, old_watermark=161.5) == DRAINING  # the old plan done first
    draining = again.to(DRAINING, 162.0)
    assert resume_step(draining, True, 150.0) is None and resume_step(draining, True, 161.5) == DONE
    assert resume_step(draining, False, 161.5) is None  # the old plan done, the new one not caught up: still draining
    done = draining.to(DONE, 172.0)
    assert done.final and [s for s, _, _ in done.history] == [RUNNING, DRAINING, DONE]


@pytest.mark.parametrize(
    "start, target, message",
    [
        (PLANNED, DONE, "allowed: failed, rolled_back, running"),
        (DRAINING, "rolled_back", "allowed: done, failed"),
        (DONE, "failed", r"none \(final\)"),
    ],
)
def test_impossible_transitions_say_what_is_allowed(start, target, message):
    m = Migration("q", "genmig", {}, {}, state=start, t_split=1.0)
    with pytest.raises(MigrationError, match=message):
        m.to(target, 0.0)


def test_running_needs_a_split_time():
    with pytest.raises(MigrationError, match="split time"):
        Migration("q", "genmig", {}, {}).to(RUNNING, 0.0)


def test_malformed_record_is_a_clear_error():
    with pytest.raises(MigrationError, match="malformed"):
        Migration.from_record({"query": "q"})


def test_transient_cost():
    cost = transient_cost(t_split=161, start=100, watermark_delay=10, trigger=2, old_memory=1000, new_memory=500, fill_time=60)
    assert cost.duration == pytest.approx(61 + 10 + 1)
    assert cost.extra_memory == 500 and cost.peak_memory == 1500  # the new state is full after one window
    short = transient_cost(t_split=130, start=100, watermark_delay=0, trigger=0, old_memory=1000, new_memory=500, fill_time=60)
    assert short.extra_memory == pytest.approx(250)
    # A join's results are out on arrival: the old plan need not wait for its watermark.
    joined = transient_cost(t_split=130, start=100, watermark_delay=10, trigger=2, old_memory=0, new_memory=500, fill_time=62,
                            on_arrival=True)
    assert joined.duration == pytest.approx(31) and joined.extra_memory == pytest.approx(250)


# --- the oracle, in miniature -----------------------------------------------------------------------


def sliding_counts(events: list[tuple[float, str]], window: float, slide: float, upto: float) -> list[tuple[float, str, int]]:
    """Plan A: per window end e (multiple of slide), per key, the count of events in (e − window, e]."""
    out = []
    e = slide
    while e <= upto:
        counts = Counter(k for t, k in events if e - window < t <= e)
        out += [(e, k, n) for k, n in sorted(counts.items())]
        e += slide
    return out


def sliding_counts_by_panes(events: list[tuple[float, str]], window: float, slide: float, upto: float) -> list[tuple[float, str, int]]:
    """Plan B, snapshot-equivalent to A: sums of per-slide panes (how an optimiser might rewrite it)."""
    panes: dict[float, Counter] = {}
    for t, k in events:
        end = slide * -(-t // slide)  # the pane (end − slide, end] holding t
        panes.setdefault(end, Counter())[k] += 1
    out = []
    e = slide
    while e <= upto:
        total = Counter()
        for end, pane in panes.items():
            if e - window < end <= e:
                total.update(pane)
        out += [(e, k, n) for k, n in sorted(total.items()) if n]
        e += slide
    return out


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(st.integers(0, 400), min_size=1, max_size=80),
    keys=st.lists(st.sampled_from("abc"), min_size=80, max_size=80),
    cut=st.integers(0, 399),
)
def test_old_then_new_equals_either_plan_alone(times, keys, cut):
    events = sorted(zip(map(float, times), keys))
    window, slide, upto = 40.0, 10.0, 500.0
    seen = [e for e in events if e[0] <= cut]  # what the old plan has read when the migration starts
    t_split = split_time({"s": max((t for t, _ in seen), default=0.0)}, window)
    after = [e for e in events if e[0] > (seen[-1][0] if seen else -1)]  # the new plan starts at the old one's offsets
    old = keep(sliding_counts(events, window, slide, upto), lambda r: r[0], t_split, "old")
    new = keep(sliding_counts_by_panes(after, window, slide, upto), lambda r: r[0], t_split, "new")
    merged = list(ordered_merge(old, new, lambda r: r[0], t_split))
    assert merged == sliding_counts(events, window, slide, upto)
    assert merged == sliding_counts_by_panes(events, window, slide, upto)


def test_a_naive_restart_at_the_same_moment_gets_windows_across_it_wrong():
    events = [(float(t), "a") for t in range(0, 200, 3)]
    window, slide, upto, cut = 40.0, 10.0, 300.0, 100
    after = [e for e in events if e[0] > cut]
    naive = [r for r in sliding_counts(events, window, slide, upto) if r[0] <= cut] + [
        r for r in sliding_counts_by_panes(after, window, slide, upto) if r[0] > cut
    ]
    truth = sliding_counts(events, window, slide, upto)
    wrong = Counter(truth) - Counter(naive)
    assert sorted(r[0] for r in wrong) == [110.0, 120.0, 130.0]  # the windows that span the restart


def test_a_run_emits_nothing_from_t_split_while_its_next_watermark_lies_before_it():
    # The next batch's watermark: the larger of this batch's and its newest event time less the delay.
    assert emits_nothing_from(30.0, watermark=20.0, event_max=31.0, delay=2.0)  # next watermark 29
    assert not emits_nothing_from(30.0, watermark=20.0, event_max=32.0, delay=2.0)  # 30: windows ending at 30 come out
    assert not emits_nothing_from(30.0, watermark=30.5, event_max=None, delay=2.0)  # already past it
    assert emits_nothing_from(30.0, watermark=None, event_max=None, delay=2.0)  # read nothing yet
    # An unknown delay (0) errs on the side of not rolling back.
    assert not emits_nothing_from(30.0, watermark=20.0, event_max=31.0, delay=0.0)
