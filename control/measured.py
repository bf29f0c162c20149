"""Measured inputs of stateful operators in the cost model the cycle decides on: groups per window, bytes per state row.

Why a module of its own: the statistics source reports, per query and plan
node, a group model n(w) = base + growth·w for every aggregation and the
bytes per state row of every stateful operator (``QueryMetrics.group_models``
and ``bytes_per_row``, already smoothed by the source). They must reach the
model the way measured selectivities do: kept between ticks, compared with
the values the model was last built with, and the model rebuilt
(``costmodel.inputs.apply_measured``) when one has moved past the trigger
threshold. Rebuilding on every small wobble would throw away the policy's
incremental state for nothing.

A group model has two parameters, and growth is often 0; its drift is
judged on what the model uses, the groups at the longest window of the
node's query in the plan (n at that span, in seconds). Only nodes of the
plan with the matching operator are kept (aggregations for groups,
aggregations and joins for bytes per row), so a plan file that names
other nodes keeps working unchanged. Pure: no clock, no IO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Collection, Mapping, Sequence

from armd.costmodel.inputs import GroupModel, apply_measured
from armd.costmodel.plan import PlanSet
from armd.policies.triggers import RateTracker

from .ports import QueryMetrics

STATEFUL_OPS = ("aggregate", "join")
"""The operators ``apply_measured`` gives a measured bytes per row."""


@dataclass(frozen=True)
class MeasuredInputs:
    """The latest measured group models and bytes per row per plan node, and what the model was built with."""

    threshold: float = 0.2
    """Relative change that makes a rebuild due (the triggers' threshold)."""
    groups: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """Aggregation node → (base, growth) with the window in seconds, as last measured."""
    bytes_per_row: Mapping[str, float] = field(default_factory=dict)
    """Stateful node → bytes per state row, as last measured."""
    decided: Mapping[str, float] = field(default_factory=dict)
    """The drift keys' values the model was last built with (``groups:NODE`` at the reference span, ``bytes:NODE``)."""
    spans: Mapping[str, float] = field(default_factory=dict)
    """Aggregation node → the span in seconds its groups are compared at (longest window of its query)."""

    def observe(self, plan: PlanSet, metrics: Sequence[QueryMetrics], admitted: Collection[str],
                time_unit_seconds: float) -> MeasuredInputs:
        """Take the measurements of the admitted queries for nodes of ``plan`` with the right operator."""
        groups, per_row, spans = dict(self.groups), dict(self.bytes_per_row), dict(self.spans)
        for q in metrics:
            if q.query not in admitted or q.query not in plan.queries:
                continue
            own = set(plan.query_nodes(q.query))
            for node, (base, growth) in q.group_models.items():
                if node in own and plan.nodes[node].op == "aggregate" and _finite(base, growth):
                    groups[node] = (float(base), float(growth))
                    spans[node] = _reference_span(plan, q.query, time_unit_seconds)
            for node, value in q.bytes_per_row.items():
                if node in own and plan.nodes[node].op in STATEFUL_OPS and _finite(value) and value > 0:
                    per_row[node] = float(value)
        return replace(self, groups=groups, bytes_per_row=per_row, spans=spans)

    def current(self) -> dict[str, float]:
        """The drift keys' values now."""
        values = {f"groups:{n}": GroupModel(*m).at(self.spans.get(n, 1.0)) for n, m in self.groups.items()}
        values.update({f"bytes:{n}": v for n, v in self.bytes_per_row.items()})
        return values

    def drifted(self) -> frozenset[str]:
        """Drift keys whose value moved past the threshold since the model was built (or never used)."""
        tracker = RateTracker(threshold=self.threshold, smoothed=self.current(), decided=self.decided)
        return tracker.drifted()

    def decide_with(self) -> MeasuredInputs:
        """Record that the model is built with the current values."""
        return replace(self, decided=self.current())

    def apply(self, plan: PlanSet, time_unit_seconds: float) -> PlanSet:
        """``plan`` with the measured inputs in place of the declared ones (nodes it no longer has are skipped)."""
        if not (self.groups or self.bytes_per_row):
            return plan
        groups = {n: GroupModel(*m) for n, m in self.groups.items() if n in plan.nodes}
        return apply_measured(plan, groups, {n: v for n, v in self.bytes_per_row.items() if n in plan.nodes}, time_unit_seconds)

    def kept(self, nodes: Collection[str], threshold: float) -> MeasuredInputs:
        """After a reload: the measurements of ``nodes`` only, under the new threshold."""
        def keep(values: Mapping[str, float | tuple[float, float]]) -> dict:
            return {n: v for n, v in values.items() if n in nodes}

        return MeasuredInputs(threshold, keep(self.groups), keep(self.bytes_per_row),
                              {k: v for k, v in self.decided.items() if k.split(":", 1)[1] in nodes}, keep(self.spans))

    def as_json(self) -> dict[str, dict[str, object]]:
        """For the decision record: the measured inputs as last reported (the model holds them unless within the threshold)."""
        return {"groups": {n: {"base": b, "growth_per_second": g} for n, (b, g) in sorted(self.groups.items())},
                "bytes_per_row": dict(sorted(self.bytes_per_row.items()))}


def _reference_span(plan: PlanSet, query: str, time_unit_seconds: float) -> float:
    """The longest window of ``query`` in the plan, in seconds (1 s for a query without windows)."""
    sizes = [plan.nodes[n].w for n in plan.query_nodes(query) if plan.nodes[n].op == "window" and plan.nodes[n].w]
    return max(sizes, default=1.0 / time_unit_seconds) * time_unit_seconds


def _finite(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values)
