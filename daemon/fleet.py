"""The fleet: the queries ``armd.agent`` applications registered, joined to the daemon's own in one policy problem.

Why: the daemon decides for every application in its store, with no Spark
session of its own for them. An agent registers each query with its
cost-model plan and the ranges the user allowed (``queries.spec``); this
module turns those rows into what the configuration gives for the daemon's
own queries — plan nodes and streams merged into the configured plan, a
``QueryQoS`` per query — so the cycle, admission and the policy see one
problem. The configuration stays the daemon's (``Controller.base``): its
own rows are synced from it, agent rows are never written back.

A query that cannot join (no plan, a plan or range the cost model refuses,
another time unit than the daemon's) stays out of the problem and is said
once, naming what is wrong (``agent_query_skipped``); it runs with its
initial settings in its application.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from armd.adapters.store.applications import GovernedQuery
from armd.costmodel.plan import PlanError, parse_plan
from armd.policies.problem import Problem
from armd.policies.qos import QoSError, QueryQoS

from .config import Config

UNIT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Fleet:
    """The agent queries in the problem and those left out (name → why)."""

    queries: tuple[GovernedQuery, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(q.name for q in self.queries)

    @property
    def recommend(self) -> frozenset[str]:
        """Queries whose application (or own declaration) asks for recommendations only."""
        return frozenset(q.name for q in self.queries if q.mode == "recommend")

    @property
    def streams(self) -> frozenset[str]:
        return frozenset(s for q in self.queries for s in (q.spec.get("plan") or {}).get("streams", {}))


def qos_of(query: GovernedQuery, unit: float) -> QueryQoS:
    """The ranges the user declared (seconds, per builder window name) as the policy's QoS (model units, node ids)."""
    spec = query.spec
    nodes = dict(spec.get("nodes") or {})
    windows = {nodes.get(n, f"{query.name}.{n}"): (float(lo) / unit, float(hi) / unit)
               for n, (lo, hi) in (spec.get("windows") or {}).items()}
    slides = [(float(lo) / unit, float(hi) / unit) for lo, hi in (spec.get("slides") or {}).values()]
    granularity = (max(hi for _lo, hi in slides), min(lo for lo, _hi in slides)) if slides else None
    return QueryQoS(windows=windows, granularity=granularity, weight=query.weight)


def _document(query: GovernedQuery) -> dict[str, Any]:
    """The query's plan document, reduced to its streams and this query's tree."""
    doc = query.spec.get("plan")
    if not isinstance(doc, dict) or not isinstance(doc.get("queries"), dict) or not doc["queries"]:
        raise ValueError(f"no cost-model plan (plan source {query.spec.get('plan_source', 'none')!r}); "
                         "give Agent(plan='plan.toml') so armd can size it")
    tree = doc["queries"].get(query.name)
    if tree is None:
        if len(doc["queries"]) != 1:
            raise ValueError(f"its plan has queries {sorted(doc['queries'])} but none named {query.name!r}")
        tree = next(iter(doc["queries"].values()))
    return {"streams": dict(doc.get("streams") or {}), "queries": {query.name: tree}}


def _alone(query: GovernedQuery, config: Config) -> tuple[dict[str, Any], QueryQoS]:
    unit = config.model.time_unit_seconds
    theirs = query.spec.get("time_unit_seconds")
    if theirs is not None and abs(float(theirs) - unit) > UNIT_TOLERANCE * unit:
        raise ValueError(f"its plan is in units of {float(theirs):g} s but the daemon's model.time_unit_seconds is {unit:g}; "
                         f"give Agent(time_unit_seconds={unit:g})")
    doc = _document(query)
    qos = qos_of(query, unit)
    Problem(parse_plan(doc), {query.name: qos})
    return doc, qos


def identity(query: GovernedQuery) -> tuple[str, str, str, str]:
    """What the query's part of the problem depends on (its status does not count)."""
    return query.name, query.app, query.mode, json.dumps([query.spec, query.weight], sort_keys=True, default=str)


def effective(config: Config, governed: list[GovernedQuery],
              checked: dict[tuple[str, str, str, str], Any] | None = None) -> tuple[Config, Fleet]:
    """``config`` with every agent query that can join merged into its plan and QoS; and the fleet taken.

    ``checked`` remembers each query's own check (by ``identity``) from one call to the next, so a fleet that grows
    by one application checks only that one's queries."""
    checked = {} if checked is None else checked
    streams = dict(config.plan_doc.get("streams") or {})
    queries = dict(config.plan_doc.get("queries") or {})
    qos = dict(config.qos)
    timings = dict(config.agent_timings)
    taken, skipped = [], {}
    for query in governed:
        if query.name in queries:
            skipped[query.name] = "the daemon's configuration has a query of that name"
            continue
        key = identity(query)
        if key not in checked:
            try:
                checked[key] = _alone(query, config)
            except (ValueError, PlanError, QoSError, KeyError, TypeError) as exc:
                checked[key] = str(exc)
        if isinstance(checked[key], str):
            skipped[query.name] = checked[key]
            continue
        doc, query_qos = checked[key]
        for name, stream in doc["streams"].items():
            streams.setdefault(name, stream)  # a stream name is one stream in the store; the configuration's wins
        queries[query.name] = doc["queries"][query.name]
        qos[query.name] = query_qos
        timings[query.name] = _timings(query.spec.get("plan") or {},
                                       float(query.spec.get("time_unit_seconds") or config.model.time_unit_seconds))
        taken.append(query)
    if not taken:
        return config, Fleet((), skipped)
    doc = {**config.plan_doc, "streams": streams, "queries": queries}
    try:
        plan = replace(parse_plan(doc), constants=config.plan.constants)
        Problem(plan, qos)
    except (PlanError, QoSError) as exc:  # e.g. two applications' plans name one node id: the fleet waits, the daemon goes on
        return config, Fleet((), {**skipped, **{q.name: f"the merged plan is refused: {exc}" for q in taken}})
    return replace(config, plan_doc=doc, plan=plan, qos=qos, agent_timings=timings), Fleet(tuple(taken), skipped)


def _timings(doc: Mapping[str, Any], unit: float) -> tuple[float, float]:
    """An agent plan's watermark delay and trigger interval, in seconds (its ``constants``, in its time unit)."""
    constants = doc.get("constants") or {}
    return (float(constants.get("watermark_delay") or 0.0) * unit, float(constants.get("trigger_interval") or 0.0) * unit)
