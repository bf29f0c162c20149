"""Spark's analyzed logical plan as Python trees, read from ``LogicalPlan.toJSON()``.

Spark serialises a plan (and every expression in it) as a flat list of
nodes in pre-order, each with its class and ``num-children``; a node's
children are the subtrees that follow it. Expressions that a plan node
holds in a field (a filter's condition, a projection list) are such flat
lists again, and some expressions embed their operands the same way (a
``Between``'s bounds). This module rebuilds the trees and offers the few
questions plan derivation asks of expressions: which attribute does a
timestamp expression shift by how much, is this a ``window()`` struct and
with which size and slide. It is pure Python, so the derivation rules can
be reasoned about without a JVM; what the JSON leaves out (a watermark's
delay, a source's options) is read through py4j by ``derive.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

MICROS = 1_000_000


@dataclass
class Expr:
    """One expression node: its simple class name, its own fields and its children."""

    cls: str
    fields: dict[str, Any]
    children: list["Expr"] = field(default_factory=list)
    embedded: dict[str, list["Expr"]] = field(default_factory=dict)
    """Operands Spark serialises inside a field rather than as children (e.g. ``Between.lower``)."""

    @property
    def name(self) -> str | None:
        return self.fields.get("name")

    @property
    def expr_id(self) -> int | None:
        ident = self.fields.get("exprId")
        return ident.get("id") if isinstance(ident, dict) else None

    def walk(self) -> Iterator["Expr"]:
        """This node and every node below it, children and embedded operands alike, in pre-order."""
        yield self
        for child in self.children:
            yield from child.walk()
        for trees in self.embedded.values():
            for tree in trees:
                yield from tree.walk()


@dataclass
class PlanNode:
    """One logical plan node: simple class name, fields (expressions parsed), children and what py4j added."""

    cls: str
    fields: dict[str, Any]
    children: list["PlanNode"] = field(default_factory=list)
    jvm: dict[str, Any] = field(default_factory=dict)
    """Facts the JSON omits, filled in by ``derive.py``: a source's format and options, a watermark's delay."""

    def expressions(self, key: str) -> list[Expr]:
        """The expression trees in field ``key`` (one tree, a list of trees, or a list of lists), flattened."""
        return list(_flatten(self.fields.get(key)))

    def walk(self) -> Iterator["PlanNode"]:
        yield self
        for child in self.children:
            yield from child.walk()


def simple(cls: str) -> str:
    return cls.rsplit(".", 1)[-1].rstrip("$")


def _is_tree(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "class" in value[0]


def _expr_tree(flat: list[dict[str, Any]]) -> Expr:
    position = 0

    def build() -> Expr:
        nonlocal position
        raw = flat[position]
        position += 1
        embedded = {k: [_expr_tree(v)] for k, v in raw.items() if _is_tree(v)}
        fields = {k: v for k, v in raw.items() if k not in embedded and k not in ("class", "num-children")}
        node = Expr(simple(raw["class"]), fields, embedded=embedded)
        node.children = [build() for _ in range(int(raw.get("num-children", 0)))]
        return node

    return build()


def _flatten(value: Any) -> Iterator[Expr]:
    if isinstance(value, Expr):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _flatten(item)


def _parse_field(value: Any) -> Any:
    """A plan node's field: expression trees become ``Expr``; lists of them keep their nesting."""
    if _is_tree(value):
        return _expr_tree(value)
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return [_parse_field(v) for v in value]
    return value


def plan_tree(flat: list[dict[str, Any]]) -> PlanNode:
    """The tree of a plan's ``toJSON()`` list (pre-order, ``num-children`` per node)."""
    position = 0

    def build() -> PlanNode:
        nonlocal position
        raw = flat[position]
        position += 1
        fields = {k: _parse_field(v) for k, v in raw.items() if k not in ("class", "num-children")}
        node = PlanNode(simple(raw["class"]), fields)
        node.children = [build() for _ in range(int(raw.get("num-children", 0)))]
        return node

    return build()


# ---- expressions ---------------------------------------------------------------------------------------------

TRANSPARENT = ("Cast", "KnownNullable", "KnownNotNull", "PreciseTimestampConversion", "Alias", "DatetimeSub",
               "CommonExpressionDef")
"""Wrappers that keep an expression's value as an instant (``DatetimeSub`` is replaced by its ``TimestampAddInterval``)."""
SHIFTS = ("TimestampAddInterval", "TimeAdd", "DateAddInterval", "TimestampAdd")


def interval_micros(expr: Expr) -> int | None:
    """The length of a constant interval expression in microseconds (negated by ``UnaryMinus``), else None."""
    if expr.cls == "UnaryMinus" and expr.children:
        inner = interval_micros(expr.children[0])
        return None if inner is None else -inner
    if expr.cls in ("Cast", "Alias") and expr.children:
        return interval_micros(expr.children[0])
    if expr.cls != "Literal":
        return None
    kind, value = str(expr.fields.get("dataType", "")), expr.fields.get("value")
    if value is None:
        return None
    if kind.startswith("interval") and kind != "interval":
        try:
            return int(value)  # day-time intervals: microseconds
        except ValueError:
            return None
    if kind == "interval":  # a calendar interval like "5 seconds" or "1 minutes 30 seconds"
        return parse_calendar(str(value))
    return None


UNITS = {"microsecond": 1, "millisecond": 1000, "second": MICROS, "minute": 60 * MICROS, "hour": 3600 * MICROS,
         "day": 86400 * MICROS, "week": 7 * 86400 * MICROS}


def parse_calendar(text: str) -> int | None:
    """Microseconds of Spark's calendar interval text (``"2 seconds"``, ``"1 minutes 500 milliseconds"``); months: None."""
    words = text.replace("interval", "").split()
    total = 0.0
    for amount, unit in zip(words[::2], words[1::2]):
        unit = unit.lower().rstrip("s")
        if unit not in UNITS:
            return None
        try:
            total += float(amount) * UNITS[unit]
        except ValueError:
            return None
    return int(round(total)) if len(words) % 2 == 0 and words else None


def time_offset(expr: Expr, defs: dict[str, Expr] | None = None) -> tuple[int, int] | None:
    """``(exprId, offset µs)`` when ``expr`` is a timestamp attribute shifted by a constant interval, else None."""
    if expr.cls == "AttributeReference":
        return (expr.expr_id, 0) if expr.expr_id is not None else None
    if expr.cls == "CommonExpressionRef" and defs:
        target = defs.get(repr(expr.fields.get("id")))
        return time_offset(target, defs) if target is not None else None
    if expr.cls in TRANSPARENT and expr.children:
        return time_offset(expr.children[0], defs)
    if expr.cls in SHIFTS and len(expr.children) == 2:
        base, amount = time_offset(expr.children[0], defs), interval_micros(expr.children[1])
        return None if base is None or amount is None else (base[0], base[1] + amount)
    if expr.cls in ("Add", "Subtract") and len(expr.children) == 2:
        base, amount = time_offset(expr.children[0], defs), interval_micros(expr.children[1])
        if base is None or amount is None:
            return None
        return base[0], base[1] + (amount if expr.cls == "Add" else -amount)
    return None


def conjuncts(expr: Expr) -> Iterator[Expr]:
    """The parts of a condition joined by AND (``With`` and ``Between`` unfolded into comparisons)."""
    if expr.cls == "And":
        for child in expr.children:
            yield from conjuncts(child)
    elif expr.cls == "With" and expr.children:
        yield from conjuncts(expr.children[0])
    else:
        yield expr


def common_defs(expr: Expr) -> dict[str, Expr]:
    """``CommonExpressionDef`` id → its expression, for resolving ``CommonExpressionRef`` (Spark 4's ``With``)."""
    return {repr(e.fields.get("id")): e.children[0] for e in expr.walk() if e.cls == "CommonExpressionDef" and e.children}


COMPARISONS = {"GreaterThanOrEqual": ">=", "GreaterThan": ">", "LessThanOrEqual": "<=", "LessThan": "<"}


def comparisons(condition: Expr) -> Iterator[tuple[Expr, str, Expr]]:
    """``(left, op, right)`` of every ``<``, ``<=``, ``>``, ``>=`` among the condition's conjuncts."""
    for part in conjuncts(condition):
        if part.cls == "Between" and {"input", "lower", "upper"} <= set(part.embedded):
            value = part.embedded["input"][0]
            yield value, ">=", part.embedded["lower"][0]
            yield value, "<=", part.embedded["upper"][0]
        elif part.cls in COMPARISONS and len(part.children) == 2:
            yield part.children[0], COMPARISONS[part.cls], part.children[1]


@dataclass(frozen=True)
class WindowStruct:
    """What ``window(time, size, slide)`` compiled into: the time attribute, size and slide in microseconds."""

    time_id: int | None
    size: int
    slide: int


def window_struct(expr: Expr) -> WindowStruct | None | str:
    """The time window an expression builds (a ``named_struct(start, …, end, …)``), ``"session"`` for a session
    window (a struct without the slide arithmetic), else None."""
    for node in expr.walk():
        if node.cls != "CreateNamedStruct" or len(node.children) != 4:
            continue
        names = [c.fields.get("value") for c in node.children[::2]]
        if names != ["start", "end"]:
            continue
        start, end = node.children[1], node.children[3]
        slide = next((interval_or_long(r.children[1]) for r in start.walk() if r.cls == "Remainder" and len(r.children) == 2), None)
        if slide is None:
            return "session"
        size = next((interval_or_long(a.children[1]) for a in end.walk() if a.cls == "Add" and len(a.children) == 2
                     and interval_or_long(a.children[1]) not in (None, 0)), None)
        time_id = next((a.expr_id for a in start.walk() if a.cls == "AttributeReference"), None)
        if size is None:
            return None
        return WindowStruct(time_id, size, slide)
    return None


def interval_or_long(expr: Expr) -> int | None:
    if expr.cls == "Literal" and str(expr.fields.get("dataType")) in ("long", "integer"):
        try:
            return int(expr.fields.get("value"))
        except (TypeError, ValueError):
            return None
    return interval_micros(expr)


def attribute_names(exprs: list[Expr]) -> list[str]:
    """The visible names of expressions (an alias's name, an attribute's name), ``?`` for anything else."""
    names = []
    for e in exprs:
        names.append(str(e.name) if e.cls in ("Alias", "AttributeReference") and e.name else e.cls.lower())
    return names
