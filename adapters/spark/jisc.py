"""The JISC join pipeline hosted in Spark: ``transformWithState`` over buckets of join keys.

Why this module: ``armd.migrations.join`` is a pure, single-process n-way
windowed equi-join whose join order can change live (JISC, paper 004). To
run it on Spark Structured Streaming the state has to live in Spark's state
store (so that it is checkpointed, recovered and partitioned by key), the
plan has to come from outside the query (the daemon decides it while the
query runs, and a running query cannot be given new Python objects), and
expiry has to follow event time across micro-batches. Every one of these is
a Spark concern, so it lives in the Spark adapter; the join itself — plans,
state matching, symmetric hash join walk, expiry walk, JISC's per-key
completion, the buffering of rows until the watermark passes them — is
``armd.migrations.join``'s ``KeyEngine`` (``per_key.py``), the pure JISC
strategy applied to one key at a time, with its state saved as a versioned
``KeyState``. This module only feeds it rows, timers and the state store.

How it fits together
    ``jisc_join`` tags each input stream's rows with the stream name, sets
    the watermark on each, unions them and runs the Row-based
    ``groupBy(bucket).transformWithState`` with ``JiscProcessor`` in
    ``EventTime`` mode, where a bucket is a hash of the join key modulo
    ``buckets``: every state or timer call is a round trip to the JVM's
    state server, and grouping by key paid the key's setting, a timer and
    its deletion, and an output batch for every key (docs/jisc.md has the
    profile). Per bucket the processor keeps one value state, read and
    written once per call: per join key ``KeyState.to_bytes()`` (the key's
    live tuples, the materialised intermediate states of the key's current
    plan, which of them are still incomplete — JISC's pending flag for that
    key — the streams that already had a tuple since the key's last
    transition (Definition 2), and the epoch and order the key was last
    processed with), each key's next wake-up and the bucket's one timer. A
    state call per key was most of the join's time once the keys were
    bucketed; re-serialising a bucket of a few hundred small keys costs
    about as much as two or three of those calls. Blobs written before the
    state had a version number of its own (version 1) are still read.

The plan (control file)
    A small JSON file ``{"epoch": int, "order": [...]}`` written atomically by
    the daemon (``write_control``). ``order`` is a join order as in
    ``migrations.join``: nested two-element lists of stream names, or a flat
    list of names meaning the left-deep order over them. The processor reads
    it once per task (one partition of one micro-batch). A key whose stored
    epoch is older than the file's is switched to the file's order the first
    time it is touched after the change (input or timer), before any of its
    tuples is processed: the states the old plan had are kept, the others
    start empty and incomplete, and each fresh tuple completes the states on
    its path for its key (JISC). A key that sat out several epochs jumps to
    the newest order directly (nothing was inserted for it in between, so its
    kept states are still exact; it only keeps more than switch-by-switch). A missing file means
    the ``order`` given to ``jisc_join``, epoch 0.

Time
    Event time in epoch milliseconds; the watermark is set on every input
    (Spark's default ``min`` policy makes the global one follow the slowest
    input). An arriving row is buffered in the key's state; rows older than
    the watermark are processed, in event-time order (ties by the ``id``
    column), when the watermark has passed them — at the key's next input or
    by an event-time timer. No row older than the watermark can come any more,
    so this is the order the pure pipeline processes the whole log in, however
    the micro-batches and the inputs interleave. A processed row with time t
    first expires the key's tuples with τ ≤ t − W, so a result (one tuple per
    stream, same key, max τ − min τ < W) is emitted exactly once, when its
    last tuple is processed — ``migrations.join``'s window semantics, which
    its oracle checks. Each key's wake-up (the earlier of the oldest
    buffered row + 1 ms and the oldest live tuple's τ + W) goes into its
    bucket's index, and the bucket keeps one event-time timer at the
    earliest; any call for the bucket processes the keys the watermark has
    passed the wake-up of, so the tuples of keys that receive nothing more
    expire too; a key with nothing live and nothing buffered has no state at
    all. Rows that arrive behind the watermark are late: they are dropped
    (counted in the key's state). The engine decides all of this
    (``KeyEngine.offer``, ``release``, ``wake_at``); the processor passes it
    the watermark and keeps the bucket's index and timer.

Heralds
    With ``modes_path`` each input passes through ``skip_filter``
    (``jisc_heralds.py``, ``mapInArrow``) before the union: it reads the
    heralds' mode table once per task and drops the rows of a stream inside
    one of its skipped intervals (join data skipping), before the shuffle.

Results are one row per join result: the key, the epoch of the plan that
produced it and, per stream ``s``, ``s_id`` and ``s_time`` of its tuple.

Statistics
    The daemon orders the join by the streams' pairwise key-match
    selectivities, which only the join sees. With ``observe_as`` the engine
    counts, for each tuple it processes, the live tuples of every other
    stream under its key; the processor emits those counts as one extra row
    per call (per bucket), ``observe()`` sums them per micro-batch and the rows are
    dropped before the sink (``SparkStats`` gathers them and
    ``costmodel.measured.pair_selectivities`` computes the selectivities).
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
from pathlib import Path
from itertools import chain
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, BooleanType, LongType, StructField, StructType

from armd.migrations.join import KeyEngine, Order, left_deep, normalise_order

from .jisc_heralds import read_modes, skip_filter
from .observed import observation_name

__all__ = [
    "Control", "ControlFiles", "JiscProcessor", "jisc_join", "read_control", "write_control",
]


# --- the control file ---------------------------------------------------------------------


class Control:
    """A plan as the daemon publishes it: an epoch and a join order over the query's streams."""

    __slots__ = ("epoch", "order")

    def __init__(self, epoch: int, order: Order) -> None:
        self.epoch = epoch
        self.order = order

    def __repr__(self) -> str:
        return f"Control(epoch={self.epoch}, order={self.order!r})"


def _as_order(order: Any, streams: Sequence[str]) -> Order:
    """A flat list of names means the left-deep order over them; nested pairs are a tree."""
    if isinstance(order, (list, tuple)) and len(order) > 2 and all(isinstance(o, str) for o in order):
        order = left_deep(list(order))
    return normalise_order(order, streams)


def _to_json(order: Order) -> Any:
    if isinstance(order, str):
        return order
    if not isinstance(order, (list, tuple)) or len(order) != 2:
        raise ValueError(f"a join order is a stream name or a pair of orders, got {order!r}")
    return [_to_json(order[0]), _to_json(order[1])]


def write_control(path: str | os.PathLike[str], epoch: int, order: Order) -> None:
    """Publish a plan atomically (temporary file in the same directory, then ``os.replace``).

    ``order`` is a join order (nested pairs of stream names) or a flat list of
    names (left-deep). Epochs must grow: keys switch when they see a newer one.
    """
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be a whole number >= 0, got {epoch!r}")
    target = Path(path)
    flat = isinstance(order, (list, tuple)) and len(order) > 2 and all(isinstance(o, str) for o in order)
    body = json.dumps({"epoch": epoch, "order": list(order) if flat else _to_json(order)})
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_control(path: str | os.PathLike[str], streams: Sequence[str], default: Order | None = None) -> Control:
    """Read and validate a control file; a missing file gives ``default`` at epoch 0.

    Raises ``ValueError`` naming the file and what is allowed when it is not
    ``{"epoch": <int >= 0>, "order": <join order over the streams>}``.
    """
    p = Path(path)
    allowed = (
        f'a JSON object {{"epoch": <whole number >= 0>, "order": <join order>}} where the order names each of '
        f"{sorted(streams)} exactly once, as nested two-element lists (a tree) or a flat list (left-deep)"
    )
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        if default is None:
            raise ValueError(f"control file {p} does not exist and no default order was given") from None
        return Control(0, _as_order(default, streams))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"control file {p} is not valid JSON ({exc}); expected {allowed}") from None
    if not isinstance(data, dict) or set(data) != {"epoch", "order"}:
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"control file {p} must have exactly the keys epoch and order, got {got}; expected {allowed}")
    epoch = data["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"control file {p}: epoch must be a whole number >= 0, got {epoch!r}; expected {allowed}")
    try:
        order = _as_order(data["order"], streams)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"control file {p}: bad order {data['order']!r} ({exc}); expected {allowed}") from None
    return Control(epoch, order)


class ControlFiles:
    """The daemon's side of the control files: one per JISC query (``control.ports.JoinOrders``).

    ``joins`` maps each query to (control file, its streams, the order it
    starts with). The file is the truth: a restarted daemon reads the epoch
    and order in force from it and goes on counting epochs from there.
    """

    def __init__(self, joins: Mapping[str, tuple[str | os.PathLike[str], Sequence[str], Order]]) -> None:
        self._joins = {q: (Path(path), list(streams), order) for q, (path, streams, order) in joins.items()}

    def queries(self) -> list[str]:
        return list(self._joins)

    def current(self, query: str) -> tuple[int, Order]:
        path, streams, default = self._joins[query]
        control = read_control(path, streams, default)
        return control.epoch, control.order

    def publish(self, query: str, epoch: int, order: Order) -> None:
        path, streams, _ = self._joins[query]
        normalise_order(order, streams)  # names every stream of the query once, or raises saying so
        in_force, _ = self.current(query)
        if epoch <= in_force:
            raise ValueError(f"epoch {epoch} of {query!r} must be larger than the one in force ({in_force}, {path})")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_control(path, epoch, order)


# --- Spark ----------------------------------------------------------------------------------


def count_columns(streams: int) -> list[str]:
    """The processor's counting columns: arrivals ``_n<i>`` per stream, then pairs ``_p<i>_<j>`` (i < j)."""
    return [f"_n{i}" for i in range(streams)] + [f"_p{i}_{j}" for i in range(streams) for j in range(i + 1, streams)]


class JiscProcessor(StatefulProcessor):
    """The ``StatefulProcessor``: one ``KeyEngine`` per join key, grouped into buckets of keys.

    Spark calls the processor once per grouping key and every state or timer
    call is a round trip to the JVM's state server, which made the per-call
    overhead (setting the key, a timer per key, its deletion, an output
    batch per call) the bulk of the join's cost when every key brings a row
    or two. So the join groups by a *bucket* of keys (a hash of the key) and
    keeps, per bucket:

    * ``bucket``, a ValueState holding the whole bucket, pickled: ``keys``,
      each key with state → its ``KeyState`` bytes; ``wake``, each such key
      → the event time its engine next has work (``KeyEngine.wake_at``);
      and ``timer``, the one event-time timer registered for the bucket
      (the earliest). One ``get`` and one ``update`` per call, whatever the
      number of keys: the state server has no multi-key get or put, and a
      call per key was most of the join's time.

    A call for a bucket (new rows, or its timer) processes the keys that
    brought rows and every key whose wake-up time the watermark has passed,
    then re-arms the bucket's timer if the earliest wake-up moved. Input
    rows: ``key``, ``stream`` (index into ``streams``), ``id`` (long),
    ``ms`` (event time, epoch milliseconds). Output rows: ``key``,
    ``epoch``, per stream ``<s>_id``, ``<s>_ms``, and the counting columns
    of ``count_columns``: zero on results; with ``count_pairs`` every call
    that processed tuples adds one row with ``_counts`` true that holds its
    arrivals per stream (``_n<i>``) and pairs per two streams
    (``_p<i>_<j>``). Run with the Row-based ``transformWithState``: a
    pandas frame per call cost more than the join.
    """

    def __init__(
        self, streams: Sequence[str], window_ms: int, control_path: str, default_order: Order, *,
        count_pairs: bool = False,
    ) -> None:
        self.streams = tuple(streams)
        self.window_ms = int(window_ms)
        self.control_path = str(control_path)
        self.default_order = default_order
        self.count_pairs = count_pairs
        self.count_names = count_columns(len(self.streams))
        self.control: Control | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        blob = StructType([StructField("blob", BinaryType(), False)])
        self.stored = handle.getValueState("bucket", blob)
        self.control = None  # read lazily, once per task (one partition of one micro-batch)
        self.columns = ["key", "epoch"] + [f"{s}_{c}" for s in self.streams for c in ("id", "ms")]
        self.columns += ["_counts"] + self.count_names
        self.row = Row(*self.columns)

    def _control(self) -> Control:
        if self.control is None:
            self.control = read_control(self.control_path, self.streams, self.default_order)
        return self.control

    def _visit(self, by_key: Mapping[Any, list[Any]], watermark: int, fired: int | None) -> Iterator[Any]:
        """Process the keys that brought rows and the keys due at ``watermark``; save the bucket in one value."""
        value = self.stored.get()
        bucket = pickle.loads(value[0]) if value is not None else {"timer": None, "wake": {}, "keys": {}}
        wake: dict[Any, int] = bucket["wake"]
        held: dict[Any, bytes] = bucket["keys"]
        if fired is not None and bucket["timer"] == fired:
            bucket["timer"] = None  # Spark deletes the fired timer itself
        due = [k for k, at in wake.items() if at <= watermark and k not in by_key]
        arrived_all = [0] * len(self.streams)
        pairs_all: dict[tuple[int, int], int] = {}
        names = self.count_names
        zeros = [0] * len(names)
        nones = [None] * (2 * len(self.streams))
        for key in chain(by_key, due):
            if key in wake:
                eng = KeyEngine.load(held[key], self.streams, self.window_ms)
            else:
                control = self._control()
                eng = KeyEngine(self.streams, self.window_ms, control.order, control.epoch)
            for row in by_key.get(key, ()):
                eng.offer(row.stream, row.id, row.ms, watermark)
            control = self._control()
            if control.epoch > eng.epoch:
                eng.switch(control.epoch, control.order)
            results = eng.release(watermark)
            if self.count_pairs:
                arrived, pairs = eng.take_counts()
                arrived_all = [a + b for a, b in zip(arrived_all, arrived)]
                for pair, n in pairs.items():
                    pairs_all[pair] = pairs_all.get(pair, 0) + n
            if eng.live or eng.buffer:
                held[key] = eng.dump()
                wake[key] = eng.wake_at()  # type: ignore[assignment]
            elif key in wake:  # nothing held: every state is empty, the key starts afresh
                del held[key], wake[key]
            for described in results:
                values: list[Any] = [key, eng.epoch, *nones, False, *zeros]
                for stream, row_id, ms in described:
                    values[2 + 2 * stream] = row_id
                    values[3 + 2 * stream] = ms
                yield self.row(*values)
        want = min(wake.values()) if wake else None
        if bucket["timer"] != want:
            if bucket["timer"] is not None:
                self.handle.deleteTimer(bucket["timer"])
            if want is not None:
                self.handle.registerTimer(want)
            bucket["timer"] = want
        if wake or bucket["timer"] is not None:
            self.stored.update((pickle.dumps(bucket, protocol=pickle.HIGHEST_PROTOCOL),))
        elif value is not None:
            self.stored.clear()
        if self.count_pairs and any(arrived_all):
            counts = dict.fromkeys(names, 0)
            counts.update({f"_n{i}": n for i, n in enumerate(arrived_all)})
            counts.update({f"_p{i}_{j}": n for (i, j), n in pairs_all.items()})
            yield self.row(None, None, *nones, True, *counts.values())

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        by_key: dict[Any, list[Any]] = {}
        for row in rows:
            by_key.setdefault(row.key, []).append(row)
        yield from self._visit(by_key, timerValues.getCurrentWatermarkInMs(), None)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:
        yield from self._visit({}, timerValues.getCurrentWatermarkInMs(), expiredTimerInfo.getExpiryTimeInMs())

    def close(self) -> None:
        pass


def jisc_join(
    inputs: Mapping[str, DataFrame],
    *,
    key: str,
    time: str,
    window_ms: int,
    control_path: str | os.PathLike[str],
    order: Order | None = None,
    id: str = "id",
    watermark_delay: str = "0 seconds",
    observe_as: str | None = None,
    modes_path: str | os.PathLike[str] | None = None,
    buckets: int = 64,
) -> DataFrame:
    """The streaming n-way windowed equi-join of ``inputs`` (stream name → streaming DataFrame).

    Every input has the join column ``key`` (same type everywhere), an event
    time column ``time`` (timestamp) and a long ``id`` that orders tuples
    with equal times. ``order`` is the plan while ``control_path`` does not
    exist (default: left-deep in the order of ``inputs``). Results: ``key``,
    ``epoch``, and per stream ``<s>_id`` and ``<s>_time``. Run it with a
    RocksDB state store (``build_session(state_store="rocksdb")``) and an
    append-mode sink.

    With ``observe_as`` (a plan node id) the join also reports, per
    micro-batch, the observed metrics ``armd:pairs:NODE:tuples:2W`` (see
    ``observed.py``): ``<s>`` the tuples of stream s it processed and
    ``<a>,<b>`` the pairs of an a and a b tuple with equal keys less than
    the window apart, counted when the later one is processed — what the
    statistics source turns into pairwise key-match selectivities.

    ``buckets`` is how many groups the join keys are hashed into (each a
    call of the stateful processor per micro-batch, with one value holding
    its keys' states and one timer): few enough that a call serves many
    keys, many enough that re-serialising a bucket's value at each call
    stays cheap (20,000 keys and 25,000 rows per micro-batch in 64 buckets
    give about 400 keys and 75 KB a bucket, under 2 ms to load and dump).

    With ``modes_path`` the join honours the heralds' mode table in that
    file (``jisc_heralds.py``, written by ``HeraldJoinModes``), read once
    per task: rows of a stream in one of its skipped intervals are dropped
    before the shuffle, in one vectorised pass over each Arrow batch (join
    data skipping; they are not counted by ``observe_as`` either).
    """
    streams = list(inputs)
    if len(streams) < 2:
        raise ValueError(f"a join needs at least two input streams, got {streams}")
    for name in streams:
        if not name.isidentifier():
            raise ValueError(f"stream names become column names and must be identifiers, got {name!r}")
    if int(window_ms) <= 0:
        raise ValueError(f"window_ms must be > 0, got {window_ms!r}")
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1:
        raise ValueError(f"buckets must be a whole number >= 1, got {buckets!r}")
    default = _as_order(order, streams) if order is not None else left_deep(streams)
    read_control(control_path, streams, default)  # fail at build time on a bad file, naming it
    if modes_path is not None:
        read_modes(modes_path, streams)
    tagged = [
        df.select(
            F.lit(i).cast("int").alias("stream"),
            F.col(key).alias("key"),
            F.col(id).cast("long").alias("id"),
            F.col(time).alias("time"),
            F.unix_millis(F.col(time)).alias("ms"),
        )
        for i, (name, df) in enumerate(inputs.items())
    ]
    if modes_path is not None:  # join data skipping before the shuffle: skipped rows cost one vectorised pass
        tagged = [df.mapInArrow(skip_filter(str(modes_path), streams), df.schema) for df in tagged]
    # per input: the global watermark follows the slowest one
    tagged = [df.withWatermark("time", watermark_delay) for df in tagged]
    union = tagged[0]
    for df in tagged[1:]:
        union = union.unionByName(df)
    # grouped by a bucket of keys (see JiscProcessor); the timestamp only carries the watermark
    union = union.select(F.pmod(F.hash("key"), F.lit(int(buckets))).alias("bucket"), "key", "stream", "id", "ms")
    key_type = union.schema["key"].dataType
    fields = [StructField("key", key_type), StructField("epoch", LongType())]
    for name in streams:
        fields += [StructField(f"{name}_id", LongType()), StructField(f"{name}_ms", LongType())]
    counting = count_columns(len(streams))
    fields += [StructField("_counts", BooleanType())] + [StructField(c, LongType()) for c in counting]
    processor = JiscProcessor(streams, int(window_ms), str(control_path), default,
                              count_pairs=observe_as is not None)
    out = (
        union.groupBy("bucket")
        .transformWithState(
            statefulProcessor=processor,
            outputStructType=StructType(fields),
            outputMode="Append",
            timeMode="EventTime",
        )
    )
    if observe_as is not None:
        metrics = [F.sum(f"_n{i}").alias(name) for i, name in enumerate(streams)]
        metrics += [F.sum(f"_p{i}_{j}").alias(f"{a},{b}")
                    for i, a in enumerate(streams) for j, b in enumerate(streams) if i < j]
        out = out.observe(observation_name("pairs", observe_as, "tuples", 2 * int(window_ms) / 1000), *metrics)
        out = out.where(~F.col("_counts"))
    cols = [F.col("key"), F.col("epoch")]
    for name in streams:
        cols += [F.col(f"{name}_id"), F.timestamp_millis(F.col(f"{name}_ms")).alias(f"{name}_time")]
    return out.select(*cols)
