"""Measured inputs of stateful operators: groups per window and bytes per state row, smoothed.

Why here: a plan file used to carry a constant ``groups`` per aggregation
and a hand-calibrated ``size`` per element. Both are properties of the data
and the engine, not of the query, and both can be measured while the query
runs. These estimators turn what was measured into the model's inputs; they
are pure (the Spark adapter counts, see ``adapters/spark/instrument.py``)
and know nothing of Spark.

**Groups as a function of the window.** Where keys drift (auction, session
or user ids), the groups alive in a window grow with the window, so a
constant is wrong for every window size but the one it was measured at. We
model the distinct keys in a window of length w as

    n(w) = base + growth·w

``base`` is the keys alive at any instant, ``growth`` the rate at which new
keys appear. In the terms of consecutive slides of length s — n₁ distinct
keys per slide and a share ρ of them already seen in the previous slide —
this is n(k·s) = n₁ + (k − 1)·n₁·(1 − ρ), i.e. growth = n₁·(1 − ρ)/s and
base = n₁ − growth·s (``GroupModel.from_slides``). Keys from a fixed set
that are all seen in every slide give growth = 0: the constant count.

The fit takes points (span, distinct keys over that span), one per number
of consecutive batches united (the adapter merges the batches' distinct-
count sketches, so one run yields n at 1, 2, …, k batch spans), and solves
non-negative least squares for (base, growth). Measuring over several spans
is what makes the model valid for window sizes other than the current one.

**Bytes per state row** per stateful operator: Σ memoryUsedBytes / Σ
numRowsTotal over an interval's batches (weighted by rows), smoothed across
intervals like the rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

import numpy as np
from scipy.optimize import nnls

from .plan import Node, PlanSet

__all__ = ["GroupModel", "Smoothed", "apply_measured", "fit_group_model", "per_row"]


@dataclass(frozen=True)
class GroupModel:
    """Distinct groups alive in a window of length w: base + growth·w (never below one group)."""

    base: float
    growth: float
    """New groups per time unit (the unit of the spans it was fitted on)."""

    def at(self, w: float) -> float:
        return max(1.0, self.base + self.growth * max(w, 0.0))

    @classmethod
    def from_slides(cls, per_slide: float, overlap: float, slide: float) -> GroupModel:
        """From n₁ distinct keys per slide of length ``slide`` and the share ``overlap`` of them seen in the previous one."""
        if not (per_slide >= 0 and 0 <= overlap <= 1 and slide > 0):
            raise ValueError(f"need per_slide ≥ 0, overlap in [0, 1], slide > 0; got {per_slide}, {overlap}, {slide}")
        growth = per_slide * (1 - overlap) / slide
        return cls(per_slide - growth * slide, growth)

    def scaled(self, time_unit: float) -> GroupModel:
        """The same model with spans measured in units ``time_unit`` times as long (e.g. seconds → ms: 1/1000)."""
        return GroupModel(self.base, self.growth / time_unit)

    def as_plan(self) -> dict[str, float]:
        """The plan document's form of an aggregate's ``groups``."""
        return {"base": self.base, "growth": self.growth}


def fit_group_model(points: Iterable[tuple[float, float]]) -> GroupModel | None:
    """(span, distinct keys over that span) → the least-squares n(w) = base + growth·w with both ≥ 0.

    Points without a positive span or with a non-finite count are ignored;
    None when nothing is left. With one span only, the slope cannot be
    learnt: the count is taken as constant (growth 0).
    """
    kept = [(float(w), float(n)) for w, n in points if w > 0 and math.isfinite(w) and math.isfinite(n) and n >= 0]
    if not kept:
        return None
    spans = {w for w, _ in kept}
    if len(spans) == 1:
        return GroupModel(sum(n for _, n in kept) / len(kept), 0.0)
    w = np.array([p[0] for p in kept])
    n = np.array([p[1] for p in kept])
    scale = w.max()
    (base, slope), _ = nnls(np.column_stack([np.ones_like(w), w / scale]), n)
    return GroupModel(float(base), float(slope / scale))


def per_row(samples: Iterable[tuple[float, float]]) -> float | None:
    """Σ bytes / Σ rows over (bytes, rows) samples with rows (an operator's state, batch by batch); None without any."""
    total_bytes = total_rows = 0.0
    for state_bytes, rows in samples:
        if rows > 0 and math.isfinite(state_bytes) and state_bytes >= 0:
            total_bytes += state_bytes
            total_rows += rows
    return total_bytes / total_rows if total_rows else None


class Smoothed:
    """Exponentially smoothed values by name: the first value is taken as is, later ones weigh ``alpha``.

    The same smoothing the control cycle applies to rates, for inputs the
    cycle does not see (bytes per row, group models' parameters).
    """

    def __init__(self, alpha: float = 0.3) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.alpha = alpha
        self.values: dict[str, float] = {}

    def update(self, name: str, value: float | None) -> float | None:
        """Fold a new measurement in (None or non-finite: nothing learnt, keep the old value) and return the smoothed one."""
        if value is not None and math.isfinite(value):
            old = self.values.get(name)
            self.values[name] = value if old is None else old + self.alpha * (value - old)
        return self.values.get(name)

    def model(self, name: str, model: GroupModel | None) -> GroupModel | None:
        """Smooth a group model parameter by parameter under ``name``."""
        base = self.update(f"{name}.base", model.base if model else None)
        growth = self.update(f"{name}.growth", model.growth if model else None)
        return None if base is None or growth is None else GroupModel(base, growth)


def apply_measured(plan: PlanSet, groups: Mapping[str, GroupModel], bytes_per_row: Mapping[str, float],
                   time_unit_seconds: float = 1.0) -> PlanSet:
    """The plan with measured inputs in place of the declared ones, node by node.

    ``groups``: aggregation node → model with w in seconds (as measured); it
    becomes the node's ``{"base", "growth"}`` in the plan's time unit.
    ``bytes_per_row``: stateful node → bytes per state row; an aggregation
    takes it as its ``size``, a join as the size of each of its inputs (a
    projection of that size is put in front of each side), so the node's
    state costs its rows times the measured figure. Unknown node ids are
    ignored (the plan may not have that node any more).
    """
    nodes: dict[str, Node] = {}
    granularities = dict(plan.granularities)
    for node_id, node in plan.nodes.items():
        if node.op == "aggregate":
            model = groups.get(node_id)
            if model is not None:
                scaled = model.scaled(1.0 / time_unit_seconds)
                node = replace(node, groups=scaled.base, group_growth=scaled.growth)
            if bytes_per_row.get(node_id):
                node = replace(node, size=float(bytes_per_row[node_id]))
        elif node.op == "join" and bytes_per_row.get(node_id):
            sides = []
            for side, input_id in zip(("left", "right"), node.inputs):
                proxy = f"{node_id}.{side}.bytes"
                nodes[proxy] = Node(proxy, "project", (input_id,), size=float(bytes_per_row[node_id]))
                granularities[proxy] = plan.granularities.get(input_id, 1.0)
                sides.append(proxy)
            node = replace(node, inputs=tuple(sides))
        nodes[node_id] = node
    return replace(plan, nodes=nodes, granularities=granularities, _members={}, _position={})
