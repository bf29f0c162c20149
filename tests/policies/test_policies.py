"""Policies: QoS values, the paper's baseline, the weighted-QoS policy, admission, registry."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
from support import REPO
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armd.costmodel.plan import parse_plan
from armd.costmodel.workload import section54
from armd.policies.admission import admit
from armd.policies.base import PolicyInput
from armd.policies.paper import PaperBisection
from armd.policies import problem as problem_module
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QoSError, QueryQoS, granularity_values, window_values
from armd.policies.registry import make_policy
from armd.policies.weighted import WeightedQoS, _hulls, _priced_choice, choose, knapsack


def join_query(stream_a: str, stream_b: str, w: float) -> dict:
    return {
        "op": "join", "sel": 0.01,
        "inputs": [
            {"op": "window", "w": w, "inputs": [{"op": "source", "stream": stream_a}]},
            {"op": "window", "w": w, "inputs": [{"op": "source", "stream": stream_b}]},
        ],
    }


def agg_query(stream: str, w: float, g: float) -> dict:
    return {
        "op": "aggregate",
        "inputs": [{"op": "granularity", "g": g, "inputs": [
            {"op": "window", "w": w, "inputs": [{"op": "source", "stream": stream}]}]}],
    }


STREAMS = {"fast": {"d": 2, "size": 64}, "slow": {"d": 200, "size": 64}, "mid": {"d": 20, "size": 32}}


def heterogeneous() -> Problem:
    """A cheap query and an expensive one with the same QoS range: the baseline holds both down."""
    doc = {"streams": STREAMS, "queries": {
        "cheap": join_query("slow", "mid", 60_000),
        "costly": join_query("fast", "mid", 60_000),
        "agg": agg_query("fast", 60_000, 1),
    }}
    qos = {
        "cheap": QueryQoS(window=(1_000, 60_000)),
        "costly": QueryQoS(window=(1_000, 60_000)),
        "agg": QueryQoS(window=(1_000, 60_000), granularity=(1_000, 1)),
    }
    return Problem(parse_plan(doc), qos)


def span(problem: Problem) -> tuple[float, float, float, float]:
    n = len(problem.queries)
    low = problem.evaluate(np.zeros(n), np.zeros(n))
    high = problem.evaluate(np.ones(n), np.ones(n))
    return float(low.total_memory), float(high.total_memory), float(low.total_cpu), float(high.total_cpu)


def bounds_at(problem: Problem, memory_share: float, cpu_share: float = 2.0) -> Bounds:
    m_low, m_high, c_low, c_high = span(problem)
    return Bounds(memory=m_low + memory_share * (m_high - m_low), cpu=c_low + cpu_share * (c_high - c_low))


# --- allowed values -----------------------------------------------------------------------------


def test_window_values_are_whole_units_inside_the_range() -> None:
    got = window_values(np.array([0.0, 0.5, 1.0, 0.333]), np.full(4, 10.5), np.full(4, 20.2))
    assert got.tolist() == [11.0, 15.0, 20.0, 14.0]


def test_granularity_values_lie_on_the_doubling_ladder() -> None:
    """Range (coarsest 1000, finest 1): rungs 1, 2, 4, …, 512; f = 0 → 512 (the coarsest rung ≤ 1000),
    f = 1 → 1, f = 0.5 → target 500.5, nearest rung 512; f = 0.9 → target 100.9 → 128 (|128−100.9| < |64−100.9|)."""
    got = granularity_values(np.array([0.0, 1.0, 0.5, 0.9]), np.full(4, 1000.0), np.full(4, 1.0))
    assert got.tolist() == [512.0, 1.0, 512.0, 128.0]


@pytest.mark.parametrize(
    ("qos", "fragment"),
    [
        (QueryQoS(window=(0, 10)), "1 ≤ min ≤ max"),
        (QueryQoS(window=(10, 5)), "1 ≤ min ≤ max"),
        (QueryQoS(window=(1.2, 1.8)), "no whole time unit"),
        (QueryQoS(granularity=(1, 10)), "coarsest ≥ finest"),
        (QueryQoS(weight=0), "weight must be"),
        (QueryQoS(windows={"nope": (1, 2)}), "not a time-based window"),
    ],
)
def test_bad_qos_is_rejected_with_what_is_allowed(qos: QueryQoS, fragment: str) -> None:
    doc = {"streams": STREAMS, "queries": {"q": join_query("slow", "mid", 100)}}
    with pytest.raises(QoSError, match="query 'q'") as caught:
        Problem(parse_plan(doc), {"q": qos})
    assert fragment in str(caught.value)


def test_granularity_range_needs_a_granularity_node_and_matching_join_inputs() -> None:
    doc = {"streams": STREAMS, "queries": {"q": join_query("slow", "mid", 100)}}
    with pytest.raises(QoSError, match="no granularity node"):
        Problem(parse_plan(doc), {"q": QueryQoS(granularity=(10, 1))})
    mixed = {"streams": STREAMS, "queries": {"q": {"op": "join", "sel": 0.1, "inputs": [
        {"op": "granularity", "g": 1, "inputs": [{"op": "window", "w": 99, "inputs": [{"op": "source", "stream": "fast"}]}]},
        {"op": "window", "w": 99, "inputs": [{"op": "source", "stream": "mid"}]},
    ]}}}
    with pytest.raises(QoSError, match="with and without the query's granularity"):
        Problem(parse_plan(mixed), {"q": QueryQoS(granularity=(10, 1))})


def test_unknown_query_in_qos_is_rejected() -> None:
    doc = {"streams": STREAMS, "queries": {"q": join_query("slow", "mid", 100)}}
    with pytest.raises(QoSError, match="unknown query"):
        Problem(parse_plan(doc), {"zz": QueryQoS()})


# --- the paper's baseline -------------------------------------------------------------------------


def test_baseline_follows_the_papers_two_steps() -> None:
    """The granularity fraction is the first (p − j)/p that fits with the windows at the same
    fraction; one step finer does not fit; the window fraction is the largest that fits (± tolerance)."""
    problem = heterogeneous()
    bounds = bounds_at(problem, 0.3)
    policy = PaperBisection(steps=10, tolerance=1e-3)
    decision = policy.decide(PolicyInput(problem, bounds, now=0.0))
    n = len(problem.queries)
    f_gran = decision.fg[0]
    assert decision.feasible and np.all(decision.fg == f_gran) and np.all(decision.fw == decision.fw[0])
    assert f_gran in [j / 10 for j in range(11)]
    assert problem.evaluate(np.full(n, f_gran), np.full(n, f_gran)).fits(bounds)
    if f_gran < 1:
        finer = f_gran + 0.1
        assert not problem.evaluate(np.full(n, finer), np.full(n, finer)).fits(bounds)
    f_window = decision.fw[0]
    assert f_window >= f_gran
    assert decision.outcome.fits(bounds)
    if f_window < 1:
        assert not problem.evaluate(np.full(n, f_window + 2e-3), np.full(n, f_gran)).fits(bounds)


def test_baseline_reports_shortfall_when_even_the_minimum_does_not_fit() -> None:
    problem = heterogeneous()
    m_low, _, _, c_high = span(problem)
    decision = PaperBisection().decide(PolicyInput(problem, Bounds(memory=m_low / 2, cpu=c_high * 2), now=0.0))
    assert not decision.feasible
    assert "memory short by" in decision.reason
    assert np.all(decision.fw == 0) and np.all(decision.fg == 0)


# --- the weighted-QoS policy ------------------------------------------------------------------------


def test_weighted_beats_the_baseline_on_a_heterogeneous_workload() -> None:
    problem = heterogeneous()
    bounds = bounds_at(problem, 0.3)
    base = PaperBisection().decide(PolicyInput(problem, bounds, now=0.0))
    better = WeightedQoS().decide(PolicyInput(problem, bounds, now=0.0))
    assert better.outcome.fits(bounds)
    assert better.weighted_qos > base.weighted_qos + 0.05
    cheap = problem.queries.index("cheap")
    assert better.fw[cheap] == 1.0  # the cheap query is not held down by the costly one


def test_weights_steer_the_budget() -> None:
    problem = heterogeneous()
    bounds = bounds_at(problem, 0.3)
    plain = WeightedQoS().decide(PolicyInput(problem, bounds, now=0.0))
    favoured_qos = dict(problem.qos_specs)
    favoured_qos["costly"] = QueryQoS(window=(1_000, 60_000), weight=50.0)
    favoured = Problem(problem.plan, favoured_qos)
    decision = WeightedQoS().decide(PolicyInput(favoured, bounds, now=0.0))
    costly = problem.queries.index("costly")
    assert decision.outcome.qos[costly] >= plain.outcome.qos[costly]
    assert decision.outcome.qos[costly] > plain.outcome.qos[costly] or plain.outcome.qos[costly] == 1.0


def small_workload(seed: int, n: int) -> Problem:
    workload = section54(n, n_streams=6, seed=seed)
    qos = {q: QueryQoS(windows=r.windows, granularity=r.granularity) for q, r in workload.qos.items()}
    return Problem(parse_plan(workload.doc), qos)


def settings_in_ranges(problem: Problem, fw: np.ndarray, fg: np.ndarray) -> None:
    w, g = problem.values(fw, fg)
    assert np.all((w[problem.win_idx] >= problem.win_low - 1e-9) & (w[problem.win_idx] <= problem.win_high + 1e-9))
    assert np.all(w[problem.win_idx] == np.rint(w[problem.win_idx]))
    if len(problem.gran_idx):
        q = problem.gran_query
        values = g[problem.gran_idx]
        assert np.all((values <= problem.g_coarse[q]) & (values >= problem.g_fine[q]))
        rung = np.log2(values / problem.g_fine[q])
        assert np.allclose(rung, np.rint(rung))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25), share=st.floats(0.0, 1.2), cpu_share=st.floats(0.05, 1.5))
def test_both_policies_fit_stay_in_range_and_weighted_is_never_worse(seed, n, share, cpu_share) -> None:
    problem = small_workload(seed, n)
    bounds = bounds_at(problem, share, cpu_share)
    base = PaperBisection().decide(PolicyInput(problem, bounds, now=0.0))
    better = WeightedQoS().decide(PolicyInput(problem, bounds, now=0.0))
    assert base.feasible and better.feasible  # the minimum always fits these bounds
    for decision in (base, better):
        assert decision.outcome.fits(bounds)
        settings_in_ranges(problem, decision.fw, decision.fg)
    assert better.weighted_qos >= base.weighted_qos - 1e-9


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 20), share=st.floats(0.0, 1.0), more=st.floats(0.0, 0.5))
def test_more_budget_never_lowers_qos(seed, n, share, more) -> None:
    """The baseline is monotone in the budget by construction (first fitting step, largest fitting
    fraction). The weighted policy keeps the setting in force when it still fits, so raising the
    bounds of a running system never lowers its QoS."""
    problem = small_workload(seed, n)
    tight_bounds, loose_bounds = bounds_at(problem, share), bounds_at(problem, share + more)
    baseline = PaperBisection()
    tight = baseline.decide(PolicyInput(problem, tight_bounds, now=0.0))
    loose = baseline.decide(PolicyInput(problem, loose_bounds, now=0.0))
    assert loose.weighted_qos >= tight.weighted_qos - 1e-9
    weighted = WeightedQoS()
    tight = weighted.decide(PolicyInput(problem, tight_bounds, now=0.0))
    loose = weighted.decide(PolicyInput(problem, loose_bounds, now=1.0, state=tight.state))
    assert loose.weighted_qos >= tight.weighted_qos - 1e-9
    assert loose.outcome.fits(loose_bounds)


def test_choose_solves_a_small_knapsack_exactly() -> None:
    """Two rows, options (value, memory): row 0: (0, 0), (3, 0.6), (4, 1.0); row 1: (0, 0), (2, 0.3), (5, 0.5).
    Budget 1: best is row 0 option 1 (3, 0.6) + row 1 option 1 (2, 0.3) = 5? No: 0 + (5, 0.5) with
    (3, 0.6) is 1.1 > 1; (3, 0.6) + (2, 0.3) = 5 at 0.9; (0) + (5, 0.5) = 5; (4, 1.0) alone = 4.
    Optimum is 5 (either pairing)."""
    value = np.array([[0.0, 3.0, 4.0], [0.0, 2.0, 5.0]])
    a = np.array([[0.0, 0.6, 1.0], [0.0, 0.3, 0.5]])
    picked, binding = choose(value, a, np.zeros_like(a))
    assert value[[0, 1], picked].sum() == pytest.approx(5.0)
    assert a[[0, 1], picked].sum() <= 1.0
    assert binding == "memory"


def test_incremental_redecision_touches_only_queries_reading_the_changed_stream() -> None:
    problem = small_workload(7, 40)
    bounds = bounds_at(problem, 0.4)
    policy = WeightedQoS()
    first = policy.decide(PolicyInput(problem, bounds, now=0.0))
    stream = problem.batch.stream_names[0]
    stream_d = problem.batch.stream_d.copy()
    stream_d[0] /= 2  # the rate doubles
    again = policy.decide(PolicyInput(problem, bounds, now=1.0, stream_d=stream_d, state=first.state,
                                      changed_streams=frozenset({stream})))
    assert again.details.get("incremental") is True
    readers = set(problem.queries_reading(frozenset({stream})).tolist())
    untouched = [i for i in range(len(problem.queries)) if i not in readers]
    assert np.array_equal(again.fw[untouched], first.fw[untouched])
    assert again.outcome.fits(bounds)
    scratch = policy.decide(PolicyInput(problem, bounds, now=1.0, stream_d=stream_d))
    assert again.weighted_qos >= 0.9 * scratch.weighted_qos


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), share=st.floats(0.05, 0.8), factor=st.floats(0.3, 1.5))
def test_incremental_redecision_stays_in_range_fits_and_keeps_the_others(seed, n, share, factor) -> None:
    """A re-decision after one stream's rate changes: settings in range, both bounds met by the exact
    total, the other queries untouched; the warm-started price search chooses as a cold one."""
    problem = small_workload(seed, n)
    bounds = bounds_at(problem, share, 0.6)
    policy = WeightedQoS()
    first = policy.decide(PolicyInput(problem, bounds, now=0.0))
    for s, stream in enumerate(problem.batch.stream_names):
        stream_d = problem.batch.stream_d.copy()
        stream_d[s] *= factor
        given_ = PolicyInput(problem, bounds, now=1.0, stream_d=stream_d, state=first.state,
                             changed_streams=frozenset({stream}))
        again = policy.decide(given_)
        settings_in_ranges(problem, again.fw, again.fg)
        exact = problem.evaluate(again.fw, again.fg, stream_d)
        assert not again.feasible or exact.fits(bounds)
        if again.details.get("incremental"):
            readers = problem.queries_reading(frozenset({stream}))
            others = np.setdiff1d(np.arange(len(problem.queries)), readers)
            assert np.array_equal(again.fw[others], first.fw[others]) and np.array_equal(again.fg[others], first.fg[others])
            cold = policy.decide(replace(given_, state=replace(first.state, grid_price=None)))
            assert cold.weighted_qos == pytest.approx(again.weighted_qos, rel=1e-12, abs=1e-12)


def test_subproblem_slices_like_the_general_path_and_is_cached(monkeypatch) -> None:
    """Ascending indices are sliced by per-query knob offsets; any order takes the general path. Both
    give the same knobs, values and scores (for the same queries), and a repeated request is served
    from the cache. Window scores summed from the table of knob positions equal the sparse sums."""
    problem = small_workload(11, 30)
    problem.grid_parts(np.linspace(0, 1, 5), np.linspace(0, 1, 3))
    keep = np.array([1, 4, 5, 9, 17, 22, 29])
    fast = problem.subproblem(keep)
    assert problem.subproblem(keep.copy()) is fast
    general = problem.subproblem(keep[::-1])  # the same queries in the other order
    assert general.queries == fast.queries[::-1]
    rng = np.random.default_rng(3)
    fw, fg = rng.random((len(keep), 3)), rng.random((len(keep), 3))
    ours = fast.evaluate(fw, fg)
    theirs = general.evaluate(fw[::-1], fg[::-1])
    for name in ("query_memory", "query_cpu", "qos"):
        assert np.array_equal(getattr(ours, name), getattr(theirs, name)[::-1]), name
    assert np.array_equal(ours.total_memory, theirs.total_memory)
    full_fw, full_fg = np.zeros(len(problem.queries)), np.zeros(len(problem.queries))
    full_fw[keep], full_fg[keep] = fw[:, 0], fg[:, 0]
    assert np.array_equal(problem.score(full_fw, full_fg)[keep], fast.score(fw[:, 0], fg[:, 0]))
    many = rng.random((len(problem.queries), 6))
    by_table = problem.window_part(many).score
    monkeypatch.setattr(problem_module, "_SLOT_CELLS", 0)  # the sparse matrix instead
    assert np.array_equal(problem.window_part(many).score, by_table)
    for cut, new in zip(fast.grid_parts(np.linspace(0, 1, 5), np.linspace(0, 1, 3)),
                        general.grid_parts(np.linspace(0, 1, 5), np.linspace(0, 1, 3))):
        assert np.array_equal(cut.score, new.score[::-1])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 40), columns=st.integers(1, 24), ties=st.booleans())
def test_hulls_of_few_rows_match_the_stepwise_walk(seed, rows, columns, ties) -> None:
    """``_hulls`` takes all successors at once for few rows; the walk row by row must give the same hull."""
    rng = np.random.default_rng(seed)
    if ties:
        value, cost = rng.integers(0, 4, (rows, columns)).astype(float), rng.integers(0, 4, (rows, columns)).astype(float)
    else:
        value, cost = rng.random((rows, columns)), rng.random((rows, columns))
    hull = _hulls(value, cost)
    for r in range(rows):  # the reference walk, one row at a time
        here = int(np.argmax(np.where(cost[r] == cost[r].min(), value[r], -np.inf)))
        walk = [here]
        while True:
            dc, dv = cost[r] - cost[r, here], value[r] - value[r, here]
            up = (dc > 0) & (dv > 0)
            if not up.any():
                break
            here = int(np.argmax(np.where(up, dv / np.where(up, dc, 1.0), -np.inf)))
            walk.append(here)
        assert hull[r, :len(walk)].tolist() == walk and np.all(hull[r, len(walk):] == -1)


# --- admission --------------------------------------------------------------------------------------


def test_admission_admits_when_the_minimum_fits_and_reports_the_shortfall_otherwise() -> None:
    problem = heterogeneous()
    m_low, m_high, c_low, c_high = span(problem)
    ok = admit(problem, Bounds(memory=m_low * 1.01, cpu=c_high), "agg")
    assert ok.admitted and ok.memory_shortfall == 0
    no = admit(problem, Bounds(memory=m_low * 0.5, cpu=c_high), "agg")
    assert not no.admitted
    assert no.memory_shortfall == pytest.approx(m_low * 0.5)
    assert "'agg'" in no.reason and "memory" in no.reason


def test_removing_a_query_lets_the_others_grow_back() -> None:
    problem = heterogeneous()
    bounds = bounds_at(problem, 0.2)
    before = WeightedQoS().decide(PolicyInput(problem, bounds, now=0.0))
    rest = [i for i, q in enumerate(problem.queries) if q != "costly"]
    smaller = problem.subproblem(np.array(rest))
    after = WeightedQoS().decide(PolicyInput(smaller, bounds, now=0.0))
    assert np.all(after.outcome.qos >= before.outcome.qos[rest] - 1e-12)
    assert after.outcome.qos.sum() > before.outcome.qos[rest].sum()


# --- registry ---------------------------------------------------------------------------------------


def test_registry_names_the_valid_choices() -> None:
    assert make_policy("weighted-qos").name == "weighted-qos"
    assert make_policy("paper-bisection", {"steps": 4}).steps == 4
    with pytest.raises(LookupError, match="available: paper-bisection, weighted-qos"):
        make_policy("greedy")
    with pytest.raises(LookupError, match="its parameters: steps, tolerance"):
        make_policy("paper-bisection", {"p": 3})
    with pytest.raises(ValueError, match="steps must be"):
        make_policy("paper-bisection", {"steps": 0})


# --- the knapsack: price sweep, warm start; priced parts ------------------------------------------


def random_knapsack(seed: int, rows: int, columns: int):
    """Options whose value and both costs grow together (like the grid), budgets that bind."""
    rng = np.random.default_rng(seed)
    a = np.sort(rng.random((rows, columns)), axis=1) * 2.0 / rows
    b = np.sort(rng.random((rows, columns)), axis=1) * rng.uniform(0.5, 3.0) / rows
    value = np.sort(rng.random((rows, columns)), axis=1) * rng.uniform(0.5, 2.0, size=(rows, 1))
    a[:, 0] = b[:, 0] = 0.0
    return value, a, b


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 300), columns=st.integers(2, 16))
def test_price_sweep_is_never_worse_than_any_lagrangian_choice(seed, rows, columns) -> None:
    """The margin bisection plus the hull sweep (only hull options are ever swept) keeps the best
    choice any price level gives: compare with argmax(value − λ·cost) over a dense grid of λ."""
    value, a, b = random_knapsack(seed, rows, columns)
    r = np.arange(rows)
    picked = _priced_choice(value, a, b, 0.0)
    if picked is None:
        return
    choice, _ = picked
    assert a[r, choice].sum() <= 1.0 and b[r, choice].sum() <= 1.0
    best = 0.0
    for price in np.geomspace(1e-3, 1e6, 400):
        trial = np.argmax(value - price * a, axis=1)
        if a[r, trial].sum() <= 1.0 and b[r, trial].sum() <= 1.0:
            best = max(best, value[r, trial].sum())
    assert value[r, choice].sum() >= best - 1e-9


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 300), columns=st.integers(2, 16),
       hint=st.floats(1e-4, 1e6))
def test_warm_start_chooses_as_a_cold_start(seed, rows, columns, hint) -> None:
    value, a, b = random_knapsack(seed, rows, columns)
    cold, cold_label, _ = knapsack(value, a, b, stay=0)
    warm, warm_label, _ = knapsack(value, a, b, stay=0, price=hint)
    r = np.arange(rows)
    assert warm_label == cold_label
    assert value[r, warm].sum() == pytest.approx(value[r, cold].sum(), rel=1e-12, abs=1e-12)
    for choice in (cold, warm):
        assert a[r, choice].sum() <= 1.0 and b[r, choice].sum() <= 1.0
        assert value[r, choice].sum() >= value[:, 0].sum()  # never worse than the known-fitting stay


def test_parts_evaluate_exactly_like_fractions() -> None:
    problem = small_workload(3, 30)
    n = len(problem.queries)
    rng = np.random.default_rng(5)
    fw, fg = rng.random((n, 4)), rng.random((n, 4))
    whole = problem.evaluate(fw, fg)
    parts = problem.evaluate_parts(problem.window_part(fw), problem.granularity_part(fg))
    for name in ("query_memory", "query_cpu", "total_memory", "total_cpu", "qos"):
        assert np.array_equal(getattr(parts, name), getattr(whole, name)), name
    # the cached grid, side by side with a start, and a width-1 part standing for every setting
    levels_w, levels_g = np.linspace(0, 1, 5), np.linspace(0, 1, 3)
    grid_w, grid_g = problem.grid_parts(levels_w, levels_g)
    mesh_w, mesh_g = np.meshgrid(levels_w, levels_g, indexing="ij")
    joined = problem.evaluate_parts([problem.window_part(fw[:, 0]), grid_w], [problem.granularity_part(fg[:, 0]), grid_g])
    grid = problem.evaluate(np.tile(mesh_w.ravel(), (n, 1)), np.tile(mesh_g.ravel(), (n, 1)))
    assert np.array_equal(joined.qos[:, 1:], grid.qos) and np.array_equal(joined.total_memory[1:], grid.total_memory)
    assert np.array_equal(joined.query_cpu[:, 0], problem.evaluate(fw[:, 0], fg[:, 0]).query_cpu)
    broadcast = problem.evaluate_parts(problem.window_part(fw), problem.granularity_part(fg[:, 0]))
    assert np.array_equal(broadcast.qos, problem.evaluate(fw, np.repeat(fg[:, :1], 4, axis=1)).qos)
    # a sub-problem slices the grid out of its parent's cache: the same as computing it afresh
    keep = np.arange(0, n, 3)
    sub = problem.subproblem(keep)
    sliced = sub.grid_parts(levels_w, levels_g)
    sub._grids.clear()
    fresh = sub.grid_parts(levels_w, levels_g)
    for cut, new in zip(sliced, fresh):
        assert np.array_equal(cut.values, new.values) and np.array_equal(cut.score, new.score)
    assert sub.qos_specs == {q: problem.qos_specs[q] for q in sub.queries if q in problem.qos_specs}


@pytest.mark.parametrize("memory", [60_000, 150_000, 200_000, 225_000])
@pytest.mark.parametrize("policy", ["weighted-qos", "paper-bisection"])
def test_a_query_reading_another_querys_window_knob_still_fits_the_exact_total(policy, memory):
    # clicks_per_second aggregates clicks_10s, whose range belongs to clicks_per_view: per-query prices
    # of one query depend on the other's choice, so only the exact total can say whether a setting fits.
    doc = json.loads((REPO / "config/plans/example.json").read_text())
    qos = {
        "clicks_per_view": QueryQoS(window=(1000, 60000), windows={"clicks_10s": (1000, 20000)}, weight=2),
        "clicks_per_second": QueryQoS(granularity=(10000, 1000)),
    }
    problem = Problem(parse_plan(doc), qos)
    bounds = Bounds(memory, 100)
    clicks_x4 = np.array([problem.plan.streams[s].d / (4 if s == "clicks" else 1) for s in problem.batch.stream_names])
    decision = make_policy(policy).decide(PolicyInput(problem, bounds, 0.0, clicks_x4))
    exact = problem.evaluate(decision.fw, decision.fg, clicks_x4)
    assert decision.feasible and exact.fits(bounds)
    assert float(exact.total_memory) == pytest.approx(float(decision.outcome.total_memory))
