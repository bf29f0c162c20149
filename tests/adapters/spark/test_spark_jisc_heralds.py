"""armd's join on Spark honours the heralds' mode table: store heralds reach the running join, exactly.

Three streams whose every piece of time carries a herald on its key (the
low or the high half of the keys, now and then any); the heralds are
written to the metadata store while the query runs, after its first
micro-batch, and ``HeraldJoinModes`` publishes the mode table the join
reads at its next one. The join's output must be the oracle's over every
row (the unoptimised join), and the join must have processed every row but
those the mode table skips (its observed per-stream counts say so).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone

from support.jisc_logs import heralded_log
from support.spark import spark  # noqa: F401

from armd.adapters.spark.jisc import jisc_join
from armd.adapters.spark.jisc_heralds import HeraldJoinModes, read_modes
from armd.adapters.spark.session import build_session
from armd.adapters.store import SqlStore
from armd.migrations.heralds.record import HeraldRecord
from armd.migrations.join import oracle_results

BASE = 1_800_000_000
W_S = 10


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(BASE + seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_join_skips_what_store_heralds_rule_out_and_equals_the_oracle(spark, tmp_path) -> None:  # noqa: F811
    names = ["A", "B", "C"]
    log, heralds = heralded_log(1, names, keys=6, span=300, piece=30, n=360)
    expected = oracle_results(log, W_S)
    assert sum(expected.values()) > 10
    cuts = [0, 60, 180, 300]  # three micro-batches by event time, then one that moves every watermark past the log
    parts = [[e for e in range(len(log)) if a <= log.ts[e] < b] for a, b in zip(cuts, cuts[1:])]
    parts.append([-1 - i for i in range(len(names))])

    def row(e: int) -> str:
        if e < 0:
            return json.dumps({"s": names[-1 - e], "k": -1, "id": e, "t": iso(5000)})
        return json.dumps({"s": names[log.stream[e]], "k": log.key[e], "id": e, "t": iso(log.ts[e])})

    store = SqlStore.open(f"sqlite:///{tmp_path / 'armd.db'}", retries=0)
    store.upgrade()
    modes_path = tmp_path / "modes.json"
    modes = HeraldJoinModes(store.heralds, modes_path, dict.fromkeys(names, "k"), W_S * 1000)
    session = build_session(state_store="rocksdb")
    query = None
    try:
        source = tmp_path / "in"
        source.mkdir()
        events = session.readStream.schema("s string, k long, id long, t timestamp").option("maxFilesPerTrigger", 1)
        events = events.json(str(source))
        joined = jisc_join({n: events.where(events.s == n) for n in names}, key="k", time="t", id="id",
                           window_ms=W_S * 1000, control_path=str(tmp_path / "plan.json"), modes_path=str(modes_path),
                           observe_as="x")
        query = (joined.writeStream.format("memory").queryName("jisc_heralds_out").outputMode("append")
                 .option("checkpointLocation", str(tmp_path / "ckpt")).start())
        for b, part in enumerate(parts):
            if b == 1:  # written while the query runs, between two micro-batches
                for stream, promised in heralds.items():
                    for low, high, start, seconds in promised:
                        store.add_herald(HeraldRecord(stream, {"k": (low, high)},
                                                      datetime.fromtimestamp(BASE + start, tz=timezone.utc),
                                                      seconds=float(seconds)))
                modes.refresh()
            hidden = source / f".part-{b:03d}.json"  # the file source skips hidden files: write, then rename
            hidden.write_text("".join(row(e) + "\n" for e in part))
            hidden.rename(source / f"part-{b:03d}.json")
            query.processAllAvailable()
        out = session.table("jisc_heralds_out").collect()
        processed = 0  # the tuples the join processed, as its observed metrics count them
        for progress in query.recentProgress:
            counts = (progress.observedMetrics or {}).get(f"armd:pairs:x:tuples:{2 * W_S!r}.0")
            processed += sum(counts[n] or 0 for n in names) if counts is not None else 0
    finally:
        if query is not None:
            query.stop()
        build_session(state_store="hdfs")
        store.close()
    got = Counter(tuple(sorted(r[f"{n}_id"] for n in names)) for r in out)
    assert got == expected, (expected - got, got - expected)
    table = read_modes(modes_path, names)
    later = [e for part in parts[1:3] for e in part]
    skipped = [e for e in later if table.skipped(log.stream[e], int((BASE + log.ts[e]) * 1000))]
    assert table.epoch == 1 and len(skipped) > len(later) // 10  # the heralds made a good part of the rows joinless
    assert processed == len(log) - len(skipped)  # and the join dropped exactly those before they touched state


def test_mode_file_round_trip_and_errors(tmp_path) -> None:
    import pytest

    from armd.adapters.spark.jisc_heralds import write_modes

    path = tmp_path / "modes.json"
    names = ["A", "B"]
    assert read_modes(path, names).epoch == 0 and not read_modes(path, names).any()  # missing: nothing skipped
    write_modes(path, 2, {"A": [(10, 20), (30, 40)]})
    table = read_modes(path, names)
    assert table.epoch == 2 and [table.skipped(0, t) for t in (9, 10, 19, 20, 35, 40)] == [False, True, True, False, True, False]
    assert not table.skipped(1, 15)
    for body, message in (
        ("{", "not valid JSON"),
        ('{"epoch": 1}', "exactly the keys epoch and skip"),
        ('{"epoch": -1, "skip": {}}', "epoch must be a whole number"),
        ('{"epoch": 1, "skip": {"X": []}}', "unknown stream"),
        ('{"epoch": 1, "skip": {"A": [[5, 5]]}}', "bad intervals"),
        ('{"epoch": 1, "skip": {"A": [[0, 10], [5, 20]]}}', "bad intervals"),
        ('{"epoch": 1, "skip": {"A": [[0, 1.5]]}}', "bad intervals"),
    ):
        path.write_text(body)
        with pytest.raises(ValueError, match=message) as err:
            read_modes(path, names)
        assert str(path) in str(err.value) and "start < end" in str(err.value)
