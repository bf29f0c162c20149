"""The daemon decides for armd.agent applications: a real ``armd run`` on SQLite, applications writing as agents do.

Two simulated applications (bench/simulated_agents.py: the agent's own
registration, reporting and reconciling code, with generated progress
instead of Spark's) register one query each. The daemon, which has no
Spark session and a small query of its own, must take both into its
problem: desired settings appear for them; a burst on alpha's stream cuts
alpha's window; when beta stops reporting it is marked gone, its budget is
released and alpha's window grows back.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from support import REPO
from support.daemon import HEARTBEAT, armd, log_events, start

from armd.adapters.store import applications as apps
from armd.adapters.store.sql import SqlStore

sys.path.insert(0, str(REPO / "bench"))
from simulated_agents import SimQuery, SimulatedApp  # noqa: E402

CONFIG = """
[store]
url = "sqlite:///{db}"
application_timeout_seconds = 2

[bounds]
memory_bytes = 1600000
cpu = 1e9
reserve = 0

[guardrails]
cooldown_seconds = 0
max_step = 1

[triggers]
window_seconds = 1

[schedule]
observe_seconds = 0.2
decide_seconds = 1
apply_seconds = 0.2

""" + HEARTBEAT


def wait_for(what: str, ok: Callable[[], bool], seconds: float = 120.0) -> None:
    """Generous: at a load of 15 on two cores the daemon's 0.2 s jobs are skipped often and 60 s ran out."""
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def daemon(tmp_path: Path):
    db = tmp_path / "armd.db"
    config = tmp_path / "armd.toml"
    config.write_text(CONFIG.format(db=db))
    store = SqlStore.open(f"sqlite:///{db}")
    store.upgrade()
    process, lines = start(config)
    yield store, process, lines
    if process.poll() is None:
        process.terminate()
    process.communicate(timeout=30)
    store.close()


def test_the_daemon_decides_for_agent_queries_and_a_gone_application_frees_its_budget(daemon):
    store, process, _lines = daemon
    alpha = SimulatedApp(store, "alpha", [SimQuery("alpha_orders", "orders_alpha", 100.0)], poll_seconds=0.2)
    beta = SimulatedApp(store, "beta", [SimQuery("beta_orders", "orders_beta", 400.0)], poll_seconds=0.2)
    for app in (alpha, beta):
        app.register()
        app.start()
    try:
        # Both fit at their largest windows (about 0.29 MB and 1.16 MB of 1.6 MB): admitted, and left as they are.
        wait_for("both agent queries admitted", lambda: [apps.queries_of(store, a.app)[q]["status"]
                                                         for a in (alpha, beta) for q in a.queries] == ["active", "active"])
        assert alpha.window("alpha_orders") == beta.window("beta_orders") == 60

        alpha.queries["alpha_orders"].rate_per_second = 2000.0  # a burst: 20× the rate, ~5.8 MB at 60 s
        # the first cut may come while the rate estimate still rises (to ~9 s): wait for the cut the burst needs
        wait_for("the burst cuts alpha's window", lambda: alpha.window("alpha_orders") < 6)
        cut = alpha.window("alpha_orders")
        desired = store.desired_settings()["alpha_orders"]  # decided by the daemon, applied by the application
        assert desired.settings.windows["alpha_orders.w"] / 1000 == pytest.approx(cut)

        # Cut to about 4.5 s beside beta. An agent applies every change by GenMig, whose growth holds the old plan's
        # state beside the new one's: with beta's 1.16 MB released, alpha can grow to about 12 s (not before).
        beta.silence()  # killed: it stops reporting; the daemon marks it gone after 2 s and its queries leave the problem
        wait_for("beta marked gone", lambda: {a.app: a.status for a in apps.applications(store)}["beta"] == "gone")
        wait_for("alpha's window grows back", lambda: alpha.window("alpha_orders") > cut * 1.2)
        assert apps.queries_of(store, "beta")["beta_orders"]["status"] == "removed"
        assert alpha.errors == 0 and beta.errors == 0
    finally:
        alpha.stop()
        beta.silence()
    process.terminate()
    _out, err = process.communicate(timeout=30)
    events = log_events(err)
    fleet = [e for e in events if e.get("event") == "fleet_changed"]
    assert {q for e in fleet for q in e["joined"]} == {"alpha_orders", "beta_orders"}
    assert [q for e in fleet for q in e["left"]] == ["beta_orders"]
    assert not [e for e in events if e.get("level") == "error"], [e for e in events if e.get("level") == "error"]


class Lines:
    """The application's log, kept (the agent logs through structlog's call shape)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        return lambda event, **fields: self.lines.append((event, fields))

    def of(self, event: str) -> list[dict]:
        return [fields for e, fields in self.lines if e == event]


def test_a_rejected_query_waits_or_starts_at_its_minimum_and_starts_when_re_admitted(daemon):
    """At their smallest windows (20 s at 1000 elements/s, about 1 MB each) only one of these fits in 1.6 MB."""
    store, _process, _lines = daemon
    logs = {name: Lines() for name in ("beta", "carol", "dave")}
    made = {name: SimulatedApp(store, name, [SimQuery(f"{name}_orders", f"orders_{name}", 1000.0, low=20.0)],
                               poll_seconds=0.2, log=logs[name]) for name in logs}
    beta, carol, dave = made.values()
    beta.register()
    wait_for("beta admitted", lambda: apps.queries_of(store, "beta")["beta_orders"]["status"] == "active")
    beta.start()
    carol.register(on_reject="wait")
    dave.register(on_reject="minimum")
    carol.start()
    dave.start()
    try:
        wait_for("carol and dave rejected", lambda: logs["carol"].of("query_rejected") and logs["dave"].of("query_rejected"))
        (said,) = logs["carol"].of("query_rejected")
        assert "rejected query 'carol_orders'" in said["message"] and "does not start until armd re-admits it" in said["message"]
        assert apps.queries_of(store, "carol")["carol_orders"]["status_reason"] in said["message"]
        assert carol.running == set()
        assert dave.running == {"dave_orders"} and dave.window("dave_orders") == 20
        assert "starts at its QoS minimum" in logs["dave"].of("query_rejected")[0]["message"]

        beta.silence()  # beta's budget is released when it is marked gone: carol (first by name) is re-admitted and starts
        wait_for("carol re-admitted and started", lambda: carol.running == {"carol_orders"})
        assert logs["carol"].of("query_readmitted")
        assert apps.queries_of(store, "carol")["carol_orders"]["status"] == "active"
        assert apps.queries_of(store, "dave")["dave_orders"]["status"] == "rejected"
        assert len(logs["carol"].of("query_rejected")) == 1 and len(logs["dave"].of("query_rejected")) == 1
    finally:
        for app in made.values():
            app.silence()


def test_an_application_in_recommend_mode_gets_recommendations_in_the_store_status_and_events(daemon, tmp_path):
    store, _process, _lines = daemon
    rex = SimulatedApp(store, "rex", [SimQuery("rex_orders", "orders_rex", 100.0)], poll_seconds=0.2, mode="recommend")
    rex.register()
    rex.start()
    try:
        wait_for("rex admitted", lambda: apps.queries_of(store, "rex")["rex_orders"]["status"] == "active")
        rex.queries["rex_orders"].rate_per_second = 5000.0  # ~14 MB at 60 s: armd recommends a cut, nothing applies it
        # A first row may recommend the 60 s it was admitted at (before the application's report reached the daemon)
        wait_for("a recommended cut", lambda: "rex_orders" in store.desired_settings()
                 and store.desired_settings()["rex_orders"].settings.windows["rex_orders.w"] < 30000)
        assert store.desired_settings()["rex_orders"].recommend_only
        time.sleep(1.0)  # several rounds of the application: still at 60 s
        assert rex.window("rex_orders") == 60
        wait_for("the recommendation event", lambda: [e for e in store.events() if e["kind"] == "recommendation"])
        (event, *_) = [e for e in store.events() if e["kind"] == "recommendation"]
        assert event["query"] == "rex_orders" and "recommend mode and applies nothing" in event["message"]
        status = armd("status", "--config", str(tmp_path / "armd.toml")).stdout
    finally:
        rex.silence()
    assert "recommended" in status.splitlines()[2]
    (line,) = [line for line in status.splitlines() if line.startswith("rex_orders")]
    assert "rex_orders.w" in line  # the recommended window, where the settings in force show none applied
