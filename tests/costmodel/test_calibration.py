"""Calibration: CPU constants by non-negative least squares, bytes per state row."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
from support import REPO
import pytest

from armd.costmodel.calibration import (
    CPU_CONSTANTS,
    Calibration,
    CalibrationError,
    CpuSample,
    apply_calibration,
    bytes_per_row,
    calibrate,
    cpu_terms,
)
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan

PLAN = REPO / "config" / "plans" / "example.json"


@pytest.fixture(scope="module")
def plan():
    return parse_plan(json.loads(PLAN.read_text()))


def with_rates(plan, factor):
    streams = {name: replace(s, d=s.d / factor) for name, s in plan.streams.items()}
    return replace(plan, streams=streams)


def test_terms_reproduce_the_cpu_estimate(plan):
    constants = plan.constants.with_overrides({name: float(i + 2) for i, name in enumerate(CPU_CONSTANTS)})
    priced = replace(plan, constants=constants)
    vector = np.array([getattr(constants, name) for name in CPU_CONSTANTS])
    for query, terms in cpu_terms(priced).items():
        assert terms @ vector == pytest.approx(estimate(priced).queries[query].cpu, rel=1e-12)


def test_nnls_recovers_the_constants_that_the_samples_determine(plan):
    rng = np.random.default_rng(5)
    truth = {name: 1e-6 * (i + 1) for i, name in enumerate(CPU_CONSTANTS)}
    truth_vector = np.array([truth[name] for name in CPU_CONSTANTS])
    samples = []
    for factor in np.linspace(0.3, 3.0, 40):
        for query, terms in cpu_terms(with_rates(plan, factor)).items():
            span = float(rng.uniform(500, 2000))
            samples.append(CpuSample(terms, span, float(terms @ truth_vector * span)))
    result = calibrate(samples, [(4800.0, 100.0), (9700.0, 200.0), (0.0, 0.0)])
    assert result.residual_seconds < 1e-9 and result.bytes_per_row == pytest.approx(14500 / 300)
    fitted = np.array([getattr(result.constants, n) for n in CPU_CONSTANTS])
    used = [CPU_CONSTANTS.index(n) for n in result.learned]
    assert np.all(fitted >= 0)
    # Constants that always appear together are not separable; their predictions still agree.
    for factor in (0.5, 2.5):
        for terms in cpu_terms(with_rates(plan, factor)).values():
            assert terms[used] @ fitted[used] == pytest.approx(terms[used] @ truth_vector[used], rel=1e-6)
    unused = set(CPU_CONSTANTS) - set(result.learned)
    assert "C_T" in unused  # the example plan has no union: C_T cannot be learned and keeps its value
    assert result.constants.C_T == plan.constants.C_T


def test_calibration_round_trips_and_applies_only_what_it_learned(plan):
    samples = [CpuSample(t, 1000.0, 0.01) for t in cpu_terms(plan).values()]
    result = calibrate(samples)
    again = Calibration.from_json(result.to_json())
    assert again == result
    applied = apply_calibration(plan.constants.with_overrides({"C_T": 7.0}), json.loads(result.to_json()))
    assert applied.C_T == 7.0 and all(getattr(applied, n) == getattr(result.constants, n) for n in result.learned)


@pytest.mark.parametrize(
    "samples, message",
    [([], "no CPU samples"), ([CpuSample(np.zeros(len(CPU_CONSTANTS)), 10.0, 1.0)], "zero model terms"),
     ([CpuSample(np.ones(len(CPU_CONSTANTS)), 10.0, float("nan"))], "finite")],
)
def test_unusable_samples_are_clear_errors(samples, message):
    with pytest.raises(CalibrationError, match=message):
        calibrate(samples)


def test_bytes_per_row_ignores_empty_state():
    assert bytes_per_row([(0.0, 0.0)]) is None
    assert bytes_per_row([(100.0, 4.0), (300.0, 4.0)]) == 50.0


def test_online_fit_learns_the_constants_batch_by_batch_and_follows_a_change() -> None:
    """Batches whose durations are exactly Σ C·term·span with known C: refitted every 10, on the last 40 only
    (the last refit, after batch 80, sees only batches after the change)."""
    from armd.costmodel.calibration import OnlineCpuFit

    rng = np.random.default_rng(5)
    fit = OnlineCpuFit(window=40, refit_every=10)
    truth = np.zeros(len(CPU_CONSTANTS))
    truth[CPU_CONSTANTS.index("C_H")], truth[CPU_CONSTANTS.index("C_U")] = 2e-6, 5e-6
    t, refits = 0.0, 0
    for i in range(81):
        if i == 40:
            truth[CPU_CONSTANTS.index("C_H")] = 4e-6  # the engine got slower at hashing
        terms = np.zeros(len(CPU_CONSTANTS))
        terms[CPU_CONSTANTS.index("C_H")], terms[CPU_CONSTANTS.index("C_U")] = rng.uniform(50, 150), rng.uniform(10, 90)
        span = rng.uniform(0.5, 1.5)
        t += span
        refits += fit.add(terms, "run", t, float(terms @ truth * span), 1.0)
        if i == 39:
            assert fit.constants.C_H == pytest.approx(2e-6, rel=1e-6)
    assert refits == 8  # every 10 samples; the first batch of the run only sets where the next one starts
    assert fit.constants.C_H == pytest.approx(4e-6, rel=1e-6) and fit.constants.C_U == pytest.approx(5e-6, rel=1e-6)
    assert set(fit.learned) == {"C_H", "C_U"} and len(fit.samples) == 40
    assert not fit.add(terms, "run", t - 1.0, 0.1, 1.0)  # no newer event time: nothing learnt
