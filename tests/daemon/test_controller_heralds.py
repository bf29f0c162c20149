"""Measured herald skip fractions reach the daemon's decisions (issue 19, item 5: the QoS policy sees the savings).

A real multi-modal select (``armd.migrations.heralds``) runs over a stream
with heralds as plan node ``big`` of ``big_orders``; the daemon's
statistics source is wrapped in the herald meter, as the daemon wires it.
The skip fraction the select measures must reach the decision as the model's
herald term: the decision's estimate of the query is the scalar cost model's
(``costmodel.evaluate``) for the plan with that fraction, at the smoothed
rates the decision used.
"""

from __future__ import annotations

import json

import pytest
import structlog

from armd.adapters.herald_meter import HeraldMeter, MeteredSource
from armd.adapters.synthetic import Schedule, SyntheticSource
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from armd.daemon.config import load_config
from armd.daemon.controller import Controller
from armd.migrations.heralds import Herald, MultiModalSelect, Partitioner, Range, conjunction

from support.fakes import CONFIG, PLAN, START, Alerts, Applier, Clock, MemoryStore, cycle, use_applier

HERALDS = {"skip": 0.0, "partition": 10, "overhead": 1.0}
"""Declared in the plan: nothing skipped until measured; one herald per 10 tuples costing one evaluation."""


def plan_doc(skip: float | None = None) -> dict:
    doc = json.loads(PLAN.read_text())
    select = doc["queries"]["big_orders"]["inputs"][0]
    select.update(id="big", heralds={**HERALDS, **({} if skip is None else {"skip": skip})})
    return doc


def controller_with_meter(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_doc()))
    config_path = tmp_path / "armd.toml"
    config_path.write_text(CONFIG.format(memory=10**9, dry_run="false", plan=plan, threshold=0.2))
    config = load_config(config_path)
    source = SyntheticSource({n: Schedule(s.rate_per_second) for n, s in config.source.streams.items()}, 1,
                             config.model.time_unit_seconds, START)
    meter = HeraldMeter()
    store, clock = MemoryStore(), Clock()
    controller = Controller(config, store, MeteredSource(source, meter), Applier(source), Alerts(),
                            structlog.get_logger(), clock)
    use_applier(controller, controller.applier)
    return controller, store, clock, meter


def orders_with_heralds(select: MultiModalSelect, partitioner: Partitioner, skipped: int, evaluated: int) -> None:
    """``skipped`` partitions of 10 orders heralded below the predicate's 100, then ``evaluated`` unheralded ones."""
    stream: list = []
    for i in range(skipped):
        stream.append(Herald.of({"amount": Range(0, 50)}, count=10))
        stream += [(10 + i, float(i)) for _ in range(10)]
    stream += [(150, float(skipped + j)) for j in range(10 * evaluated)]
    for part in partitioner.feed(stream):
        select.process(part)


def decision_cpu(store, query: str) -> float:
    rows = [rows for decision_id, rows in store.of("estimates") if decision_id is not None][-1]
    return next(r.cpu for r in rows if r.query == query)


def test_a_decision_prices_the_skip_fraction_the_running_select_measured(tmp_path):
    controller, store, clock, meter = controller_with_meter(tmp_path)
    select = MultiModalSelect(conjunction(("amount", ">=", 100)), {"amount": 0, "ts": 1})
    partitioner = Partitioner({"amount": 0, "ts": 1}, ts="ts")
    meter.register("big_orders", "big", select)
    cycle(controller, clock)
    assert controller.model.full.batch.plan.nodes["big"].heralds.skip == 0.0  # as declared until measured

    orders_with_heralds(select, partitioner, skipped=9, evaluated=1)  # 90 of 100 tuples skipped
    cycle(controller, clock)
    observed = store.of("observation")[-1]
    assert {q.query: dict(q.herald_skips) for q in observed.queries if q.herald_skips} == {"big_orders": {"big": 0.9}}
    decision = store.of("decision")[-1]
    assert decision.trigger.startswith("measured herald skip fraction of 1 node(s) moved past the threshold: big=0.9")
    assert controller.model.full.batch.plan.nodes["big"].heralds.skip == pytest.approx(0.9)

    # The scalar cost model, from the plan document with the measured fraction and the rates the decision used.
    d = {s: controller.state.rates.smoothed.get(s) for s in ("clicks", "views", "orders")}

    def expected(skip: float) -> float:
        doc = plan_doc(skip)
        for name, spec in doc["streams"].items():
            if d[name] is not None:
                spec.pop("rate", None)
                spec["d"] = d[name]
        return estimate(parse_plan(doc)).queries["big_orders"].cpu

    after = decision_cpu(store, "big_orders")
    assert after == pytest.approx(expected(0.9), rel=1e-9)
    assert after < expected(0.0)  # the policy sees the saving (same rates, the declared fraction)

    # An interval without herald work leaves the smoothed fraction where it was; more skipping moves it.
    cycle(controller, clock)
    assert controller.state.heralds.smoothed == {"big": pytest.approx(0.1)}
    orders_with_heralds(select, partitioner, skipped=10, evaluated=0)
    cycle(controller, clock)
    assert controller.state.heralds.smoothed["big"] < 0.1
