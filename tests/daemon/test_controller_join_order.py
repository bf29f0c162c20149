"""The controller chooses the join order of a JISC join and publishes it to the query's control file.

Recording fakes of the store, applier and alert sink (``test_controller``),
the synthetic statistics source with rate steps, and the real control files
(``adapters/spark/jisc.ControlFiles``) in a temporary directory; no Spark.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import structlog
from support.fakes import Alerts, Applier, Clock, MemoryStore, START, cycle
from support.jisc_plan import PLAN, first_pair

from armd.adapters.spark.jisc import ControlFiles, read_control
from armd.adapters.synthetic import Schedule, SyntheticSource
from armd.costmodel.evaluate import estimate
from armd.daemon.config import load_config
from armd.daemon.controller import Controller
from armd.control.ports import QueryMetrics
from armd.policies.join_order import plan_in_order

CONFIG = """
[store]
url = "sqlite:///unused.db"
[model]
time_unit_seconds = 1
[bounds]
memory_bytes = 1e12
cpu = 1e12
[triggers]
alpha = 1
[schedule]
observe_seconds = 1
[source]
kind = "spark"
[spark]
state_store = "rocksdb"
[managed.triple]
builder = "armd.adapters.spark.builders:multiway_join"
nodes = {{ w = "t_wa" }}
[managed.triple.join_order]
order = ["a", "c", "b"]
control = "{tmp}/order.json"
cooldown_seconds = 30
[plan]
file = "plan.json"
"""

def rates(step_at: float) -> dict[str, Schedule]:
    """a and b slow, c fast: joining a and b first is cheapest. From ``step_at`` on a is fast and c slow: b and c first."""
    return {"a": Schedule(2.0, steps=((step_at, 8.0),)), "b": Schedule(2.0), "c": Schedule(8.0, steps=((step_at, 2.0),))}


class MeasuringPairs(SyntheticSource):
    """The synthetic source, plus the pairwise selectivities a JISC join on Spark would report for ``triple``."""

    def __init__(self, pairs: dict[str, float], *args) -> None:
        super().__init__(*args)
        self.pairs = pairs

    def observe(self, at):
        observation = super().observe(at)
        return replace(observation, queries=(*observation.queries, QueryMetrics("triple", pair_selectivities=self.pairs)))


def make(tmp_path, step_at=100.0, pairs=None, dry_run=False, settings=None):
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(tmp=tmp_path) + ("[guardrails]\ndry_run = true\n" if dry_run else ""))
    config = load_config(path)
    args = (rates(step_at), 1, 1.0, START)
    source = SyntheticSource(*args) if pairs is None else MeasuringPairs(pairs, *args)
    store, alerts, clock = MemoryStore(), Alerts(), Clock()
    store.settings.update(settings or {})  # what a daemon that ran before left in force
    files = ControlFiles({"triple": (tmp_path / "order.json", ["a", "c", "b"], ["a", "c", "b"])})
    controller = Controller(config, store, source, Applier(source), alerts, structlog.get_logger(), clock, join_orders=files)
    return controller, store, clock, files


def step(controller, clock, times=1):
    """Decision cycles of 5 s each (long enough for the measured rates to tell 2/s from 8/s)."""
    for _ in range(times):
        cycle(controller, clock, 5.0)


def test_a_cheaper_order_is_published_with_the_next_epoch_and_recorded(tmp_path):
    controller, store, clock, files = make(tmp_path)
    with structlog.testing.capture_logs() as logs:
        step(controller, clock, 5)
    epoch, order = files.current("triple")
    assert epoch == 1 and first_pair(order) == {"a", "b"}
    assert ("triple", "jisc", "done") in store.of("migration")
    changed = [e for e in store.of("event") if e.kind == "join_order_changed"]
    assert len(changed) == 1 and changed[0].details["epoch"] == 1
    assert changed[0].details["old_order"] == [["a", "c"], "b"]
    assert changed[0].details["best_cost"] < 0.8 * changed[0].details["current_cost"]
    assert any(entry["event"] == "join_order_changed" for entry in logs)


def test_the_chosen_order_is_desired_before_it_is_published(tmp_path):
    controller, store, clock, files = make(tmp_path)
    step(controller, clock, 2)
    epoch, order = files.current("triple")
    started, reordered = [row for rows in store.of("desired") for row in rows]
    assert started.join_order == (("a", "c"), "b") and started.plan_version == 1  # the order in force, kept
    assert epoch == 1 and reordered.join_order == order and reordered.plan_version == 2 and not reordered.recommend_only
    decision = store.of("decision")[-1]
    assert reordered.decision_id == decision.id and decision.outputs["join_orders"]["triple"]["epoch"] == 1


def test_a_dry_run_publishes_no_join_order_and_writes_recommendations_only(tmp_path):
    (tmp_path / "before").mkdir()
    ran, store, clock, _ = make(tmp_path / "before")
    step(ran, clock)
    controller, store, clock, files = make(tmp_path, dry_run=True, settings=store.settings)  # restarted as a dry run
    step(controller, clock, 5)
    assert files.current("triple")[0] == 0 and not (tmp_path / "order.json").exists()
    assert store.of("migration") == [] and not [e for e in store.of("event") if e.kind == "join_order_changed"]
    desired = [row for rows in store.of("desired") for row in rows]
    assert desired and all(row.recommend_only for row in desired)
    recommended = [row.join_order for row in desired if first_pair(row.join_order) == {"a", "b"}]
    assert recommended  # the cheaper order is recommended, not put into force
    assert all(d.dry_run and not d.applied for d in store.of("decision"))
    assert any(d.outputs["join_orders"] for d in store.of("decision"))


def test_the_rates_crossing_over_bring_another_order_after_the_cool_down(tmp_path):
    controller, store, clock, files = make(tmp_path)
    step(controller, clock, 2)  # the first starts the query
    assert files.current("triple")[0] == 1
    clock.advance(100)  # past the step (and the 30 s cool-down)
    step(controller, clock, 2)
    epoch, order = files.current("triple")
    assert epoch == 2 and first_pair(order) == {"b", "c"}
    assert [e.details["epoch"] for e in store.of("event") if e.kind == "join_order_changed"] == [1, 2]


def test_the_cool_down_holds_a_second_change(tmp_path):
    controller, store, clock, files = make(tmp_path, step_at=20.0)
    step(controller, clock, 2)
    assert files.current("triple")[0] == 1  # at 10 s
    step(controller, clock, 5)  # 15 s … 35 s: b and c first is cheaper from 25 s on, but the last change was under 30 s ago
    assert files.current("triple")[0] == 1
    step(controller, clock, 3)  # … 50 s
    assert files.current("triple")[0] == 2
    first, second = [e.at for e in store.of("event") if e.kind == "join_order_changed"]
    assert (second - first).total_seconds() == 30


def test_a_bad_control_file_is_an_error_event_and_the_loop_goes_on(tmp_path):
    controller, store, clock, files = make(tmp_path)
    (tmp_path / "order.json").write_text('{"epoch": "one"}')
    step(controller, clock, 2)
    failed = [e for e in store.of("event") if e.kind == "join_order_failed"]
    assert failed and "order.json" in failed[0].message and "epoch" in failed[0].message
    assert store.of("decision")  # the QoS decision still ran
    (tmp_path / "order.json").unlink()
    step(controller, clock)
    assert read_control(tmp_path / "order.json", ["a", "b", "c"]).epoch == 1


def test_nothing_is_published_before_the_query_runs(tmp_path):
    controller, _, clock, files = make(tmp_path)
    step(controller, clock)  # admitted, decided and started: the order is chosen from the next decision step on
    assert files.current("triple")[0] == 0 and not (tmp_path / "order.json").exists()
    step(controller, clock)
    assert files.current("triple")[0] == 1


def test_measured_pair_selectivities_choose_the_order(tmp_path):
    """Rates alone put a and b first; b and c matching 50 × less often than the other pairs put b and c first."""
    pairs = {"a,b": 0.5, "a,c": 0.5, "b,c": 0.01}
    controller, store, clock, files = make(tmp_path, pairs=pairs)
    step(controller, clock, 3)
    epoch, order = files.current("triple")
    assert epoch == 1 and first_pair(order) == {"b", "c"}
    changed = [e for e in store.of("event") if e.kind == "join_order_changed"]
    assert changed[0].details["pair_selectivities"] == pytest.approx(pairs)


def test_the_cost_model_estimates_the_join_in_the_order_it_runs(tmp_path):
    """After a switch to a and b first the controller's model is the plan rebuilt in that order, also after a restart."""
    controller, _, clock, files = make(tmp_path)
    plan, profile = controller.config.plan, controller.config.model.profile

    def memory(c) -> float:  # the controller's estimate of the query at the plan's rates
        problem = c.model.full
        n = len(problem.queries)
        outcome = problem.evaluate(np.zeros(n), np.zeros(n), c.model.plan_d, with_qos=False)
        return float(outcome.query_memory[problem.queries.index("triple")])

    step(controller, clock)
    assert files.current("triple")[0] == 0
    before = memory(controller)
    assert before == pytest.approx(estimate(plan, profile).queries["triple"].memory)  # the plan's order, (a ⋈ c) ⋈ b
    step(controller, clock)
    epoch, order = files.current("triple")
    assert epoch == 1 and first_pair(order) == {"a", "b"}
    rebuilt = estimate(plan_in_order(plan, "triple", order, {}, 0.2), profile).queries["triple"].memory
    assert memory(controller) == pytest.approx(rebuilt) and rebuilt < 0.7 * before  # the fast stream joins last
    restarted, _, _, _ = make(tmp_path)  # reads the order in force from the control file
    assert memory(restarted) == pytest.approx(rebuilt)
