"""One definition per key: a dataclass field declared with ``setting()``.

A section of the file is a frozen dataclass and each of its fields is one key:
the field's name is the key, its annotation the type, its default the
default, and the ``Setting`` in its metadata holds what only the file needs —
the doc, the allowed range or choices, a check of its own, whether the value
is a secret. Everything else is derived from that one declaration, so adding
a key is adding a field: the keys a table allows and the message that lists
them (``keys_of``), reading and checking each value (``reader.Table.read``),
the JSON view of ``Config.public()`` (``public_view``) and the search for
secrets (``key_values``). What relates keys to each other stays explicit code
in the loaders.

A section read into a class of the core (``Bounds``, ``Guardrails``,
``QueryQoS``, ``AlertHook``), which knows nothing of files, is declared here
as a dataclass of its keys whose settings name the core's attribute
(``attr``); ``into`` builds the core object from the keys read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Iterator, Literal, Mapping

from .errors import Key

METADATA = "armd.setting"
"""Where a field keeps its ``Setting``."""


@dataclass(frozen=True)
class Rule:
    """An allowed range of a number, with the words that describe it."""

    text: str
    test: Callable[[float], bool]


POSITIVE = Rule("> 0", lambda x: x > 0)
NON_NEGATIVE = Rule("≥ 0", lambda x: x >= 0)
AT_LEAST_ONE = Rule("≥ 1", lambda x: x >= 1)
ANY = Rule("", lambda x: True)
UNIT_CLOSED_OPEN = Rule("in [0, 1)", lambda x: 0 <= x < 1)
UNIT_OPEN_CLOSED = Rule("in (0, 1]", lambda x: 0 < x <= 1)


def at_most(rule: Rule, limit: float, meaning: str | None = None) -> Rule:
    """``rule`` with a finite upper ``limit``: what is accepted must also be representable where it is used.

    A number the file accepts ends up in a timer, a ``timedelta``, a random generator or a formula; a huge
    one (``1e308``) passes a lower bound and breaks there, so every number has an upper bound too.
    ``meaning`` says the limit in words (``a year``).
    """
    words = f"{limit:g}" + (f" ({meaning})" if meaning else "")
    text = f"{rule.text} and ≤ {words}" if rule.text else f"≤ {words}"
    return Rule(text, lambda x: rule.test(x) and x <= limit)


def in_range(low: float, high: float, meaning: str | None = None) -> Rule:
    """A closed range ``[low, high]``, for numbers whose lower bound is itself a limit of what works."""
    words = f"[{low:g}, {high:g}]" + (f" ({meaning})" if meaning else "")
    return Rule(f"in {words}", lambda x: low <= x <= high)


MINUTE, HOUR, DAY, YEAR = 60.0, 3600.0, 86400.0, 365 * 86400.0
"""Durations in seconds, for the upper bounds of the keys that are durations."""


@dataclass(frozen=True)
class Setting:
    """What the file needs to know about a key, besides its name, type and default."""

    doc: str
    """What the key means; its unit and range when the name does not say."""
    rule: Rule = ANY
    """A number's allowed range."""
    choices: tuple[str, ...] | None = None
    """A string's allowed values."""
    expected: str | None = None
    """The words for an allowed value, when the type's own words (``a string``) say too little."""
    check: Callable[[Any], str | None] | None = None
    """A test of its own on the value once its type is right: ``None`` when fine, else the message after the key."""
    secret: Literal["password", "value"] | None = None
    """``password``: the password in this URL is a secret; ``value``: the whole value is."""
    kinds: tuple[str, ...] | None = None
    """In a table with a ``kind`` key: the kinds this key belongs to (``None``: every kind)."""
    attr: str | None = None
    """The attribute of the core object this key becomes, when its name differs from the key."""


def setting(
    default: Any = MISSING,
    *,
    doc: str,
    factory: Callable[[], Any] | None = None,
    rule: Rule = ANY,
    choices: tuple[str, ...] | None = None,
    expected: str | None = None,
    check: Callable[[Any], str | None] | None = None,
    secret: Literal["password", "value"] | None = None,
    kinds: tuple[str, ...] | None = None,
    attr: str | None = None,
) -> Any:
    """A dataclass field that is a key of the file; no default (and no ``factory``): the key is required."""
    meta = {METADATA: Setting(doc, rule, choices, expected, check, secret, kinds, attr)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def definitions(spec: type) -> Iterator[tuple[dataclasses.Field[Any], Setting]]:
    """The keys of a section class, in the order they are declared, with their settings."""
    for f in fields(spec):
        if METADATA in f.metadata:
            yield f, f.metadata[METADATA]


def keys_of(spec: type, kind: str | None = None) -> tuple[str, ...]:
    """The keys a section allows; with ``kind``: only those of that kind (and ``kind`` itself)."""
    return tuple(f.name for f, s in definitions(spec) if kind is None or s.kinds is None or kind in s.kinds)


def default_of(f: dataclasses.Field[Any]) -> Any:
    """A field's default (``MISSING`` if it has none)."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def into(target: Callable[..., Any], spec: type, values: Mapping[str, Any]) -> Any:
    """Build ``target`` (a core class) from the keys of ``spec`` read into ``values``."""
    return target(**{s.attr or f.name: values[f.name] for f, s in definitions(spec) if f.name in values})


def _shown(s: Setting, value: Any, owner: Any) -> bool:
    """A key of another kind, or an optional one left out, is not part of the table as written."""
    return s.kinds is None or (getattr(owner, "kind", None) in s.kinds and value is not None)


def public_view(value: Any, spec: type | None = None) -> Any:
    """``value`` as JSON-able data laid out like the file: a section by its keys, mappings and arrays item by item.

    ``spec`` is the section class whose keys describe ``value`` (or each item of a mapping or array);
    without one, a section is described by its own class.
    """
    if spec is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        spec = type(value)
    if spec is not None and isinstance(value, Mapping):
        return {name: public_view(item, spec) for name, item in value.items()}
    if spec is not None and isinstance(value, (tuple, list)):
        return [public_view(item, spec) for item in value]
    if spec is not None:
        shown = {}
        for f, s in definitions(spec):
            item = getattr(value, s.attr or f.name)
            if _shown(s, item, value):
                shown[f.name] = public_view(item)
        return shown
    if isinstance(value, Mapping):
        return {name: public_view(item) for name, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [public_view(item) for item in value]
    return value


def key_values(value: Any, spec: type | None, key: Key) -> Iterator[tuple[Key, Setting, Any]]:
    """Every key below ``value`` with its path, setting and value (``spec`` as for ``public_view``)."""
    if spec is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        spec = type(value)
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from key_values(item, spec, (*key, name))
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from key_values(item, spec, (*key, i))
    elif spec is not None:
        for f, s in definitions(spec):
            item = getattr(value, s.attr or f.name)
            yield (*key, f.name), s, item
            yield from key_values(item, None, (*key, f.name))
