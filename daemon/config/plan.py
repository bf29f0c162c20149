"""The plan and what refers to it: the plan itself, its calibration and the QoS of its queries.

The plan is read first, since most other sections name its streams or
queries. Its own checks live in the core (``parse_plan``, ``Problem``,
``QueryQoS``); their errors are reported here under the key they concern —
a QoS mistake under ``queries.NAME`` when it belongs to one query.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from armd.costmodel.calibration import Calibration, CalibrationError, calibrated_plan
from armd.costmodel.plan import PlanError, PlanSet, parse_plan, unique_keys
from armd.policies.problem import Problem
from armd.policies.qos import QoSError, QueryQoS

from .errors import listing, reason
from .keys import into, keys_of
from .reader import Table
from .keys import YEAR
from .sections import PLAN_SIZE, ModelConfig, QueryKeys
from ..names import node_labels
from ..units import DURATION_EXAMPLES, format_duration, parse_duration

PLAN_KEYS = ("file", "streams", "queries", "constants")
"""``[plan]``: a plan file, or the plan document inline (docs/plan-format.md)."""


def read_plan(top: Table) -> tuple[dict[str, Any], PlanSet]:
    """The plan document as written and the validated plan."""
    if "plan" not in top.raw:
        raise top.error(
            ("plan",),
            'missing; give [plan] with file = "PLAN.json" or inline [plan.streams.*] and [plan.queries.*] '
            '(with source.kind = "spark" and a [managed.NAME] builder per query it may be left out: armd derives it)',
        )
    t = top.table("plan", PLAN_KEYS)
    inline = {k: v for k, v in t.raw.items() if k != "file"}
    if ("file" in t.raw) == bool(inline):
        wrong = "both file and inline plan tables given" if inline else "no plan given"
        raise t.error(
            (),
            f'{wrong}; allowed: exactly one of file = "PLAN.json" or inline [plan.streams.*] and [plan.queries.*]',
        )
    name = None
    if inline:
        doc = inline
    else:
        name = t.string("file")
        plan_path = t.file.parent / name
        try:
            text = plan_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise t.error(
                ("file",),
                f"cannot read plan file {str(plan_path)!r}: {reason(exc)}; allowed: a plan file (.json or .toml), "
                "relative to the configuration's folder",
            ) from None
        try:
            doc = tomllib.loads(text) if plan_path.suffix == ".toml" else json.loads(text, object_pairs_hook=unique_keys)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError, PlanError) as exc:
            kind = "TOML" if plan_path.suffix == ".toml" else "JSON"
            raise t.error(("file",), f"plan file {name!r} is not valid {kind}: {exc}; see docs/plan-format.md") from None
    try:
        return doc, parse_plan(doc)
    except PlanError as exc:
        where = f"plan file {name!r}: " if name else ""
        raise t.error((), f"{where}{exc}") from None


def calibrate(top: Table, plan: PlanSet, model: ModelConfig) -> PlanSet:
    """``plan`` with the constants of ``model.calibration`` (a file written by ``armd calibrate``), if any."""
    if model.calibration is None:
        return plan
    name = model.calibration
    path = top.file.parent / name
    where = top.section("model", ModelConfig)
    try:
        calibration = Calibration.from_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise where.error(("calibration",), f"cannot read calibration file {str(path)!r}: {reason(exc)}; "
                                            "write one with armd calibrate (relative to the configuration's folder)") from None
    except CalibrationError as exc:
        raise where.error(("calibration",), f"{name!r}: {exc}; write it again with armd calibrate") from None
    return calibrated_plan(plan, calibration)


def read_queries(top: Table, plan: PlanSet, time_unit_seconds: float = 1.0) -> dict[str, QueryQoS]:
    """``[queries.NAME]``: the QoS of each query that has one, checked against the plan.

    A range's ends are model time units, or durations (``"10 minutes"``) turned into them; either way at most
    a year, since the policy's trial sizes grow linearly over the range.
    """
    qos: dict[str, QueryQoS] = {}
    longest = YEAR / time_unit_seconds
    labels = node_labels(plan)
    for name, raw in top.mapping("queries").items():
        if name not in plan.queries:
            raise top.error(("queries", name), f"not a query of the plan; plan queries: {listing(plan.queries)}")
        t = Table(top.file, ("queries", name), _in_model_units(top, name, raw, time_unit_seconds), keys_of(QueryKeys))
        per_node = t.mapping("windows")
        w = Table(top.file, (*t.key, "windows"), per_node, per_node)
        # A window may be named as armd shows it (``views`` for the unnamed ``clicks_per_view.1``).
        by_label = {labels[n]: n for n in plan.query_nodes(name) if labels[n] != n}
        windows = {by_label.get(node, node): w.pair(node, PLAN_SIZE) for node in per_node}
        values = t.read(QueryKeys, windows=windows)
        ranges = [(("window",), values["window"]), (("granularity",), values["granularity"]),
                  *((("windows", node), pair) for node, pair in windows.items())]
        for key, pair in ranges:
            if pair is not None and max(pair) > longest:
                raise t.error(key, f"{max(pair):g} model time units is {format_duration(max(pair) * time_unit_seconds)}; "
                                   f"allowed: at most a year ({longest:g} units of {time_unit_seconds:g} s)")
        qos[name] = into(QueryQoS, QueryKeys, values)
    try:
        Problem(plan, qos)
    except QoSError as exc:
        if exc.query in qos:
            raise top.error(("queries", exc.query), exc.detail) from None
        raise top.error(("queries",), str(exc)) from None
    return qos


def _in_model_units(top: Table, query: str, raw: Any, unit: float) -> Any:
    """``raw`` with every duration in its ranges (``window``, ``windows.*``, ``granularity``) as model time units."""
    if not isinstance(raw, dict):
        return raw

    def pair(key: tuple[str, ...], value: Any) -> Any:
        if not (isinstance(value, list) and any(isinstance(v, str) for v in value)):
            return value
        converted = []
        for v in value:
            seconds = parse_duration(v) if isinstance(v, str) else None
            if isinstance(v, str) and not seconds:
                raise top.error(("queries", query, *key), f"expected [min, max] as model time units or durations such "
                                                          f"as {DURATION_EXAMPLES}, got {v!r}")
            converted.append(seconds / unit if seconds else v)
        return converted

    result = dict(raw)
    for key in ("window", "granularity"):
        if key in result:
            result[key] = pair((key,), result[key])
    if isinstance(result.get("windows"), dict):
        result["windows"] = {node: pair(("windows", node), v) for node, v in result["windows"].items()}
    return result
