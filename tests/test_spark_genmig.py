"""GenMig on real local Spark against the oracle: old plan alone, new plan alone, and old → new live.

The ``armd-synthetic`` source replays the same rows for every query that
reads it, and its event time runs at a fixed speed, so the four runs of the
scenario see identical input: (a) the old plan alone, (b) the new plan
alone, (c) the old plan migrated to the new one by GenMig while it runs,
(d) the same change by a naive restart. (c) must be (a)'s results before
T_split plus (b)'s from T_split on — nothing lost, nothing twice, nothing
different — and (d) is counted against the same expectation to show what a
restart gets wrong. The harness is bench/migration.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from spark_fixtures import progress_listener, spark  # noqa: F401

from armd.adapters.spark.managed import QueryManager
from armd.adapters.spark.sinks import MemorySink

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import migration  # noqa: E402


@pytest.fixture(scope="module")
def window_change(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Windowed count per key, window 6 s → 10 s, slide 2 s → 1 s, migrated 12 s of event time into the stream."""
    scenario = migration.SCENARIOS[0]
    old, new = migration.settings(*scenario.old), migration.settings(*scenario.new)
    manager = QueryManager(spark, tmp_path_factory.mktemp("checkpoints"))
    sink = MemorySink()
    return {
        "a": migration.alone(progress_listener, manager, sink, "a", old),
        "b": migration.alone(progress_listener, manager, sink, "b", new),
        "genmig": migration.migrate(progress_listener, manager, sink, "c_genmig", "genmig", old, new),
        "naive": migration.migrate(progress_listener, manager, sink, "c_naive", "naive", old, new),
    }


def expected(runs: dict, split: float) -> dict:
    return {k: v for k, v in runs["a"].items() if k[1] < split} | {k: v for k, v in runs["b"].items() if k[1] >= split}


def test_genmig_equals_old_before_the_split_and_new_after_it(window_change):
    run = window_change["genmig"]
    assert [m.state for m in run["transitions"]] == ["running", "draining", "done"]
    first = run["transitions"][0]
    assert first.t_split > max(first.facts["positions"].values())
    split = first.t_split - run["start"]
    got = run["rows"]
    assert migration.compare(expected(window_change, split), got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == expected(window_change, split).keys()
    # Both plans answered, each on its side, and the new windows are 10 s long.
    assert any(k[1] < split for k in got) and any(k[1] >= split for k in got)
    assert all(k[1] - k[0] == 10 for k in got if k[1] >= split) and all(k[1] - k[0] == 6 for k in got if k[1] < split)


def test_a_naive_restart_gets_results_wrong_on_the_same_input(window_change):
    run = window_change["genmig"]
    split = run["transitions"][0].t_split - run["start"]
    counted = migration.compare(expected(window_change, split), window_change["naive"]["rows"])
    assert counted["lost"] + counted["duplicated"] + counted["wrong"] > 0, counted
