"""The shipped simulated demo (``config/armd-simulated.toml``) reacts to real change, not to Poisson noise, and ahead of a ramp.

Issue 21 found the demo making 33 decisions and 17 applied changes in three
minutes, most triggered by the noise of one stream's counted rate. The
controller runs here on the demo's own configuration and synthetic source
(measured state from its simulated windows), with a simulated clock
(one-second ticks, as configured).
"""

from __future__ import annotations

from dataclasses import replace

import structlog
from support import REPO
from support.fakes import START, Alerts, Applier, Clock, MemoryStore, cycle, use_applier

from armd.daemon.config import load_config
from armd.daemon.controller import Controller
from armd.daemon.wiring import synthetic_source

DEMO = REPO / "config" / "armd-simulated.toml"
BURST = (20, 35)
"""The clicks burst of the demo, in seconds after the start."""


def run(config, seconds):
    """The controller on ``config``'s synthetic source for ``seconds`` one-second ticks; the store it wrote to.

    The closed loop is off: these tests isolate the triggers and the forecast, and the recording applier does not
    actuate the plant, so measured state would not follow the decisions (``tests/daemon/test_feedback_loop.py``
    covers the loop on an actuated plant).
    """
    config = replace(config, feedback=replace(config.feedback, enabled=False))
    source = synthetic_source(config, START)
    store, clock, applier = MemoryStore(), Clock(), Applier(source)
    controller = Controller(config, store, source, applier, Alerts(), structlog.get_logger(), clock)
    use_applier(controller, applier)
    decisions_at = []
    for second in range(1, seconds + 1):
        before = len(store.of("decision"))
        cycle(controller, clock)
        decisions_at += [(second, d) for d in store.of("decision")[before:]]
    return store, decisions_at


def test_the_simulated_demo_changes_settings_only_at_the_start_and_in_its_burst():
    config = load_config(DEMO, environ={})
    assert [(b.at_seconds, b.at_seconds + b.duration_seconds) for b in config.source.streams["clicks"].bursts] == [BURST]
    _, decisions = run(config, 180)
    applied_at = [t for t, d in decisions if d.applied]
    settle = BURST[1] + config.triggers.window_seconds * 2 + config.guardrails.cooldown  # the way back down
    steady = [t for t in applied_at if 5 < t < BURST[0] or t > settle]
    assert applied_at[0] == 1 and steady == [], applied_at
    assert any(BURST[0] <= t <= BURST[1] for t in applied_at)  # the burst itself is met with a cut


def ramp_config(tmp_path, forecast: bool):
    """The demo with its burst replaced by a ramp of clicks ×4 over two minutes (a step every 2 s), from 30 s on."""
    steps = ", ".join(f"{{ at_seconds = {30 + 2 * k}, rate_per_second = {50 + 150 * (k + 1) / 60:.2f} }}" for k in range(60))
    text = DEMO.read_text().replace("bursts = [ { at_seconds = 20, duration_seconds = 15, factor = 4 } ]", f"steps = [ {steps} ]")
    text = text.replace('file = "plans/example.json"', f'file = "{REPO / "config" / "plans" / "example.json"}"')
    path = tmp_path / f"ramp-{forecast}.toml"
    path.write_text(text.replace("[forecast]\nenabled = true", "") + f"\n[forecast]\nenabled = {str(forecast).lower()}\n")
    return load_config(path, environ={})


def test_with_forecasting_the_settings_in_force_stay_within_the_bound_through_a_ramp(tmp_path):
    """Estimated at the rates measured each second: without forecasting the cuts come after the rise, with it before."""
    over = {}
    for forecast in (False, True):
        config = ramp_config(tmp_path, forecast)
        store, decisions = run(config, 170)
        totals = [rows[-1].memory_bytes for decision_id, rows in store.of("estimates") if decision_id is None]
        over[forecast] = sum(total > config.bounds.usable_memory for total in totals)
        if forecast:
            used = [d.outputs["forecast"]["streams"]["clicks"] for _, d in decisions if d.outputs["forecast"]]
            assert any(f["used"] and f["forecast_rate"] > 1.2 * f["measured_rate"] for f in used)
    assert over[True] == 0 and over[False] > 10, over
