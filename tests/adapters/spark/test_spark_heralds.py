"""Heralds written to the store reach a running Spark query at its next micro-batch; the result stays exact."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone

from support.spark import spark  # noqa: F401

from armd.adapters.herald_feed import StoreHeralds
from armd.adapters.spark.heralds import HeraldSelect
from armd.adapters.store import SqlStore
from armd.migrations.heralds import Verdict, atom, conjunction
from armd.migrations.heralds.record import HeraldRecord

SELECT = conjunction((200, "<=", "a"), ("a", "<", 400))
T0 = datetime(2026, 11, 24, 9, 0, tzinfo=timezone.utc)


def rows(rnd, start: int, n: int, low: int, high: int) -> list[dict]:
    return [{"a": rnd.randint(low, high), "b": i, "t": (T0 + timedelta(seconds=start + i)).isoformat()} for i in range(n)]


def test_store_heralds_skip_and_pass_spans_of_the_next_micro_batch_exactly(spark, tmp_path) -> None:  # noqa: F811
    store = SqlStore.open(f"sqlite:///{tmp_path / 'armd.db'}", retries=0)
    store.upgrade()
    source = tmp_path / "in"
    source.mkdir()
    rnd = random.Random(5)
    batches = [
        rows(rnd, 0, 100, 0, 999),
        rows(rnd, 100, 50, 500, 999) + rows(rnd, 150, 50, 250, 300) + rows(rnd, 200, 50, 0, 350) + rows(rnd, 250, 50, 0, 999),
    ]
    heralds = [({"a": (500, 999)}, 100), ({"a": (250, 300)}, 150), ({"a": (0, 350)}, 200)]
    out: list = []
    ticks = iter(range(100))
    select = HeraldSelect(SELECT, StoreHeralds(store.heralds, "clicks", ts_index=-1), lambda df, _: out.extend(df.collect()),
                          ts="t", clock=lambda: float(next(ticks)))
    events = spark.readStream.schema("a long, b long, t timestamp").option("maxFilesPerTrigger", 1).json(str(source))
    query = events.writeStream.foreachBatch(select).option("checkpointLocation", str(tmp_path / "ckpt")).start()
    try:
        for i, part in enumerate(batches):
            if i == 1:  # written while the query runs, between two micro-batches
                for patterns, start in heralds:
                    store.add_herald(HeraldRecord("clicks", patterns, T0 + timedelta(seconds=start), seconds=50.0))
            hidden = source / f".part-{i}.json"  # the file source skips hidden files: write, then rename
            hidden.write_text("".join(json.dumps(r) + "\n" for r in part))
            hidden.rename(source / f"part-{i}.json")
            query.processAllAvailable()
    finally:
        query.stop()
        store.close()
    expected = sorted((r["a"], r["b"]) for part in batches for r in part if 200 <= r["a"] < 400)
    assert sorted((r["a"], r["b"]) for r in out) == expected
    assert select.plans[0] == []
    assert [(s.verdict, s.residual) for s in select.plans[1]] == [
        (Verdict.UNSATISFIABLE, ()), (Verdict.IMPLIED, ()), (Verdict.UNKNOWN, (atom(200, "<=", "a"),))
    ]


def test_side_stream_heralds_reach_the_next_micro_batch_like_the_stores(spark, tmp_path) -> None:  # noqa: F811
    """``[managed.NAME] herald_sources``: heralds appended to a file of the side stream's directory while the query
    runs plan its next micro-batch, exactly as the store's do."""
    from armd.adapters.herald_feed import stream_heralds

    side, source = tmp_path / "heralds", tmp_path / "in"
    side.mkdir()
    source.mkdir()
    rnd = random.Random(6)
    batches = [rows(rnd, 0, 100, 0, 999), rows(rnd, 100, 50, 500, 999) + rows(rnd, 150, 50, 250, 300) + rows(rnd, 200, 50, 0, 999)]
    out: list = []
    ticks = iter(range(100))
    select = HeraldSelect(SELECT, stream_heralds("clicks", ts_index=-1, side=str(side)),
                          lambda df, _: out.extend(df.collect()), ts="t", clock=lambda: float(next(ticks)))
    events = spark.readStream.schema("a long, b long, t timestamp").option("maxFilesPerTrigger", 1).json(str(source))
    query = events.writeStream.foreachBatch(select).option("checkpointLocation", str(tmp_path / "ckpt")).start()
    try:
        for i, part in enumerate(batches):
            if i == 1:
                with open(side / "clicks.jsonl", "a") as f:
                    for patterns, start in (({"a": [500, 999]}, 100), ({"a": [250, 300]}, 150)):
                        f.write(json.dumps({**patterns, "seconds": 50, "starts_at": (T0 + timedelta(seconds=start)).isoformat()}) + "\n")
            hidden = source / f".part-{i}.json"
            hidden.write_text("".join(json.dumps(r) + "\n" for r in part))
            hidden.rename(source / f"part-{i}.json")
            query.processAllAvailable()
    finally:
        query.stop()
    expected = sorted((r["a"], r["b"]) for part in batches for r in part if 200 <= r["a"] < 400)
    assert sorted((r["a"], r["b"]) for r in out) == expected
    assert select.plans[0] == []
    assert [s.verdict for s in select.plans[1]] == [Verdict.UNSATISFIABLE, Verdict.IMPLIED]
