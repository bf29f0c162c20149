"""JISC over the tuples of one join key, resumable from a small versioned state.

Why this module: a host that partitions the join by key (Spark's
``transformWithStateInPandas``, ``armd.adapters.spark.jisc``) runs the join
one key at a time and must put each key's state away between calls and
restore it later, possibly in another process. ``KeyEngine`` is the
``JISC`` strategy of ``strategies.py`` with the global event log replaced
by per-key bookkeeping and event-time expiry; ``KeyState`` is what it saves.
Both are pure (no clock, no IO, no Spark), so the engine is tested here
against the brute-force oracle without a JVM, and the host keeps only the
glue: reading rows, timers and the state store.

The saved state
    ``KeyState`` is a frozen dataclass with a ``version``. ``to_bytes``
    pickles its fields as a plain dict of builtins (ints, tuples, lists,
    dicts, frozensets), never the class itself, so a saved state does not
    depend on where this code lives. ``from_bytes`` reads every version
    this module knows — version 1 is the positional 13-tuple the Spark
    processor stored before the state had names — and refuses any other,
    naming the version it found and the ones it reads.
"""

from __future__ import annotations

import pickle
from collections import deque
from dataclasses import dataclass, fields
from typing import Hashable, Sequence

from .pipeline import Cursor, Entry, EventLog, Order, count_pairs, expire_event, flatten, insert, normalise_order, walk_up
from .strategies import JISC, watch_paths

__all__ = ["KEY_STATE_VERSION", "KeyEngine", "KeyState"]

KEY_STATE_VERSION = 2
"""The version ``KeyState.to_bytes`` writes (1: the unnamed tuple of the first Spark host)."""

_READABLE_VERSIONS = (1, 2)
"""Version 1 is a positional tuple, every later one a dict of the fields."""

_K: Hashable = 0
"""The one key of a per-key plan (its state dicts are keyed by it)."""

Row = tuple[int, int, int]
"""A processed tuple as the host knows it: (stream index, row id, event time ms)."""


@dataclass(frozen=True)
class KeyState:
    """Everything ``KeyEngine`` needs to resume one key where it stopped."""

    epoch: int
    """The epoch of the plan the key runs."""
    order: Order
    """The key's join order (nested pairs of stream names)."""
    states: dict[frozenset[int], list[Entry]]
    """Stream set of a materialised node (leaf or inner join) → the key's entries in it."""
    pending: tuple[frozenset[int], ...]
    """Inner joins still incomplete for the key (JISC's pending flag)."""
    attempted: tuple[int, ...]
    """Streams that had a tuple of the key since its last transition (Definition 2)."""
    events: dict[int, Row]
    """Live tuples: sequence number → (stream index, row id, event time ms)."""
    seq: int
    """The next sequence number."""
    last_ms: int | None
    """Event time of the newest processed tuple."""
    timer: int | None
    """The event-time timer the host registered for the key (ms), if any."""
    dropped: int
    """Rows refused as late."""
    completions: int
    """State entries completed on demand (JISC)."""
    buffer: list[tuple[int, int, int]]
    """Rows received but not yet processed: (event time ms, row id, stream index)."""
    version: int = KEY_STATE_VERSION
    """The layout of these fields; a state in memory always has the current one (``from_bytes`` upgrades)."""

    def __post_init__(self) -> None:
        if self.version != KEY_STATE_VERSION:
            raise ValueError(_unknown(self.version))

    def to_bytes(self) -> bytes:
        """The state as pickled builtins (a dict of the fields), readable whatever module holds this class."""
        return pickle.dumps({f.name: getattr(self, f.name) for f in fields(self)}, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_bytes(cls, blob: bytes) -> KeyState:
        """Read a state saved by any readable version, in the current layout; ``ValueError`` names an unknown one."""
        data = pickle.loads(blob)
        if isinstance(data, dict):
            version = data.get("version")
            if version == KEY_STATE_VERSION:
                return cls(**data)
        elif isinstance(data, tuple) and data:
            version = data[0]
            if version == 1:  # the same fields as version 2, by position
                if len(data) != 13:
                    raise ValueError(f"JISC key state of version 1 must have 13 fields, got {len(data)}")
                (_, epoch, order, states, pending, attempted, events, seq, last_ms, timer, dropped, completions,
                 buffer) = data
                return cls(epoch, order, states, tuple(pending), tuple(attempted), events, seq, last_ms, timer,
                           dropped, completions, buffer)
        else:
            version = None
        raise ValueError(_unknown(version))


def _unknown(version: object) -> str:
    return (f"JISC key state of version {version!r} cannot be read: this armd writes version {KEY_STATE_VERSION} "
            f"and reads versions {', '.join(map(str, _READABLE_VERSIONS))}")


class KeyEngine(JISC):
    """``migrations.join``'s JISC strategy over the tuples of one key, savable as a ``KeyState``.

    Event ids are per-key sequence numbers (they grow with event time, as the
    pipeline's expiry needs); ``events`` maps each live one to (stream index,
    the row's id, event time in ms). Everything JISC does — keeping the
    states the old plan shares with the new one, marking the others
    incomplete with their pending flag, completing them for the key when a
    fresh tuple probes them, passing expiry through incomplete states — is
    the inherited code; this class only replaces the global event log with
    per-key bookkeeping and event-time expiry.
    """

    def __init__(self, streams: Sequence[str], window_ms: int, order: Order, epoch: int = 0) -> None:
        super().__init__(EventLog.from_events(streams, ()), window_ms, order)
        self.epoch = epoch
        self.events: dict[int, Row] = {}
        """Live tuples: sequence number → (stream index, row id, event time ms)."""
        self.live: deque[int] = deque()
        """Live sequence numbers, oldest first."""
        self.seq = 0
        self.last_ms: int | None = None
        self.timer: int | None = None
        """The event-time timer registered for this key (ms), if any."""
        self.dropped = 0
        """Rows refused as late (older than the watermark, or than the key's newest processed row)."""
        self.buffer: list[tuple[int, int, int]] = []
        """Rows received but not yet processed: (event time ms, row id, stream index)."""
        self.out: list = []
        self.emit = self._emit_collect
        self.arrived = [0] * len(streams)
        """Tuples processed per stream since ``take_counts`` (not saved: reported once, then reset)."""
        self.pairs: dict[tuple[int, int], int] = {}
        """Pairs of tuples (i, j), i < j, with this key and less than the window apart, counted when the later one is processed."""

    # --- persistence ------------------------------------------------------------------------

    def state(self) -> KeyState:
        """The key's state to save (it shares the engine's lists: save it before processing more)."""
        nodes = self.plan.leaves + self.plan.joins[:-1]
        return KeyState(
            epoch=self.epoch,
            order=self.plan.order,
            states={n.streams: n.state[_K] for n in nodes if n.state and _K in n.state},
            pending=tuple(n.streams for n in self.plan.joins[:-1] if not n.complete),
            attempted=tuple(i for i, s in enumerate(self.attempted) if _K in s),
            events=self.events,
            seq=self.seq,
            last_ms=self.last_ms,
            timer=self.timer,
            dropped=self.dropped,
            completions=self.completions,
            buffer=self.buffer,
        )

    @classmethod
    def from_state(cls, state: KeyState, streams: Sequence[str], window_ms: int) -> KeyEngine:
        """The engine that resumes where ``state`` was saved (it takes over the state's lists and dicts)."""
        eng = cls(streams, window_ms, normalise_order(state.order, streams), state.epoch)
        plan = eng.plan
        pend = set(state.pending)
        for node in plan.leaves + plan.joins[:-1]:
            node.state = {_K: state.states[node.streams]} if node.streams in state.states else {}
            if node.streams in pend:
                node.complete, node.pending = False, {_K}
                plan.incomplete += 1
        eng.watch = watch_paths(plan)
        eng.attempted = [({_K} if i in state.attempted else set()) for i in range(len(streams))]
        eng.events = state.events
        eng.live = deque(sorted(eng.events))
        eng.seq, eng.last_ms, eng.timer = state.seq, state.last_ms, state.timer
        eng.dropped, eng.completions = state.dropped, state.completions
        eng.buffer = state.buffer
        eng.cursor = Cursor(eng.live[0] if eng.live else eng.seq)
        return eng

    def dump(self) -> bytes:
        """``state().to_bytes()``: what a host stores for the key."""
        return self.state().to_bytes()

    @classmethod
    def load(cls, blob: bytes, streams: Sequence[str], window_ms: int) -> KeyEngine:
        """The engine that resumes from ``dump``'s bytes (or a state of an older readable version)."""
        return cls.from_state(KeyState.from_bytes(blob), streams, window_ms)

    # --- processing -------------------------------------------------------------------------

    def switch(self, epoch: int, order: Order) -> None:
        """Move the key to a newer plan (JISC's transition: keep shared states, others incomplete)."""
        if epoch <= self.epoch:
            return
        self.epoch = epoch
        self.transition(order)

    def expire(self, now_ms: int) -> None:
        """Expire every live tuple with τ ≤ now − W, oldest first, walking up through every state."""
        limit = now_ms - self.window
        live, events = self.live, self.events
        while live and events[live[0]][2] <= limit:
            seq = live.popleft()
            stream = events.pop(seq)[0]
            expire_event(self.plan, seq, stream, _K)
        self.cursor.lo = live[0] if live else self.seq

    def offer(self, stream: int, row_id: int, ms: int, watermark: int) -> None:
        """Buffer an arriving row; a row older than the watermark is late and refused (``dropped``)."""
        if ms < watermark:
            self.dropped += 1
        else:
            self.buffer.append((ms, row_id, stream))

    def release(self, watermark: int) -> list[list[Row]]:
        """Process, in event-time order, every buffered row older than the watermark; then expire.

        No row older than the watermark can arrive any more (it would be
        late), so these rows are processed in the order the pure pipeline
        processes the whole log, whatever micro-batches brought them.
        Expiring at the watermark afterwards is safe for the same reason.
        Returns the results, each as (stream index, row id, event time ms)
        per tuple.
        """
        results: list[list[Row]] = []
        if self.buffer:
            self.buffer.sort()
            cut = 0
            while cut < len(self.buffer) and self.buffer[cut][0] < watermark:
                cut += 1
            ready, self.buffer = self.buffer[:cut], self.buffer[cut:]
            for ms, row_id, stream in ready:
                results.extend(self.describe(r) for r in self.add(stream, row_id, ms))
        self.expire(watermark)
        return results

    def wake_at(self) -> int | None:
        """When the watermark must pass for this key to have work: buffered rows or an expiry (ms)."""
        times = []
        if self.buffer:
            times.append(min(ms for ms, _, _ in self.buffer) + 1)
        if self.live:
            times.append(self.events[self.live[0]][2] + self.window)
        return min(times) if times else None

    def add(self, stream: int, row_id: int, ms: int) -> list[tuple[int, ...]]:
        """Process one tuple; returns the results it completes, each as a tuple of sequence numbers.

        A tuple older than the key's newest one is refused (counted in
        ``dropped``): expiry has already moved past what it could join.
        """
        if self.last_ms is not None and ms < self.last_ms:
            self.dropped += 1
            return []
        self.last_ms = ms
        self.expire(ms)
        self._count_pairs(stream)
        seq = self.seq
        self.seq += 1
        self.events[seq] = (stream, row_id, ms)
        self.live.append(seq)
        plan = self.plan
        leaf, entry = insert(plan, seq, stream, _K)
        if plan.incomplete and self.watch[stream]:
            seen = self.attempted[stream]
            if _K not in seen:  # fresh (Definition 2): complete every state on the path for this key
                seen.add(_K)
                self.complete_path(leaf, _K)
        self.out = []
        walk_up(leaf, _K, entry, self.emit)
        self.next_id = self.seq
        return [flatten(p) for _, p in self.out]

    def _count_pairs(self, stream: int) -> None:
        self.arrived[stream] += 1
        count_pairs(self.plan, stream, _K, self.pairs)

    def take_counts(self) -> tuple[list[int], dict[tuple[int, int], int]]:
        """The arrivals and pair counts since the last call, which starts them afresh."""
        out = self.arrived, self.pairs
        self.arrived, self.pairs = [0] * len(self.arrived), {}
        return out

    def describe(self, result: tuple[int, ...]) -> list[Row]:
        """(stream index, row id, event time ms) of each tuple of a result."""
        return [self.events[s] for s in result]

    def oldest_ms(self) -> int | None:
        return self.events[self.live[0]][2] if self.live else None

    def incomplete(self) -> list[frozenset[int]]:
        return [n.streams for n in self.plan.joins if not n.complete]

