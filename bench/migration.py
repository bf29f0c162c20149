"""GenMig against a naive restart on local Spark: results lost, duplicated, wrong; duration, output gaps, extra state.

Each scenario runs its query four times over the same replayed input (the
``armd-synthetic`` source, event time at ``SPEED`` seconds per wall-clock
second): the old plan alone, the new plan alone, and old → new by GenMig
and by a naive restart while the query runs. The expected result is the
old plan's before T_split and the new plan's from T_split on (T_split of
the GenMig run); both migrated runs are counted against it.

Times are event time (seconds of the stream), which the simulated source
makes independent of the machine's speed: the migration lasts from the
position the new run starts at to the end of the old run's first batch
whose watermark has passed T_split (its last result is then out); an output gap
is the distance between consecutive distinct reference points (window
ends) the sink received, around the migration (any gap reaching into the
time from its start to T_split + window) and in steady operation before it. The extra state is
the new run's Spark state (memoryUsedBytes) while the old one still runs;
its prediction is the cost model's ``spark`` profile estimate of the new
plan, filling over the migration (``migrations.genmig.transient_cost``),
at the bytes per row measured on the old run.

    .venv/bin/python bench/migration.py --json

prints {"cases": [{"scenario", "strategy", "lost", "duplicated", "wrong",
"migration_duration_s", "window_s", "watermark_delay_s", "trigger_s",
"max_output_gap_s", "steady_output_gap_s", "peak_extra_state_bytes",
"predicted_extra_state_bytes"}, …], "targets"}.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any

import structlog

from armd.adapters.spark.genmig import GenMigApplier
from armd.adapters.spark.listener import ProgressListener
from armd.adapters.spark.managed import ManagedSpec, NaiveRestartApplier, QueryManager, QueryParams
from armd.adapters.spark.session import build_session
from armd.adapters.spark.sinks import MemorySink
from armd.adapters.spark.source import schedule_json
from armd.adapters.synthetic import Schedule
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from armd.daemon.ports import QuerySettings
from armd.migrations.genmig import transient_cost

SPEED = 16.0
END = 40.0
BATCH = 2.0
DELAY = 2.0
KEYS = 3
RATE = 10.0
MIGRATE_AT = 12.0
"""Event time (seconds of the stream) the old run's watermark has passed when the migration starts."""
WINDOWED_COUNT = "armd.adapters.spark.builders:windowed_count"


@dataclass(frozen=True)
class Scenario:
    name: str
    old: tuple[float, float]
    """(window, slide) of the old plan, seconds."""
    new: tuple[float, float]


SCENARIOS = [
    Scenario("count per key: window 6 s → 10 s, slide 2 s → 1 s", (6.0, 2.0), (10.0, 1.0)),
    Scenario("count per key: slide 2 s → 4 s (coarser granularity)", (8.0, 2.0), (8.0, 4.0)),
]


def settings(window: float, slide: float) -> QuerySettings:
    return QuerySettings(fw=0.0, fg=0.0, windows={"w": window}, granularity=slide, qos=0.0)


ALIGN = 4
"""Every slide divides this: windows (aligned to the epoch) then fall on the same offsets from an origin on a
multiple of it in every run, and runs compare by (window start, end − origin, key)."""


def origin() -> float:
    """A stream origin a few seconds ahead, on a multiple of ``ALIGN`` seconds."""
    return ALIGN * math.ceil((time.time() + 3) / ALIGN)


def sources(start: float) -> dict[str, dict[str, Any]]:
    return {"clicks": {"start": repr(start), "schedule": json.dumps(schedule_json(Schedule(RATE))), "seed": 11,
                       "keys": KEYS, "end_seconds": END, "max_seconds_per_batch": BATCH, "speed": SPEED}}


def results(rows: list[dict], start: float) -> dict[tuple, list[int]]:
    """(window start, window end − origin, key) → the counts the sink received for that window."""
    out: dict[tuple, list[int]] = {}
    for row in rows:
        window = row["window"]
        out.setdefault((window["start"].timestamp() - start, window["end"].timestamp() - start, row["key"]), []).append(row["n"])
    return out


def compare(expected: dict[tuple, list[int]], got: dict[tuple, list[int]]) -> dict[str, int]:
    return {
        "lost": sum(1 for k in expected if k not in got),
        "duplicated": sum(len(v) - 1 for v in got.values() if len(v) > 1),
        "wrong": sum(1 for k, v in got.items() if k not in expected or v[0] != expected[k][0]),
    }


def _read_to_end(listener: ProgressListener, manager: QueryManager, name: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = listener.latest(name)
        if latest is not None and latest.sources and json.loads(latest.sources[0].end_offset)["event_ms"] >= END * 1000:
            break
        time.sleep(0.2)
    query = manager.get(name).query
    if query is not None:
        query.processAllAvailable()
    manager.stop(name)


def alone(listener: ProgressListener, manager: QueryManager, sink: MemorySink, name: str, setting: QuerySettings) -> dict:
    start = origin()
    params = QueryParams(extra={"delay_seconds": DELAY, "sources": sources(start)}).with_settings(setting, 1.0)
    manager.register(ManagedSpec(name, WINDOWED_COUNT, sink, params))
    manager.start(name)
    _read_to_end(listener, manager, name)
    return results(sink.rows(name), start)


def migrate(listener: ProgressListener, manager: QueryManager, sink: MemorySink, name: str, strategy: str,
            old: QuerySettings, new: QuerySettings) -> dict[str, Any]:
    """Run the old plan, change it to the new one by ``strategy`` once its watermark passed MIGRATE_AT, read to the end."""
    start = origin()
    params = QueryParams(extra={"delay_seconds": DELAY, "sources": sources(start)}).with_settings(old, 1.0)
    manager.register(ManagedSpec(name, WINDOWED_COUNT, sink, params))
    transitions: list = []
    applier: Any = (GenMigApplier(manager, listener, 1.0, on_transition=transitions.append) if strategy == "genmig"
                    else NaiveRestartApplier(manager, 1.0))
    manager.start(name)
    if not listener.wait_for(lambda: (r := listener.latest(name)) is not None and r.watermark is not None
                             and r.watermark.timestamp() >= start + MIGRATE_AT, 120):
        raise RuntimeError(f"{name}: the old run did not reach {MIGRATE_AT} s of event time")
    old_run = str(manager.get(name).query.runId)  # type: ignore[union-attr]
    if strategy == "naive":  # a restarted query reads on from where the stream is now
        managed = manager.get(name)
        fresh = {s: {**o, "starting_seconds": "latest"} for s, o in managed.params.extra["sources"].items()}
        managed.params = replace(managed.params, extra={**managed.params.extra, "sources": fresh})
    applier.apply(name, old, new)
    deadline = time.monotonic() + 120
    while strategy == "genmig" and applier.migrating() and time.monotonic() < deadline:
        time.sleep(0.2)
    if strategy == "genmig" and applier.migrations:
        raise RuntimeError(f"{name}: GenMig did not finish within 120 s (state {applier.migrations[name].state})")
    new_run = str(manager.get(name).query.runId)  # type: ignore[union-attr]
    _read_to_end(listener, manager, name)
    records = [r for r in listener.records(name)]
    return {"rows": results(sink.rows(name), start), "transitions": transitions, "start": start,
            "old": [r for r in records if r.run_id == old_run], "new": [r for r in records if r.run_id == new_run]}


def _max_gap(points: list[float], low: float, high: float) -> float:
    """The largest distance between consecutive distinct reference points among those spanning [low, high]."""
    ordered = sorted(set(points))
    return max((b - a for a, b in zip(ordered, ordered[1:]) if b >= low and a <= high), default=high - low)


def measure_scenario(spark: Any, listener: ProgressListener, scenario: Scenario, index: int) -> list[dict[str, Any]]:
    manager = QueryManager(spark, tempfile.mkdtemp(prefix="armd-migration-"))
    sink = MemorySink()
    old, new = settings(*scenario.old), settings(*scenario.new)
    a = alone(listener, manager, sink, f"a{index}", old)
    b = alone(listener, manager, sink, f"b{index}", new)
    runs = {strategy: migrate(listener, manager, sink, f"{strategy}{index}", strategy, old, new) for strategy in ("genmig", "naive")}
    genmig = runs["genmig"]
    first = genmig["transitions"][0]
    split = first.t_split - genmig["start"]
    expected = {k: v for k, v in a.items() if k[1] < split} | {k: v for k, v in b.items() if k[1] >= split}
    window = max(scenario.old[0], scenario.new[0])
    began = max(first.facts["positions"].values()) - genmig["start"]
    cases = []
    for strategy, run in runs.items():
        start = run["start"]
        ends = [k[1] for k in run["rows"]]
        # The migration is over when the old run has given its last result: the first batch whose watermark has
        # passed T_split (the batches it still runs until the applier stops it only write nothing).
        passed = [r.event_max.timestamp() - start for r in run["old"]
                  if r.event_max and r.watermark and r.watermark.timestamp() - start >= split]
        old_last = min(passed, default=max((r.event_max.timestamp() - start for r in run["old"] if r.event_max), default=began))
        new_state = [r.state_bytes for r in run["new"] if r.event_max and r.event_max.timestamp() - start <= old_last]
        old_rows = [(r.state_bytes, r.state_rows) for r in run["old"] if r.state_rows]
        per_row = sum(x for x, _ in old_rows) / sum(n for _, n in old_rows) if old_rows else math.nan
        cases.append({
            "scenario": scenario.name, "strategy": "genmig" if strategy == "genmig" else "naive-restart",
            **compare(expected, run["rows"]),
            "migration_duration_s": round(old_last - began, 3) if strategy == "genmig" else 0.0,
            "window_s": window, "watermark_delay_s": DELAY, "trigger_s": BATCH,
            "max_output_gap_s": round(_max_gap(ends, began, split + window), 3),
            "steady_output_gap_s": round(_max_gap([e for e in ends if e < began], -math.inf, began), 3),
            "peak_extra_state_bytes": max(new_state, default=0) if strategy == "genmig" else 0,
            "predicted_extra_state_bytes": round(predicted_extra(scenario, per_row)) if strategy == "genmig" else 0,
            "t_split_s": round(split, 3),
        })
    return cases


def predicted_extra(scenario: Scenario, bytes_per_row: float) -> float:
    """The new plan's state while both run: the spark profile's estimate, filling over the migration."""
    window, slide = scenario.new
    doc = {"streams": {"clicks": {"d": 1000.0 / RATE, "g": 1, "size": 1}},
           "constants": {"aggregate_size": 1, "watermark_delay": DELAY * 1000, "trigger_interval": BATCH * 1000},
           "queries": {"q": {"op": "aggregate", "groups": KEYS, "inputs": [{"op": "granularity", "g": slide * 1000, "inputs": [
               {"op": "window", "w": window * 1000, "inputs": [{"op": "source", "stream": "clicks"}]}]}]}}}
    rows = estimate(parse_plan(doc), "spark").total.memory
    span = max(scenario.old[0], scenario.new[0])
    return transient_cost(span, 0.0, DELAY, BATCH, 0.0, rows * bytes_per_row, window).extra_memory


def run() -> dict[str, Any]:
    spark = build_session()
    listener = ProgressListener().attach(spark)
    cases = [c for i, scenario in enumerate(SCENARIOS) for c in measure_scenario(spark, listener, scenario, i)]
    genmig = [c for c in cases if c["strategy"] == "genmig"]
    return {
        "cases": cases,
        "targets": {
            "exact": all(c["lost"] == c["duplicated"] == c["wrong"] == 0 for c in genmig),
            "duration_le_window_delay_two_triggers": all(
                c["migration_duration_s"] <= c["window_s"] + c["watermark_delay_s"] + 2 * c["trigger_s"] for c in genmig),
            "gap_le_steady_plus_trigger": all(c["max_output_gap_s"] <= c["steady_output_gap_s"] + c["trigger_s"] for c in genmig),
            "extra_state_within_25pct": all(
                c["peak_extra_state_bytes"] > 0
                and abs(c["predicted_extra_state_bytes"] - c["peak_extra_state_bytes"]) <= 0.25 * c["peak_extra_state_bytes"]
                for c in genmig),
        },
        "scenarios_not_covered": ["two- and three-way joins (window and order changes)", "adding or removing a filter",
                                  "adding or removing a duplicate elimination"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the JSON's
    result = run()
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
