"""GenMig against a naive restart on local Spark: results lost, duplicated, wrong; duration, output gaps, extra state.

Each scenario runs its query four times over the same replayed input (the
``armd-synthetic`` source, event time at ``SPEED`` seconds per wall-clock
second): the old plan alone, the new plan alone, and old → new by GenMig
and by a naive restart while the query runs. The expected result is the
old plan's before T_split and the new plan's from T_split on (T_split of
the GenMig run); both migrated runs are counted against it. A result is
identified by its reference point (a window's end, a join result's latest
event time) and its columns; a window aggregate's count is its value.

Scenarios: a windowed count per key (window and slide changed, a filter
added, a duplicate elimination removed), a two-way and a three-way
stream-stream join (range changed, join order changed) on the synthetic
source; and the window change on two of Spark's own sources (each row names
its ``"source"``): a directory of JSON files being appended (the same
arrivals, one file per second of event time, renamed in at BATCH event
seconds per trigger while the migrated query runs; the runs alone read the
finished directory) and ``rate-micro-batch`` (key = value mod KEYS, BATCH
event seconds per batch). There the naive restart starts where a fresh
checkpoint starts its source: the whole directory again, the first batch.

Times are event time (seconds of the stream), which the simulated source
makes independent of the machine's speed: the migration lasts from the
position the new run starts at to the end of the old run's first batch
whose watermark has passed T_split (its last result is then out); an output gap
is the distance between consecutive distinct reference points
the sink received, around the migration (any gap reaching into the
time from its start to T_split + window) and in steady operation before it.
``window_s`` is the window T_split is placed by (Algorithm 1's w): the
largest window of either plan times the windows a result spans (two for the
three-way join, whose streams are bound to the first one only). The extra state is
the new run's Spark state (memoryUsedBytes) while the old one still runs;
its prediction is the cost model's ``spark`` profile estimate of the new
plan, filling over the migration (``migrations.genmig.transient_cost``),
at the bytes per row measured on the old run.

    .venv/bin/python bench/migration.py --json [--scenario SUBSTRING]

prints {"cases": [{"scenario", "source", "strategy", "lost", "duplicated", "wrong",
"migration_duration_s", "window_s", "watermark_delay_s", "trigger_s",
"max_output_gap_s", "steady_output_gap_s", "peak_extra_state_bytes",
"predicted_extra_state_bytes"}, …], "targets"}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Mapping

import structlog

from armd.adapters.spark.genmig import GenMigApplier
from armd.adapters.spark.listener import ProgressListener
from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
from armd.adapters.spark.session import build_session
from armd.adapters.spark.sinks import MemorySink
from armd.adapters.spark.source import Arrivals, SourceOptions, schedule_json
from armd.adapters.synthetic import Schedule
from armd.control.errors import NotReady
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan
from armd.migrations.genmig import transient_cost

SPEED = 16.0
END = 40.0
BATCH = 2.0
DELAY = 2.0
KEYS = 5
MIGRATE_AT = 12.0
"""Event time (seconds of the stream) the old run's watermark has passed when the migration starts."""
TIME_UNIT = 0.001
"""Seconds of the "+1 time unit" in T_split (Algorithm 1's discrete validity): the resolution event times are
counted in — the daemon's default model unit, milliseconds, at or above every source's timestamp resolution here."""
BUILDERS = "armd.adapters.spark.builders:"


@dataclass(frozen=True)
class Variant:
    """One plan of a scenario: its window (a join's range), slide, join order and further builder params."""

    window: float
    slide: float | None = None
    join_order: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    shape: str
    """``count``, ``join2`` or ``join3``."""
    rates: Mapping[str, float]
    """Elements per second per stream."""
    old: Variant
    new: Variant
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Builder params of both plans."""
    source: str = "armd-synthetic"
    """``armd-synthetic``, ``files`` (a directory of JSON files being appended) or ``rate-micro-batch`` (count only)."""
    speed: float | None = None
    """``armd-synthetic`` only: event seconds per wall second (None: SPEED). Below SPEED the batches are paced by a
    processing-time trigger of BATCH / speed wall seconds, so that each still covers BATCH seconds of event time."""

    @property
    def builder(self) -> str:
        if self.source == "rate-micro-batch":
            return "migration:rate_count"
        return BUILDERS + {"count": "windowed_count", "join2": "range_join", "join3": "three_way_join"}[self.shape]

    @property
    def trigger(self) -> Mapping[str, Any] | None:
        """Files and rate-micro-batch batches are paced by a processing-time trigger; the synthetic source paces itself."""
        if self.source == "armd-synthetic":
            return None if self.speed is None else {"processingTime": f"{BATCH / self.speed:g} seconds"}
        return {"processingTime": f"{TRIGGER_WALL:g} seconds"}

    @property
    def span_windows(self) -> int:
        return 2 if self.shape == "join3" else 1

    def params(self, variant: Variant, start: float, where: str = "") -> QueryParams:
        extra = {"delay_seconds": DELAY, "sources": sources(self.rates, start, self.source, where, self.speed or SPEED),
                 "end": start + END,
                 **self.extra, **variant.extra}
        return QueryParams(windows={"w": variant.window}, slides={"w": variant.slide} if variant.slide else {},
                           join_order=variant.join_order, extra=extra)

    def plan(self, variant: Variant) -> dict[str, Any]:
        """The variant as a cost-model plan in milliseconds, one byte per element (join results too), for ``estimate(…, "spark")``."""
        ms = 1000.0
        duplicated = 1 + float(self.extra.get("duplicate_fraction", 0.0))
        streams = {name: {"d": ms / (rate * duplicated), "g": 1, "size": 1} for name, rate in self.rates.items()}

        def window(stream: str, below: dict | None = None) -> dict:
            return {"op": "window", "w": variant.window * ms, "inputs": [below or {"op": "source", "stream": stream}]}

        if self.shape == "count":
            below = None
            if variant.extra.get("min_value") is not None:
                below = {"op": "select", "sel": 1 - float(variant.extra["min_value"]), "inputs": [{"op": "source", "stream": "clicks"}]}
            query = {"op": "aggregate", "groups": KEYS, "inputs": [
                {"op": "granularity", "g": (variant.slide or variant.window) * ms, "inputs": [window("clicks", below)]}]}
        else:
            order = list(variant.join_order or self.rates)
            query = {"op": "join", "sel": 1 / KEYS, "inputs": [window(order[0]), window(order[1])]}
            if self.shape == "join3":  # a first-join result is one row of the second join's state: one byte, not 1 + 1
                query = {"op": "join", "sel": 1 / KEYS, "inputs": [{"op": "project", "size": 1, "inputs": [query]}, window(order[2])]}
        constants = {"aggregate_size": 1, "watermark_delay": DELAY * ms, "trigger_interval": BATCH * ms}
        return {"streams": streams, "constants": constants, "queries": {"q": query}}


SCENARIOS = [
    Scenario("count per key: window 6 s → 10 s, slide 2 s → 1 s", "count", {"clicks": 10.0}, Variant(6.0, 2.0), Variant(10.0, 1.0)),
    Scenario("count per key: slide 2 s → 4 s (coarser granularity)", "count", {"clicks": 10.0}, Variant(8.0, 2.0), Variant(8.0, 4.0)),
    Scenario("count per key: filter value > 0.5 added", "count", {"clicks": 10.0}, Variant(8.0, 2.0),
             Variant(8.0, 2.0, extra={"min_value": 0.5})),
    Scenario("count per key: duplicate elimination removed", "count", {"clicks": 10.0}, Variant(8.0, 2.0, extra={"distinct": True}),
             Variant(8.0, 2.0), extra={"duplicate_fraction": 0.3}),
    Scenario("two-way join: range 2 s → 4 s", "join2", {"a": 10.0, "b": 10.0}, Variant(2.0), Variant(4.0)),
    Scenario("three-way join: range 2 s → 4 s", "join3", {"a": 3.0, "b": 6.0, "c": 1.5}, Variant(2.0), Variant(4.0)),
    Scenario("three-way join: order (a ⋈ b) ⋈ c → (a ⋈ c) ⋈ b", "join3", {"a": 3.0, "b": 6.0, "c": 1.5},
             Variant(4.0, join_order=("a", "b", "c")), Variant(4.0, join_order=("a", "c", "b"))),
    Scenario("files: count per key, window 6 s → 10 s, slide 2 s → 1 s", "count", {"clicks": 10.0}, Variant(6.0, 2.0),
             Variant(10.0, 1.0), source="files"),
    Scenario("rate-micro-batch: count per key, window 6 s → 10 s, slide 2 s → 1 s", "count", {"clicks": 10.0},
             Variant(6.0, 2.0), Variant(10.0, 1.0), source="rate-micro-batch"),
]
TRIGGER_WALL = 0.5
"""Processing-time trigger (wall seconds) of the files and rate-micro-batch scenarios; their event time advances
BATCH seconds per trigger (files appear at SPEED / 4 event seconds per wall second, rate-micro-batch advances
BATCH per batch)."""
FILE_SLICE = 1.0
"""Event seconds each JSON file of the files scenario covers."""
FILE_SCHEMA = "event_time TIMESTAMP, key BIGINT, value DOUBLE"


ALIGN = 4
"""Every slide divides this: windows (aligned to the epoch) then fall on the same offsets from an origin on a
multiple of it in every run, and runs compare by times after the origin."""


def origin() -> float:
    """A stream origin a few seconds ahead, on a multiple of ``ALIGN`` seconds."""
    return ALIGN * math.ceil((time.time() + 3) / ALIGN)


def sources(rates: Mapping[str, float], start: float, kind: str = "armd-synthetic", where: str = "",
            speed: float = SPEED) -> dict[str, dict[str, Any]]:
    """Each stream's source options (``params.extra["sources"]``); ``where`` is the files scenario's directory."""
    names = ",".join(rates)
    synthetic = {name: {"start": repr(start), "schedule": json.dumps(schedule_json(Schedule(rate))), "seed": 11,
                        "all_streams": names, "keys": KEYS, "end_seconds": END, "max_seconds_per_batch": BATCH, "speed": speed}
                 for name, rate in rates.items()}
    if kind == "files":
        # At most BATCH event seconds per batch, like the synthetic source: a slow run must not leap ahead.
        return {name: {"format": "json", "path": f"{where}/{name}", "schema": FILE_SCHEMA, "event_time_column": "event_time",
                       "maxFilesPerTrigger": str(int(BATCH / FILE_SLICE))} for name in rates}
    if kind == "rate-micro-batch":
        return {name: {"format": "rate-micro-batch", "rowsPerBatch": str(int(rate * BATCH)), "numPartitions": "1",
                       "startTimestamp": str(int(start * 1000)), "advanceMillisPerBatch": str(int(BATCH * 1000))}
                for name, rate in rates.items()}
    return synthetic


def write_files(rates: Mapping[str, float], start: float, where: str, pace: float | None = None) -> None:
    """The synthetic arrivals as JSON files, one per FILE_SLICE event seconds, written (renamed in) in event-time order.

    ``pace``: event seconds per wall-clock second (None: all at once). Rows are the ``armd-synthetic`` source's, so
    every run over the directory sees the same input.
    """
    for name, options in sources(rates, start).items():
        os.makedirs(f"{where}/{name}", exist_ok=True)
    arrivals = {name: Arrivals(SourceOptions.parse({"stream": name, **{k: str(v) for k, v in o.items()}}))
                for name, o in sources(rates, start).items()}
    began = time.monotonic()
    for i in range(int(END / FILE_SLICE)):
        if pace is not None:
            time.sleep(max(0.0, began + i * FILE_SLICE / pace - time.monotonic()))
        for name, source in arrivals.items():
            lines = [json.dumps({"event_time": datetime.fromtimestamp(start + t, tz=timezone.utc).isoformat(), "key": int(k),
                                 "value": float(v)})
                     for times, keys, values in source.between(int(i * FILE_SLICE * 1000), int((i + 1) * FILE_SLICE * 1000))
                     for t, k, v in zip(times, keys, values)]
            staged = f"{where}/.{name}-{i:04d}.json"
            with open(staged, "w") as out:
                out.write("\n".join(lines) + "\n")
            os.replace(staged, f"{where}/{name}/part-{i:04d}.json")


def rate_count(spark: Any, params: QueryParams) -> Any:
    """``windowed_count`` over ``rate-micro-batch``: key = value mod KEYS, rows up to the scenario's end."""
    from pyspark.sql import functions as F

    from armd.adapters.spark.builders import _window, interval
    from armd.adapters.spark.sources import read_source

    name = next(iter(params.extra["sources"]))
    df = read_source(spark, params.extra["sources"], name).select(
        F.col("timestamp").alias("event_time"), (F.col("value") % KEYS).alias("key"))
    df = df.filter(F.col("event_time") < F.timestamp_seconds(F.lit(float(params.extra["end"]))))
    df = df.withWatermark("event_time", interval(float(params.extra.get("delay_seconds", 0)) or 0.001))
    return df.groupBy(_window(params, "w", 10.0, 1.0), "key").agg(F.count(F.lit(1)).alias("n"))


rate_count.reference_point = "window.end"  # type: ignore[attr-defined]


def results(rows: list[dict], start: float) -> dict[tuple, list[int]]:
    """Each result's identity → the values the sink received for it (a window's count; 1 per join result).

    The identity starts with the reference point (seconds after the origin):
    (window end, window start, key) for an aggregate, (latest event time,
    every column) for a join result.
    """
    out: dict[tuple, list[int]] = {}
    for row in rows:
        row = {k: v for k, v in row.items() if k not in ("query", "plan_version", "batch_id")}
        if "window" in row:
            window, value = row.pop("window"), row.pop("n")
            identity = (round(window["end"].timestamp() - start, 3), round(window["start"].timestamp() - start, 3), *sorted(row.items()))
        else:
            times = {k: round(v.timestamp() - start, 3) for k, v in row.items() if isinstance(v, datetime)}
            identity, value = (max(times.values()), *sorted({**row, **times}.items())), 1
        out.setdefault(identity, []).append(value)
    return out


def compare(expected: dict[tuple, list[int]], got: dict[tuple, list[int]]) -> dict[str, int]:
    return {
        "lost": sum(len(v) - len(got.get(k, ())) for k, v in expected.items() if len(got.get(k, ())) < len(v)),
        "duplicated": sum(len(v) - len(expected.get(k, [None])) for k, v in got.items() if len(v) > len(expected.get(k, [None]))),
        "wrong": sum(1 for k, v in got.items() if k not in expected or v[0] != expected[k][0]),
    }


def _at_end(offset: str, start: float) -> bool:
    """Whether a source has read to the scenario's end (and, for rate-micro-batch, the batches that emit its last windows)."""
    doc = json.loads(offset)
    if "event_ms" in doc:
        return doc["event_ms"] >= END * 1000
    if "timestamp" in doc:
        return doc["timestamp"] >= (start + END + 3 * BATCH) * 1000
    return True  # files: the writer is done when this is asked; processAllAvailable reads the rest


def _read_to_end(listener: ProgressListener, manager: QueryManager, name: str, start: float, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        latest = listener.latest(name)
        if latest is not None and latest.sources and all(_at_end(s.end_offset, start) for s in latest.sources):
            break
        time.sleep(0.2)
    query = manager.get(name).query
    if query is not None and not any('"timestamp"' in (s.end_offset or "") for s in latest.sources):
        query.processAllAvailable()  # never returns on rate-micro-batch, whose next batch is always available
    manager.stop(name)


def _files_directory(scenario: Scenario) -> str:
    """A directory of its own for the files scenario's input; the other sources need none ("")."""
    return tempfile.mkdtemp(prefix="armd-migration-files-") if scenario.source == "files" else ""


def alone(listener: ProgressListener, manager: QueryManager, sink: MemorySink, name: str, scenario: Scenario,
          variant: Variant) -> dict:
    start, where = origin(), _files_directory(scenario)
    if scenario.source == "files":
        write_files(scenario.rates, start, where)
    manager.register(ManagedSpec(name, scenario.builder, sink, scenario.params(variant, start, where), trigger=scenario.trigger))
    manager.start(name)
    _read_to_end(listener, manager, name, start)
    return results(sink.rows(name), start)


def migrate(listener: ProgressListener, manager: QueryManager, sink: MemorySink, name: str, strategy: str,
            scenario: Scenario) -> dict[str, Any]:
    """Run the old plan, change it to the new one by ``strategy`` once its watermark passed MIGRATE_AT, read to the end."""
    start, where = origin(), _files_directory(scenario)
    writer = None
    if scenario.source == "files":  # the directory is appended to while the query runs: BATCH event seconds per trigger
        writer = threading.Thread(target=write_files, args=(scenario.rates, start, where, BATCH / TRIGGER_WALL), daemon=True)
        writer.start()
    manager.register(ManagedSpec(name, scenario.builder, sink, scenario.params(scenario.old, start, where), trigger=scenario.trigger))
    transitions: list = []
    applier = GenMigApplier(manager, listener, TIME_UNIT, on_transition=transitions.append)
    manager.start(name)
    if not listener.wait_for(lambda: (r := listener.latest(name)) is not None and r.watermark is not None
                             and r.watermark.timestamp() >= start + MIGRATE_AT, 120):
        raise RuntimeError(f"{name}: the old run did not reach {MIGRATE_AT} s of event time")
    old_run = str(manager.get(name).query.runId)  # type: ignore[union-attr]
    new = scenario.params(scenario.new, start, where)
    if strategy == "genmig":
        for attempt in range(10):  # NotReady is "not now": the daemon's coordinator tries again at its next round too
            try:
                applier.migrate(name, new)
                break
            except NotReady:
                if attempt == 9:
                    raise
                time.sleep(0.5)
        deadline = time.monotonic() + 240
        while applier.advance() and time.monotonic() < deadline:
            time.sleep(0.2)
        if applier.migrations:
            raise RuntimeError(f"{name}: GenMig did not finish within 240 s (state {applier.migrations[name].state})")
    else:  # a restarted query reads on from where the stream is now (the synthetic source), else from where its
        # source starts on a fresh checkpoint: a file source's whole directory, rate-micro-batch's first batch
        fresh = {s: {**o, "starting_seconds": "latest"} if scenario.source == "armd-synthetic" else o
                 for s, o in new.extra["sources"].items()}
        manager.restart(name, replace(new, extra={**new.extra, "sources": fresh}))
    new_run = str(manager.get(name).query.runId)  # type: ignore[union-attr]
    if writer is not None:
        writer.join()
    _read_to_end(listener, manager, name, start)
    records = [r for r in listener.records(name)]
    written = sink.rows(name)
    return {"rows": results(written, start), "versions": sorted({r["plan_version"] for r in written}),
            "transitions": transitions, "start": start,
            "old": [r for r in records if r.run_id == old_run], "new": [r for r in records if r.run_id == new_run]}


def expected(a: dict, b: dict, split: float) -> dict:
    """The old plan's results before T_split and the new plan's from it on (``split`` after the origin)."""
    return {k: v for k, v in a.items() if k[0] < split} | {k: v for k, v in b.items() if k[0] >= split}


def _max_gap(points: list[float], low: float, high: float) -> float:
    """The largest distance between consecutive distinct reference points among those spanning [low, high]."""
    ordered = sorted(set(points))
    return max((b - a for a, b in zip(ordered, ordered[1:]) if b >= low and a <= high), default=high - low)


def measure_scenario(spark: Any, listener: ProgressListener, scenario: Scenario, index: int) -> list[dict[str, Any]]:
    manager = QueryManager(spark, tempfile.mkdtemp(prefix="armd-migration-"))
    sink = MemorySink()
    a = alone(listener, manager, sink, f"a{index}", scenario, scenario.old)
    b = alone(listener, manager, sink, f"b{index}", scenario, scenario.new)
    runs = {strategy: migrate(listener, manager, sink, f"{strategy}{index}", strategy, scenario) for strategy in ("genmig", "naive")}
    genmig = runs["genmig"]
    first = genmig["transitions"][0]
    split = first.t_split - genmig["start"]
    want = expected(a, b, split)
    window = first.facts["span_seconds"]
    began = max(first.facts["positions"].values()) - genmig["start"]
    cases = []
    for strategy, run in runs.items():
        start = run["start"]
        points = [k[0] for k in run["rows"]]
        # The migration is over when the old run has given its last result: after the first batch whose watermark
        # has passed T_split, or for a join (results out on arrival) that has read past it on every source (the
        # batches it still runs until the applier stops it only write nothing).
        passed = [r.event_max.timestamp() - start for r in run["old"] if r.event_max and _done(r, start, split, first.facts["emits"])]
        old_last = min(passed, default=max((r.event_max.timestamp() - start for r in run["old"] if r.event_max), default=began))
        new_state = [r.state_bytes for r in run["new"] if r.event_max and r.event_max.timestamp() - start <= old_last]
        old_rows = [(r.state_bytes, r.state_rows) for r in run["old"] if r.state_rows]
        per_row = sum(x for x, _ in old_rows) / sum(n for _, n in old_rows) if old_rows else math.nan
        cases.append({
            "scenario": scenario.name, "source": scenario.source, "strategy": "genmig" if strategy == "genmig" else "naive-restart",
            **compare(want, run["rows"]),
            "migration_duration_s": round(old_last - began, 3) if strategy == "genmig" else 0.0,
            "window_s": window, "watermark_delay_s": DELAY, "trigger_s": BATCH,
            "max_output_gap_s": round(_max_gap(points, began, split + window), 3),
            "steady_output_gap_s": round(_max_gap([p for p in points if p < began], -math.inf, began), 3),
            "peak_extra_state_bytes": max(new_state, default=0) if strategy == "genmig" else 0,
            "predicted_extra_state_bytes": round(predicted_extra(scenario, per_row, window, first.facts["emits"])) if strategy == "genmig" else 0,
            "t_split_s": round(split, 3), "expected_results": len(want),
        })
    return cases


def _done(record: Any, start: float, split: float, emits: str) -> bool:
    """Whether the old run has emitted every result before T_split with this batch."""
    if emits == "arrival":
        return all(json.loads(s.end_offset)["event_ms"] / 1000 >= split for s in record.sources)
    return record.watermark is not None and record.watermark.timestamp() - start >= split


def predicted_extra(scenario: Scenario, bytes_per_row: float, window: float, emits: str) -> float:
    """The new plan's state while both run: the spark profile's estimate, filling over the migration.

    ``window`` is the span T_split was placed by; an element stays span + delay + trigger in Spark's state.
    """
    rows = estimate(parse_plan(scenario.plan(scenario.new)), "spark").total.memory
    return transient_cost(window, 0.0, DELAY, BATCH, 0.0, rows * bytes_per_row, window + DELAY + BATCH,
                          on_arrival=emits == "arrival").extra_memory


def run(scenarios: list[Scenario]) -> dict[str, Any]:
    spark = build_session()
    listener = ProgressListener().attach(spark)
    cases = [c for i, scenario in enumerate(scenarios) for c in measure_scenario(spark, listener, scenario, i)]
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
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--scenario", default="", help="run only the scenarios whose name contains this")
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the JSON's
    chosen = [s for s in SCENARIOS if args.scenario in s.name]
    if not chosen:
        parser.error(f"no scenario name contains {args.scenario!r}; names: {'; '.join(s.name for s in SCENARIOS)}")
    result = run(chosen)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
