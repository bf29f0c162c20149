"""Policies by name, as the configuration names them."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .base import Policy
from .paper import PaperBisection
from .weighted import WeightedQoS

POLICIES: dict[str, type] = {
    PaperBisection.name: PaperBisection,
    WeightedQoS.name: WeightedQoS,
}


def make_policy(name: str, params: Mapping[str, Any] | None = None) -> Policy:
    """The policy called ``name``; an unknown name or parameter raises ``LookupError``, a bad value ``ValueError``."""
    if name not in POLICIES:
        raise LookupError(f"unknown policy {name!r}; available: {', '.join(sorted(POLICIES))}")
    cls = POLICIES[name]
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = set(params or {}) - set(allowed)
    if unknown:
        raise LookupError(
            f"policy {name!r} has no parameter(s) {sorted(unknown)}; its parameters: {', '.join(allowed) or 'none'}"
        )
    try:
        return cls(**dict(params or {}))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"policy {name!r}: {exc}") from None
