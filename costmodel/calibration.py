"""Calibrating the cost constants from measurements.

The paper's constants are abstract costs per operation; on a real engine they
are whatever one hash call, one list append, one aggregate update costs
there. Every CPU formula is linear in the constants (each constant multiplies
a term that depends only on the stream characteristics), so a query's CPU
estimate is Σ_c C_c · term_c, and the terms are found exactly by evaluating
the model with one constant at 1 and the others at 0. Measured batch
durations against those terms (times the batch's span) are then a
non-negative least-squares problem whose solution is the constants in
seconds per operation. A constant whose term is zero in every sample cannot
be learned from the data; it keeps its previous value and is reported.

Memory is calibrated separately: bytes per state row, from the engine's
reported state bytes over its reported state rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from scipy.optimize import nnls

from .constants import CostConstants
from .evaluate import estimate
from .plan import MAX_VALUE, MIN_VALUE, PlanSet, unique_keys

CPU_CONSTANTS = ("C_H", "C_B", "C_R", "C_P", "C_F", "C_E", "C_O", "C_L", "C_U", "C_I", "C_S", "C_Rd", "C_T", "C_Q")
"""The per-operation constants of the CPU formulas (sizes and bucket counts are not among them)."""


class CalibrationError(ValueError):
    """Measurements that cannot calibrate anything; the message says what is missing."""


def cpu_terms(plan: PlanSet, profile: str = "paper") -> dict[str, np.ndarray]:
    """Per query, the coefficient of each CPU constant in its CPU estimate (operations per time unit).

    Returns {query: array over ``CPU_CONSTANTS``}; Σ coefficient·constant is the query's CPU estimate.
    """
    zero = plan.constants.with_overrides({name: 0.0 for name in CPU_CONSTANTS})
    terms = {query: np.zeros(len(CPU_CONSTANTS)) for query in plan.queries}
    for i, name in enumerate(CPU_CONSTANTS):
        unit = replace(plan, constants=replace(zero, **{name: 1.0}))
        for query, totals in estimate(unit, profile).queries.items():
            terms[query][i] = totals.cpu
    return terms


@dataclass(frozen=True)
class CpuSample:
    """One measured batch of one query: its processing time and the model's terms over its span."""

    terms: np.ndarray
    """Coefficients per ``CPU_CONSTANTS`` (from ``cpu_terms`` at the rates of that batch)."""
    span: float
    """Event time the batch covered, in model time units."""
    seconds: float
    """Measured processing time of the batch."""


@dataclass(frozen=True)
class Calibration:
    constants: CostConstants
    """The constants in seconds per operation (unlearned ones as before)."""
    learned: tuple[str, ...]
    """Constants the samples determined."""
    bytes_per_row: float | None
    residual_seconds: float
    """Root-mean-square error of the fit per batch."""
    samples: int

    def to_json(self) -> str:
        values = {name: getattr(self.constants, name) for name in CostConstants.names()}
        return json.dumps({
            "constants": values, "learned": list(self.learned), "bytes_per_row": self.bytes_per_row,
            "residual_seconds": self.residual_seconds, "samples": self.samples,
        })

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        try:
            doc = json.loads(text, object_pairs_hook=unique_keys)
            calibration = cls(
                CostConstants().with_overrides(doc["constants"]), tuple(doc["learned"]), doc["bytes_per_row"],
                float(doc["residual_seconds"]), int(doc["samples"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(f"stored calibration is malformed: {exc}") from None
        calibration._check()
        return calibration

    def _check(self) -> None:
        """What a calibration file may hold: a file written by hand or damaged must fail here, not in the model."""
        unknown = [name for name in self.learned if name not in CostConstants.names()]
        if unknown:
            raise CalibrationError(f"learned names unknown constants {unknown}; allowed: {', '.join(CPU_CONSTANTS)}")
        per_row = self.bytes_per_row
        if per_row is not None and (isinstance(per_row, bool) or not isinstance(per_row, (int, float))
                                    or not MIN_VALUE <= per_row <= MAX_VALUE):
            raise CalibrationError(f"bytes_per_row must be null or a number in [{MIN_VALUE:g}, {MAX_VALUE:g}], "
                                   f"got {per_row!r}")
        if not (math.isfinite(self.residual_seconds) and self.residual_seconds >= 0):
            raise CalibrationError(f"residual_seconds must be a finite number ≥ 0, got {self.residual_seconds!r}")
        if self.samples < 0:
            raise CalibrationError(f"samples must be a whole number ≥ 0, got {self.samples!r}")


def fit_cpu(samples: Sequence[CpuSample], previous: CostConstants | None = None) -> tuple[CostConstants, tuple[str, ...], float]:
    """Constants (seconds per operation) that best explain the measured batch durations, all ≥ 0."""
    previous = previous or CostConstants()
    if not samples:
        raise CalibrationError("no CPU samples: at least one measured batch is needed")
    design = np.array([s.terms * s.span for s in samples], dtype=float)
    seconds = np.array([s.seconds for s in samples], dtype=float)
    if not (np.isfinite(design).all() and np.isfinite(seconds).all() and (seconds >= 0).all()):
        raise CalibrationError("CPU samples must be finite, with durations ≥ 0")
    used = np.flatnonzero(np.abs(design).sum(axis=0) > 0)
    if not len(used):
        raise CalibrationError("every sample has zero model terms: the batches covered no event time")
    scale = np.abs(design[:, used]).max(axis=0)  # columns on one scale, so nnls is well conditioned
    solution, _ = nnls(design[:, used] / scale, seconds)
    fitted = solution / scale
    learned = tuple(CPU_CONSTANTS[i] for i in used)
    constants = previous.with_overrides(dict(zip(learned, map(float, fitted))))
    residual = float(np.sqrt(np.mean((design[:, used] @ fitted - seconds) ** 2)))
    return constants, learned, residual


class OnlineCpuFit:
    """The CPU constants refitted while batches arrive: ``fit_cpu`` over a sliding window of recent batches.

    ``armd calibrate`` fits once, offline, from the store; a running daemon
    should not need that step. Feed every batch of a managed query with the
    model's CPU terms of that query (``cpu_terms`` of the plan in force);
    a batch covers the event time from the previous batch's newest event of
    the same run to its own. After ``refit_every`` new samples the constants
    are refitted on the last ``window`` samples (old behaviour fades out as
    the window slides). Pure: times are arguments.
    """

    def __init__(self, window: int = 400, refit_every: int = 20, previous: CostConstants | None = None) -> None:
        if window < 1 or refit_every < 1:
            raise ValueError(f"window and refit_every must be ≥ 1, got {window} and {refit_every}")
        self.window, self.refit_every = window, refit_every
        self.samples: list[CpuSample] = []
        self._last_event: dict[str, float] = {}
        self._new = 0
        self.constants = previous
        self.learned: tuple[str, ...] = ()
        self.residual_seconds: float | None = None

    def add(self, terms: np.ndarray | None, run: str, event_max: float | None, batch_seconds: float, unit_seconds: float) -> bool:
        """One batch: ``event_max`` its newest event time (seconds), ``batch_seconds`` its duration; True if refitted."""
        before = self._last_event.get(run)
        if event_max is not None:
            self._last_event[run] = event_max if before is None else max(before, event_max)
        if terms is None or before is None or event_max is None or event_max <= before or batch_seconds < 0:
            return False
        self.samples.append(CpuSample(np.asarray(terms, dtype=float), (event_max - before) / unit_seconds, batch_seconds))
        del self.samples[:-self.window]
        self._new += 1
        if self._new < self.refit_every:
            return False
        self._new = 0
        try:
            self.constants, self.learned, self.residual_seconds = fit_cpu(self.samples, self.constants)
        except CalibrationError:
            return False
        return True


def bytes_per_row(samples: Iterable[tuple[float, float]]) -> float | None:
    """Σ state bytes / Σ state rows over (bytes, rows) samples that hold rows; None without any."""
    total_bytes = total_rows = 0.0
    for state_bytes, rows in samples:
        if rows and rows > 0 and math.isfinite(state_bytes) and state_bytes >= 0:
            total_bytes += state_bytes
            total_rows += rows
    return total_bytes / total_rows if total_rows else None


def calibrate(
    cpu_samples: Sequence[CpuSample],
    state_samples: Iterable[tuple[float, float]] = (),
    previous: CostConstants | None = None,
) -> Calibration:
    constants, learned, residual = fit_cpu(cpu_samples, previous)
    return Calibration(constants, learned, bytes_per_row(state_samples), residual, len(cpu_samples))


def apply_calibration(plan_constants: CostConstants, calibration: Calibration | Mapping[str, Any]) -> CostConstants:
    """The plan's constants with the learned ones replaced (sizes and buckets stay the plan's)."""
    if not isinstance(calibration, Calibration):
        calibration = Calibration.from_json(json.dumps(calibration))
    return plan_constants.with_overrides({name: getattr(calibration.constants, name) for name in calibration.learned})


def calibrated_plan(plan: PlanSet, calibration: Calibration) -> PlanSet:
    """The plan with the learned CPU constants and, when measured, the bytes per state row as every
    stream's element size and the aggregate size (the engine's bytes per row replace the declared sizes)."""
    constants = apply_calibration(plan.constants, calibration)
    streams = plan.streams
    if calibration.bytes_per_row:
        per_row = float(calibration.bytes_per_row)
        constants = constants.with_overrides({"aggregate_size": per_row})
        streams = {name: replace(spec, size=per_row) for name, spec in plan.streams.items()}
    return replace(plan, constants=constants, streams=streams)

