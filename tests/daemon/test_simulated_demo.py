"""The shipped simulated demo (``config/armd-simulated.toml``) reacts to its burst and not to Poisson noise.

Issue 21 found it making 33 decisions and 17 applied changes in three
minutes, most triggered by the noise of one stream's counted rate. The
controller runs here on the demo's own configuration and synthetic source,
with a simulated clock (one-second ticks, as configured), for three minutes.
"""

from __future__ import annotations

import structlog
from support import REPO
from support.fakes import START, Alerts, Applier, Clock, MemoryStore, cycle, use_applier

from armd.daemon.config import load_config
from armd.daemon.controller import Controller
from armd.daemon.wiring import synthetic_source

BURST = (20, 35)
"""The clicks burst of the demo, in seconds after the start."""


def test_the_simulated_demo_changes_settings_only_at_the_start_and_in_its_burst():
    config = load_config(REPO / "config" / "armd-simulated.toml", environ={})
    assert [(b.at_seconds, b.at_seconds + b.duration_seconds) for b in config.source.streams["clicks"].bursts] == [BURST]
    source = synthetic_source(config, START)
    store, clock, applier = MemoryStore(), Clock(), Applier(source)
    controller = Controller(config, store, source, applier, Alerts(), structlog.get_logger(), clock)
    use_applier(controller, applier)
    applied_at = []
    for second in range(1, 181):
        before = len(store.of("decision"))
        cycle(controller, clock)
        applied_at += [second for d in store.of("decision")[before:] if d.applied]
    settle = BURST[1] + config.triggers.window_seconds * 2 + config.guardrails.cooldown  # the way back down
    steady = [t for t in applied_at if 5 < t < BURST[0] or t > settle]
    assert applied_at[0] == 1 and steady == [], applied_at
    assert any(BURST[0] <= t <= BURST[1] for t in applied_at)  # the burst itself is met with a cut
