"""Reading one TOML table: its key path, the keys it allows, and each value checked against its definition.

``Table.read(spec)`` reads every key of a section class whose type is a plain
value (a number, a whole number, a boolean, a string, an optional string, a
pair ``[a, b]``), checking it against the key's setting; keys of other types
(tables of names, arrays of tables, nested sections) are read by the loader
of their section, which hands the results over, and ``read`` refuses to
forget one. The typed getters are also
used on their own for tables whose keys the user names (streams, queries).
"""

from __future__ import annotations

import math
import typing
from dataclasses import MISSING
from functools import cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import ConfigError, Key, is_number, key_path, listing, show
from .keys import ANY, Rule, Setting, default_of, definitions, keys_of
from ..units import DURATION_EXAMPLES, SIZE_EXAMPLES, parse_duration, parse_size

REQUIRED: Any = MISSING
"""The default of a key that must be given."""

PAIR = tuple[float, float] | None
"""The type of an optional pair ``[a, b]`` (QoS ranges)."""


@cache
def _types(spec: type) -> dict[str, Any]:
    return typing.get_type_hints(spec)


class Table:
    """One TOML table being read: knows its key path and rejects keys it does not allow."""

    def __init__(self, file: Path, key: Key, raw: Any, allowed: Iterable[str], what: str | None = None) -> None:
        self.file, self.key = file, key
        allowed = tuple(allowed)
        if not isinstance(raw, dict):
            raise self.error((), f"expected a table, got {show(raw)}")
        self.raw = raw
        for name in raw:
            if name not in allowed:
                if not key:
                    raise self.error((name,), f"unknown section; allowed sections: {listing(allowed, 99)}")
                raise self.error(
                    (name,), f"unknown key; allowed keys of {what or f'[{key_path(key)}]'}: {listing(allowed, 99)}"
                )

    def error(self, key: Key, message: str) -> ConfigError:
        return ConfigError(self.file, (*self.key, *key), message)

    # --- a section, from its definition -----------------------------------------------------

    def section(self, name: str, spec: type) -> Table:
        """The table ``name`` (empty when absent), allowing the keys of ``spec``."""
        return Table(self.file, (*self.key, name), self.raw.get(name, {}), keys_of(spec))

    def read(
        self, spec: type, *, defaults: Mapping[str, Any] | None = None, keys: Iterable[str] | None = None, **given: Any
    ) -> dict[str, Any]:
        """The keys of ``spec`` (or only ``keys``): plain values read and checked, the others as ``given``.

        ``defaults`` replace the declared defaults (a default that depends on other keys). A key that is not
        a plain value must be read by the section's loader and passed in ``given``: forgetting one is a
        ``TypeError``, never a key that is accepted and then ignored.
        """
        types = _types(spec)
        wanted = set(keys) if keys is not None else None
        values: dict[str, Any] = {}
        for f, s in definitions(spec):
            if wanted is not None and f.name not in wanted:
                continue
            if f.name in given:
                values[f.name] = given.pop(f.name)
                continue
            reader = _READERS.get(types[f.name])
            if reader is None:
                raise TypeError(f"{spec.__name__}.{f.name} is no plain value; its loader must pass it to read()")
            values[f.name] = reader(self, f.name, (defaults or {}).get(f.name, default_of(f)), s)
        if given:
            raise TypeError(f"{spec.__name__} has no keys {sorted(given)}")
        return values

    # --- one value of a given type ----------------------------------------------------------

    def value(self, name: str, default: Any, expected: str) -> Any:
        """The raw value of ``name``, or ``default``; missing and required is an error."""
        if name in self.raw:
            return self.raw[name]
        if default is REQUIRED:
            raise self.error((name,), f"missing; expected {expected}")
        return default

    def number(self, name: str, default: Any = REQUIRED, rule: Rule = ANY) -> float:
        expected = f"a number {rule.text}".rstrip()
        value = self.value(name, default, expected)
        if isinstance(value, str):
            value = self._with_unit(name, value, expected)
        if not is_number(value) or not math.isfinite(value) or not rule.test(value):
            raise self.error((name,), f"expected {expected}, got {show(value)}")
        return float(value)

    def _with_unit(self, name: str, text: str, expected: str) -> Any:
        """A ``*_seconds`` key may be a duration, a ``*_bytes`` key a size: the number they stand for."""
        if name.endswith("_seconds"):
            parsed, words = parse_duration(text), f"{expected} of seconds or a duration such as {DURATION_EXAMPLES}"
        elif name.endswith("_bytes"):
            parsed, words = parse_size(text), f"{expected} of bytes or a size such as {SIZE_EXAMPLES}"
        else:
            return text
        if parsed is None:
            raise self.error((name,), f"expected {words}, got {show(text)}")
        return parsed

    def integer(self, name: str, default: Any = REQUIRED, rule: Rule = ANY) -> int:
        expected = f"a whole number {rule.text}".rstrip()
        value = self.value(name, default, expected)
        if not isinstance(value, int) or isinstance(value, bool) or not rule.test(value):
            raise self.error((name,), f"expected {expected}, got {show(value)}")
        return value

    def string(
        self, name: str, default: Any = REQUIRED, choices: Iterable[str] | None = None, expected: str | None = None
    ) -> str:
        choices = tuple(choices) if choices is not None else None
        expected = expected or (f"one of {listing(choices, 99)}" if choices else "a string")
        value = self.value(name, default, expected)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            raise self.error((name,), f"expected {expected}, got {show(value)}")
        return value

    def boolean(self, name: str, default: Any = REQUIRED) -> bool:
        value = self.value(name, default, "true or false")
        if not isinstance(value, bool):
            raise self.error((name,), f"expected true or false, got {show(value)}")
        return value

    def pair(self, name: str, rule: Rule = ANY) -> tuple[float, float] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not (isinstance(value, list) and len(value) == 2
                and all(is_number(v) and math.isfinite(v) and rule.test(v) for v in value)):
            each = f", each {rule.text}" if rule.text else ""
            raise self.error((name,), f"expected a list of two numbers [a, b]{each}, got {show(value)}")
        return float(value[0]), float(value[1])

    def mapping(self, name: str) -> dict[str, Any]:
        """A table whose keys are names chosen by the user (streams, queries, parameters)."""
        value = self.raw.get(name, {})
        if not isinstance(value, dict):
            raise self.error((name,), f"expected a table, got {show(value)}")
        return value

    def table(self, name: str, allowed: Iterable[str]) -> Table:
        return Table(self.file, (*self.key, name), self.raw.get(name, {}), allowed)

    def tables(self, name: str) -> list[Any]:
        """An array of tables (``[[name]]`` or ``name = [{…}, …]``); the items are checked by the caller."""
        value = self.raw.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.error(
                (name,),
                f"expected an array of tables ([[{key_path((*self.key, name))}]] or [{{…}}, …]), got {show(value)}",
            )
        return value

    def items(self, name: str, spec: type) -> list[Table]:
        """The items of the array of tables ``name``, each allowing the keys of ``spec``."""
        return [Table(self.file, (*self.key, name, i), raw, keys_of(spec)) for i, raw in enumerate(self.tables(name))]


def _string(t: Table, name: str, default: Any, s: Setting) -> str:
    value = t.string(name, default, s.choices, s.expected)
    problem = s.check(value) if s.check is not None else None
    if problem is not None:
        raise t.error((name,), problem)
    return value


def _optional_string(t: Table, name: str, default: Any, s: Setting) -> str | None:
    return _string(t, name, default, s) if name in t.raw or default is not None else None


_READERS: dict[Any, Any] = {
    float: lambda t, name, default, s: t.number(name, default, s.rule),
    int: lambda t, name, default, s: t.integer(name, default, s.rule),
    bool: lambda t, name, default, s: t.boolean(name, default),
    str: _string,
    str | None: _optional_string,
    float | None: lambda t, name, default, s: t.number(name, default, s.rule) if name in t.raw or default is not None else None,
    PAIR: lambda t, name, default, s: t.pair(name, s.rule),
}
"""How each plain type is read; a key of any other type is read by its section's loader."""
