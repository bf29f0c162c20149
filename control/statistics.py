"""Statistics checked at the port: what a source may report, and what is done with a value outside that.

Why: a rate, an inter-arrival time, a selectivity or a state size that is NaN,
infinite, zero or negative was stored raw or fed to the cost model, and a
selectivity of 5 triggered a decision. Every observation now passes through
``screen`` before the controller uses it: values outside their domain are
taken out (and listed), so nothing rejected reaches the model or the store
as a number. Pure: no clock, no IO.

The domains, in one place (``d``, ``l``, ``g`` in model time units):

========================  ==============================================================
stream ``rows``           a whole number ≥ 0
stream ``interval``       finite, ≥ 0 seconds (0: the first observation, at the start)
stream ``rate``           finite, ≥ 0 per second; > 0 when rows arrived
stream ``d``              > 0; finite when rows arrived, ``inf`` allowed when none did
stream ``l``, ``g``       absent, or finite and > 0
query ``state_rows``      absent, or a whole number ≥ 0 (an empty window holds 0 rows)
query ``state_bytes``     absent, or finite and ≥ 0; > 0 when ``state_rows`` > 0
query selectivities       finite, in (0, 1] (docs/cost-model.md: formulas (1), (2))
query pair selectivities  finite, in (0, 1] (the fraction of key pairs that match)
query bytes per row       finite, > 0 per node (memoryUsedBytes / numRowsTotal)
query group models        per node a pair (base, growth), both finite and ≥ 0 (n(w) = base + growth·w)
query herald skips        in [0, 1] per node (the share of evaluation work heralds skipped; 0: none)
========================  ==============================================================

A stream with any value outside its domain is dropped from the observation
as a whole (its rate, ``d`` and row count describe one interval together);
a query keeps its other values, the rejected one becomes absent. Engine
batches are the engine's own report, stored for calibration as they came.
"""

from __future__ import annotations

import math
from datetime import datetime
from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from .ports import EventRecord, Observation, QueryMetrics, StreamStats


@dataclass(frozen=True)
class Rejection:
    """One value taken out of an observation."""

    subject: str
    """``stream`` or ``query``."""
    name: str
    """The stream's or the query's name."""
    field: str
    """``rate_per_second``, ``d``, ``state_bytes``, ``selectivities.NODE``, ``pair_selectivities.A,B``, …"""
    value: Any
    reason: str
    """The domain it is outside of."""

    def as_json(self) -> dict[str, Any]:
        value = self.value
        shown = value if isinstance(value, (int, str)) or (isinstance(value, float) and math.isfinite(value)) else repr(value)
        return {"subject": self.subject, "name": self.name, "field": self.field, "value": shown, "reason": self.reason}


class Screened(NamedTuple):
    """What ``screen`` returns; unpacks as ``observation, rejected``."""

    observation: Observation
    """The observation without the rejected values."""
    rejected: tuple[Rejection, ...]


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and not math.isnan(value)


def _whole(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


Check = Callable[[Any], bool]
WHOLE_AT_LEAST_0: tuple[Check, str] = (lambda v: _whole(v) and v >= 0, "a whole number ≥ 0")
FINITE_AT_LEAST_0: tuple[Check, str] = (lambda v: _number(v) and math.isfinite(v) and v >= 0, "finite and ≥ 0")
FINITE_POSITIVE: tuple[Check, str] = (lambda v: _number(v) and math.isfinite(v) and v > 0, "finite and > 0")
POSITIVE_OR_INF: tuple[Check, str] = (lambda v: _number(v) and v > 0, "> 0 (inf when nothing arrived)")
FRACTION: tuple[Check, str] = (lambda v: _number(v) and 0 < v <= 1, "in (0, 1]")
SHARE: tuple[Check, str] = (lambda v: _number(v) and 0 <= v <= 1, "in [0, 1]")
GROUP_MODEL: tuple[Check, str] = (lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(FINITE_AT_LEAST_0[0](x) for x in v),
                                  "(base, growth), both finite and ≥ 0")


def screen(observation: Observation) -> Screened:
    """``observation`` without the values outside their domain (see the module), and what was taken out."""
    rejected: list[Rejection] = []
    streams = []
    for stats in observation.streams:
        found = _stream(stats)
        rejected += found
        if not found:
            streams.append(stats)
    queries = []
    for metrics in observation.queries:
        found, kept = _query(metrics)
        rejected += found
        queries.append(kept)
    if not rejected:
        return Screened(observation, ())
    return Screened(replace(observation, streams=tuple(streams), queries=tuple(queries)), tuple(rejected))


def _stream(s: StreamStats) -> list[Rejection]:
    out: list[Rejection] = []

    def check(field: str, value: Any, domain: tuple[Check, str]) -> bool:
        ok, text = domain
        if not ok(value):
            out.append(Rejection("stream", s.stream, field, value, text))
            return False
        return True

    rows_ok = check("rows", s.rows, WHOLE_AT_LEAST_0)
    check("interval_seconds", s.interval_seconds, FINITE_AT_LEAST_0)
    arrived = rows_ok and s.rows > 0
    check("rate_per_second", s.rate_per_second, FINITE_POSITIVE if arrived else FINITE_AT_LEAST_0)
    check("d", s.d, FINITE_POSITIVE if arrived else POSITIVE_OR_INF)
    for field in ("l", "g"):
        value = getattr(s, field)
        if value is not None:
            check(field, value, FINITE_POSITIVE)
    return out


def _query(q: QueryMetrics) -> tuple[list[Rejection], QueryMetrics]:
    out: list[Rejection] = []
    changes: dict[str, Any] = {}

    def bad(field: str, value: Any, domain: tuple[Check, str]) -> bool:
        ok, text = domain
        if ok(value):
            return False
        out.append(Rejection("query", q.query, field, value, text))
        return True

    if q.state_rows is not None and bad("state_rows", q.state_rows, WHOLE_AT_LEAST_0):
        changes["state_rows"] = None
    rows = changes.get("state_rows", q.state_rows)
    if q.state_bytes is not None and bad("state_bytes", q.state_bytes, FINITE_POSITIVE if rows else FINITE_AT_LEAST_0):
        changes["state_bytes"] = None
    for field in ("selectivities", "pair_selectivities"):
        values: Mapping[str, float] = getattr(q, field)
        kept = {key: value for key, value in values.items() if not bad(f"{field}.{key}", value, FRACTION)}
        if len(kept) != len(values):
            changes[field] = kept
    per_row = {key: value for key, value in q.bytes_per_row.items() if not bad(f"bytes_per_row.{key}", value, FINITE_POSITIVE)}
    if len(per_row) != len(q.bytes_per_row):
        changes["bytes_per_row"] = per_row
    skips = {key: value for key, value in q.herald_skips.items() if not bad(f"herald_skips.{key}", value, SHARE)}
    if len(skips) != len(q.herald_skips):
        changes["herald_skips"] = skips
    groups = {key: model for key, model in q.group_models.items() if not bad(f"group_models.{key}", model, GROUP_MODEL)}
    if len(groups) != len(q.group_models):
        changes["group_models"] = groups
    return out, (replace(q, **changes) if changes else q)


def rejected_event(at: datetime, rejected: Sequence[Rejection]) -> EventRecord:
    """The ``statistics_rejected`` warning for one observation's rejections (the first five named in the message)."""
    named = "; ".join(f"{r.subject} {r.name} {r.field} = {r.as_json()['value']} (must be {r.reason})" for r in rejected[:5])
    return EventRecord(at, "statistics_rejected", "warning", f"{len(rejected)} statistics outside their domain were dropped: {named}",
                       None, {"rejected": [r.as_json() for r in rejected]})
