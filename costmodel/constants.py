"""The named cost constants of paper 001 (Tables 1 and 2, §3.5–3.6).

Costs are in abstract cost units per operation; calibration (a later
adapter) replaces the defaults with measured values. The paper uses C_R both
for a heap restructure in joins and for rounding a timestamp in the
granularity operator; armd keeps them apart as ``C_R`` and ``C_Rd``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class CostConstants:
    """Per-operation costs, element sizes and bucket counts used by the formulas."""

    C_H: float = 1.0
    """Call of the hash function (join)."""
    C_B: float = 1.0
    """One hash-bucket operation, insertion or removal (join)."""
    C_R: float = 1.0
    """Restructuring the expiration heap after inserting or removing its top (join)."""
    C_P: float = 1.0
    """One evaluation of a predicate: a selection's, or a join's including the temporal-overlap check."""
    C_F: float = 1.0
    """One evaluation of a projection function, or building one join result."""
    C_E: float = 1.0
    """One call of the expiration predicate (join)."""
    C_O: float = 1.0
    """Checking two elements for temporal overlap (aggregation)."""
    C_L: float = 1.0
    """One list operation, append or remove-first (aggregation)."""
    C_U: float = 1.0
    """Updating one aggregate."""
    C_I: float = 1.0
    """Initialising one aggregate."""
    C_S: float = 1.0
    """Setting one timestamp (window)."""
    C_Rd: float = 1.0
    """Rounding one timestamp (granularity operator)."""
    C_T: float = 1.0
    """Appending one element to an output stream (union)."""
    C_Q: float = 1.0
    """Enqueueing or dequeueing one element (tuple-based window's FIFO queue)."""
    aggregate_size: float = 48.0
    """Bytes of one aggregate in an aggregation's state, unless the node sets ``size``."""
    buckets: int = 64
    """Hash buckets per join status structure, unless the node sets ``buckets``."""
    watermark_delay: float = 0.0
    """``spark`` profile: the watermark delay D of the queries, in model time units."""
    trigger_interval: float = 0.0
    """``spark`` profile: the event time one micro-batch covers (the trigger interval T), in model time units."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def with_overrides(self, overrides: Mapping[str, Any]) -> CostConstants:
        """A copy with some constants replaced; unknown names or bad values raise ``ValueError``."""
        valid = self.names()
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in valid:
                raise ValueError(f"unknown cost constant {name!r}; valid names: {', '.join(valid)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"cost constant {name} must be a finite number ≥ 0, got {value!r}")
            if name == "buckets":
                if value != int(value) or value < 1:
                    raise ValueError(f"cost constant buckets must be an integer ≥ 1, got {value!r}")
                value = int(value)
            elif name == "aggregate_size" and value == 0:
                raise ValueError("cost constant aggregate_size must be > 0, got 0")
            changes[name] = float(value) if name != "buckets" else value
        return replace(self, **changes)

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.names()}
