"""``armd herald add`` and ``armd herald list``: heralds announced through the metadata store (paper 002).

A herald written here is a row of the ``heralds`` table, the same row a
person or a program can write with SQL; both are read back by
``SqlStore.heralds``. The command line only turns ``--attr a=LOW:HIGH`` into
ranges and checks the stream is one the configuration knows, so a typo is one
line here rather than a herald no query ever sees. What a herald record may
hold is checked once, in ``armd.migrations.heralds.record``.
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import datetime, timezone
from typing import Any, Callable

from armd.migrations.heralds.record import Bound, HeraldRecord, InvalidHerald


class HeraldInputError(ValueError):
    """A mistake in ``armd herald`` input; one line."""


def add_parsers(commands: Any, config_option: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    herald = commands.add_parser("herald", help="announce heralds on a stream through the metadata store (docs/heralds.md)")
    actions = herald.add_subparsers(dest="herald_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="announce that a stream's next tuples match a range per attribute")
    add.add_argument("stream", help="a stream of the configuration's plan")
    add.add_argument("--attr", action="append", required=True, metavar="NAME=LOW:HIGH",
                     help="a closed range for one attribute; leave LOW or HIGH empty for no bound (repeatable)")
    life = add.add_mutually_exclusive_group(required=True)
    life.add_argument("--count", type=int, help="the herald covers the stream's next COUNT tuples")
    life.add_argument("--seconds", type=float, help="the herald covers SECONDS of event time from now")
    add.add_argument("--json", action="store_true", help="print the stored herald as JSON")
    config_option(add)
    listing = actions.add_parser("list", help="heralds in the store, oldest first")
    listing.add_argument("stream", nargs="?", help="only this stream's heralds")
    listing.add_argument("--json", action="store_true", help="print JSON")
    config_option(listing)
    return herald


def parse_attr(text: str) -> tuple[str, tuple[Bound, Bound]]:
    """``region=25:32``, ``temp=:100``, ``price=9.5:`` into a name and a closed range."""
    name, eq, bounds = text.partition("=")
    low, colon, high = bounds.partition(":")
    if not eq or not colon or not name.strip():
        raise HeraldInputError(f"--attr {text!r}: expected NAME=LOW:HIGH, e.g. region=25:32 (LOW or HIGH may be empty)")
    return name.strip(), (_number(text, low), _number(text, high))


def _number(text: str, value: str) -> Bound:
    value = value.strip()
    if not value:
        return None
    try:
        number: float = int(value)
    except ValueError:
        try:
            number = float(value)
        except ValueError:
            raise HeraldInputError(f"--attr {text!r}: {value!r} is not a number; allowed: a finite number or empty") from None
    if not math.isfinite(number):
        raise HeraldInputError(f"--attr {text!r}: {value!r} is not finite; leave the bound empty for no bound")
    return number


def record_of(args: argparse.Namespace, streams: list[str], now: datetime | None = None) -> HeraldRecord:
    """The herald the command line describes, checked; ``HeraldInputError`` names what is wrong."""
    if args.stream not in streams:
        raise HeraldInputError(f"no stream {args.stream!r} in the configuration's plan; streams: {', '.join(streams) or 'none'}")
    patterns: dict[str, tuple[Bound, Bound]] = {}
    for text in args.attr:
        name, bounds = parse_attr(text)
        if name in patterns:
            raise HeraldInputError(f"--attr {name} given twice; give one range per attribute")
        patterns[name] = bounds
    try:
        return HeraldRecord(args.stream, patterns, now or datetime.now(timezone.utc),
                            count=args.count, seconds=args.seconds, source="cli")
    except InvalidHerald as exc:
        raise HeraldInputError(str(exc)) from None


def as_json(record: HeraldRecord) -> dict[str, Any]:
    return {"id": record.id, "stream": record.stream, "patterns": record.patterns_json(), "count": record.count,
            "seconds": record.seconds, "starts_at": record.starts_at.isoformat(), "source": record.source}


def as_text(record: HeraldRecord) -> str:
    ranges = ", ".join(f"{name}=[{_show(low)}, {_show(high)}]" for name, (low, high) in sorted(record.patterns.items()))
    life = f"next {record.count} tuples" if record.count is not None else f"{record.seconds:g} s from {record.starts_at.isoformat()}"
    return f"herald {record.id} on {record.stream}: {ranges} for the {life} ({record.source})"


def _show(bound: Bound) -> str:
    return "*" if bound is None else f"{bound:g}"


def dumps(records: list[HeraldRecord]) -> str:
    return json.dumps([as_json(r) for r in records], indent=2)
