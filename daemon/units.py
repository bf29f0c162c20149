"""Durations and sizes as people write and read them.

People budget in "10 minutes" and "512 MiB", not in model time units and
bytes; the cost model works in plain numbers. This module is the one place
that turns the first into the second (reading the configuration and the
CLI's ``--since``) and back (every table armd prints, every plot axis).

Bytes use one system everywhere: IEC (KiB = 1024 B, MiB, GiB, TiB). Reading
also takes SI sizes as written (``850 kB`` is 850 000 bytes), because that is
what the user meant, but armd never prints them. Durations accept what
``pytimeparse2`` parses (``30s``, ``1h30m``, ``10 minutes``, ``1.5 hours``)
and Spark's interval syntax (``interval 10 minutes``, ``2 hours 30 minutes``).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

import humanfriendly
from pytimeparse2 import parse as _parse_timespan

DURATION_EXAMPLES = '"30s", "10 minutes", "1h30m" or "interval 2 hours"'
SIZE_EXAMPLES = '"512 MiB", "2 GiB" or "850 kB"'
IEC_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def parse_duration(text: str) -> float | None:
    """Seconds in ``text`` (``None`` when it is no duration); a bare number is seconds."""
    cleaned = re.sub(r"^\s*interval\s+", "", text.strip(), flags=re.IGNORECASE)
    # Spark writes "1 hour 30 minutes"; pytimeparse2 wants the parts without words in between, which is that.
    try:
        seconds = _parse_timespan(cleaned)
    except (ValueError, OverflowError, ArithmeticError):
        return None
    if seconds is None:
        return None
    seconds = float(seconds.total_seconds() if isinstance(seconds, timedelta) else seconds)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def parse_size(text: str) -> float | None:
    """Bytes in ``text`` (``512 MiB``, ``850 kB``, ``1024``); ``None`` when it is no size."""
    try:
        value = float(humanfriendly.parse_size(text.strip()))
    except (humanfriendly.InvalidSize, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def format_size(value: float | None) -> str:
    """``value`` bytes in IEC units with three significant digits: ``1.5 MiB``, ``812 B``."""
    if value is None:
        return "—"
    for unit, size in IEC_UNITS:
        if abs(value) >= size:
            return f"{_digits(value / size)} {unit}"
    return f"{value:.0f} B"


def _digits(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


_PARTS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0))


def format_duration(seconds: float | None) -> str:
    """Compact: ``10m``, ``1h30m``, ``2d4h``, ``45s``, ``250ms``; at most two parts, the rest rounded off."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 60 and seconds != int(seconds):
        return f"{seconds:.3g}s"
    parts, rest = [], round(seconds)
    for unit, size in _PARTS:
        if rest >= size and len(parts) < 2:
            count = int(rest // size)
            parts.append(f"{count}{unit}")
            rest -= count * size
        elif parts:
            break  # never "1d0h5s": the parts shown are adjacent
    return "".join(parts)


def instant(at: datetime | str | None) -> str:
    """A wall-clock instant as people read it: ``2026-11-24 05:31:07 UTC`` (``—`` when unknown)."""
    if at is None:
        return "—"
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return at
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
