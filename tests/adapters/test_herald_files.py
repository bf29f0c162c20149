"""Heralds on a side stream (a directory of JSON-lines files, ``[managed.NAME] herald_sources``) reach a running
select at its next batch, beside the store's, and a line that is no herald is skipped with its reason."""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timedelta, timezone

import pytest

from armd.adapters.herald_feed import HeraldedSelect, stream_heralds
from armd.adapters.herald_files import HeraldFiles
from armd.adapters.store import SqlStore
from armd.migrations.heralds import Action, conjunction, regular_select
from armd.migrations.heralds.record import HeraldRecord, InvalidHerald

POSITION = {"a": 0, "b": 1, "ts": 2}
SELECT = conjunction((200, "<=", "a"), ("a", "<", 400))
T0 = datetime(2026, 11, 24, 9, 0, tzinfo=timezone.utc)


def batch(rnd: random.Random, start: float, n: int, low: int, high: int) -> list[tuple]:
    return [(rnd.randint(low, high), rnd.randrange(10), start + i) for i in range(n)]


def append(path, *lines) -> None:
    with open(path, "a") as f:
        f.write("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


def test_side_stream_and_store_heralds_configure_the_running_select_at_its_next_batch(tmp_path) -> None:
    side = tmp_path / "heralds"
    side.mkdir()
    store = SqlStore.open(f"sqlite:///{tmp_path / 'armd.db'}", retries=0)
    store.upgrade()
    t0 = T0.timestamp()
    try:
        feeds = stream_heralds("clicks", ts_index=2, store=store.heralds, side=str(side))
        select = HeraldedSelect(SELECT, POSITION, feeds)
        rnd = random.Random(4)
        rows, out = [], []

        def run(b, now):
            rows.extend(b)
            out.extend(select.process(b, now))

        run(batch(rnd, t0, 100, 0, 999), now=0.0)
        assert select.select.tuples == {Action.EVALUATE: 100}
        # written while the select runs: a side-stream file (a count herald and a seconds one) and a store row
        append(side / "2026-11-24.jsonl", {"a": [500, 999], "count": 100, "starts_at": T0.isoformat().replace("+00:00", "Z")},
               {"a": [250, 300], "seconds": 60, "starts_at": t0 + 200})
        store.add_herald(HeraldRecord("clicks", {"a": (0, 150)}, T0 + timedelta(seconds=300), seconds=50.0))
        run(batch(rnd, t0 + 100, 100, 500, 999), now=1.0)
        assert select.select.tuples[Action.SKIP] == 0 and feeds.missed == 1  # the count herald's start went by
        append(side / "2026-11-24.jsonl", {"a": [0, 999], "count": 10, "starts_at": t0 + 360})  # one for later
        run(batch(rnd, t0 + 200, 60, 250, 300) + batch(rnd, t0 + 260, 40, 0, 999) + batch(rnd, t0 + 300, 50, 0, 150),
            now=2.0)
        assert select.select.tuples[Action.PASS] == 60 and select.select.tuples[Action.SKIP] == 50
        assert feeds.applied == 2 and feeds.error is None and select.refused == []
        run(batch(rnd, t0 + 350, 20, 0, 999), now=3.0)  # the count herald starts at t0 + 360: ten tuples under it
        assert feeds.applied == 3 and select.select.tuples[Action.EVALUATE] == 100 + 100 + 40 + 20
    finally:
        store.close()
    assert out == regular_select(rows, SELECT, POSITION)


def test_whole_lines_only_ids_in_reading_order_and_bad_lines_skipped_with_their_reason(tmp_path) -> None:
    files = HeraldFiles(tmp_path)
    (tmp_path / "b.jsonl").write_text(json.dumps({"a": [1, 2], "count": 5, "starts_at": 0}) + "\n" + '{"a": [3,')
    (tmp_path / ".a.jsonl").write_text(json.dumps({"a": [1, 2], "count": 5}) + "\n")  # hidden: being written
    assert [(r.id, r.patterns, r.count) for r in files.read("s")] == [(1, {"a": (1, 2)}, 5)]
    with open(tmp_path / "b.jsonl", "a") as f:
        f.write(' 4], "seconds": 10, "starts_at": "2026-11-24T09:00:00+00:00"}\n')
    os.rename(tmp_path / ".a.jsonl", tmp_path / "a.jsonl")  # named before b, read after it: a later id
    append(tmp_path / "c.jsonl", {"a": [5, 1], "count": 1}, {"a": [0, 1], "count": 2, "starts_at": "yesterday"}, "[1]")
    skipped: dict[int, str] = {}
    fresh = files.read("s", since=1, invalid=lambda id, reason: skipped.setdefault(id, reason))
    assert [(r.id, r.seconds or r.count) for r in fresh] == [(2, 5), (3, 10)]
    assert fresh[1].starts_at == T0
    assert fresh[0].starts_at == datetime.fromtimestamp(os.stat(tmp_path / "a.jsonl").st_mtime, timezone.utc)
    assert skipped == {4: "c.jsonl: attribute a: low 5 is above high 1; allowed: low <= high",
                       5: "c.jsonl: starts_at is an ISO 8601 time with a zone or epoch seconds, got 'yesterday'",
                       6: "c.jsonl: a herald line is a JSON object of ranges and one lifespan, got '[1]'"}
    assert files.read("s", since=6) == []
    append(tmp_path / "c.jsonl", {"a": [5, 1], "count": 1})
    with pytest.raises(InvalidHerald, match="^c.jsonl: attribute a: low 5 is above high 1"):
        files.read("s", since=6)  # without a callback, as the store's read


def test_a_missing_directory_applies_no_herald_and_says_why(tmp_path) -> None:
    feeds = stream_heralds("clicks", ts_index=2, side=str(tmp_path / "gone"))
    select = HeraldedSelect(SELECT, POSITION, feeds)
    assert select.process([(250, 0, 1.0)], now=0.0) == [(250, 0, 1.0)]
    assert "No such file or directory" in feeds.error
