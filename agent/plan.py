"""The cost-model plan an application registers with each query: derived from the DataFrame, else a plan file.

Why: the daemon decides on the cost model, so it needs each agent query's
plan. ``adapters/spark/derive`` reads it off Spark's analyzed plan without
running the query; when that fails (an operator it does not map) the
application's plan file (``Agent(plan=...)``, docs/plan-format.md) stands
in, and without one the query is registered without a plan and a warning
says so: it then runs with its initial settings and armd cannot size it.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from armd.adapters.spark.managed import QueryParams

from .settings import AgentError


@dataclass(frozen=True)
class PlanInfo:
    document: dict[str, Any] | None
    source: str
    """``derived``, ``file:PATH`` or ``none``."""
    nodes: dict[str, str] = field(default_factory=dict)
    """Builder window name, and every other label of a derived plan (``agg1``, ``f1``…) → plan node id."""
    delay_seconds: float | None = None
    """The smallest watermark delay of the query's streams, read off its plan (None: not derived). GenMig bounds a
    run's next watermark with it when it decides whether a migration may be superseded (docs/genmig.md); the
    smallest, because the bound must hold whichever stream's watermark is in force."""

    def apply(self, params: QueryParams) -> QueryParams:
        """``params`` with its windows keyed by this plan's node ids, and the watermark delay unless given."""
        if self.delay_seconds is not None and "delay_seconds" not in params.extra:
            params = replace(params, extra={**params.extra, "delay_seconds": self.delay_seconds})
        if not self.nodes:
            return params
        old = dict(params.extra.get("nodes") or {})
        nodes = {**old, **self.nodes}
        windows = {nodes.get(name, node): params.windows[node] for name, node in old.items() if node in params.windows}
        return replace(params, windows=windows, extra={**params.extra, "nodes": nodes})


def describe(spark: Any, builder: Callable[[Any, QueryParams], Any], declared: Any, params: QueryParams,
             time_unit_seconds: float, plan_file: Path | None, log: Any) -> PlanInfo:
    from armd.adapters.spark.derive import derive_builder

    try:
        derivation = derive_builder(spark, builder, declared.name, params, time_unit_seconds=time_unit_seconds,  # type: ignore[arg-type]
                                    streams=declared.streams)
        # Every label of the instrumented query: the measurements (groups, bytes per row) arrive under them.
        nodes = {**derivation.nodes, **{n: derivation.nodes.get(n, f"{declared.name}.{n}") for n in declared.windows}}
        delays = derivation.watermark_delays.values()
        return PlanInfo(derivation.document, "derived", nodes, min(delays) if delays else None)
    except Exception as exc:  # noqa: BLE001 - any failure to derive falls back to the plan file
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
    if plan_file is not None:
        return PlanInfo(read_plan_file(plan_file), f"file:{plan_file}")
    log.warning("plan_not_derived", query=declared.name, reason=why,
                hint="give Agent(plan='plan.toml') so armd can size the query; it runs with its initial settings meanwhile")
    return PlanInfo(None, "none")


def read_plan_file(path: Path) -> dict[str, Any]:
    """A plan document from TOML or JSON; ``AgentError`` naming the file and what is wrong."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise AgentError(f"plan file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise AgentError(f"plan file {str(path)!r} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    if not isinstance(doc, dict) or "queries" not in doc:
        raise AgentError(f"plan file {str(path)!r} has no [queries] table (docs/plan-format.md)")
    return doc
