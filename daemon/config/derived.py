"""The plan derived from the managed queries' builders, when the configuration gives no ``[plan]``.

With ``source.kind = "spark"`` and a builder for every query, armd reads
each query's analyzed plan from Spark (``armd.adapters.spark.derive``) and
builds the plan from them; a ``[plan]`` remains an override. The model's
time unit must be a millisecond or finer (Spark's event time is in ms, and
formula 7 stretches every window by one unit). Deriving needs
a Spark session, so ``check-config`` starts one too (the session is reused
by the daemon): what it accepts is what the daemon runs.

A query whose plan cannot be derived (an operator the model does not know)
is not refused: it runs *unmanaged* — armd starts it with its initial
settings and never changes it — and the daemon reports
``plan_derivation_failed`` with the one-line reason. Recommend-only would
need a model of the query, which is exactly what is missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from armd.costmodel.plan import PlanError, PlanSet, parse_plan

from .errors import listing, reason
from .keys import keys_of
from .reader import Table
from .sections import ManagedQueryConfig, ModelConfig, SparkConfig

BUILDER_KEYS = ("builder", "trigger_seconds", "watermark_delay_seconds")

FINEST_SPARK_SECONDS = 0.001
"""Spark's event time is in milliseconds: the coarsest model time unit a derived plan may use."""


@dataclass(frozen=True)
class DerivedPlan:
    doc: dict[str, Any]
    plan: PlanSet
    derivations: Mapping[str, Any] = field(default_factory=dict)
    """Query → ``Derivation`` (its Spark operators, measured placeholders, builder names → node ids)."""
    unmanaged: Mapping[str, str] = field(default_factory=dict)
    """Query → why its plan could not be derived (it runs unmanaged)."""


def wants_derivation(top: Table) -> bool:
    """No ``[plan]``, Spark as the source and at least one ``[managed.NAME]``."""
    source = top.raw.get("source")
    return "plan" not in top.raw and isinstance(source, dict) and source.get("kind") == "spark" and bool(top.raw.get("managed"))


def synthetic_sources(top: Table) -> dict[str, dict[str, Any]]:
    """``armd-synthetic`` options of every ``[source.streams.NAME]`` (enough to build the queries, not to run them)."""
    raw = top.raw.get("source", {}).get("streams") or {}
    sources: dict[str, dict[str, Any]] = {}
    for name, spec in raw.items():
        spec = spec if isinstance(spec, dict) else {}
        rate = spec.get("rate_per_second")
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate <= 0:
            raise top.error(("source", "streams", name, "rate_per_second"),
                            f"missing or not a number > 0 (got {rate!r}); without a [plan] every stream needs its rate")
        sources[name] = {"start": "0", "schedule": json.dumps({"rate_per_second": float(rate), "steps": [], "bursts": []}),
                         "keys": spec.get("keys", 1), "all_streams": ",".join(raw)}
    return sources


def params_for(values: Mapping[str, Any], sources: Mapping[str, Any], nodes: Mapping[str, str] | None = None) -> Any:
    """The ``QueryParams`` a managed query's builder is built with, as the daemon gives them (``wiring.spark_runtime``)."""
    from armd.adapters.spark.managed import QueryParams

    extra = {"sources": dict(sources), "delay_seconds": values["watermark_delay_seconds"],
             "trigger_seconds": values["trigger_seconds"], "nodes": dict(nodes or {}), **values.get("params", {})}
    return QueryParams(extra=extra)


def derive_plan(top: Table, model: ModelConfig, spark: SparkConfig) -> DerivedPlan:
    """Derive every ``[managed.NAME]`` query's plan on a local Spark session; one plan for all of them."""
    from armd.adapters.spark.derive import DerivationError, derive_builder, plan_document
    from armd.adapters.spark.session import build_session

    if model.time_unit_seconds > FINEST_SPARK_SECONDS:
        # Formula 7 gives a window's elements w + 1 time units of validity: in seconds every window would be
        # estimated a second longer than Spark keeps it (a 2 s window 50 % too large).
        raise top.error(("model", "time_unit_seconds"), f"{model.time_unit_seconds:g} s is too coarse for a plan derived "
                        "from Spark: the model adds one time unit to every window, so windows would be estimated up to a "
                        f"unit longer than Spark keeps them; allowed: {FINEST_SPARK_SECONDS:g} s (the default) or finer "
                        "(remove the key), or give a [plan] file")
    sources = synthetic_sources(top)
    session = build_session(spark.master, spark.app_name, spark.conf, state_store=spark.state_store)
    derivations: dict[str, Any] = {}
    unmanaged: dict[str, str] = {}
    for name, raw in top.mapping("managed").items():
        t = Table(top.file, ("managed", name), raw, keys_of(ManagedQueryConfig))
        values = t.read(ManagedQueryConfig, keys=BUILDER_KEYS)
        values["params"] = dict(t.mapping("params"))
        streams = t.value("streams", [], "a list of stream names")
        if not (isinstance(streams, list) and all(isinstance(x, str) for x in streams)):
            raise t.error(("streams",), f"expected a list of stream names, one per Spark source in Spark's order, got {streams!r}")
        try:
            derivations[name] = derive_builder(session, values["builder"], name, params_for(values, sources),
                                               trigger_seconds=values["trigger_seconds"],
                                               time_unit_seconds=model.time_unit_seconds, streams=streams)
        except DerivationError as exc:
            unmanaged[name] = str(exc)
        except Exception as exc:  # the user's builder failed: one line, no traceback
            raise t.error(("builder",), f"building the query to derive its plan failed: {type(exc).__name__}: "
                                        f"{reason(exc)}; without a [plan] the builder must build with the "
                                        f"configuration's streams ({listing(sources)})") from None
    if not derivations:
        first = next(iter(unmanaged.items()), ("?", ""))
        raise top.error(("managed", first[0]), f"no query's plan could be derived ({first[1]}); give a [plan] file")
    doc = plan_document(list(derivations.values()))
    try:
        plan = parse_plan(doc)
    except PlanError as exc:
        raise top.error(("managed",), f"the derived plan is not valid: {exc}; give a [plan] file") from None
    return DerivedPlan(doc, plan, derivations, unmanaged)
