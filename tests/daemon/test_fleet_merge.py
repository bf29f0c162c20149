"""The fleet merged into the daemon's problem: an agent query's plan, ranges and migrations (``daemon/fleet.py``)."""

from __future__ import annotations

from pathlib import Path

from support.daemon import HEARTBEAT

from armd.adapters.store.applications import GovernedQuery
from armd.control.pricing import _migration_cost
from armd.control.ports import QuerySettings
from armd.daemon.config import load_config
from armd.daemon.fleet import effective
from armd.daemon.setup import setup_of

CONFIG = """
[store]
url = "sqlite:///{db}"

[bounds]
memory_bytes = 6000000
cpu = 1e9
reserve = 0

[model]
time_unit_seconds = 0.001

""" + HEARTBEAT


def views_per_ad() -> GovernedQuery:
    """What ``armd.agent`` registers for a sliding count per key (``views_per_ad`` of the fleet benchmark)."""
    plan = {"streams": {"views": {"rate": 0.04, "g": 1.0, "size": 400.0}},
            "constants": {"aggregate_size": 400.0, "watermark_delay": 2000.0, "trigger_interval": 0.0},
            "queries": {"views_per_ad": {"op": "aggregate", "id": "views_per_ad.agg1", "groups": 1, "inputs": [
                {"op": "granularity", "id": "views_per_ad.w.g", "g": 1000.0, "inputs": [
                    {"op": "window", "id": "views_per_ad.w", "w": 16000.0, "inputs": [{"op": "source", "stream": "views"}]}]}]}}}
    spec = {"plan": plan, "plan_source": "derived", "nodes": {"agg1": "views_per_ad.agg1", "w": "views_per_ad.w"},
            "mode": "apply", "windows": {"w": [4.0, 16.0]}, "slides": {"w": [1.0, 4.0]},
            "initial": {"fw": 1.0, "fg": 1.0, "windows": {"views_per_ad.w": 16000.0}, "granularity": 1000.0, "qos": 1.0,
                        "drop_rate": 0.0},
            "time_unit_seconds": 0.001}
    return GovernedQuery("views_per_ad", "ads", spec, 1.0, {}, "apply", "running")


def test_an_agent_querys_changes_are_priced_as_the_genmig_migrations_its_application_makes(tmp_path: Path) -> None:
    """The daemon's own source is not Spark here (its changes are made in place), but an agent applies every change
    by GenMig: both plans run for the new window + the watermark delay its plan declares, the old state held."""
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(db=tmp_path / "armd.db"))
    merged, fleet = effective(load_config(path, environ={}), [views_per_ad()])
    assert fleet.names == {"views_per_ad"}
    assert merged.agent_timings == {"views_per_ad": (2.0, 0.0)}  # 2000 ms of the agent's unit
    setup = setup_of(merged, join_orders=False)
    assert setup.migration.strategy_of("views_per_ad") == "genmig" and setup.migration.strategy_of("heartbeat") == "instant"
    cut = QuerySettings(0.25, 1.0, {"views_per_ad.w": 8000.0}, 1000.0, 0.5)
    cost = _migration_cost(setup, "views_per_ad", cut, 3e6)
    assert (cost.strategy, cost.duration_seconds, cost.extra_state_bytes) == ("genmig", 8.0 + 2.0, 3e6)
