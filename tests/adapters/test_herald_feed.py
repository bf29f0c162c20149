"""Heralds written to a real SQLite store (``add_herald`` and plain SQL) reach a running select at its next batch."""

from __future__ import annotations

import json
import random
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from structlog.testing import capture_logs

from armd.adapters.herald_feed import HeraldedSelect, StoreHeralds
from armd.adapters.store import SqlStore
from armd.migrations.heralds import Action, conjunction, regular_select
from armd.migrations.heralds.record import HeraldRecord, InvalidHerald

POSITION = {"a": 0, "b": 1, "ts": 2}
SELECT = conjunction((200, "<=", "a"), ("a", "<", 400))
T0 = datetime(2026, 11, 24, 9, 0, tzinfo=timezone.utc)


def batch(rnd: random.Random, start: float, n: int, low: int, high: int) -> list[tuple]:
    return [(rnd.randint(low, high), rnd.randrange(10), start + i) for i in range(n)]


def test_heralds_from_the_store_configure_the_running_select_at_its_next_batch(tmp_path) -> None:
    path = tmp_path / "armd.db"
    store = SqlStore.open(f"sqlite:///{path}", retries=0)
    store.upgrade()
    try:
        # before the select starts: a count herald (its tuples may have gone by: not applied) and a live seconds one
        store.add_herald(HeraldRecord("clicks", {"a": (500, 999)}, T0, count=10_000, source="cli"))
        t0 = T0.timestamp()
        store.add_herald(HeraldRecord("clicks", {"a": (0, 150)}, T0 + timedelta(seconds=400), seconds=50.0))
        feed = StoreHeralds(store.heralds, "clicks", ts_index=2, poll_seconds=5.0)
        select = HeraldedSelect(SELECT, POSITION, feed)
        rnd = random.Random(3)
        rows, out = [], []

        def run(b, now):
            rows.extend(b)
            out.extend(select.process(b, now))

        run(batch(rnd, t0, 100, 0, 999), now=0.0)  # nothing new: every tuple evaluated
        assert select.select.tuples == {Action.EVALUATE: 100}
        store.add_herald(HeraldRecord("clicks", {"a": (500, 999)}, T0 + timedelta(seconds=100), count=100, source="cli"))
        run(batch(rnd, t0 + 100, 100, 500, 999), now=10.0)  # picked up at the next batch: all 100 skipped
        assert select.select.tuples[Action.SKIP] == 100
        with sqlite3.connect(path) as db:  # a program writes one with SQL, no armd involved
            db.execute("INSERT INTO heralds (stream, patterns, lifespan_count, starts_at) VALUES (?, ?, ?, ?)",
                       ("clicks", json.dumps({"a": [250, 300]}), 60, "2026-11-24 09:04:10"))
        run(batch(rnd, t0 + 200, 50, 0, 999), now=12.0)  # within 5 s of the last read: not seen yet
        assert select.select.tuples[Action.PASS] == 0
        run(batch(rnd, t0 + 250, 60, 250, 300) + batch(rnd, t0 + 310, 40, 0, 999), now=20.0)
        assert select.select.tuples[Action.PASS] == 60  # the herald implies the select: passed unevaluated
        assert len(feed.pending) == 1  # the seconds herald waits for its span
        run(batch(rnd, t0 + 350, 100, 0, 150), now=30.0)  # [t0 + 400, t0 + 450) is skipped
        assert select.select.tuples[Action.SKIP] == 100 + 50
        assert feed.applied == 3 and feed.pending == [] and feed.missed == 0
        # a count herald read after its start went by is not applied: its first tuples are gone
        store.add_herald(HeraldRecord("clicks", {"a": (0, 10)}, T0 + timedelta(seconds=440), count=5))
        run(batch(rnd, t0 + 460, 20, 0, 999), now=40.0)
        assert feed.missed == 1 and feed.applied == 3
        # two heralds that contradict each other: the second is refused with its reason, the query goes on
        store.add_herald(HeraldRecord("clicks", {"a": (0, 100)}, T0 + timedelta(seconds=480), count=10))
        store.add_herald(HeraldRecord("clicks", {"a": (500, 600)}, T0 + timedelta(seconds=485), count=10))
        run(batch(rnd, t0 + 480, 20, 0, 100), now=50.0)
        assert len(select.refused) == 1 and "contradicts" in select.refused[0]
        # a row that is no herald is skipped and said once; the good herald written after it still applies
        with sqlite3.connect(path) as db:
            bad = db.execute("INSERT INTO heralds (stream, patterns, lifespan_count) VALUES ('clicks', '[1, 2]', 5)").lastrowid
        good = store.add_herald(HeraldRecord("clicks", {"a": (500, 999)}, T0 + timedelta(seconds=510), count=20))
        with pytest.raises(InvalidHerald, match=f"heralds row {bad}"):
            store.heralds("clicks")  # a reader that gives no ``invalid`` still learns of it
        assert [r.id for r in store.heralds("clicks", since=bad, invalid=lambda *_: None)] == [good]
        skipped_before = select.select.tuples[Action.SKIP]
        with capture_logs() as logs:
            run(batch(rnd, t0 + 500, 40, 500, 999), now=60.0)
            run(batch(rnd, t0 + 540, 20, 0, 999), now=70.0)  # read again: nothing new, the bad row not said again
        assert feed.error is None and list(feed.skipped) == [bad] and "heralds row" in feed.skipped[bad]
        assert [e["event"] for e in logs] == ["herald_row_skipped"] and feed.last_id == good
        assert select.select.tuples[Action.SKIP] == skipped_before + 20
        assert out == regular_select(rows, SELECT, POSITION)
        assert out == regular_select(rows, SELECT, POSITION)
    finally:
        store.close()
