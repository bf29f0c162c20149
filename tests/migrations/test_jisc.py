"""The join pipeline and its reordering strategies against a brute-force oracle, plus JISC's bookkeeping."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armd.migrations.join import (
    JISC,
    STRATEGIES,
    EventLog,
    MovingState,
    ParallelTrack,
    Plan,
    Restart,
    left_deep,
    normalise_order,
    oracle_count,
    oracle_results,
    run_host,
)

NAMES = ("A", "B", "C", "D", "E")


def tree(draw, names: list[str], shape: str):
    """A random join tree over ``names``: left-deep or any binary shape."""
    if len(names) == 1:
        return names[0]
    if shape == "left-deep":
        return (tree(draw, names[:-1], shape), names[-1])
    cut = draw(st.integers(1, len(names) - 1))
    return (tree(draw, names[:cut], shape), tree(draw, names[cut:], shape))


@st.composite
def scenarios(draw):
    n = draw(st.integers(2, 5))
    names = list(NAMES[:n])
    keys = draw(st.integers(1, 3))
    events = draw(
        st.lists(
            st.tuples(st.sampled_from(names), st.integers(0, keys - 1), st.integers(0, 40)),
            min_size=1, max_size=60,
        )
    )
    window = draw(st.integers(1, 15))
    shape = draw(st.sampled_from(["left-deep", "bushy"]))

    def order():
        return tree(draw, draw(st.permutations(names)), shape)

    start = order()
    moments = sorted(draw(st.lists(st.integers(0, len(events)), max_size=4)))
    transitions = [(at, order()) for at in moments]  # equal or close moments overlap
    batch = draw(st.integers(1, 6))
    return names, events, window, start, transitions, batch


def run(cls, log, window, start, transitions, batch=4, **kw):
    strategy = cls(log, window, start, collect=True, **kw)
    run_host(strategy, transitions, batch=batch)
    return strategy


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_strategy_but_restart_equals_the_oracle(scenario):
    names, events, window, start, transitions, batch = scenario
    log = EventLog.from_events(names, events)
    expected = oracle_results(log, window)
    assert sum(expected.values()) == oracle_count(log, window)
    for cls in (JISC, MovingState, ParallelTrack):
        got = run(cls, log, window, start, transitions, batch).results()
        assert got == expected, (cls.name, expected - got, got - expected)
        assert max(got.values(), default=1) == 1  # duplicate-free
    restarted = run(Restart, log, window, start, transitions, batch).results()
    assert not restarted - expected  # Restart loses results but never invents or repeats one
    if not transitions:
        assert restarted == expected


def restart_example():
    """r, s and t arrive, the order changes, then u arrives: the quadruple spans the switch."""
    names = ["R", "S", "T", "U"]
    events = [("R", 1, 0), ("S", 1, 1), ("T", 1, 2), ("U", 1, 3), ("U", 1, 4), ("R", 1, 5)]
    return names, EventLog.from_events(names, events)


def test_restart_loses_results_that_the_oracle_counts():
    names, log = restart_example()
    old, new = left_deep(names), ((("S", "T"), "R"), "U")
    expected = oracle_results(log, 10)
    assert sum(expected.values()) == 4
    got = run(Restart, log, 10, old, [(3, new)], batch=1).results()
    lost = sum((expected - got).values())
    assert lost == 4  # every result needs s and t, which the restarted plan never saw
    for cls in (JISC, MovingState, ParallelTrack):
        assert run(cls, log, 10, old, [(3, new)], batch=1).results() == expected


def test_window_slide_passes_through_an_incomplete_state():
    """Paper 004 §4.2's scenario: s expires right after the switch, so (r, s, t, u) must not appear."""
    names = ["R", "S", "T", "U"]
    names.append("X")
    events = [("S", 7, 1), ("R", 7, 2), ("T", 7, 3), ("U", 7, 11), ("X", 7, 12)]
    log = EventLog.from_events(names, events)
    old = (((("R", "S"), "T"), "U"), "X")
    new = (((("S", "T"), "R"), "U"), "X")
    strategy = JISC(log, 10, old, collect=True)
    run_host(strategy, [(3, new)], batch=1)
    assert strategy.plan.by_streams[frozenset({0, 1, 2})].complete  # RST was kept, with (r, s, t) in it
    assert strategy.results() == oracle_results(log, 10) == {}  # s expired before u: nothing may come out


# --- JISC bookkeeping -------------------------------------------------------------------------


def bookkeeping_log():
    names = ["A", "B", "C", "D"]
    events = [("A", k, 0) for k in (1, 2, 3)] + [("B", k, 1) for k in (1, 2)] + [("C", k, 2) for k in (1, 3)]
    events += [("D", 1, 3), ("B", 1, 4), ("B", 1, 5), ("B", 3, 6), ("D", 3, 7)]
    return names, EventLog.from_events(names, events)


def test_definition_1_and_completion_counters():
    names, log = bookkeeping_log()
    jisc = JISC(log, 100, left_deep(names), collect=True)
    for e in range(7):
        jisc.process(e)
    jisc.transition(((("A", "C"), "B"), "D"))
    plan = jisc.plan
    ac = plan.by_streams[frozenset({0, 2})]
    abc = plan.by_streams[frozenset({0, 1, 2})]
    assert abc.complete  # it existed in the old plan: kept (Definition 1)
    assert not ac.complete and ac.pending == {1, 3}  # case 1: keys in both A and C
    assert plan.incomplete == 1 and len(ac.pending) == 2
    assert ac.state == {}


def test_fresh_then_attempted_and_completion_by_counter():
    names, log = bookkeeping_log()
    jisc = JISC(log, 100, left_deep(names), collect=True)
    for e in range(7):
        jisc.process(e)
    jisc.transition(((("A", "C"), "B"), "D"))
    ac = jisc.plan.by_streams[frozenset({0, 2})]
    assert [len(w) for w in jisc.watch] == [0, 1, 0, 0]  # only B's tuples probe AC
    jisc.process(7)  # D key 1: its path probes ABC (complete) only — no bookkeeping at all
    assert jisc.completions == 0 and not any(jisc.attempted)
    jisc.process(8)  # B key 1, fresh: completes AC for key 1
    assert jisc.completions == 1 and ac.pending == {3} and len(ac.state[1]) == 1
    jisc.process(9)  # B key 1 again: attempted, no new completion
    assert jisc.completions == 1 and 1 in jisc.attempted[1]
    jisc.process(10)  # B key 3, fresh: completes key 3, counter reaches 0
    assert ac.complete and not ac.pending and jisc.plan.incomplete == 0
    jisc.process(11)
    jisc.finish()
    assert jisc.results() == oracle_results(log, 100)
    assert not jisc.watch and not any(jisc.attempted)  # fast path again: no per-tuple bookkeeping


def test_overlapped_transition_keeps_an_incomplete_state_incomplete():
    """Paper 004 Figure 4: ST is incomplete after the first switch and must stay so after the second."""
    names = ["R", "S", "T", "U"]
    events = [(s, 1, i) for i, s in enumerate("RSTU")] + [("R", 1, 5), ("U", 1, 6)]
    log = EventLog.from_events(names, events)
    jisc = JISC(log, 100, left_deep(names), collect=True)
    for e in range(4):
        jisc.process(e)
    jisc.transition(((("S", "T"), "R"), "U"))
    st_ = frozenset({1, 2})
    assert not jisc.plan.by_streams[st_].complete
    jisc.transition(((("S", "T"), "U"), "R"))
    assert not jisc.plan.by_streams[st_].complete and jisc.plan.by_streams[st_].pending == {1}
    for e in range(4, len(log)):
        jisc.process(e)
    assert jisc.results() == oracle_results(log, 100)


def test_left_deep_completion_walks_the_spine_and_bushy_recurses(monkeypatch):
    names = ["A", "B", "C", "D", "E"]
    events = [(s, 0, i) for i, s in enumerate(names)] + [("E", 0, 6), ("A", 0, 7)]
    log = EventLog.from_events(names, events)
    calls = {"spine": 0, "recursive": 0}
    for kind, new in (("spine", (((("E", "D"), "C"), "B"), "A")), ("recursive", (("E", "D"), (("C", "B"), "A")))):
        jisc = JISC(log, 100, left_deep(names), collect=True)
        original = getattr(jisc, f"_complete_{kind}")

        def counted(node, key, original=original, kind=kind):
            calls[kind] += 1
            return original(node, key)

        monkeypatch.setattr(jisc, f"_complete_{kind}", counted)
        run_host(jisc, [(5, new)], batch=1)
        assert jisc.plan.left_deep == (kind == "spine")
        assert jisc.results() == oracle_results(log, 100)
        # left-deep: ED, EDC, EDCB are all new; bushy: ED and CB are new, CBA = ABC is kept
        assert jisc.completions == (3 if kind == "spine" else 2)
    assert calls["spine"] >= 1 and calls["recursive"] >= 1


def test_completion_by_expiry_settles_keys_nobody_probes():
    names = ["A", "B", "C"]
    events = [("A", 1, 0), ("B", 1, 0), ("C", 9, 1), ("C", 9, 50)]
    log = EventLog.from_events(names, events)
    jisc = JISC(log, 10, left_deep(names))
    for e in range(3):
        jisc.process(e)
    jisc.transition((("A", "C"), "B"))
    jisc.transition((("B", "C"), "A"))
    bc = jisc.plan.by_streams[frozenset({1, 2})]
    assert not bc.complete and bc.pending == set() or bc.complete
    jisc.transition((("A", "B"), "C"))
    ab = jisc.plan.by_streams[frozenset({0, 1})]
    assert not ab.complete and ab.pending == {1}
    jisc.process(3)  # A and B of key 1 expire: the pending key settles without a probe
    assert ab.complete and jisc.plan.incomplete == 0


def test_moving_state_recomputes_only_unmatched_states():
    names, log = bookkeeping_log()
    ms = MovingState(log, 100, left_deep(names), collect=True)
    run_host(ms, [(7, ((("A", "C"), "B"), "D")), (9, ((("C", "A"), "D"), "B"))], batch=1)
    assert ms.recomputed == 2  # AC, then ACD
    assert ms.results() == oracle_results(log, 100)


def test_parallel_track_discards_the_old_plan_once_it_holds_only_new_entries():
    names = ["A", "B", "C"]
    events = [(s, i % 2, i) for i, s in zip(range(40), itertools.cycle(names))]
    log = EventLog.from_events(names, events)
    pt = ParallelTrack(log, 6, left_deep(names), collect=True, check_every=1)
    run_host(pt, [(10, (("B", "C"), "A"))], batch=1)
    assert pt.discarded == 1 and len(pt.tracks) == 1
    assert pt.results() == oracle_results(log, 6)


def test_orders_are_validated():
    with pytest.raises(ValueError, match="exactly once"):
        normalise_order((("A", "B"), "A"), ["A", "B", "C"])
    with pytest.raises(ValueError, match="pair"):
        normalise_order(("A", "B", "C"), ["A", "B", "C"])
    assert Plan([["A", "B"], "C"], ["A", "B", "C"]).left_deep
    assert not Plan((("A", "B"), ("C", "D")), ["A", "B", "C", "D"]).left_deep
    assert set(STRATEGIES) == {"jisc", "moving-state", "parallel-track", "restart"}


def test_host_measures_gaps_with_the_clock_it_is_given():
    names, log = restart_example()
    ticks = itertools.count()
    strategy = MovingState(log, 10, left_deep(names))
    result = run_host(strategy, [(3, ((("S", "T"), "R"), "U"))], clock=lambda: float(next(ticks)), batch=1)
    assert result.emitted == 4 and result.switch_at == [3]
    assert result.max_gap >= 1 and result.throughput(0, len(log)) > 0


def test_queued_tuples_are_drained_through_the_old_plan_before_the_switch():
    names, log = restart_example()
    for cls in (JISC, MovingState, ParallelTrack, Restart):
        strategy = cls(log, 10, left_deep(names), collect=True)
        for e in range(4):
            strategy.receive(e)
        strategy.transition(((("S", "T"), "R"), "U"))
        assert not strategy.queue and strategy.next_id == 4
        assert strategy.results() == {(0, 1, 2, 3): 1}  # u arrived before the decision: the old plan joined it
