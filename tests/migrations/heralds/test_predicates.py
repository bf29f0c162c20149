"""Atoms: the allowed comparisons, constants on one side only, and compiled rows that match ``holds``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.heralds import atoms

from armd.migrations.heralds import Atom, Attr, Const, ConstantComparison, atom, compile_conjunction


def test_two_constants_are_rejected_with_a_message_that_says_what_to_do() -> None:
    with pytest.raises(ConstantComparison, match="attribute on at least one side"):
        atom(3, "<", 4)
    with pytest.raises(ConstantComparison):
        Atom(Const(1), "=", Const(1))


def test_only_equal_less_and_less_or_equal_are_stored() -> None:
    assert atom("a", ">", 5) == Atom(Const(5), "<", Attr("a"))
    assert atom("a", ">=", "b") == Atom(Attr("b"), "<=", Attr("a"))
    with pytest.raises(ValueError, match="one of"):
        Atom(Attr("a"), ">", Const(1))
    with pytest.raises(ValueError, match="unknown comparison"):
        atom("a", "!=", 1)


@given(st.lists(atoms(), max_size=4), st.tuples(*[st.integers(-3, 3)] * 3))
def test_a_compiled_conjunction_agrees_with_holds(predicate, row) -> None:
    compiled = compile_conjunction(predicate, {"x": 0, "y": 1, "z": 2})
    values = dict(zip("xyz", row))
    assert compiled(row) == all(a.holds(values) for a in predicate)


def test_an_unknown_attribute_is_named() -> None:
    with pytest.raises(KeyError, match="'w'"):
        compile_conjunction([atom("w", "<", 1)], {"x": 0})
