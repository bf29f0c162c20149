"""The closed loop end to end: the daemon's controller on the simulated plant, a real SQLite store, a plan that is wrong.

The plan declares half the bytes per row the plant really holds, so the
model calls the QoS maxima feasible while the measured state is far over the
memory bound. Only feedback (``[feedback]``, ``control/feedback.py``) can bring
it under; without it armd keeps the maxima and the state stays over.
"""

from __future__ import annotations

import json

import structlog
from support import REPO
from support.fakes import START, Alerts, Clock, cycle, use_applier

from armd.adapters.store.sql import SqlStore
from armd.adapters.synthetic import SyntheticSource
from armd.daemon.config import load_config
from armd.daemon.controller import Controller
from armd.daemon.wiring import SimulatedApplier, synthetic_parts

MEMORY = 120_000
"""The plant holds about 165 kB at the QoS maxima; the plan's half-sized rows make it about 82 kB: "fits"."""
SECONDS = 125


def run(tmp_path, enabled: bool) -> tuple[list[float], SqlStore]:
    """The shipped simulated demo without its burst, every plan row half its real size; measured total per second."""
    plan = json.loads((REPO / "config" / "plans" / "example.json").read_text())
    for stream in plan["streams"].values():
        stream["size"] /= 2
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    text = (REPO / "config" / "armd-simulated.toml").read_text()
    for old, new in (('file = "plans/example.json"', f'file = "{tmp_path}/plan.json"'),
                     ("sqlite:///armd.db", f"sqlite:///{tmp_path}/armd.db"), ("memory_bytes = 250000", f"memory_bytes = {MEMORY}"),
                     ("bursts = [ { at_seconds = 20, duration_seconds = 15, factor = 4 } ]", "")):
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "armd.toml").write_text(text + f"\n[feedback]\nenabled = {str(enabled).lower()}\nwindow_seconds = 10\n")
    config = load_config(tmp_path / "armd.toml")
    schedules, sizes, taps = synthetic_parts(config)
    source = SyntheticSource(schedules, 7, config.model.time_unit_seconds, START, {s: 2 * b for s, b in sizes.items()}, taps)
    store = SqlStore.open(config.store.url, retries=0)
    store.upgrade()
    clock = Clock()
    controller = Controller(config, store, source, SimulatedApplier(source), Alerts(), structlog.get_logger(), clock)
    use_applier(controller, controller.applier)
    measured = []
    for _ in range(SECONDS):
        cycle(controller, clock)
        now = source.seconds(clock.now)
        measured.append(sum(source._state(q, t, now).state_bytes for q, t in source.taps.items()))
    assert controller.flush(force=True)
    return measured, store


def test_feedback_brings_a_mis_modelled_plant_under_the_bound_that_the_model_alone_leaves_over(tmp_path):
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    blind, _ = run(tmp_path / "off", enabled=False)
    assert min(blind[-20:]) > MEMORY  # the model says the maxima fit; they do not

    closed, store = run(tmp_path / "on", enabled=True)
    assert max(closed[-20:]) < MEMORY
    with store._engine.connect() as db:
        triggers = [t for (t,) in db.exec_driver_sql("select trigger from decisions")]
        kinds = [k for (k,) in db.exec_driver_sql("select kind from events")]
        inputs = [json.loads(i) for (i,) in db.exec_driver_sql("select inputs from decisions")]
    store.close()
    assert "adaptation_ineffective" in kinds or any(t.startswith("measured state") for t in triggers)
    factors = inputs[-1]["feedback"]["factors"]["clicks_per_view"]["memory"]
    assert 1.6 < factors < 2.5  # the plant's rows are twice the plan's
