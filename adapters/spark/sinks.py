"""Where managed queries write their results: one ``foreachBatch`` abstraction, idempotent per batch.

Spark replays a micro-batch after a failure (and a restarted query may
re-run its last batch), so every sink here writes a batch as a whole and
replaces whatever an earlier attempt of the same batch wrote. A batch is
identified by (query, plan_version, batch_id): every run of a managed query
starts on a fresh checkpoint, where batch ids start at 0 again, with a new
plan version.
the Parquet sink overwrites the batch's own directory, the SQL sink deletes
and inserts in one transaction, the memory sink replaces a dict entry.

Each query writes through its own ``BatchWriter`` (``sink.writer(query,
plan_version)``), which is what ``writeStream.foreachBatch`` calls. Its
``keep`` hook, ``keep(df) -> df``, is applied to every batch before it is
written and can be replaced between batches while the query runs: GenMig
restricts the old plan's output to results before the split time through it.
``foreachBatch`` functions run in the driver process, so setting ``keep``
from the daemon's thread takes effect at the next batch.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

Keep = Callable[[DataFrame], DataFrame]
"""A filter hook: the rows of a batch that may be written."""

META_COLUMNS = ("query", "plan_version", "batch_id", "row")
"""Columns the SQL sink adds in front of the result's own columns."""


class BatchWriter:
    """The ``foreachBatch`` function of one query run; ``keep`` may be replaced at any time."""

    def __init__(self, sink: "BatchSink", query: str, plan_version: int, keep: Keep | None = None) -> None:
        self.sink, self.query, self.plan_version = sink, query, int(plan_version)
        self._keep = keep
        self._lock = threading.Lock()
        self.batches = 0
        """Batches written by this writer (replays included)."""
        self.last_batch_id: int | None = None
        """The id of the newest batch handed to this writer (its write may still be going on)."""

    @property
    def keep(self) -> Keep | None:
        with self._lock:
            return self._keep

    @keep.setter
    def keep(self, keep: Keep | None) -> None:
        with self._lock:
            self._keep = keep

    def keep_from(self, keep: Keep, after_batch: int) -> bool:
        """Set ``keep`` only if no batch later than ``after_batch`` has reached this writer yet; whether it was set.

        GenMig chooses T_split from the progress of some batch; a later batch
        written unfiltered could already hold results past it.
        """
        with self._lock:
            if self.last_batch_id is not None and self.last_batch_id > after_batch:
                return False
            self._keep = keep
            return True

    def __getstate__(self) -> dict[str, Any]:
        # Spark Connect pickles the foreachBatch function to run it in the server's Python: a lock does not pickle.
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        with self._lock:
            keep, self.last_batch_id = self._keep, int(batch_id)
        if keep is not None:
            df = keep(df)
        self.sink.write_batch(df, self.query, int(batch_id), self.plan_version)
        self.batches += 1


class BatchSink(ABC):
    """A destination for query results, written one whole micro-batch at a time."""

    def writer(self, query: str, plan_version: int = 0, keep: Keep | None = None) -> BatchWriter:
        return BatchWriter(self, query, plan_version, keep)

    @abstractmethod
    def write_batch(self, df: DataFrame, query: str, batch_id: int, plan_version: int) -> None:
        """Write ``df`` as batch ``batch_id`` of ``query``, replacing an earlier write of the same batch."""

    def close(self) -> None:
        pass


class MemorySink(BatchSink):
    """Rows kept in the driver, for tests and small demos."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[tuple[str, int, int], list[dict[str, Any]]] = {}

    def write_batch(self, df: DataFrame, query: str, batch_id: int, plan_version: int) -> None:
        rows = [row.asDict(recursive=True) for row in df.collect()]
        with self._lock:
            self._batches[(query, plan_version, batch_id)] = rows

    def rows(self, query: str | None = None) -> list[dict[str, Any]]:
        """Rows written so far, by query, plan version and batch id; each with ``query``, ``plan_version`` and ``batch_id`` added."""
        with self._lock:
            items = sorted(self._batches.items())
        return [
            {**row, "query": q, "plan_version": v, "batch_id": b}
            for (q, v, b), rows in items
            if query is None or q == query
            for row in rows
        ]

    def batch_ids(self, query: str, plan_version: int | None = None) -> list[int]:
        with self._lock:
            return sorted(b for q, v, b in self._batches if q == query and plan_version in (None, v))

    def clear(self) -> None:
        with self._lock:
            self._batches.clear()


class ParquetSink(BatchSink):
    """A Parquet directory: ``ROOT/plan_version=V/query=Q/batch_id=B/``, each batch overwritten as a whole.

    ``spark.read.parquet(ROOT)`` reads every batch back with ``plan_version``,
    ``query`` and ``batch_id`` as partition columns.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, query: str, batch_id: int, plan_version: int) -> Path:
        return self.root / f"plan_version={plan_version}" / f"query={query}" / f"batch_id={batch_id}"

    def write_batch(self, df: DataFrame, query: str, batch_id: int, plan_version: int) -> None:
        df.write.mode("overwrite").parquet(str(self.path(query, batch_id, plan_version)))


class SqlSink(BatchSink):
    """A SQL table through SQLAlchemy; a batch is deleted and inserted again in one transaction.

    The table has ``query``, ``plan_version``, ``batch_id`` and ``row`` (the
    row's position in the batch; the four are unique together) followed by
    the result's columns; a struct column such as Spark's ``window`` becomes
    one column per field (``window_start``, ``window_end``). It is created on
    the first batch when missing. Batches are collected to the driver, so
    this sink is for results of moderate size (aggregates, not raw streams).
    """

    def __init__(self, url_or_engine: Any, table: str) -> None:
        import sqlalchemy as sa

        self._sa = sa
        self.engine = sa.create_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
        self.table_name = table
        self._table: Any = None
        self._lock = threading.Lock()

    def _columns(self, schema: T.StructType) -> list[tuple[str, Any]]:
        sa = self._sa
        out = []
        for field in schema.fields:
            t = field.dataType
            if isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
                kind: Any = sa.BigInteger()
            elif isinstance(t, (T.FloatType, T.DoubleType, T.DecimalType)):
                kind = sa.Float()
            elif isinstance(t, T.BooleanType):
                kind = sa.Boolean()
            elif isinstance(t, (T.TimestampType, T.TimestampNTZType)):
                kind = sa.DateTime()
            else:
                kind = sa.Text()
            out.append((field.name, kind))
        return out

    def _table_for(self, schema: T.StructType) -> Any:
        sa = self._sa
        with self._lock:
            if self._table is None:
                metadata = sa.MetaData()
                columns = [
                    sa.Column("query", sa.String(200), nullable=False),
                    sa.Column("batch_id", sa.BigInteger(), nullable=False),
                    sa.Column("plan_version", sa.Integer(), nullable=False),
                    sa.Column("row", sa.Integer(), nullable=False),
                    *(sa.Column(name, kind) for name, kind in self._columns(schema)),
                    sa.UniqueConstraint("query", "plan_version", "batch_id", "row", name=f"uq_{self.table_name}_batch_row"),
                ]
                sa.Table(self.table_name, metadata, *columns)
                metadata.create_all(self.engine, checkfirst=True)
                self._table = sa.Table(self.table_name, sa.MetaData(), autoload_with=self.engine)
            return self._table

    def write_batch(self, df: DataFrame, query: str, batch_id: int, plan_version: int) -> None:
        flat = flatten_structs(df)
        table = self._table_for(flat.schema)
        known = {c.name for c in table.columns}
        missing = [c for c in flat.columns if c not in known]
        if missing:
            raise ValueError(
                f"SQL sink table {self.table_name!r} has no column(s) {missing} for query {query!r}; "
                "give each result schema its own table"
            )
        rows = [
            {"query": query, "batch_id": batch_id, "plan_version": plan_version, "row": i, **row.asDict()}
            for i, row in enumerate(flat.collect())
        ]
        sa = self._sa
        with self.engine.begin() as conn:
            conn.execute(sa.delete(table).where(
                table.c.query == query, table.c.plan_version == plan_version, table.c.batch_id == batch_id))
            if rows:
                conn.execute(sa.insert(table), rows)

    def read(self, query: str | None = None) -> list[dict[str, Any]]:
        """Rows of the table (of one query), ordered by batch and row."""
        table = self._table if self._table is not None else self._sa.Table(
            self.table_name, self._sa.MetaData(), autoload_with=self.engine
        )
        stmt = self._sa.select(table).order_by(table.c.query, table.c.plan_version, table.c.batch_id, table.c.row)
        if query is not None:
            stmt = stmt.where(table.c.query == query)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(stmt)]

    def close(self) -> None:
        self.engine.dispose()


def flatten_structs(df: DataFrame) -> DataFrame:
    """One level of struct columns split into ``parent_field`` columns (Spark's ``window`` → window_start, window_end)."""
    columns: list[Any] = []
    for field in df.schema.fields:
        if isinstance(field.dataType, T.StructType):
            columns.extend(F.col(f"`{field.name}`.`{sub.name}`").alias(f"{field.name}_{sub.name}") for sub in field.dataType.fields)
        else:
            columns.append(F.col(f"`{field.name}`"))
    return df.select(*columns)


def before(column: str, split: Any) -> Keep:
    """A ``keep`` hook that passes rows whose ``column`` (e.g. ``window.end``) is <= ``split``."""
    return lambda df: df.where(F.col(column) <= F.lit(split))


def chain(hooks: Iterable[Keep]) -> Keep:
    """Apply several ``keep`` hooks in order."""
    hooks = tuple(hooks)

    def keep(df: DataFrame) -> DataFrame:
        for hook in hooks:
            df = hook(df)
        return df

    return keep
