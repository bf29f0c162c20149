"""The JISC Spark host (``adapters/spark/jisc.py``) against ``migrations.join``'s brute-force oracle.

One end-to-end run on local Spark (``transformWithStateInPandas`` on RocksDB,
file sources, the join order changed through the control file between
micro-batches), plus fast checks of the control file's validation. The
per-key engine the processor runs is checked without Spark, over many random
logs and plans, in ``tests/migrations/test_per_key.py``.
"""

from __future__ import annotations

import json
import pickle
import time
from collections import Counter
from datetime import datetime, timezone

import pytest
from support.jisc_logs import pair_counts, random_log
from support.spark import spark  # noqa: F401

from armd.adapters.spark.jisc import jisc_join, read_control, write_control
from armd.adapters.spark.session import build_session
from armd.migrations.join import EventLog, KeyEngine, left_deep, oracle_results

W_MS = 10_000
"""Window: 10 s (timestamps are whole seconds, so the oracle works in seconds with W = 10)."""


def batches(log: EventLog, count: int) -> list[range]:
    """Split the log into ``count`` runs of consecutive events, cutting only where the timestamp grows."""
    cuts = [i for i in range(1, len(log)) if log.ts[i] > log.ts[i - 1]]
    step = max(1, len(cuts) // count)
    bounds = [0] + cuts[step - 1 :: step][: count - 1] + [len(log)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


# --- the control file ------------------------------------------------------------------------------


def test_control_file_round_trip_and_errors(tmp_path) -> None:
    path = tmp_path / "plan.json"
    names = ["A", "B", "C"]
    assert read_control(path, names, left_deep(names)).epoch == 0  # missing: the default, epoch 0
    write_control(path, 3, (("C", "B"), "A"))
    c = read_control(path, names)
    assert c.epoch == 3 and c.order == (("C", "B"), "A")
    write_control(path, 4, ["B", "A", "C"])  # flat list: left-deep
    assert read_control(path, names).order == (("B", "A"), "C")
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary files left behind
    for body, message in (
        ("{", "not valid JSON"),
        ('{"epoch": 1}', "exactly the keys epoch and order"),
        ('[1, 2]', "exactly the keys epoch and order"),
        ('{"epoch": -1, "order": ["A", "B", "C"]}', "epoch must be a whole number"),
        ('{"epoch": true, "order": ["A", "B", "C"]}', "epoch must be a whole number"),
        ('{"epoch": 1, "order": ["A", "B", "X"]}', "bad order"),
        ('{"epoch": 1, "order": [["A", "B"]]}', "bad order"),
    ):
        path.write_text(body)
        with pytest.raises(ValueError, match=message) as err:
            read_control(path, names)
        assert str(path) in str(err.value) and "exactly once" in str(err.value)
    with pytest.raises(ValueError, match="epoch must be"):
        write_control(path, -2, ["A", "B", "C"])
    with pytest.raises(ValueError, match="does not exist"):
        read_control(tmp_path / "nope.json", names)


# --- on local Spark ---------------------------------------------------------------------------------


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(1_800_000_000 + seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_spark_host_equals_the_oracle_across_order_changes(spark, tmp_path) -> None:  # noqa: F811
    started = time.monotonic()
    names = ["A", "B", "C", "D"]
    log = random_log(8, names, keys=3, n=140, span=60)
    window = W_MS // 1000
    expected = oracle_results(log, window)
    assert sum(expected.values()) > 20  # enough results to mean something
    parts = [list(p) for p in batches(log, 4)]
    # end of input: one tuple per stream far ahead (a key of its own) moves every stream's watermark past the log
    parts.append([-1 - i for i in range(len(names))])
    # published before batches 1 and 2: AB is kept, ABD is new; then AB is kept, CD is new (bushy)
    orders = {1: (1, ((("B", "A"), "D"), "C")), 2: (2, (("A", "B"), ("D", "C")))}

    def row(e: int) -> str:
        if e < 0:
            return json.dumps({"s": names[-1 - e], "k": -1, "id": e, "t": iso(1000)})
        return json.dumps({"s": names[log.stream[e]], "k": log.key[e], "id": e, "t": iso(log.ts[e])})

    session = build_session(state_store="rocksdb")
    query = None
    try:
        control = tmp_path / "plan.json"
        source = tmp_path / "in"
        source.mkdir()
        # One file source for all streams (one offset per micro-batch for all of them); each stream is a filter on it.
        events = session.readStream.schema("s string, k long, id long, t timestamp").option("maxFilesPerTrigger", 1)
        events = events.json(str(source))
        inputs = {name: events.where(events.s == name) for name in names}
        joined = jisc_join(inputs, key="k", time="t", id="id", window_ms=W_MS, control_path=str(control), observe_as="x")
        query = (
            joined.writeStream.format("memory").queryName("jisc_out").outputMode("append")
            .option("checkpointLocation", str(tmp_path / "ckpt")).start()
        )
        for b, part in enumerate(parts):
            if b in orders:
                write_control(control, *orders[b])
            hidden = source / f".part-{b:03d}.json"  # the file source skips hidden files: write, then rename
            hidden.write_text("".join(row(e) + "\n" for e in part))
            hidden.rename(source / f"part-{b:03d}.json")
            query.processAllAvailable()
        out = session.table("jisc_out").collect()
        observed = Counter()
        for progress in query.recentProgress:
            row = (progress.observedMetrics or {}).get(f"armd:pairs:x:tuples:{2 * W_MS / 1000!r}")
            observed.update({k: v for k, v in (row.asDict() if row is not None else {}).items() if v is not None})
        state = session.read.format("statestore").option("path", str(tmp_path / "ckpt"))
        blobs = {}  # join key → its state, held in its bucket's one value
        for r in state.option("stateVarName", "bucket").load().collect():
            blobs.update(pickle.loads(bytes(r["value"]["blob"]))["keys"])
    finally:
        if query is not None:
            query.stop()
        build_session(state_store="hdfs")
    got = Counter(tuple(sorted(r[f"{n}_id"] for n in names)) for r in out)
    assert got == expected, (expected - got, got - expected)
    assert max(got.values()) == 1  # no duplicates
    assert {r["epoch"] for r in out} >= {1, 2}  # results under more than one plan
    for r in out[:5]:
        times = [r[f"{n}_time"].replace(tzinfo=timezone.utc).timestamp() for n in names]
        assert max(times) - min(times) < window
    engines = {k: KeyEngine.load(b, names, W_MS) for k, b in blobs.items()}
    assert set(engines) == {-1}  # the timers expired every key of the log once the watermark passed it
    # the processor's counts reach the progress events: every tuple and every pair of the log, once
    assert +observed == pair_counts(log, window)
    assert time.monotonic() - started < 90
