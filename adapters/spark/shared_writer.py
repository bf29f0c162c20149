"""A ``foreachBatch`` writer whose filter lives in files, for queries that run behind Spark Connect.

Why: GenMig changes a running query's sink filter (``BatchWriter.keep``)
from armd's thread. In a classic session the ``foreachBatch`` function runs
in the driver, the same process, so the change reaches the next batch. Over
Spark Connect the function is pickled once when the query starts and runs in
a Python process the *server* starts; a change made in the client never
reaches it. This writer keeps what both sides must agree on in a directory
both see (on the same machine, or a shared path like the checkpoints): the
pickled filter, the newest batch id and the count of batches written, under
an ``flock`` that does for both processes what ``BatchWriter``'s lock does
for two threads (``keep_from`` stays atomic against a batch starting).
Every batch reads the filter afresh, a few small file reads per batch.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from pyspark import cloudpickle
from pyspark.sql import DataFrame

from .sinks import BatchSink, BatchWriter, Keep

KEEP, LAST, COUNT, LOCK = "keep.pickle", "last_batch_id", "batches", "lock"


class SharedBatchWriter(BatchWriter):
    """``BatchWriter`` with its filter, newest batch id and batch count in the directory ``board``."""

    def __init__(self, sink: BatchSink, query: str, plan_version: int, board: str | Path, keep: Keep | None = None) -> None:
        self.sink, self.query, self.plan_version = sink, query, int(plan_version)
        self.board = Path(board)
        self.board.mkdir(parents=True, exist_ok=True)
        self.keep = keep

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.board / LOCK, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write(self, name: str, data: bytes) -> None:
        partial = self.board / f".{name}.{os.getpid()}"
        partial.write_bytes(data)
        os.replace(partial, self.board / name)

    def _read(self, name: str) -> bytes | None:
        try:
            return (self.board / name).read_bytes()
        except FileNotFoundError:
            return None

    def _read_keep(self) -> Keep | None:
        data = self._read(KEEP)
        return None if data is None else pickle.loads(data)

    def _read_int(self, name: str) -> int | None:
        data = self._read(name)
        return None if data is None else int(data)

    @property  # type: ignore[override]
    def keep(self) -> Keep | None:
        with self._locked():
            return self._read_keep()

    @keep.setter
    def keep(self, keep: Keep | None) -> None:
        with self._locked():
            self._write(KEEP, cloudpickle.dumps(keep))

    @property  # type: ignore[override]
    def last_batch_id(self) -> int | None:
        return self._read_int(LAST)

    @property  # type: ignore[override]
    def batches(self) -> int:
        return self._read_int(COUNT) or 0

    def keep_from(self, keep: Keep, after_batch: int) -> bool:
        with self._locked():
            last = self._read_int(LAST)
            if last is not None and last > after_batch:
                return False
            self._write(KEEP, cloudpickle.dumps(keep))
            return True

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)  # no lock to leave out: the board's flock is taken per call

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with self._locked():
            keep = self._read_keep()
            self._write(LAST, str(int(batch_id)).encode())
        if keep is not None:
            df = keep(df)
        self.sink.write_batch(df, self.query, int(batch_id), self.plan_version)
        with self._locked():
            self._write(COUNT, str((self._read_int(COUNT) or 0) + 1).encode())
