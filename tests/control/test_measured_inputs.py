"""Measured group models and bytes per state row reach the model the cycle decides on (``control/measured.py``).

Pure: the example plan (``support.fakes``), observations written as values.
The source reports, per plan node, n(w) = base + growth·w (w in seconds)
and bytes per state row; the cycle keeps them, rebuilds the model when one
moves past the trigger threshold and decides on the rebuilt model.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest
from support.fakes import CONFIG, PLAN

from armd.control.cycle import Changes, Snapshot, decide, initial_state, observe
from armd.control.measured import MeasuredInputs
from armd.control.model import build_model
from armd.control.ports import Observation, QueryMetrics
from armd.daemon.config import load_config
from armd.daemon.setup import setup_of, trigger_rules

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
AGG = "clicks_per_second"  # the aggregation node of query clicks_per_second (its window: clicks_10s, 10 s)


def example(tmp_path, memory=400_000):
    path = tmp_path / "armd.toml"
    path.write_text(CONFIG.format(memory=memory, dry_run="false", plan=PLAN, threshold=0.2))
    config = load_config(path)
    setup = setup_of(config, join_orders=False)
    return setup, build_model(setup, {}, {}, {}), initial_state(trigger_rules(config))


def first_tick(setup, model, state):
    tick = decide(setup, model, state, Snapshot(AT, 0.0, {}, changes=Changes(queries=True)), make_id=lambda: "d1")
    return tick, {q: new for q, (_, new) in tick.changes.items()}


def fold(setup, model, state, running, *metrics):
    return observe(setup, model, state, Observation(AT, (), metrics), at=AT, now=1.0, running=running, changed_at={},
                   migrating=frozenset()).state


def test_measured_inputs_rebuild_the_model_and_change_the_decision(tmp_path):
    setup, model, state = example(tmp_path)
    tick, running = first_tick(setup, model, state)
    before = tick.estimates[-1].memory_bytes
    drifting = QueryMetrics(AGG, group_models={AGG: (20.0, 40.0)}, bytes_per_row={AGG: 400.0})
    state = fold(setup, tick.model, tick.state, running, drifting)
    after = decide(setup, tick.model, state, Snapshot(AT, 2.0, running), make_id=lambda: "d2")
    assert after.decision is not None and after.decision.trigger.startswith("measured inputs moved past the threshold")
    agg = after.model.full.plan.nodes[AGG]
    assert (agg.groups, agg.group_growth, agg.size) == (20.0, pytest.approx(40.0 * 0.001), 400.0)  # growth per ms
    assert after.decision.outputs["measured_inputs"]["groups"][AGG] == {"base": 20.0, "growth_per_second": 40.0}
    # a thousand groups per window of 10 s instead of 20, at 400 B a row: the aggregation no longer fits as it ran
    assert after.changes and AGG in after.changes
    assert after.changes[AGG][1].granularity > running[AGG].granularity  # coarser slides hold fewer windows
    assert after.decision.estimated_memory_bytes <= setup.bounds.memory
    assert before != pytest.approx(after.estimates[-1].memory_bytes)


def test_a_small_wobble_does_not_rebuild_and_a_plan_without_the_nodes_ignores_them(tmp_path):
    setup, model, state = example(tmp_path)
    tick, running = first_tick(setup, model, state)
    state = fold(setup, tick.model, tick.state, running, QueryMetrics(AGG, bytes_per_row={AGG: 400.0}))
    rebuilt = decide(setup, tick.model, state, Snapshot(AT, 2.0, running))
    state = fold(setup, rebuilt.model, rebuilt.state, running, QueryMetrics(AGG, bytes_per_row={AGG: 440.0}))  # +10 %
    assert not state.measured.drifted()
    quiet = decide(setup, rebuilt.model, state, Snapshot(AT, 3.0, running))
    assert quiet.model is rebuilt.model
    assert quiet.decision is None or not quiet.decision.trigger.startswith("measured inputs")
    unknown = QueryMetrics(AGG, group_models={"agg1": (5.0, 1.0), "clicks_10s": (5.0, 1.0)}, bytes_per_row={"f1": 9.0})
    assert fold(setup, tick.model, tick.state, running, unknown).measured == tick.state.measured


def test_groups_drift_is_judged_at_the_longest_window_of_the_query(tmp_path):
    setup, _, _ = example(tmp_path)
    inputs = MeasuredInputs(0.2).observe(setup.plan, [QueryMetrics(AGG, group_models={AGG: (10.0, 0.0)})], [AGG], 0.001)
    assert inputs.spans == {AGG: pytest.approx(10.0)} and inputs.current() == {f"groups:{AGG}": 10.0}
    inputs = inputs.decide_with()
    # growth appears: 10 + 0.5·10 = 15 groups at 10 s, half as many again
    moved = inputs.observe(setup.plan, [QueryMetrics(AGG, group_models={AGG: (10.0, 0.5)})], [AGG], 0.001)
    assert moved.drifted() == {f"groups:{AGG}"}
    assert inputs.kept({"other"}, 0.3) == MeasuredInputs(0.3)
