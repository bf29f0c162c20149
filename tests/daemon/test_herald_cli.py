"""``armd herald add`` / ``list`` on a real SQLite store: the row is what SQL sees, and mistakes are one line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from support.config_cases import MINIMAL

from armd.adapters.store import SqlStore
from armd.daemon.cli import main


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # MINIMAL's store is sqlite:///armd.db, relative to the working directory
    path = tmp_path / "armd.toml"
    path.write_text(MINIMAL)
    assert main(["db", "upgrade", "--config", str(path)]) == 0
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_herald_added_is_a_row_sql_sees_and_list_shows(config: Path, capsys, tmp_path: Path) -> None:
    code, out, _ = run(capsys, "herald", "add", "clicks", "--attr", "region=25:32", "--attr", "temp=:99.5",
                       "--count", "5000", "--json", "--config", str(config))
    assert code == 0 and json.loads(out)["patterns"] == {"region": [25, 32], "temp": [None, 99.5]}
    with sqlite3.connect(tmp_path / "armd.db") as db:
        db.execute("INSERT INTO heralds (stream, patterns, lifespan_seconds) VALUES ('clicks', '{\"k\": [1, 1]}', 30)")
        rows = db.execute("SELECT stream, patterns, lifespan_count, lifespan_seconds, source FROM heralds ORDER BY id").fetchall()
    assert [(s, json.loads(p), c, t, src) for s, p, c, t, src in rows] == [
        ("clicks", {"region": [25, 32], "temp": [None, 99.5]}, 5000, None, "cli"),
        ("clicks", {"k": [1, 1]}, None, 30.0, "sql"),
    ]
    code, out, _ = run(capsys, "herald", "list", "clicks", "--config", str(config))
    assert code == 0 and out.splitlines() == [
        "herald 1 on clicks: region=[25, 32], temp=[*, 99.5] for the next 5000 tuples (cli)",
        out.splitlines()[1],
    ] and out.splitlines()[1].startswith("herald 2 on clicks: k=[1, 1] for the 30 s from ")
    store = SqlStore.open(f"sqlite:///{tmp_path / 'armd.db'}", retries=0)
    try:
        stored = store.heralds("clicks")
    finally:
        store.close()
    assert stored[0].to_herald().range("region").high == 32 and stored[1].to_herald(ts=0.0).lifespan.value == 30.0


@pytest.mark.parametrize("args, words", [
    (["nope", "--attr", "a=1:2", "--count", "3"], "no stream 'nope' in the configuration's plan; streams: clicks"),
    (["clicks", "--attr", "a=3:2", "--count", "3"], "low 3 is above high 2"),
    (["clicks", "--attr", "a=x:2", "--count", "3"], "'x' is not a number"),
    (["clicks", "--attr", "a", "--count", "3"], "expected NAME=LOW:HIGH"),
    (["clicks", "--attr", "a=:", "--count", "3"], "give at least one bound"),
    (["clicks", "--attr", "a=1:inf", "--count", "3"], "not finite"),
    (["clicks", "--attr", "a=1:2", "--attr", "a=3:4", "--count", "3"], "--attr a given twice"),
    (["clicks", "--attr", "a=1:2", "--count", "0"], "whole number of tuples in [1,"),
    (["clicks", "--attr", "a=1:2", "--count", str(2**64)], "whole number of tuples in [1,"),
    (["clicks", "--attr", "a=1:2", "--seconds", "-1"], "positive finite number"),
])
def test_mistakes_are_one_line_and_write_nothing(args, words, config: Path, capsys, tmp_path: Path) -> None:
    code, out, err = run(capsys, "herald", "add", *args, "--config", str(config))
    assert code == 2 and out == "" and err.count("\n") == 1 and words in err, err
    with sqlite3.connect(tmp_path / "armd.db") as db:
        assert db.execute("SELECT count(*) FROM heralds").fetchone() == (0,)


def test_a_row_sql_wrote_that_is_no_herald_is_one_line(config: Path, capsys, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "armd.db") as db:
        db.execute("INSERT INTO heralds (stream, patterns, lifespan_count) VALUES ('clicks', '{\"a\": [5, 1]}', 3)")
    code, out, err = run(capsys, "herald", "list", "--config", str(config))
    assert code == 2 and out == "" and err.strip() == "armd: heralds row 1: attribute a: low 5 is above high 1; allowed: low <= high"


def test_the_database_refuses_a_row_without_exactly_one_lifespan(config: Path, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "armd.db") as db, pytest.raises(sqlite3.IntegrityError, match="ck_heralds_one_lifespan"):
        db.execute("INSERT INTO heralds (stream, patterns, lifespan_count, lifespan_seconds) VALUES ('clicks', '{}', 3, 4)")
