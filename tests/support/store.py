"""``store``: an empty metadata store on a fresh SQLite file, upgraded as ``armd db upgrade`` does, closed afterwards."""

from __future__ import annotations

import pytest

from armd.adapters.store.sql import SqlStore


@pytest.fixture
def store(tmp_path):
    store = SqlStore.open(f"sqlite:///{tmp_path}/armd.db")
    store.upgrade()
    yield store
    store.close()
