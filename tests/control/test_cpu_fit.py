"""The CPU constants refitted online from batch durations (``control/cpu_fit.py``) and taken into the model.

Pure for ``CpuRefit``: batches written as values, their durations made by
known constants through the model's own CPU terms. The controller test runs
the simulated daemon with batches added to its observations.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from support.fakes import CONFIG, PLAN, START, cycle, use_applier

from armd.control.cpu_fit import CpuRefit, cpu_terms_now
from armd.control.ports import BatchProgress
from armd.costmodel.calibration import CPU_CONSTANTS
from armd.costmodel.constants import CostConstants

QUERIES = ("clicks_per_view", "clicks_per_second", "big_orders")
SPAN = 2.0  # seconds of event time per batch


def true_constants() -> CostConstants:
    """What the engine 'really' costs: 0.3 ms for each operation of every kind (batches of ~0.7 s, and 8 ms for big_orders)."""
    return CostConstants().with_overrides({name: 3e-4 for name in CPU_CONSTANTS})


def batches(terms, unit, durations=None, n=30):
    """n batches per query, each covering SPAN s; durations by the true constants unless given."""
    truth = np.array([getattr(true_constants(), c) for c in CPU_CONSTANTS])
    out = []
    for k in range(1, n + 1):
        for i, q in enumerate(QUERIES):
            seconds = float(terms[q] @ truth) * SPAN / unit if durations is None else durations(k, i)
            out.append(BatchProgress(q, f"run-{q}", k, START + timedelta(seconds=k * SPAN), 100, int(round(seconds * 1000)),
                                     event_max=START + timedelta(seconds=k * SPAN)))
    return out


@pytest.fixture
def model(tmp_path):
    from armd.control.model import build_model
    from armd.daemon.config import load_config
    from armd.daemon.setup import setup_of, trigger_rules
    from armd.control.cycle import initial_state

    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=200_000, dry_run="false", plan=PLAN, threshold=0.2))
    config = load_config(path)
    setup = setup_of(config, join_orders=False)
    return setup, build_model(setup, {}, {}, {}), initial_state(trigger_rules(config))


def test_a_fit_that_explains_the_batches_is_taken_and_predicts_them(model):
    setup, built, state = model
    terms = cpu_terms_now(built, state.rates, setup.profile)
    refit = CpuRefit(setup.plan.constants, refit_every=20)
    event = refit.feed(terms, batches(terms, setup.time_unit_seconds), setup.time_unit_seconds, START)
    assert event is not None and event.kind == "cpu_constants_refitted" and refit.constants is not None
    assert event.details["residual_seconds"] <= 0.5 * event.details["mean_batch_seconds"]
    fitted = np.array([getattr(refit.constants, c) for c in CPU_CONSTANTS])
    truth = np.array([getattr(true_constants(), c) for c in CPU_CONSTANTS])
    for q in QUERIES:  # the constants need not be unique; the durations they predict must be right (to the ms Spark gives)
        assert float(terms[q] @ fitted) * 2000 == pytest.approx(float(terms[q] @ truth) * 2000, rel=0.05, abs=1e-3)


def test_a_fit_that_does_not_explain_the_batches_is_not_taken(model):
    setup, built, state = model
    terms = cpu_terms_now(built, state.rates, setup.profile)
    refit = CpuRefit(setup.plan.constants, refit_every=20)
    noisy = batches(terms, setup.time_unit_seconds, durations=lambda k, i: 0.05 if k % 2 else 3.0)
    assert refit.feed(terms, noisy, setup.time_unit_seconds, START) is None
    assert refit.constants is None and refit.fit.constants is not None  # fitted, but not good enough to take


def test_the_controller_takes_a_good_refit_into_the_model(tmp_path):
    """model.cpu_refit = true: batches of the queries reach the fit; the event is recorded; the model decides on the fit."""
    import structlog

    from armd.adapters.synthetic import Schedule, SyntheticSource
    from armd.daemon.config import load_config
    from armd.daemon.controller import Controller
    from support.fakes import Alerts, Applier, Clock, MemoryStore

    path = tmp_path / "armd.toml"
    path.write_text("[model]\ncpu_refit = true\n" + CONFIG.format(memory=200_000, dry_run="false", plan=PLAN, threshold=0.2))
    config = load_config(path)
    source = SyntheticSource({n: Schedule(s.rate_per_second) for n, s in config.source.streams.items()}, 1,
                             config.model.time_unit_seconds, START)
    store, clock = MemoryStore(), Clock()
    controller = Controller(config, store, source, Applier(source), Alerts(), structlog.get_logger(), clock)
    use_applier(controller, controller.applier)
    terms = cpu_terms_now(controller.model, controller.state.rates, controller.setup.profile)
    made = iter(batches(terms, config.model.time_unit_seconds))
    observe = source.observe
    source.observe = lambda at: replace(observe(at), batches=tuple(next(made) for _ in range(3)))
    before = controller.model.full.plan.constants
    for _ in range(25):
        cycle(controller, clock)
    kinds = [e.kind for name, e in store.calls if name == "event"]
    assert controller.cpu_refit is not None and controller.cpu_refit.constants is not None
    assert controller.model.full.plan.constants == controller.cpu_refit.constants != before
    assert "cpu_constants_refitted" in kinds
