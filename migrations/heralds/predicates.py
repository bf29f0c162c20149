"""Conjunctive inequality predicates ``z1 θ z2`` with θ ∈ {=, <, ≤} (paper 002 §II).

Why a module of its own: the reasoner needs predicates as data (which
attributes, which constants, which comparison), while the operators need
them as fast row functions. Both views come from the same ``Atom``, so what
is proven about a predicate is about exactly the code that evaluates it.

An atom compares two terms; each term is an attribute (a name, qualified as
``"L.a"`` in a join when that helps) or a constant, never two constants — a
comparison of constants decides nothing about a stream and is rejected.
``>`` and ``≥`` are accepted by ``atom`` as a convenience and stored with
the sides swapped, so the model only ever holds ``=``, ``<`` and ``<=``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from numbers import Real
from typing import Any, Callable, Iterable, Mapping, Sequence

EQ, LT, LE = "=", "<", "<="
OPERATORS = (EQ, LT, LE)
_SPELLINGS = {"=": EQ, "==": EQ, "<": LT, "<=": LE, "≤": LE}
_SWAPPED = {">": LT, ">=": LE, "≥": LE}


class ConstantComparison(ValueError):
    """An atom compared two constants; the paper's model needs an attribute on at least one side."""


@dataclass(frozen=True)
class Attr:
    """An attribute of the stream (or of one join input) by name."""

    name: str


@dataclass(frozen=True)
class Const:
    """A numeric constant."""

    value: Real | Fraction


Term = Attr | Const


@dataclass(frozen=True)
class Atom:
    """``left op right`` with ``op`` one of ``=``, ``<``, ``<=``."""

    left: Term
    op: str
    right: Term

    def __post_init__(self) -> None:
        if self.op not in OPERATORS:
            raise ValueError(f"an atom's comparison must be one of {OPERATORS}, got {self.op!r}")
        if isinstance(self.left, Const) and isinstance(self.right, Const):
            raise ConstantComparison(
                f"{self} compares two constants; write a predicate with an attribute on at least one side"
            )

    def attributes(self) -> set[str]:
        return {t.name for t in (self.left, self.right) if isinstance(t, Attr)}

    def holds(self, values: Mapping[str, Any]) -> bool:
        """Evaluate on a mapping from attribute name to value (the reference semantics)."""
        a = values[self.left.name] if isinstance(self.left, Attr) else self.left.value
        b = values[self.right.name] if isinstance(self.right, Attr) else self.right.value
        if self.op == EQ:
            return a == b
        return a < b if self.op == LT else a <= b

    def __str__(self) -> str:
        def show(t: Term) -> str:
            return t.name if isinstance(t, Attr) else str(t.value)

        return f"{show(self.left)} {self.op} {show(self.right)}"


def _term(z: Term | str | Real | Fraction) -> Term:
    if isinstance(z, (Attr, Const)):
        return z
    if isinstance(z, str):
        return Attr(z)
    if isinstance(z, (Real, Fraction)) and not isinstance(z, bool):
        return Const(z)
    raise TypeError(f"a term is an attribute name (str) or a number, got {z!r}")


def atom(left: Term | str | Real, op: str, right: Term | str | Real) -> Atom:
    """Build an atom: strings are attributes, numbers constants; ``>``/``>=`` swap the sides."""
    if op in _SWAPPED:
        return Atom(_term(right), _SWAPPED[op], _term(left))
    if op not in _SPELLINGS:
        raise ValueError(f"unknown comparison {op!r}; use one of =, <, <=, >, >=")
    return Atom(_term(left), _SPELLINGS[op], _term(right))


def conjunction(*atoms: Atom | tuple[Any, str, Any]) -> tuple[Atom, ...]:
    """A conjunction as a tuple of atoms; triples are passed to ``atom``."""
    return tuple(a if isinstance(a, Atom) else atom(*a) for a in atoms)


def attributes_of(atoms: Iterable[Atom]) -> set[str]:
    return set().union(*(a.attributes() for a in atoms))


def compile_conjunction(atoms: Sequence[Atom], position: Mapping[str, int]) -> Callable[[Sequence[Any]], bool]:
    """A function ``row -> bool`` for the conjunction, rows indexed by ``position[name]``.

    Generated as one Python expression so that a row costs one call and a
    few comparisons, as a hand-written select would; the regular plan and
    the herald plan both evaluate through it, so neither is handicapped.
    The empty conjunction is always true.
    """
    return _compile(atoms, {name: f"r[{i}]" for name, i in position.items()}, "r")


def compile_pair(
    atoms: Sequence[Atom],
    left: Mapping[str, int],
    right: Mapping[str, int],
    *,
    prefixes: tuple[str, str] = ("L", "R"),
) -> Callable[[Sequence[Any], Sequence[Any]], bool]:
    """A function ``(left_row, right_row) -> bool`` for a join predicate over ``L.a`` / ``R.b``."""
    names = {f"{prefixes[0]}.{n}": f"l[{i}]" for n, i in left.items()}
    names |= {f"{prefixes[1]}.{n}": f"r[{i}]" for n, i in right.items()}
    return _compile(atoms, names, "l, r")


def _compile(atoms: Sequence[Atom], names: Mapping[str, str], parameters: str) -> Callable[..., bool]:
    constants: dict[str, Any] = {}

    def code(t: Term) -> str:
        if isinstance(t, Attr):
            if t.name not in names:
                raise KeyError(f"attribute {t.name!r} is not in the row layout {sorted(names)}")
            return names[t.name]
        name = f"c{len(constants)}"
        constants[name] = t.value
        return name

    parts = [f"({code(a.left)} {'==' if a.op == EQ else a.op} {code(a.right)})" for a in atoms]
    body = " and ".join(parts) if parts else "True"
    return eval(f"lambda {parameters}: {body}", {"__builtins__": {}, **constants})  # noqa: S307 - from validated atoms
