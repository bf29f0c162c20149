"""``bench/jisc.py --spark``: armd's n-way join on Spark against Spark's native stream-stream join.

The same two- and three-way windowed equi-joins (key equal, every pair of
event times less than W apart) run twice over the same input, in the same
run: as Spark's native stream-stream join (chained inner joins with
time-range conditions, watermarks on every input) and as armd's JISC join
(``adapters/spark/jisc.py``: ``transformWithStateInPandas`` per key, the
same plan throughout, no transition). Both read one JSON file source whose
files are all present before the query starts, one file per micro-batch,
so the query runs at saturation; throughput is input rows over the wall
time from start to the end of the last micro-batch, the median over
``repeats`` runs per engine, the engines alternating (each first in turn) so
that the shared machine's load swings hit both alike; the JSON gives every
run's time and the 1-minute load average before and after. Both use the RocksDB
state store (armd's join needs it); state bytes are the largest
``memoryUsedBytes`` summed over the stateful operators in any progress
report. Each engine's result count is checked against a brute force over
the input (the oracle).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from itertools import product
from pathlib import Path

W_S = 10
"""Window in seconds; timestamps are whole seconds, so ``|Δ| < 10`` is ``|Δ| ≤ 9`` for the native join."""


def iso(seconds: int) -> str:
    return datetime.fromtimestamp(1_800_000_000 + seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def workload(names: list[str], per_stream: int, keys: int, rate: int, seed: int) -> list[tuple[str, int, int, int]]:
    """(stream, key, id, second) in time order: ``rate`` tuples per second per stream, keys uniform."""
    rnd = random.Random(seed)
    rows = []
    for i in range(per_stream * len(names)):
        rows.append((names[i % len(names)], rnd.randrange(keys), i, i // (rate * len(names))))
    return rows


def oracle(rows, names: list[str]) -> int:
    """Results of the n-way join: one tuple per stream, one key, all times less than W apart."""
    by_key: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for s, k, _, t in rows:
        by_key[k][s].append(t)
    count = 0
    for streams in by_key.values():
        for times in product(*(streams[n] for n in names)):
            if max(times) - min(times) < W_S:
                count += 1
    return count


def write_files(directory: Path, rows, names: list[str], files: int) -> None:
    step = -(-len(rows) // files)
    for f in range(files):
        part = rows[f * step : (f + 1) * step]
        (directory / f"part-{f:03d}.json").write_text(
            "".join(json.dumps({"s": s, "k": k, "id": i, "t": iso(t)}) + "\n" for s, k, i, t in part))
    end = rows[-1][3] + 10 * W_S  # one tuple per stream far ahead, each with a key of its own: moves the watermarks on
    (directory / f"part-{files:03d}.json").write_text(
        "".join(json.dumps({"s": n, "k": -1 - j, "id": -1 - j, "t": iso(end)}) + "\n" for j, n in enumerate(names)))


def native_join(events, names: list[str]):
    from pyspark.sql import functions as F

    sides = [events.where(events.s == n).select(F.col("k").alias(f"{n}_k"), F.col("id").alias(f"{n}_id"),
                                                 F.col("t").alias(f"{n}_t")).withWatermark(f"{n}_t", "2 seconds")
             for n in names]
    out = sides[0]
    for j, n in enumerate(names[1:], start=1):
        cond = F.col(f"{names[0]}_k") == F.col(f"{n}_k")
        for m in names[:j]:  # every pair of times within the window
            cond = cond & (F.col(f"{n}_t") >= F.col(f"{m}_t") - F.expr(f"INTERVAL {W_S - 1} SECONDS"))
            cond = cond & (F.col(f"{n}_t") <= F.col(f"{m}_t") + F.expr(f"INTERVAL {W_S - 1} SECONDS"))
        out = out.join(sides[j], cond, "inner")
        if j < len(names) - 1:  # a stream may carry one event time: keep the first input's, the others as plain times
            out = out.select(*[F.col(c) if c == f"{names[0]}_t" or not c.endswith("_t") else F.col(c).alias(c, metadata={})
                               for c in out.columns])
    return out


def run_engine(session, engine: str, names: list[str], source: Path, work: Path, table: str | None = None) -> dict:
    from armd.adapters.spark.jisc import jisc_join

    events = session.readStream.schema("s string, k long, id long, t timestamp").option("maxFilesPerTrigger", 1)
    events = events.json(str(source))
    if engine == "native":
        joined = native_join(events, names)
    else:
        inputs = {n: events.where(events.s == n) for n in names}
        joined = jisc_join(inputs, key="k", time="t", id="id", window_ms=W_S * 1000,
                           control_path=str(work / f"plan-{engine}.json"), watermark_delay="2 seconds")
    table = table or f"out_{engine}_{len(names)}"
    started = time.perf_counter()
    query = (joined.writeStream.format("memory").queryName(table).outputMode("append")
             .option("checkpointLocation", str(work / f"ckpt-{engine}")).start())
    try:
        query.processAllAvailable()
        elapsed = time.perf_counter() - started
        state = max((sum(op.get("memoryUsedBytes", 0) for op in p.get("stateOperators", []))
                     for p in (json.loads(p.json) for p in query.recentProgress)), default=0)
    finally:
        query.stop()
    return {"seconds": elapsed, "results": session.table(table).count(), "state_bytes": state}


def main(per_stream: int, seed: int, *, keys: int = 20_000, files: int = 4, repeats: int = 3,
         conf: dict[str, str] | None = None) -> dict:
    from armd.adapters.spark.session import build_session

    load_before = os.getloadavg()
    session = build_session("local[2]", "armd-bench-jisc", conf=conf, shuffle_partitions=2, state_store="rocksdb")
    cases = []
    try:
        with tempfile.TemporaryDirectory() as tmp:  # warm-up, not measured: the first query of a session pays for it
            source = Path(tmp) / "in"
            source.mkdir()
            write_files(source, workload(["A", "B"], 500, keys=100, rate=20, seed=seed), ["A", "B"], files=2)
            for engine in ("native", "armd"):
                run_engine(session, engine, ["A", "B"], source, Path(tmp) / engine, table=f"warm_{engine}")
        for names in (["A", "B"], ["A", "B", "C"]):
            rows = workload(names, per_stream, keys=keys, rate=20, seed=seed)
            expected = oracle(rows, names)
            with tempfile.TemporaryDirectory() as tmp:
                source = Path(tmp) / "in"
                source.mkdir()
                write_files(source, rows, names, files=files)
                runs: dict[str, list[dict]] = {"native": [], "armd": []}
                for rep in range(repeats):  # interleaved, each engine first in turn: load on the machine hits both alike
                    for engine in (("native", "armd") if rep % 2 == 0 else ("armd", "native")):
                        work = Path(tmp) / f"{engine}-{rep}"
                        run = run_engine(session, engine, names, source, work, table=f"out_{engine}_{len(names)}_{rep}")
                        run["load"] = os.getloadavg()[0]
                        runs[engine].append(run)
                        print(json.dumps({"join": f"{len(names)}-way", "engine": engine, "repeat": rep,
                                          **{k: round(v, 2) for k, v in run.items()}}), file=sys.stderr)
                for engine in ("native", "armd"):
                    seconds = statistics.median(r["seconds"] for r in runs[engine])
                    cases.append({
                        "join": f"{len(names)}-way", "engine": engine, "tuples": len(rows),
                        "rows_per_s": round(len(rows) / seconds, 1), "seconds": round(seconds, 2),
                        "seconds_per_repeat": [round(r["seconds"], 2) for r in runs[engine]],
                        "state_bytes": max(r["state_bytes"] for r in runs[engine]),
                        "results": runs[engine][0]["results"], "oracle_results": expected,
                        "oracle_ok": all(r["results"] == expected for r in runs[engine]),
                    })
    finally:
        session.stop()

    def ratio(join: str) -> float:
        armd, native = (next(c["rows_per_s"] for c in cases if c["join"] == join and c["engine"] == e) for e in ("armd", "native"))
        return round(armd / native, 3)

    return {
        "cases": cases,
        "armd_over_native_2_way": ratio("2-way"),
        "armd_over_native_3_way": ratio("3-way"),
        "target": "armd's join >= 0.5 x native throughput",
        "repeats": repeats,
        "figure": "median wall time of the repeats (engines interleaved)",
        "micro_batches": files + 1,
        "keys": keys,
        "conf": dict(conf or {}),
        "load_average_1m": {"before": round(load_before[0], 1), "after": round(os.getloadavg()[0], 1)},
        "oracle_ok": all(c["oracle_ok"] for c in cases),
    }
