"""A SQLite store's file: relative paths anchored at the configuration, read commands never create one, a file
that is not a database refused at once, and a file deleted or replaced under a running store noticed (``StoreLost``)."""

from __future__ import annotations

import os
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from armd.adapters.store import SqlStore, StoreError, StoreLost, StoreUnavailable
from armd.adapters.store.sqlite_file import anchored_url, sqlite_path
from armd.control.ports import EventRecord

T0 = datetime(2026, 11, 24, 6, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("url, expected", [
    ("sqlite:///armd.db", "sqlite:////etc/armd/armd.db"),
    ("sqlite:///data/x.db", "sqlite:////etc/armd/data/x.db"),
    ("sqlite:///../state/x.db", "sqlite:////etc/state/x.db"),
    ("sqlite:////var/lib/armd/armd.db", "sqlite:////var/lib/armd/armd.db"),
    ("sqlite://", "sqlite://"),
    ("sqlite:///:memory:", "sqlite:///:memory:"),
    ("sqlite:///file:x.db?mode=ro&uri=true", "sqlite:///file:x.db?mode=ro&uri=true"),
    ("postgresql+psycopg://u:p@db/armd", "postgresql+psycopg://u:p@db/armd"),
])
def test_a_relative_sqlite_path_is_anchored_at_the_configuration_folder(url: str, expected: str) -> None:
    assert anchored_url(url, Path("/etc/armd")) == expected


def test_only_sqlite_files_have_a_path() -> None:
    assert sqlite_path("sqlite:////tmp/a.db") == Path("/tmp/a.db")
    assert sqlite_path("postgresql+psycopg://db/armd") is None and sqlite_path("not a url") is None


def test_must_exist_refuses_a_missing_file_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "armd.db"
    with pytest.raises(StoreError, match="no metadata store at .*armd.db.*does not exist"):
        SqlStore.open(f"sqlite:///{missing}", must_exist=True)
    assert not missing.exists()


def test_a_file_that_is_not_a_database_fails_at_once_without_retries(tmp_path: Path) -> None:
    bad = tmp_path / "armd.db"
    bad.write_bytes(b"these are not the bytes of a SQLite database, just text long enough to be a header\n" * 4)
    started = time.monotonic()
    with pytest.raises(StoreError, match="is not a SQLite database") as caught:
        SqlStore.open(f"sqlite:///{bad}", retries=5, backoff_seconds=1.0)
    assert not isinstance(caught.value, StoreUnavailable)
    assert time.monotonic() - started < 1.0  # five retries would take 31 s


def _event(message: str) -> EventRecord:
    return EventRecord(T0, "config_reloaded", "info", message)


def _messages(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT message FROM events ORDER BY id")]


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_file_deleted_or_replaced_under_the_store_is_lost_and_nothing_is_written_into_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "armd.db"
    store = SqlStore.open(f"sqlite:///{path}")
    try:
        store.upgrade()
        store.record_event(_event("before"))
        if how == "deleted":
            path.unlink()
        else:
            os.replace(path, tmp_path / "old.db")
            other = SqlStore.open(f"sqlite:///{path}")
            other.upgrade()
            other.close()
        with pytest.raises(StoreLost, match=f"was {how}") as caught:
            store.record_event(_event("after"))
        assert isinstance(caught.value, StoreUnavailable)  # the outbox keeps the record, as in any outage
        with pytest.raises(StoreLost):  # and stays lost: never writes into the file now at that path
            store.status()
    finally:
        store.close()
    if how == "replaced":
        assert _messages(path) == []  # the new file got nothing of the old store's
    else:
        assert not path.exists()
