"""bench/control.py's metrics and plant: hand-made traces, a migration on the plant, a tiny scenario through armd's real path."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from support import REPO

sys.path.insert(0, str(REPO / "bench"))
# By path, under a name of its own: the repository root's control/ (armd.control's sources) must not answer "control".
_spec = importlib.util.spec_from_file_location("bench_control", REPO / "bench" / "control.py")
assert _spec is not None and _spec.loader is not None
control = importlib.util.module_from_spec(_spec)
sys.modules["bench_control"] = control
_spec.loader.exec_module(control)
from plant import Keys, Plant, SimulatedGenMig, Tap  # noqa: E402

from armd.adapters.synthetic import Schedule  # noqa: E402
from armd.control.ports import QuerySettings  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_seconds_over_the_bound_count_only_samples_strictly_above_it():
    assert control.seconds_over([100, 250, 200, 300, 150, 201], 200) == 3
    assert control.seconds_over([100, 250, 300], 200, step_seconds=0.5) == 1.0
    assert control.seconds_over([], 200) == 0


def test_a_summary_gives_peak_over_bound_mean_qos_and_results_kept():
    trace = control.Trace(state=[50.0, 300.0, 100.0], kept=[5, 5, 10], oracle=[10, 10, 10], qos=[1.0, 0.5, 0.75])
    got = control.summarize(trace, 200.0)
    assert got == {"peak_state_over_bound": 1.5, "seconds_over_bound": 1, "mean_qos": 0.75, "results_kept": pytest.approx(20 / 30, abs=1e-4)}


def settings(window_ms: float) -> QuerySettings:
    return QuerySettings(1.0, 1.0, {"q.w": window_ms}, None, 1.0)


def test_a_window_change_holds_both_plans_state_until_the_old_plan_drains():
    now = {"t": 0.0}
    plant = Plant({"s": Schedule(100.0)}, 1, 0.001, START, {"q": [Tap("s", "q.w", 10_000, 8.0)]})
    genmig = SimulatedGenMig(plant, lambda: START + timedelta(seconds=now["t"]), delay_seconds=2, trigger_seconds=1)
    moves = []
    genmig.on_transition = lambda m: moves.append(m.state)
    assert genmig.apply("q", None, settings(10_000)) == "direct" and plant.running("q")
    now["t"] = 30.0
    steady = plant.state("q", 30.0)[0]
    assert steady == len(plant.arrivals("s", 20.0, 30.0))
    assert genmig.apply("q", settings(10_000), settings(4_000)) == "genmig"  # T_split = 34 s, old plan done at 37 s
    now["t"] = 33.0
    rows, size = plant.state("q", 33.0)
    assert rows == len(plant.arrivals("s", 23.0, 33.0)) + len(plant.arrivals("s", 30.0, 33.0)) and size == rows * 8.0
    assert plant.contributions(33.0)[0] == len(plant.arrivals("s", 23.0, 33.0))  # before T_split the old plan answers
    genmig.advance()
    assert moves == ["running"] and genmig.running_migrations()
    now["t"] = 35.0
    genmig.advance()
    assert plant.contributions(35.0) == (len(plant.arrivals("s", 31.0, 35.0)), len(plant.arrivals("s", 25.0, 35.0)))
    now["t"] = 37.0
    genmig.advance()
    assert moves == ["running", "draining", "done"] and not genmig.running_migrations()
    assert plant.state("q", 37.0)[0] == len(plant.arrivals("s", 33.0, 37.0))
    assert genmig.changes == 1


def test_drifting_keys_grow_the_groups_a_count_per_key_holds():
    taps = {"q": [Tap("s", "q.w", 20_000, 1.0, granule_seconds=1.0)]}
    fixed = Plant({"s": Schedule(50.0)}, 1, 0.001, START, taps, {"s": Keys(20, 0.0)})
    drifting = Plant({"s": Schedule(50.0)}, 1, 0.001, START, taps, {"s": Keys(20, 0.2)})
    for plant in (fixed, drifting):
        plant.set_window("q", "q.w", 20_000)
    held = fixed.state("q", 60.0)[0]
    assert held <= 20 * 21  # at most one group per key and granule (21 granules touch a 20 s window)
    assert drifting.state("q", 60.0)[0] > held + 0.15 * len(drifting.arrivals("s", 40.0, 60.0))


def test_a_tiny_scenario_runs_through_the_controller_the_store_and_the_plant(tmp_path):
    scenario = control.Scenario("tiny", 45, bursts=((20, 25, 4.0),))
    row = control.run(scenario, (), tmp_path, warmup=10)
    assert row["scenario"] == "tiny" and row["mechanisms"] == ["none"] and row["plant"] == "simulated"
    assert row["decisions"] >= 1 and 0 < row["results_kept"] <= 1 and 0 < row["mean_qos"] <= 1
    assert row["peak_state_over_bound"] > 1  # the burst outgrows the bound before any cut takes effect
    assert row["seconds_over_bound"] >= 1 and row["seconds_over_bound_in_warmup"] == 0 and row["applied_changes"] >= 1
    assert row["applied_changes_after_warmup"] == row["applied_changes"]  # no change before the burst at 20 s


def test_a_timeline_lists_each_decision_from_the_store_and_each_migration_in_order(tmp_path):
    scenario = control.Scenario("tiny", 45, bursts=((20, 25, 4.0),))
    row = control.run(scenario, (), tmp_path, warmup=10, timeline=True)
    events = row["timeline"]
    decisions = [e for e in events if e["kind"] == "decision"]
    assert len(decisions) == row["decisions"] and decisions[0]["trigger"] == "queries added or removed"
    assert set(decisions[-1]["windows_ms"]) == set(control.QUERIES) and set(decisions[-1]["measured_bytes"]) == set(control.QUERIES)
    genmig = [e for e in events if e["kind"] == "applied" and e["how"] == "genmig"]
    assert len(genmig) == row["applied_changes"] >= 1 and all(e["t_split"] > e["t"] for e in genmig)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert any(e["kind"] == "migration" and e["state"] == "done" for e in events)


def test_scenarios_and_mechanism_sets_are_chosen_by_name_and_a_wrong_name_is_said_in_one_line():
    table = {"a": {}, "b": {}}
    scenarios, sets = control.selection("burst,ramp", "all,none,b", table)
    assert [s.name for s in scenarios] == ["burst", "ramp"] and sets == [("a", "b"), (), ("b",)]
    assert control.selection(None, None, table) == (list(control.SCENARIOS), None)
    with pytest.raises(control.MechanismError, match="no scenario bursty"):
        control.selection("bursty", None, table)
    with pytest.raises(control.MechanismError, match="no mechanism c"):
        control.selection("burst", "a+c", table)


def test_the_mechanism_table_gives_none_each_alone_and_all():
    assert control.variants({}) == [()]
    assert control.variants({"a": {}, "b": {}}) == [(), ("a",), ("b",), ("a", "b")]
    assert control.merged({"x": {"k": 1, "j": 2}}, {"x": {"k": 3}, "y": {"z": True}}) == {"x": {"k": 3, "j": 2}, "y": {"z": True}}
    doc = {"a": {"k": 1, "s": "t", "l": [1, 2.5]}, "b": {"c": {"on": True}}}
    assert tomllib.loads(control.toml(doc)) == doc


def test_a_mechanism_is_one_line_of_overrides_and_a_wrong_key_is_named_in_one_line(tmp_path):
    table = {"dry": {"guardrails": {"dry_run": True}}, "typo": {"guardrails": {"cooldown": 1}}}
    scenario = control.Scenario("tiny", 30, bursts=((10, 20, 4.0),))
    folders = {name: tmp_path / name for name in ("none", "dry", "typo")}
    for folder in folders.values():
        folder.mkdir()
    live, dry = (control.run(scenario, m, folders[m[0] if m else "none"], table, warmup=5) for m in ((), ("dry",)))
    assert dry["mechanisms"] == ["dry"] and live["mechanisms"] == ["none"]
    assert live["applied_changes"] >= 1 and dry["applied_changes"] == 0  # the override reached the daemon: it only recommends
    with pytest.raises(control.MechanismError, match=r"mechanisms \[typo\].*cooldown"):
        control.run(scenario, ("typo",), folders["typo"], table)


def test_the_headline_takes_the_rows_with_every_mechanism_and_the_worst_burst():
    def row(scenario, mechanisms, changes=0, over=0.0):
        return {"scenario": scenario, "mechanisms": mechanisms, "applied_changes": changes, "applied_changes_after_warmup": changes,
                "seconds_over_bound": over}

    table = {"a": {}, "b": {}}
    rows = [row(s, ["none"], 9, 99.0) for s in ("steady", "ramp", *control.BURSTS)]
    rows += [row("steady", ["a", "b"], 0), row("ramp", ["a", "b"], 1, 0.0), row("burst", ["a", "b"], 2, 10.0),
             row("burst_drifting_keys", ["a", "b"], 1, 31.0), row("burst_bytes_2x", ["a", "b"], 2, 12.0)]
    got = control.headline(rows, table)
    assert got["headline_mechanisms"] == ["a", "b"] and got["steady_applied_changes"] == 0
    assert got["burst_applied_changes"] == 2 and got["burst_seconds_over_bound"] == 31.0 and got["ramp_seconds_over_bound"] == 0.0
    assert got["burst_limit_s"] == 30 + control.DELAY_S + 1


def test_the_mis_modelled_bytes_burst_is_the_bursts_workload_told_to_the_model_at_half_its_bytes():
    burst, wrong = (next(s for s in control.SCENARIOS if s.name == name) for name in ("burst", "burst_bytes_2x"))
    assert replace(wrong, name="burst", plan_bytes_factor=1.0) == burst
    plan = control.plan_doc(control.QUERIES, control.STREAMS, wrong.plan_bytes_factor)
    assert plan["queries"]["clicks_keys"]["size"] == control.QUERIES["clicks_keys"]["size"] / 2
    assert plan["streams"]["views"]["size"] == control.STREAMS["views"][1] / 2
    assert control.taps_of(control.QUERIES, wrong.bytes_factor)["clicks_keys"][0].row_bytes == control.QUERIES["clicks_keys"]["size"]
