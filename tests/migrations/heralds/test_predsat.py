"""PredSAT's verdicts and residuals against brute force, and the paper's worked examples."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.heralds import atoms, herald_ranges, names_of, points, range_truth, truth

from armd.migrations.heralds import Domain, JoinReasoner, Range, SelectReasoner, Verdict, conjunction
from armd.migrations.heralds.herald import normalise

DOMAINS = st.sampled_from([Domain.REAL, Domain.INTEGER])
SLOW = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(st.lists(atoms(), min_size=1, max_size=5), herald_ranges(), DOMAINS)
def test_select_verdict_and_residual_agree_with_brute_force(predicate, ranges, domain) -> None:
    decision = SelectReasoner(predicate, domain).decide_ranges(ranges)
    names = names_of(predicate, ranges)
    values = points(names, domain)
    size = len(next(iter(values.values())))
    herald = range_truth(ranges, values, size)
    query = truth(predicate, values, size)
    if decision.verdict is Verdict.UNSATISFIABLE:
        assert not (herald & query).any()
        return
    assert (herald & query).any(), "satisfiable under the herald, yet not called unsatisfiable"
    residual = truth(decision.residual, values, size)
    assert ((residual == query) | ~herald).all(), "the residual differs from the predicate under the herald"
    assert (decision.verdict is Verdict.IMPLIED) == bool((query | ~herald).all())
    assert set(decision.residual) <= set(predicate)


@SLOW
@given(
    st.lists(atoms(("L.x", "L.y", "R.x")), min_size=1, max_size=5),
    herald_ranges(("x", "y")),
    herald_ranges(("x",)),
)
def test_join_verdict_combines_both_heralds(predicate, left, right) -> None:
    decision = JoinReasoner(predicate).decide(normalise(left), normalise(right))
    ranges = {f"L.{a}": r for a, r in left.items()} | {f"R.{a}": r for a, r in right.items()}
    names = names_of(predicate, ranges)
    values = points(names, Domain.REAL)
    size = len(next(iter(values.values())))
    herald = range_truth(ranges, values, size)
    query = truth(predicate, values, size)
    assert (decision.verdict is Verdict.UNSATISFIABLE) == (not (herald & query).any())
    if decision.verdict is not Verdict.UNSATISFIABLE:
        assert (decision.verdict is Verdict.IMPLIED) == bool((query | ~herald).all())


def test_the_four_optimisations_of_section_3a() -> None:
    # (1) select data skipping: A > 1000 ∧ A < B with A < 800
    q1 = SelectReasoner(conjunction(("A", ">", 1000), ("A", "<", "B")))
    assert q1.decide({"A": Range.below(800)}).verdict is Verdict.UNSATISFIABLE
    # (2) join data skipping: A > 800 ∧ A < B with B < 800
    q2 = JoinReasoner(conjunction(("L.A", ">", 800), ("L.A", "<", "R.B")))
    assert q2.decide(None, (("B", Range.below(800)),)).verdict is Verdict.UNSATISFIABLE
    # (3) select elimination of A > 1000 given A > 1200: only A ≤ B is left
    q3 = SelectReasoner(conjunction(("A", ">", 1000), ("A", "<=", "B")))
    assert [str(a) for a in q3.decide({"A": Range.above(1200)}).residual] == ["A <= B"]
    # (4) join simplification: A < 800 ∧ A < B given B > 1000 leaves A < 800, which L's herald implies
    q4 = JoinReasoner(conjunction(("L.A", "<", 800), ("L.A", "<", "R.B")))
    assert [str(a) for a in q4.decide(None, (("B", Range.above(1000)),)).residual] == ["L.A < 800"]
    assert q4.decide((("A", Range.below(500)),), (("B", Range.above(1000)),)).verdict is Verdict.IMPLIED


def test_section_4_example_four_partition_pairs() -> None:
    join = JoinReasoner(conjunction(("L.A", "<", "R.B"), ("R.B", ">", 1000)))
    h1, h2 = (("A", Range.above(2000)),), (("A", Range.below(500)),)
    h3, h4 = (("B", Range.above(2000)),), (("B", Range.below(1500)),)
    assert join.decide(h2, h3).verdict is Verdict.IMPLIED
    assert join.decide(h1, h4).verdict is Verdict.UNSATISFIABLE
    assert join.decide(h2, h4).verdict is Verdict.UNKNOWN
    assert SelectReasoner(conjunction(("B", ">", 1000))).decide(dict(h3)).verdict is Verdict.IMPLIED


def test_incremental_refinement_stops_where_nothing_tightens() -> None:
    # A > 100 ∧ A < B ∧ B < C ∧ B < D ∧ C > 500 (paper 002 Fig. 2/3)
    query = SelectReasoner(conjunction(("A", ">", 100), ("A", "<", "B"), ("B", "<", "C"), ("B", "<", "D"), ("C", ">", 500)))
    narrow = query.decide({"B": Range.below(300)})
    assert narrow.verdict is Verdict.UNKNOWN and "B < C" not in [str(a) for a in narrow.residual]
    assert narrow.visited == 2  # B, then A below it; C and D above are untouched
    assert query.decide({"A": Range.below(50)}).verdict is Verdict.UNSATISFIABLE
