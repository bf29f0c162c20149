"""Minimum-range SAT and IMP agree with brute force over small domains, on both domains."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.heralds import atoms, names_of, points, truth

from armd.migrations.heralds import Domain, InequalityGraph, Range, conjunction, implies, satisfiable
from armd.migrations.heralds.satisfiability import negation

DOMAINS = st.sampled_from([Domain.REAL, Domain.INTEGER])
SLOW = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def brute_satisfiable(predicate, domain) -> bool:
    values = points(names_of(predicate), domain)
    size = len(next(iter(values.values()))) if values else 1
    return bool(truth(predicate, values, size).any())


@SLOW
@given(st.lists(atoms(), min_size=1, max_size=6), DOMAINS)
def test_satisfiable_agrees_with_brute_force(predicate, domain) -> None:
    assert satisfiable(predicate, domain) == brute_satisfiable(predicate, domain)


@SLOW
@given(st.lists(atoms(), max_size=5), atoms(), DOMAINS)
def test_implication_agrees_with_brute_force(predicate, implied, domain) -> None:
    names = names_of([*predicate, implied])
    values = points(names, domain)
    size = len(next(iter(values.values())))
    premise = truth(predicate, values, size)
    expected = bool((~premise | truth([implied], values, size)).all())
    assert implies(predicate, implied, domain) == expected


@SLOW
@given(st.lists(atoms(), min_size=1, max_size=5), st.dictionaries(st.sampled_from("xyz"), st.integers(-2, 2)), DOMAINS)
def test_incremental_refinement_equals_recomputing_from_scratch(predicate, uppers, domain) -> None:
    graph = InequalityGraph(predicate, domain)
    ranges = {name: Range(high=value) for name, value in uppers.items()}
    extra = tuple(a for name, r in ranges.items() for a in r.atoms(name))
    assert graph.refine(ranges).satisfiable == satisfiable((*predicate, *extra), domain)


def test_the_negation_of_each_comparison() -> None:
    le, lt, eq = conjunction(("x", "<=", "y"), ("x", "<", "y"), ("x", "=", "y"))
    assert [str(a) for a in negation(le)] == ["y < x"]
    assert [str(a) for a in negation(lt)] == ["y <= x"]
    assert [str(a) for a in negation(eq)] == ["x < y", "y < x"]


def test_a_strict_cycle_is_unsatisfiable_and_a_loose_one_means_equality() -> None:
    assert not satisfiable(conjunction(("a", "<", "b"), ("b", "<=", "c"), ("c", "<=", "a")))
    cycle = conjunction(("a", "<=", "b"), ("b", "<=", "c"), ("c", "<=", "a"))
    assert satisfiable(cycle)
    assert implies(cycle, conjunction(("a", "=", "c"))[0])


@pytest.mark.parametrize(("domain", "expected"), [(Domain.REAL, True), (Domain.INTEGER, False)])
def test_strict_chains_need_room_only_over_the_integers(domain, expected) -> None:
    chain = conjunction((0, "<=", "a"), ("a", "<", "b"), ("b", "<", "c"), ("c", "<=", 1))
    assert satisfiable(chain, domain) is expected


def test_fractional_constants_round_inwards_over_the_integers() -> None:
    assert satisfiable(conjunction((2.5, "<", "a"), ("a", "<", 3.5)), Domain.INTEGER)
    assert not satisfiable(conjunction((2.5, "<", "a"), ("a", "<", 3)), Domain.INTEGER)
    assert satisfiable(conjunction((2.5, "<", "a"), ("a", "<", 3)), Domain.REAL)


@pytest.mark.parametrize("domain", [Domain.REAL, Domain.INTEGER])
def test_a_strict_edge_between_touching_bounds_is_unsatisfiable(domain) -> None:
    assert not satisfiable(conjunction((0, "<=", "x"), ("x", "<", "y"), ("y", "<=", 0)), domain)
    assert not satisfiable(conjunction((0, "<=", "x"), ("x", "<=", "y"), ("y", "<", 0)), domain)
    assert satisfiable(conjunction((0, "<=", "x"), ("x", "<=", "y"), ("y", "<=", 0)), domain)
    graph = InequalityGraph(conjunction(("x", "<", "y"), ("y", "<=", "z")), domain)
    assert not graph.refine({"x": Range(low=1), "z": Range(high=1)}).satisfiable
