"""Heralds in armd's join on Spark: the mode table the join reads at every micro-batch (paper 002 §V, issue 19).

Why this module: the join runs inside a long-lived streaming query
(``adapters/spark/jisc.py``), and a running query cannot be handed new
Python objects. Heralds reach it the way join orders do: through a small
file the executors read once per task (one partition of one micro-batch).
The driver side (``HeraldJoinModes``) reads each stream's heralds from the
metadata store, asks the pure decision (``migrations.join.herald_modes``)
which event-time intervals of which stream can join nothing, and publishes
that **mode table** atomically; the join's processor drops the rows of a
stream that fall in one of its skipped intervals before they touch state
(neither stored nor probed). Everything else runs in the normal mode.

The mode file is ``{"epoch": <int >= 0>, "skip": {"<stream>": [[start_ms,
end_ms], ...], ...}}``: per stream, half-open intervals of event time in
epoch milliseconds. A missing file means no heralds: every row normal.
Heralds written to the store reach the query at the first micro-batch that
starts after the next ``refresh`` — call it from a progress listener, or
between batches as the test does.

Not here: the probe-only mode (a tuple that may still complete results but
that no later tuple can join, so it need not be stored) and handing
partition ids on to a join downstream; the join's own multi-way tree keeps
its intermediate results per key, where heralds have nothing to decide.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from bisect import bisect_right
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from armd.migrations.heralds.herald import Herald, Lifespan
from armd.migrations.heralds.record import HeraldRecord
from armd.migrations.join.herald_modes import skip_spans

__all__ = ["HeraldJoinModes", "Modes", "read_modes", "skip_filter", "write_modes"]


class Modes:
    """The skipped intervals per stream index, ready for a lookup per row (``skipped(stream, ms)``)."""

    __slots__ = ("epoch", "starts", "ends")

    def __init__(self, epoch: int, intervals: Sequence[Sequence[tuple[int, int]]]) -> None:
        self.epoch = epoch
        self.starts = [[a for a, _ in iv] for iv in intervals]
        self.ends = [[b for _, b in iv] for iv in intervals]

    def any(self) -> bool:
        return any(self.starts)

    def skipped(self, stream: int, ms: int) -> bool:
        starts = self.starts[stream]
        if not starts:
            return False
        i = bisect_right(starts, ms) - 1
        return i >= 0 and ms < self.ends[stream][i]


def skip_filter(path: str, streams: Sequence[str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A ``mapInArrow`` function that drops the rows the mode table at ``path`` skips (columns ``stream``, ``ms``).

    The table is read once per task; a batch is filtered with one
    ``searchsorted`` per stream that has skipped intervals, no Python per row.
    """

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        modes = read_modes(path, streams)
        bounds = [(i, np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64))
                  for i, (s, e) in enumerate(zip(modes.starts, modes.ends)) if s]
        for batch in batches:
            if not bounds or batch.num_rows == 0:
                yield batch
                continue
            stream = batch.column("stream").to_numpy(zero_copy_only=False)
            ms = batch.column("ms").to_numpy(zero_copy_only=False)
            drop = np.zeros(batch.num_rows, dtype=bool)
            for i, starts, ends in bounds:
                at = np.searchsorted(starts, ms, side="right") - 1
                drop |= (stream == i) & (at >= 0) & (ms < ends[np.maximum(at, 0)])
            yield batch.filter(pa.array(~drop)) if drop.any() else batch

    return run


def write_modes(path: str | os.PathLike[str], epoch: int, skip: Mapping[str, Sequence[tuple[int, int]]]) -> None:
    """Publish a mode table atomically (temporary file in the same directory, then ``os.replace``)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be a whole number >= 0, got {epoch!r}")
    target = Path(path)
    body = json.dumps({"epoch": epoch, "skip": {s: [[int(a), int(b)] for a, b in iv] for s, iv in skip.items()}})
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_modes(path: str | os.PathLike[str], streams: Sequence[str]) -> Modes:
    """Read and validate a mode file; a missing one is epoch 0 with nothing skipped.

    Raises ``ValueError`` naming the file and what is allowed when it is not
    ``{"epoch": <int >= 0>, "skip": {<stream>: [[start_ms, end_ms], ...]}}``
    over the join's streams with start < end, in order, not overlapping.
    """
    p = Path(path)
    allowed = (f'a JSON object {{"epoch": <whole number >= 0>, "skip": {{<stream>: [[start_ms, end_ms], ...]}}}} '
               f"with streams among {list(streams)} and intervals start < end, in order, not overlapping")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Modes(0, [[] for _ in streams])
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"mode file {p} is not valid JSON ({exc}); expected {allowed}") from None
    if not isinstance(data, dict) or set(data) != {"epoch", "skip"} or not isinstance(data["skip"], dict):
        raise ValueError(f"mode file {p} must have exactly the keys epoch and skip (an object); expected {allowed}")
    epoch = data["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"mode file {p}: epoch must be a whole number >= 0, got {epoch!r}; expected {allowed}")
    unknown = sorted(set(data["skip"]) - set(streams))
    if unknown:
        raise ValueError(f"mode file {p}: unknown stream(s) {unknown}; expected {allowed}")
    intervals = []
    for name in streams:
        iv = data["skip"].get(name, [])
        ok = isinstance(iv, list) and all(
            isinstance(x, list) and len(x) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in x)
            and x[0] < x[1] for x in iv)
        if not ok or any(a[1] > b[0] for a, b in zip(iv, iv[1:])):
            raise ValueError(f"mode file {p}: bad intervals for {name!r}: {iv!r}; expected {allowed}")
        intervals.append([(a, b) for a, b in iv])
    return Modes(epoch, intervals)


class HeraldJoinModes:
    """The driver's side: the store's heralds of every stream of a join → the join's mode file.

    ``read(stream)`` returns the stream's heralds as store records
    (``SqlStore.heralds``); ``keys`` names, per stream, the attribute its
    heralds give the join key's range under; ``window_ms`` is the join's
    window. Seconds heralds are placed by event time (``starts_at`` on);
    count heralds cannot be placed on a set and are counted in ``unplaced``.
    ``refresh()`` publishes a new epoch when the table changed and returns
    the skipped intervals (ms) per stream.
    """

    def __init__(
        self,
        read: Callable[[str], Sequence[HeraldRecord]],
        path: str | os.PathLike[str],
        keys: Mapping[str, str],
        window_ms: int,
    ) -> None:
        self.read = read
        self.path = Path(path)
        self.keys = dict(keys)
        self.window_ms = int(window_ms)
        current = read_modes(self.path, list(self.keys))
        self.epoch = current.epoch
        self.published: dict[str, list[tuple[int, int]]] | None = None
        self.unplaced = 0

    def refresh(self) -> dict[str, list[tuple[int, int]]]:
        heralds: dict[str, list[Herald]] = {}
        unplaced = 0
        for stream in self.keys:
            records = self.read(stream)
            unplaced += sum(1 for r in records if r.seconds is None)
            heralds[stream] = [  # in ms, the join's event time
                Herald(r.to_herald(ts=0.0).patterns, Lifespan("time", r.seconds * 1000.0), r.starts_at.timestamp() * 1000.0)
                for r in records if r.seconds is not None]
        self.unplaced = unplaced
        skip = {s: [(math.ceil(a), math.ceil(b)) for a, b in iv] for s, iv in skip_spans(heralds, self.keys, self.window_ms).items()}
        if skip != self.published:
            self.epoch += 1
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_modes(self.path, self.epoch, skip)
            self.published = skip
        return skip
