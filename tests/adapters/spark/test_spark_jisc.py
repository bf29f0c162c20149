"""The JISC Spark host (``adapters/spark/jisc.py``) against ``migrations.join``'s brute-force oracle.

One end-to-end run on local Spark (``transformWithStateInPandas`` on RocksDB,
file sources, the join order changed through the control file between
micro-batches), plus fast checks of the per-key engine the processor runs
(the same micro-batch / timer discipline, many random logs and plans) and of
the control file's validation.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

import pytest
from support.spark import spark  # noqa: F401

from armd.adapters.spark.jisc import KeyEngine, jisc_join, read_control, write_control
from armd.adapters.spark.session import build_session
from armd.migrations.join import EventLog, left_deep, oracle_results

W_MS = 10_000
"""Window: 10 s (timestamps are whole seconds, so the oracle works in seconds with W = 10)."""


def random_log(seed: int, names: list[str], keys: int, n: int, span: int) -> EventLog:
    rng = random.Random(seed)
    events = [(rng.choice(names), rng.randrange(keys), rng.randrange(span)) for _ in range(n)]
    return EventLog.from_events(names, events)


def random_order(rng: random.Random, names: list[str]):
    names = list(names)
    rng.shuffle(names)
    if rng.random() < 0.5:
        return left_deep(names)

    def bushy(ns):
        if len(ns) == 1:
            return ns[0]
        cut = rng.randrange(1, len(ns))
        return (bushy(ns[:cut]), bushy(ns[cut:]))

    return bushy(names)


def next_order(rng: random.Random, order, names: list[str]):
    """Half the time the top two inputs swapped (the states below stay, one new state: JISC's best case)."""
    if rng.random() < 0.5 and not isinstance(order[0], str):
        (low, high), top = order
        return ((low, top), high)
    return random_order(rng, names)


def batches(log: EventLog, count: int) -> list[range]:
    """Split the log into ``count`` runs of consecutive events, cutting only where the timestamp grows."""
    cuts = [i for i in range(1, len(log)) if log.ts[i] > log.ts[i - 1]]
    step = max(1, len(cuts) // count)
    bounds = [0] + cuts[step - 1 :: step][: count - 1] + [len(log)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


# --- the per-key engine, with the processor's batch and timer discipline, without Spark ---------------


def deliveries(log: EventLog, parts: int, rng: random.Random) -> list[list[int]]:
    """Micro-batches of event ids: each stream in its own time order, but streams lag each other at random."""
    out: list[list[int]] = [[] for _ in range(parts + 3)]
    for s in range(len(log.streams)):
        evs = [e for e in range(len(log)) if log.stream[e] == s]
        lag = rng.randrange(3)
        cuts = sorted(rng.randrange(len(evs) + 1) for _ in range(parts - 1)) if evs else []
        for b, (lo, hi) in enumerate(zip([0] + cuts, cuts + [len(evs)])):
            out[b + lag].extend(evs[lo:hi])
    for batch in out:
        rng.shuffle(batch)  # the order inside a micro-batch means nothing
    return out


def simulate(log: EventLog, window_ms: int, plans: list, parts: list[list[int]]) -> tuple[Counter, int, Counter]:
    """What the processor does, without Spark: key state through bytes, timers at the watermark.

    The watermark is Spark's with delay 0 and the ``min`` policy over the
    inputs: the smallest of the streams' newest event times (-1 until every
    stream has been seen). Returns the results, the rows dropped as late and
    the counts the processor reports (``pair_counts``).
    """
    names = list(log.streams)
    store: dict = {}
    timers: dict = {}
    out: Counter = Counter()
    counts: Counter = Counter()
    newest: dict[int, int] = {}
    watermark = -1

    def run(key, eng, epoch, order):
        eng.switch(epoch, order)
        for res in eng.release(watermark):
            out[tuple(sorted(r for _, r, _ in res))] += 1
        arrived, pairs = eng.take_counts()
        counts.update({names[i]: n for i, n in enumerate(arrived)})
        counts.update({f"{names[i]},{names[j]}": n for (i, j), n in pairs.items()})
        store[key] = eng.dump()
        timers[key] = eng.wake_at()

    for b, part in enumerate(parts):
        epoch, order = plans[min(b, len(plans) - 1)]
        by_key = defaultdict(list)
        for e in part:
            by_key[log.key[e]].append(e)
        for key, evs in by_key.items():
            eng = KeyEngine.load(store[key], names, window_ms) if key in store else KeyEngine(names, window_ms, order, epoch)
            for e in evs:
                eng.offer(log.stream[e], e, int(log.ts[e] * 1000), watermark)
            run(key, eng, epoch, order)
        for key, at in list(timers.items()):  # timers fire after the batch's input, at this batch's watermark
            if at is not None and at <= watermark:
                run(key, KeyEngine.load(store[key], names, window_ms), epoch, order)
        for e in part:
            newest[log.stream[e]] = max(newest.get(log.stream[e], -1), int(log.ts[e] * 1000))
        if len(newest) == len(names):
            watermark = max(watermark, min(newest.values()))
    # end of input: a watermark past everything releases and expires what is left
    watermark = 10**12
    for key in list(store):
        run(key, KeyEngine.load(store[key], names, window_ms), *plans[-1])
    dropped = sum(KeyEngine.load(blob, names, window_ms).dropped for blob in store.values())
    return out, dropped, +counts


def pair_counts(log: EventLog, window: float) -> Counter:
    """Brute force: tuples per stream, and per two streams "a,b" the pairs with equal keys less than ``window`` apart."""
    out: Counter = Counter(log.streams[s] for s in log.stream)
    for i in range(len(log)):
        for j in range(i + 1, len(log)):
            a, b = sorted((log.stream[i], log.stream[j]))
            if a != b and log.key[i] == log.key[j] and abs(log.ts[i] - log.ts[j]) < window:
                out[f"{log.streams[a]},{log.streams[b]}"] += 1
    return out


@pytest.mark.parametrize("seed", range(40))
def test_key_engine_with_batches_timers_and_switches_equals_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    names = ["A", "B", "C", "D", "E"][: rng.randint(2, 5)]
    log = random_log(seed, names, keys=rng.randint(1, 4), n=rng.randint(10, 90), span=rng.randint(5, 60))
    window = rng.randint(1, 15)
    parts = deliveries(log, rng.randint(1, 6), rng)
    plans, epoch, order = [], 0, random_order(rng, names)
    for _ in parts:
        if rng.random() < 0.6:
            epoch, order = epoch + rng.randint(1, 2), next_order(rng, order, names)
        plans.append((epoch, order))
    got, dropped, counts = simulate(log, window * 1000, plans, parts)
    expected = oracle_results(log, window)
    assert dropped == 0
    assert got == expected, (expected - got, got - expected)
    assert counts == pair_counts(log, window)


def test_a_fresh_tuple_completes_the_missing_state_and_old_states_are_kept() -> None:
    names = ["A", "B", "C", "D"]
    eng = KeyEngine(names, 100, left_deep(names), epoch=0)
    for stream, t in ((0, 0), (1, 1), (2, 2)):  # A, B, C: AB and ABC hold one entry each
        eng.add(stream, stream, t)
    eng = KeyEngine.load(eng.dump(), names, 100)
    eng.switch(1, ((("A", "C"), "B"), "D"))
    assert eng.incomplete() == [frozenset({0, 2})] and eng.completions == 0  # AC is new; ABC = ACB kept
    eng.switch(1, left_deep(names))  # the same epoch again: no switch
    assert eng.epoch == 1 and eng.incomplete() == [frozenset({0, 2})]
    assert eng.add(3, 9, 3) == [(0, 1, 2, 3)]  # D probes ABC (kept, complete): no completion needed
    eng = KeyEngine.load(eng.dump(), names, 100)
    assert eng.completions == 0
    assert len(eng.add(1, 10, 4)) == 1  # B probes AC: fresh, completes it first
    assert eng.completions == 1 and eng.incomplete() == []


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
        blobs = {r["key"]["key"]: bytes(r["value"]["blob"]) for r in state.option("stateVarName", "jisc").load().collect()}
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
