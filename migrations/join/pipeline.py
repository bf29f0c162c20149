"""The n-way windowed equi-join pipeline that every reordering strategy runs on.

Why one module: JISC, Moving State, Parallel Track and Restart must be
compared on exactly the same join code, so the plan tree, the state layout,
the symmetric-hash-join walk and the window expiry live here once and the
strategies (``strategies.py``) only decide what happens to the states when
the join order changes.

Join order
    A nested tuple of stream names, e.g. ``((("A", "B"), "C"), "D")``
    (left-deep) or ``(("A", "B"), ("C", "D"))`` (bushy). Every stream
    appears exactly once; every inner tuple has two members. A node of the
    tree is identified by the *set* of streams under it: two plans share a
    state exactly when they have a node over the same stream set (paper 003's
    state matching, paper 004's Definition 1).

Window semantics (the oracle in ``oracle.py`` uses exactly these)
    Every event has a stream, a join key and a timestamp τ. Events are
    processed in timestamp order, ties in log order; the position in that
    order is the event id. With window size W > 0 an event is *live* at time
    t while t − τ < W. A result is one event per stream, all with the same
    key, that are live together at some moment: max τ − min τ < W. It is
    emitted exactly once, when its last component (highest id) arrives.
    Operationally, when an event with timestamp t arrives, every event with
    τ ≤ t − W expires first: it leaves its stream's hash table and every
    intermediate entry that contains it is deleted, walking up the tree
    (a composite is valid only while all its components are). Then the new
    event is inserted and probes upwards.

States
    Every non-root node holds ``state``: a dict key → list of entries. An
    entry is ``(min_id, payload)``: the smallest event id in it (expiry and
    Parallel Track's old/new test only need the minimum, because ids grow
    with time) and the payload, an event id for a leaf or a pair of child
    payloads for a join. ``flatten`` turns a payload into the sorted tuple
    of event ids, the canonical form of a result. The root is not
    materialised: its joins are the query's output.

JISC bookkeeping on nodes
    ``complete`` (Definition 1) and ``pending``: the keys whose entries in
    an incomplete state may still be missing. The invariant is that for a
    key not in ``pending`` the node's entries are exactly the join of its
    children's live entries; ``len(pending)`` is the completion counter of
    §4.3 and the node is complete when it reaches zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Sequence

Order = Any
"""A join order: a stream name, or a 2-tuple of orders."""

Entry = tuple[int, Any]


@dataclass(frozen=True)
class EventLog:
    """Events in processing order (timestamp, then log order); the index is the event id."""

    streams: tuple[str, ...]
    stream: tuple[int, ...]
    """Stream index of each event (into ``streams``)."""
    key: tuple[Hashable, ...]
    ts: tuple[float, ...]

    @classmethod
    def from_events(cls, streams: Sequence[str], events: Iterable[tuple[str, Hashable, float]]) -> EventLog:
        """Sort ``(stream, key, timestamp)`` events stably by timestamp."""
        index = {name: i for i, name in enumerate(streams)}
        if len(index) != len(streams):
            raise ValueError(f"stream names must be distinct, got {list(streams)}")
        rows = sorted(((ts, n, index[s], k) for n, (s, k, ts) in enumerate(events)), key=lambda r: (r[0], r[1]))
        return cls(
            tuple(streams),
            tuple(r[2] for r in rows),
            tuple(r[3] for r in rows),
            tuple(r[0] for r in rows),
        )

    def __len__(self) -> int:
        return len(self.ts)


class Node:
    """One node of a join tree: a leaf (one stream) or a join of two children."""

    __slots__ = ("streams", "left", "right", "parent", "sibling", "leaf", "state", "complete", "pending")

    def __init__(self, streams: frozenset[int], leaf: int = -1) -> None:
        self.streams = streams
        self.leaf = leaf
        self.left: Node | None = None
        self.right: Node | None = None
        self.parent: Node | None = None
        self.sibling: Node | None = None
        self.state: dict[Hashable, list[Entry]] | None = {}
        self.complete = True
        self.pending: set[Hashable] = set()

    @property
    def is_leaf(self) -> bool:
        return self.leaf >= 0

    def exact_for(self, key: Hashable) -> bool:
        """True when this node's entries for ``key`` are all there (JISC)."""
        return self.complete or key not in self.pending

    def __repr__(self) -> str:
        return f"Node({sorted(self.streams)}, complete={self.complete}, pending={len(self.pending)})"


class Plan:
    """A join tree over a fixed set of streams; states start empty."""

    def __init__(self, order: Order, streams: Sequence[str]) -> None:
        self.order = normalise_order(order, streams)
        self.names = tuple(streams)
        index = {name: i for i, name in enumerate(streams)}
        self.leaves: list[Node] = [None] * len(streams)  # type: ignore[list-item]
        self.joins: list[Node] = []
        """Join nodes bottom-up (children before parents); the root is last."""
        self.root = self._build(self.order, index)
        self.root.state = None
        self.by_streams: dict[frozenset[int], Node] = {n.streams: n for n in self.leaves + self.joins}
        self.left_deep = all(j.left.is_leaf or j.right.is_leaf for j in self.joins)  # type: ignore[union-attr]
        self.incomplete = 0
        """Number of incomplete join states (JISC); 0 means the plain fast path."""

    def _build(self, order: Order, index: dict[str, int]) -> Node:
        if isinstance(order, str):
            node = Node(frozenset((index[order],)), index[order])
            self.leaves[index[order]] = node
            return node
        left = self._build(order[0], index)
        right = self._build(order[1], index)
        node = Node(left.streams | right.streams)
        node.left, node.right = left, right
        left.parent = right.parent = node
        left.sibling, right.sibling = right, left
        self.joins.append(node)
        return node

    def describe(self) -> str:
        return order_text(self.order)


def normalise_order(order: Order, streams: Sequence[str]) -> Order:
    """Validate a join order (lists become tuples); every stream exactly once, binary joins."""
    seen: list[str] = []

    def walk(o: Order) -> Order:
        if isinstance(o, str):
            seen.append(o)
            return o
        if not isinstance(o, (tuple, list)) or len(o) != 2:
            raise ValueError(f"a join order is a stream name or a pair of orders, got {o!r}")
        return (walk(o[0]), walk(o[1]))

    out = walk(order)
    if sorted(seen) != sorted(streams) or len(set(seen)) != len(seen):
        raise ValueError(f"join order {order_text(out)} must name each of {sorted(streams)} exactly once")
    if len(seen) < 2:
        raise ValueError("a join needs at least two streams")
    return out


def order_text(order: Order) -> str:
    if isinstance(order, str):
        return order
    return f"({order_text(order[0])} ⋈ {order_text(order[1])})"


def left_deep(names: Sequence[str]) -> Order:
    """The left-deep order ((n0 ⋈ n1) ⋈ n2) ⋈ …"""
    order: Order = names[0]
    for name in names[1:]:
        order = (order, name)
    return order


def flatten(payload: Any) -> tuple[int, ...]:
    """The sorted event ids of a payload: the canonical form of a result."""
    out: list[int] = []
    stack = [payload]
    while stack:
        p = stack.pop()
        if type(p) is tuple:
            stack.extend(p)
        else:
            out.append(p)
    out.sort()
    return tuple(out)


# --- the hot path -------------------------------------------------------------------------


def join_lists(left: list[Entry], right: list[Entry]) -> list[Entry]:
    """All pairs of two entry lists with the same key (one symmetric-hash-join probe result)."""
    return [((a if a < b else b), (pa, pb)) for a, pa in left for b, pb in right]


def walk_up(leaf: Node, key: Hashable, entry: Entry, emit: Callable[[list[Entry]], None]) -> None:
    """Insert-and-probe upwards from a freshly inserted leaf entry (symmetric hash join).

    At each join the delta probes the opposite child's hash table for the
    same key; the matches go into the join's state and on up. The root
    emits instead of storing. (The hot path: one comprehension per level.)
    """
    node = leaf
    delta = [entry]
    while True:
        other = node.sibling.state.get(key)  # type: ignore[union-attr]
        if not other:
            return
        if len(delta) == 1:
            a, pa = delta[0]
            new = [((a if a < b else b), (pa, pb)) for b, pb in other]
        else:
            new = [((a if a < b else b), (pa, pb)) for a, pa in delta for b, pb in other]
        node = node.parent  # type: ignore[assignment]
        state = node.state
        if state is None:
            emit(new)
            return
        lst = state.get(key)
        if lst is None:
            state[key] = new  # not mutated again during this walk
        else:
            lst.extend(new)
        delta = new


def walk_up_old(leaf: Node, key: Hashable, entry: Entry, emit: Callable[[list[Entry]], None], end: int) -> None:
    """``walk_up`` for an old Parallel Track plan: the root skips joins of two new parts.

    ``end`` is the first event id of the next plan; a part is new when its
    smallest id is ≥ end, and a result made only of new parts is the newer
    plan's to produce (paper 003 §4.2.2).
    """
    node = leaf
    delta = [entry]
    while True:
        other = node.sibling.state.get(key)  # type: ignore[union-attr]
        if not other:
            return
        node = node.parent  # type: ignore[assignment]
        state = node.state
        if state is None:
            pairs = (((a if a < b else b), (pa, pb)) for a, pa in delta for b, pb in other)
            new = [(m, p) for m, p in pairs if m < end]
            if new:
                emit(new)
            return
        new = [((a if a < b else b), (pa, pb)) for a, pa in delta for b, pb in other]
        lst = state.get(key)
        if lst is None:
            state[key] = new
        else:
            lst.extend(new)
        delta = new


def expire_event(plan: Plan, event: int, stream: int, key: Hashable) -> None:
    """Remove an expired event from its hash table and every entry containing it, walking up.

    ``event`` is the oldest live event (expiry goes in id order), so it is
    the first entry of its key in its stream's table, and every entry with
    a smaller minimum id is already gone. Above the leaf an entry contains
    it exactly when its minimum id is ≤ event. The walk stops at a complete
    state that held no such entry (nothing above can hold one either) but
    passes through incomplete states regardless (paper 004 §4.2), where it
    also retires a pending key whose true entries have become empty.
    """
    leaf = plan.leaves[stream]
    table = leaf.state
    lst = table[key]  # type: ignore[index]
    if len(lst) == 1:
        del table[key]  # type: ignore[union-attr]
    else:
        del lst[0]
    node = leaf.parent
    while node is not None:
        state = node.state
        if state is None:
            return
        lst = state.get(key)
        removed = False
        if lst:
            keep = [en for en in lst if en[0] > event]
            if len(keep) != len(lst):
                removed = True
                if keep:
                    state[key] = keep
                else:
                    del state[key]
        if not node.complete:
            if key in node.pending:
                _retire_if_empty(plan, node, key)
        elif not removed:
            return
        node = node.parent


def _retire_if_empty(plan: Plan, node: Node, key: Hashable) -> None:
    """A pending key is settled once a child that is exact for it has no entries for it."""
    for child in (node.left, node.right):
        if child.exact_for(key) and key not in child.state:  # type: ignore[union-attr, operator]
            node.state.pop(key, None)  # type: ignore[union-attr]
            mark_done(plan, node, key)
            return


def mark_done(plan: Plan, node: Node, key: Hashable) -> None:
    """Decrement the node's completion counter for ``key``; at zero the state is complete (§4.3)."""
    node.pending.discard(key)
    if not node.pending and not node.complete:
        node.complete = True
        plan.incomplete -= 1


class Cursor:
    """The expiry front of one plan: every event with an id below ``lo`` has expired from it."""

    __slots__ = ("lo",)

    def __init__(self, lo: int = 0) -> None:
        self.lo = lo


def advance(plan: Plan, cursor: Cursor, log: EventLog, now: float, window: float) -> None:
    """Expire from ``plan`` every event with timestamp ≤ now − window."""
    lo = cursor.lo
    ts = log.ts
    limit = now - window
    if lo < len(ts) and ts[lo] <= limit:
        streams, keys = log.stream, log.key
        while ts[lo] <= limit:
            expire_event(plan, lo, streams[lo], keys[lo])
            lo += 1
        cursor.lo = lo


def insert(plan: Plan, event: int, stream: int, key: Hashable) -> tuple[Node, Entry]:
    """Put an event into its stream's hash table; returns the leaf and the entry to probe with."""
    leaf = plan.leaves[stream]
    entry = (event, event)
    lst = leaf.state.get(key)  # type: ignore[union-attr]
    if lst is None:
        leaf.state[key] = [entry]  # type: ignore[index]
    else:
        lst.append(entry)
    return leaf, entry


def count_pairs(plan: Plan, stream: int, key: Hashable, pairs: dict[tuple[int, int], int]) -> None:
    """Add an arriving tuple's partners to ``pairs``: the live tuples of every other stream under its key.

    Call it after expiring up to the tuple's time and before inserting it;
    over a log every pair of tuples with equal keys less than the window
    apart is then counted once, as ``(i, j)`` with stream i < j. What the
    join-order policy's pairwise key-match selectivities are measured from.
    """
    for other, leaf in enumerate(plan.leaves):
        if other != stream:
            live = leaf.state.get(key)  # type: ignore[union-attr]
            if live:
                pair = (other, stream) if other < stream else (stream, other)
                pairs[pair] = pairs.get(pair, 0) + len(live)


def recompute(node: Node, cut: int) -> None:
    """Fill a join state from its children's states, every key (Moving State's eager step)."""
    left, right = node.left.state, node.right.state  # type: ignore[union-attr]
    small, large = (left, right) if len(left) <= len(right) else (right, left)  # type: ignore[arg-type]
    state: dict[Hashable, list[Entry]] = {}
    for key, lst in small.items():  # type: ignore[union-attr]
        other = large.get(key)  # type: ignore[union-attr]
        if other:
            new = [en for en in join_lists(lst, other) if en[0] >= cut]
            if new:
                state[key] = new
    node.state = state
