"""The CPU constants refitted while the engine runs, from its micro-batches' durations.

Why: the cost model's CPU constants are abstract per-operation costs; what
one hash or one aggregate update costs is a property of the engine and the
machine. ``armd calibrate`` fits them once, offline; a running daemon sees
every batch (``Observation.batches``) and can keep them fitted itself.
``CpuRefit`` feeds each batch of a managed query, with that query's CPU
terms in the model as it stands (``costmodel.calibration.cpu_terms`` at the
smoothed rates), to ``OnlineCpuFit`` (NNLS over a sliding window of
batches). A refit is only taken when it explains the batches: its root-mean-
square error must stay within ``good`` times the mean batch duration;
otherwise the constants in use stay and the next refit tries again.

Taking the fit changes what a CPU figure means: estimates become seconds
of processing per model time unit (as after ``armd calibrate``), so
``bounds.cpu`` must be given in those units; hence it is opt-in
(``[model] cpu_refit``). Pure: times come in as arguments.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Mapping, Sequence

import numpy as np

from armd.costmodel.calibration import CPU_CONSTANTS, OnlineCpuFit, cpu_terms
from armd.costmodel.constants import CostConstants
from armd.policies.triggers import ArrivalTracker

from .model import Model
from .ports import BatchProgress, EventRecord

GOOD_FIT = 0.5
"""A refit is taken when its RMS error per batch is at most this share of the mean batch duration."""


class CpuRefit:
    """An ``OnlineCpuFit`` fed by the controller, and the constants the model uses (None: the plan's)."""

    def __init__(self, previous: CostConstants, window: int = 400, refit_every: int = 20, good: float = GOOD_FIT) -> None:
        self.fit = OnlineCpuFit(window, refit_every, previous)
        self.good = good
        self.constants: CostConstants | None = None
        """The last refit taken (None until one explains the batches)."""

    def feed(self, terms: Mapping[str, np.ndarray], batches: Sequence[BatchProgress], unit_seconds: float,
             at: datetime) -> EventRecord | None:
        """Every batch of a query with ``terms``; ``cpu_constants_refitted`` when a good refit was taken."""
        refitted = False
        for b in batches:
            newest = b.event_max.timestamp() if b.event_max is not None else None
            refitted |= self.fit.add(terms.get(b.query), b.run_id, newest, b.batch_ms / 1000.0, unit_seconds)
        if not refitted or self.fit.constants is None or not self.fit.learned:
            return None
        mean = float(np.mean([s.seconds for s in self.fit.samples]))
        residual = float(self.fit.residual_seconds or 0.0)
        if mean <= 0 or residual > self.good * mean:
            return None
        self.constants = self.fit.constants
        learned = {name: getattr(self.constants, name) for name in CPU_CONSTANTS if name in self.fit.learned}
        return EventRecord(
            at, "cpu_constants_refitted", "info",
            f"CPU constants refitted on {len(self.fit.samples)} batches (RMS error {residual:.3g} s per batch, mean "
            f"batch {mean:.3g} s): {', '.join(f'{k}={v:.3g}' for k, v in learned.items())}", None,
            {"learned": learned, "residual_seconds": residual, "mean_batch_seconds": mean, "samples": len(self.fit.samples)})


def cpu_terms_now(model: Model, rates: ArrivalTracker, profile: str) -> dict[str, np.ndarray]:
    """Per query, its CPU terms in the model at the smoothed rates (streams without a measured rate at the plan's)."""
    plan = model.full.plan
    d = dict(zip(model.stream_names, model.current_d(rates)))
    streams = {name: replace(spec, d=float(d[name])) if math.isfinite(d.get(name, math.inf)) and d[name] > 0 else spec
               for name, spec in plan.streams.items()}
    return cpu_terms(replace(plan, streams=streams, _members={}, _position={}), profile)
