"""What heralds save an operator, in the cost model's terms (paper 002 §VII, equation 9).

The paper prices a workload processed with heralds as the regular cost, plus
an overhead per herald (PredSAT on its arrival and one control-table lookup
per partition), minus the work of the operators that heralds let skip. armd's
cost model prices rates rather than workloads, so the same equation reads per
unit of time: an operator whose plan node carries ``heralds`` costs its
regular CPU, minus the fraction ``skip`` of its evaluation work that heralds
prove unnecessary, plus ``overhead`` predicate evaluations (``C_P``) per
herald, one herald per ``partition`` input tuples. Heralds never change an
operator's output (the optimisations are exact), so the output formulas and
the memory are untouched; only the CPU the policy sees changes.

What ``skip`` covers per operator:

* ``select`` — the input tuples in partitions that are dropped (select data
  skipping) or passed unevaluated (select elimination): formula §3.5's
  predicate evaluations for them go;
* ``join`` — the probe work (formula 12's comparisons) of partition pairs
  proven empty (join data skipping); inserting, purging and producing the
  results stay.

``skip`` is declared in the plan until the running operators measure it:
the multi-modal select counts the tuples it skipped or passed, the batch
join the probe work it skipped (``skip_fraction`` of each), and
``measured_effect`` / ``apply_herald_measures`` put the measured fraction
(and the tuples per herald actually seen) in place of the declared ones, so
the policy prices the savings the heralds really bring.

``overhead`` defaults to 150 predicate evaluations per herald: on the
single-process host a PredSAT decision costs 14–25 µs and one predicate
evaluation about 0.1–0.2 µs (``bench/heralds.py``, docs/heralds.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping

from .constants import CostConstants
from .characteristics import Stream

if TYPE_CHECKING:  # plan.py imports this module for HeraldEffect
    from .plan import PlanSet

DEFAULT_OVERHEAD = 150.0
"""Predicate evaluations (``C_P``) one herald costs: PredSAT, the configurator, the control-table entry."""
DEFAULT_PARTITION = 50.0
"""Input tuples per herald: the paper's average partition."""


@dataclass(frozen=True)
class HeraldEffect:
    """A plan node's ``heralds`` parameter: the fraction of evaluation work skipped, tuples per herald, cost per herald."""

    skip: float
    partition: float = DEFAULT_PARTITION
    overhead: float = DEFAULT_OVERHEAD


def herald_cpu(cpu: float, evaluation: float, inputs: list[Stream], effect: HeraldEffect, k: CostConstants) -> float:
    """Equation 9 per unit of time: ``cpu`` less ``skip`` × ``evaluation`` (the skippable part of ``cpu``),
    plus the heralds' overhead over the operator's input rate."""
    heralds_per_time = sum(s.rate for s in inputs) / effect.partition
    return max(cpu - effect.skip * evaluation, 0.0) + heralds_per_time * effect.overhead * k.C_P


def measured_effect(declared: HeraldEffect | None, skip: float, tuples: int = 0, heralds: int = 0) -> HeraldEffect:
    """The node's herald effect with a measured ``skip`` (and, when ``heralds`` > 0, the measured tuples per
    herald); the declared overhead is kept (``DEFAULT_OVERHEAD`` when nothing was declared)."""
    if not 0.0 <= skip <= 1.0:
        raise ValueError(f"a measured skip fraction is in [0, 1], got {skip!r}")
    base = declared if declared is not None else HeraldEffect(skip)
    partition = max(tuples / heralds, 1.0) if heralds > 0 and tuples > 0 else base.partition
    return replace(base, skip=skip, partition=partition)


def apply_herald_measures(plan: PlanSet, effects: Mapping[str, HeraldEffect]) -> PlanSet:
    """The plan with each select's or join's measured herald effect in place of the declared one; ids of
    other operators, or of nodes the plan no longer has, are ignored."""
    nodes = {
        node_id: replace(node, heralds=effects[node_id]) if node_id in effects and node.op in ("select", "join") else node
        for node_id, node in plan.nodes.items()
    }
    return replace(plan, nodes=nodes)
