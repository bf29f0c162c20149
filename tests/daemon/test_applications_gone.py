"""The daemon marks armd.agent applications that stopped reporting gone, with an event; their queries leave."""

from __future__ import annotations

from datetime import timedelta

import structlog
from support import REPO
from support.fakes import Alerts, Clock

from armd.adapters.store import applications as apps
from armd.adapters.store.sql import SqlStore
from armd.adapters.synthetic import SyntheticSource
from armd.daemon.config import load_config
from armd.daemon.controller import Controller
from armd.daemon.wiring import SimulatedApplier, synthetic_parts


def test_a_silent_application_is_marked_gone_after_the_timeout(tmp_path):
    text = (REPO / "config" / "armd-simulated.toml").read_text().replace("sqlite:///armd.db", f"sqlite:///{tmp_path}/armd.db")
    text = text.replace('file = "plans/', f'file = "{REPO}/config/plans/')
    (tmp_path / "armd.toml").write_text(text.replace("[store]\n", "[store]\napplication_timeout_seconds = 30\n", 1))
    config = load_config(tmp_path / "armd.toml")
    assert config.store.application_timeout_seconds == 30
    schedules, sizes, taps = synthetic_parts(config)
    clock = Clock()
    source = SyntheticSource(schedules, 7, config.model.time_unit_seconds, clock.now, sizes, taps)
    store = SqlStore.open(config.store.url, retries=0)
    store.upgrade()
    controller = Controller(config, store, source, SimulatedApplier(source), Alerts(), structlog.get_logger(), clock)
    for app in ("alive", "silent"):
        apps.register_application(store, app, "h", 1, "apply", clock.now)
        apps.register_queries(store, app, [apps.AgentQueryRow(f"{app}_q", {})], clock.now)
    clock.now += timedelta(seconds=20)
    apps.seen(store, "alive", clock.now)
    controller.applications_gone()
    assert {a.status for a in apps.applications(store)} == {"running"}
    clock.now += timedelta(seconds=20)  # "silent" has not reported for 40 s, "alive" for 20 s
    controller.applications_gone()
    assert controller.flush(force=True)
    assert {a.app: a.status for a in apps.applications(store)} == {"alive": "running", "silent": "gone"}
    assert apps.queries_of(store, "silent")["silent_q"]["status"] == "removed"
    (event,) = [e for e in store.events() if e["kind"] == "application_gone"]
    assert "'silent' stopped reporting for more than 30 s" in event["message"]
    store.close()
