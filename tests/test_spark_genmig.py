"""GenMig on real local Spark against the oracle: old plan alone, new plan alone, and old → new live.

The ``armd-synthetic`` source replays the same rows for every query that
reads it, and its event time runs at ``SPEED`` seconds per wall-clock
second, so the four runs of a scenario see identical input: (a) the old plan
alone, (b) the new plan alone, (c) the old plan migrated to the new one by
GenMig while it runs, (d) the same change by a naive restart. (c) must be
(a)'s results before T_split plus (b)'s from T_split on — nothing lost,
nothing twice, nothing different — and (d) is counted against the same
expectation to show what a restart gets wrong.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from typing import Any

import pytest
from spark_fixtures import progress_listener, spark  # noqa: F401

from armd.adapters.spark.genmig import GenMigApplier
from armd.adapters.spark.managed import ManagedSpec, NaiveRestartApplier, QueryManager, QueryParams
from armd.adapters.spark.sinks import MemorySink
from armd.adapters.spark.source import schedule_json
from armd.adapters.synthetic import Schedule
from armd.daemon.ports import QuerySettings

SPEED = 8.0
END = 48.0
BATCH = 2.0
DELAY = 2.0
KEYS = 3
WINDOWED_COUNT = "armd.adapters.spark.builders:windowed_count"


def sources(start: float, rate: float = 10.0) -> dict[str, dict[str, Any]]:
    return {"clicks": {"start": repr(start), "schedule": json.dumps(schedule_json(Schedule(rate))), "seed": 11,
                       "keys": KEYS, "end_seconds": END, "max_seconds_per_batch": BATCH, "speed": SPEED}}


def settings(window: float, slide: float) -> QuerySettings:
    return QuerySettings(fw=0.0, fg=0.0, windows={"w": window}, granularity=slide, qos=0.0)


def origin() -> float:
    """A stream origin a few seconds ahead, on an even second: windows (aligned to the epoch) then fall on the
    same offsets from the origin in every run, so runs compare by (window start, end − origin, key)."""
    return 2 * math.ceil((time.time() + 3) / 2)


def results(rows: list[dict], start: float) -> dict[tuple, list[int]]:
    """Window start and end in seconds after the stream's origin, and key → the counts given for that window."""
    out: dict[tuple, list[int]] = {}
    for row in rows:
        window = row["window"]
        identity = (window["start"].timestamp() - start, window["end"].timestamp() - start, row["key"])
        out.setdefault(identity, []).append(row["n"])
    return out


def run_alone(spark, listener, manager, sink, name, params) -> None:  # noqa: F811
    manager.register(ManagedSpec(name, WINDOWED_COUNT, sink, params))
    query = manager.start(name)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        latest = listener.latest(name)
        if latest is not None and latest.sources and json.loads(latest.sources[0].end_offset)["event_ms"] >= END * 1000:
            break
        time.sleep(0.2)
    query.processAllAvailable()
    manager.stop(name)


def compare(expected: dict[tuple, list[int]], got: dict[tuple, list[int]]) -> dict[str, int]:
    lost = sum(1 for k in expected if k not in got)
    duplicated = sum(len(v) - 1 for v in got.values() if len(v) > 1)
    wrong = sum(1 for k, v in got.items() if k not in expected or (k in expected and v[0] != expected[k][0]))
    return {"lost": lost, "duplicated": duplicated, "wrong": wrong}


@pytest.fixture(scope="module")
def window_change(spark, progress_listener, tmp_path_factory):  # noqa: F811
    """Windowed count per key, window 6 s → 10 s, slide 2 s → 1 s, migrated 12 s of event time into the stream."""
    old, new = settings(6.0, 2.0), settings(10.0, 1.0)
    manager = QueryManager(spark, tmp_path_factory.mktemp("checkpoints"))
    sink = MemorySink()
    base = {"delay_seconds": DELAY}
    alone = {}
    for name, setting in (("a", old), ("b", new)):
        start = origin()
        run_alone(spark, progress_listener, manager, sink, name,
                  QueryParams(extra={**base, "sources": sources(start)}).with_settings(setting, 1.0))
        alone[name] = results(sink.rows(name), start)

    outcomes = {}
    for strategy in ("genmig", "naive"):
        start = origin()
        name = f"c_{strategy}"
        params = QueryParams(extra={**base, "sources": sources(start)}).with_settings(old, 1.0)
        manager.register(ManagedSpec(name, WINDOWED_COUNT, sink, params))
        transitions = []
        if strategy == "genmig":
            applier: Any = GenMigApplier(manager, progress_listener, 1.0, on_transition=transitions.append)
        else:
            applier = NaiveRestartApplier(manager, 1.0)
        manager.start(name)
        assert progress_listener.wait_for(
            lambda: (r := progress_listener.latest(name)) is not None and r.watermark is not None
            and r.watermark.timestamp() >= start + 12, 120)
        if strategy == "naive":  # a restart reads on from where the stream is now
            managed = manager.get(name)
            fresh = {s: {**o, "starting_seconds": "latest"} for s, o in managed.params.extra["sources"].items()}
            managed.params = replace(managed.params, extra={**managed.params.extra, "sources": fresh})
        applier.apply(name, old, new)
        deadline = time.monotonic() + 120
        while strategy == "genmig" and applier.migrating() and time.monotonic() < deadline:
            time.sleep(0.2)
        run = manager.get(name).query
        while time.monotonic() < deadline:
            latest = progress_listener.latest(name)
            if latest is not None and json.loads(latest.sources[0].end_offset)["event_ms"] >= END * 1000:
                break
            time.sleep(0.2)
        run.processAllAvailable()
        manager.stop(name)
        outcomes[strategy] = {"rows": results(sink.rows(name), start), "transitions": transitions, "start": start,
                              "versions": {r["plan_version"] for r in sink.rows(name)}}
    return {**alone, **outcomes}


def test_genmig_equals_old_before_the_split_and_new_after_it(window_change):
    transitions = window_change["genmig"]["transitions"]
    assert [m.state for m in transitions] == ["running", "draining", "done"]
    t_split = transitions[0].t_split
    assert transitions[0].facts["positions"] and t_split > max(transitions[0].facts["positions"].values())
    split = t_split - window_change["genmig"]["start"]
    expected = {k: v for k, v in window_change["a"].items() if k[1] < split}
    expected |= {k: v for k, v in window_change["b"].items() if k[1] >= split}
    got = window_change["genmig"]["rows"]
    assert compare(expected, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == expected.keys()
    assert window_change["genmig"]["versions"] == {0, 1}  # both plans answered
    # Both sides of the split are there, and the new windows are 10 s long.
    assert any(k[1] < split for k in got) and any(k[1] >= split for k in got)
    assert all(k[1] - k[0] == 10 for k in got if k[1] >= split)


def test_a_naive_restart_gets_results_wrong_on_the_same_input(window_change):
    # The same expectation for the restart's results, split where GenMig split.
    split = window_change["genmig"]["transitions"][0].t_split - window_change["genmig"]["start"]
    expected = {k: v for k, v in window_change["a"].items() if k[1] < split}
    expected |= {k: v for k, v in window_change["b"].items() if k[1] >= split}
    counted = compare(expected, window_change["naive"]["rows"])
    assert counted["lost"] + counted["duplicated"] + counted["wrong"] > 0, counted
