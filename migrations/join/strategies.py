"""Four ways to change the join order of a running pipeline, on the same join code.

* ``JISC`` (paper 004): keep every state the new plan shares with the old
  one, start the others empty and incomplete, and complete a key's entries
  the first time a tuple needs them. No halt, one plan.
* ``MovingState`` (paper 003 §4.1): halt, move the matching states,
  recompute every unmatched state eagerly from its children, resume.
* ``ParallelTrack`` (paper 003 §4.2): run the old and the new plan side by
  side on every new tuple, drop old⋈old-free duplicates at the old root,
  hold the new plan's output until the old plan holds only new entries,
  then discard the old plan.
* ``Restart``: a fresh plan with empty states; the naive baseline, which
  loses every result that has a component from before the switch.

All four share the input queue discipline of paper 004 §4.1: tuples
received before a transition is decided are drained through the old plan
first, so no tuple is ever half-processed by two plans.

Nothing here reads a clock; the host (``host.py``) times the calls.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Hashable

from .pipeline import (
    Cursor,
    Entry,
    EventLog,
    Node,
    Order,
    Plan,
    advance,
    flatten,
    join_lists,
    mark_done,
    recompute,
    walk_up,
    walk_up_old,
)


class Strategy:
    """A join pipeline over an event log plus a rule for changing its order."""

    name = "base"

    def __init__(self, log: EventLog, window: float, order: Order, *, collect: bool = False) -> None:
        if not window > 0:
            raise ValueError(f"window must be > 0, got {window!r}")
        self.log = log
        self.window = window
        self.plan = Plan(order, log.streams)
        self.cursor = Cursor()
        self.queue: deque[int] = deque()
        self.next_id = 0
        """Id of the next event to process; events below it have been processed."""
        self.emitted = 0
        """Results delivered to the output so far (buffered ones not counted)."""
        self.out: list[Entry] | None = [] if collect else None
        self.emit = self._emit_collect if collect else self._emit_count
        self.transitions = 0

    # --- output ---------------------------------------------------------------------------

    def _emit_count(self, new: list[Entry]) -> None:
        self.emitted += len(new)

    def _emit_collect(self, new: list[Entry]) -> None:
        self.emitted += len(new)
        self.out.extend(new)  # type: ignore[union-attr]

    def results(self) -> Counter[tuple[int, ...]]:
        """The delivered results as a multiset of sorted event-id tuples (needs ``collect=True``)."""
        if self.out is None:
            raise ValueError("construct the strategy with collect=True to keep its results")
        return Counter(flatten(p) for _, p in self.out)

    # --- input ----------------------------------------------------------------------------

    def receive(self, event: int) -> None:
        """Queue an event; it is processed by ``step`` or by the drain before a transition."""
        self.queue.append(event)

    def step(self) -> bool:
        """Process the oldest queued event; False when the queue is empty."""
        if not self.queue:
            return False
        self.process(self.queue.popleft())
        return True

    def drain(self) -> None:
        while self.queue:
            self.process(self.queue.popleft())

    def transition(self, order: Order) -> None:
        """Change the join order: drain the queue through the current plan, then switch (paper 004 §4.1)."""
        self.drain()
        self.transitions += 1
        self._switch(order)

    def finish(self) -> None:
        """End of input: deliver anything still held back."""
        self.drain()

    # --- to override ----------------------------------------------------------------------

    def process(self, event: int) -> None:
        # advance / insert / walk_up, inlined where it saves calls on the hot path
        log = self.log
        key = log.key[event]
        now = log.ts[event]
        plan, cursor = self.plan, self.cursor
        if log.ts[cursor.lo] <= now - self.window:
            advance(plan, cursor, log, now, self.window)
        leaf = plan.leaves[log.stream[event]]
        entry = (event, event)
        lst = leaf.state.get(key)  # type: ignore[union-attr]
        if lst is None:
            leaf.state[key] = [entry]  # type: ignore[index]
        else:
            lst.append(entry)
        walk_up(leaf, key, entry, self.emit)
        self.next_id = event + 1

    def _switch(self, order: Order) -> None:
        raise NotImplementedError


class Restart(Strategy):
    """Throw the states away and start the new plan empty (loses results across the switch)."""

    name = "restart"

    def _switch(self, order: Order) -> None:
        self.plan = Plan(order, self.log.streams)
        # Events before the switch are not in the new plan, so they never expire from it.
        self.cursor = Cursor(max(self.cursor.lo, self.next_id))


class MovingState(Strategy):
    """Halt, move matching states, recompute the unmatched ones bottom-up, resume (paper 003 §4.1)."""

    name = "moving-state"

    def __init__(self, log: EventLog, window: float, order: Order, *, collect: bool = False) -> None:
        super().__init__(log, window, order, collect=collect)
        self.recomputed = 0
        """Join states recomputed eagerly over all transitions."""

    def _switch(self, order: Order) -> None:
        old = self.plan
        new = Plan(order, self.log.streams)
        for i, leaf in enumerate(new.leaves):
            leaf.state = old.leaves[i].state
        for node in new.joins[:-1]:  # bottom-up, so children are ready; the root is not stored
            match = old.by_streams.get(node.streams)
            if match is not None:
                node.state = match.state
            else:
                recompute(node, self.cursor.lo)
                self.recomputed += 1
        self.plan = new


class JISC(Strategy):
    """Just-in-time state completion (paper 004).

    After a switch a join state of the new plan is *complete* if the old
    plan had a complete state over the same streams (Definition 1, with the
    §4.5 rule for overlapped transitions: an incomplete old state stays
    incomplete) and *incomplete* otherwise. An incomplete state keeps the
    set of keys that may still miss entries; its size is the completion
    counter (§4.3), set at the switch from the keys its children can hold:
    both children complete → keys present in both (case 1); one incomplete
    → keys of the complete one that the other may hold (case 2); both
    incomplete → keys both may hold (case 3, which the paper leaves to the
    children's completion and armd counts like the others).

    A tuple is *fresh* when no tuple of its stream with its key has arrived
    since the switch (Definition 2). A fresh tuple first completes, for its
    key, every incomplete state it will probe on its way up — the whole
    path, not only the first probe, so that every later (*attempted*) tuple
    of that stream and key finds exact entries everywhere and needs no
    check at all. Streams whose path probes no incomplete state skip the
    bookkeeping entirely (``watch``). Completion of a state for a key
    starts from the highest state below it that is exact for the key and
    joins upwards: a loop
    along the spine for left-deep plans (Procedure 3), a recursion over
    both children for bushy ones (Procedure 2). A completed key is dropped
    from the pending set; window slides pass through incomplete states and
    also settle pending keys whose entries have all expired.
    """

    name = "jisc"

    def __init__(self, log: EventLog, window: float, order: Order, *, collect: bool = False) -> None:
        super().__init__(log, window, order, collect=collect)
        self.attempted: list[set[Hashable]] = [set() for _ in log.streams]
        """Per stream, keys seen since the last switch: their tuples are attempted, not fresh.
        (Sets of existing key objects, so that dropping them after completion costs almost nothing.)"""
        self.watch: list[list[Node]] = [[] for _ in log.streams]
        """Per stream: the states its tuples probe that were incomplete at the switch (often none)."""
        self.completions = 0
        """State entries (node, key) completed on demand over all transitions."""

    def process(self, event: int) -> None:
        log = self.log
        key = log.key[event]
        now = log.ts[event]
        plan, cursor = self.plan, self.cursor
        if log.ts[cursor.lo] <= now - self.window:
            advance(plan, cursor, log, now, self.window)
        leaf = plan.leaves[log.stream[event]]
        entry = (event, event)
        lst = leaf.state.get(key)  # type: ignore[union-attr]
        if lst is None:
            leaf.state[key] = [entry]  # type: ignore[index]
        else:
            lst.append(entry)
        if plan.incomplete:
            if self.watch[leaf.leaf]:
                seen = self.attempted[leaf.leaf]
                if key not in seen:
                    seen.add(key)
                    self.complete_path(leaf, key)
        elif self.watch:
            self.watch = []  # every state complete: drop the bookkeeping once
            self.attempted = [set() for _ in log.streams]
        walk_up(leaf, key, entry, self.emit)
        self.next_id = event + 1

    def complete_path(self, leaf: Node, key: Hashable) -> None:
        """Make every state a tuple from ``leaf`` will probe exact for ``key``."""
        for opposite in self.watch[leaf.leaf]:
            if not (opposite.complete or key not in opposite.pending):
                self.complete(opposite, key)

    def complete(self, node: Node, key: Hashable) -> None:
        if self.plan.left_deep:
            self._complete_spine(node, key)
        else:
            self._complete_recursive(node, key)

    def _complete_spine(self, node: Node, key: Hashable) -> None:
        """Left-deep: find the highest exact state on the spine, then join upwards (no recursion)."""
        chain = []
        while not node.exact_for(key):
            chain.append(node)
            node = node.right if node.left.is_leaf else node.left  # type: ignore[union-attr, assignment]
        for n in reversed(chain):
            self._fill(n, key)

    def _complete_recursive(self, node: Node, key: Hashable) -> None:
        """Bushy: complete whichever children are not exact for the key, then this state."""
        for child in (node.left, node.right):
            if not child.exact_for(key):  # type: ignore[union-attr]
                self._complete_recursive(child, key)  # type: ignore[arg-type]
        self._fill(node, key)

    def _fill(self, node: Node, key: Hashable) -> None:
        left = node.left.state.get(key)  # type: ignore[union-attr]
        right = node.right.state.get(key)  # type: ignore[union-attr]
        cut = self.cursor.lo
        new = [en for en in join_lists(left, right) if en[0] >= cut] if left and right else None
        if new:
            node.state[key] = new  # type: ignore[index]
        else:
            node.state.pop(key, None)  # type: ignore[union-attr]
        mark_done(self.plan, node, key)
        self.completions += 1

    def _switch(self, order: Order) -> None:
        old = self.plan
        new = Plan(order, self.log.streams)
        for i, leaf in enumerate(new.leaves):
            leaf.state = old.leaves[i].state
        for node in new.joins[:-1]:  # bottom-up: children are classified first
            match = old.by_streams.get(node.streams)
            if match is not None:
                node.state = match.state
                node.complete = match.complete
                node.pending = set(match.pending)
            else:
                node.state = {}
                node.pending = _may_hold(node.left) & _may_hold(node.right)  # type: ignore[arg-type]
                node.complete = not node.pending
            if not node.complete:
                new.incomplete += 1
        self.plan = new
        self.attempted = [set() for _ in self.log.streams]
        self.watch = watch_paths(new)

    def incomplete_states(self) -> list[Node]:
        return [n for n in self.plan.joins if not n.complete]


def watch_paths(plan: Plan) -> list[list[Node]]:
    """Per stream, the incomplete states its tuples probe on the way up: what a fresh tuple completes."""
    out = []
    for leaf in plan.leaves:
        path, node = [], leaf
        while node.parent is not None:
            if not node.sibling.complete:  # type: ignore[union-attr]
                path.append(node.sibling)  # type: ignore[arg-type]
            node = node.parent
        out.append(path)
    return out


def _may_hold(node: Node) -> set[Hashable]:
    """Keys for which the node's true state may be non-empty."""
    keys = set(node.state)  # type: ignore[arg-type]
    if not node.complete:
        keys |= node.pending
    return keys


class _Track:
    __slots__ = ("plan", "cursor", "end", "buffer", "checked")

    def __init__(self, plan: Plan, cursor: Cursor) -> None:
        self.plan = plan
        self.cursor = cursor
        self.end: int | None = None
        """First event id of the next plan; None for the newest plan."""
        self.buffer: list[Entry] = []
        self.checked = 0
        """Monitor progress: states (leaves, then joins bottom-up) known to hold no old entry."""


class ParallelTrack(Strategy):
    """Run old and new plans side by side until the old one holds only new entries (paper 003 §4.2).

    Overlapped transitions stack plans: each plan emits the results whose
    oldest component falls in its own era, so the partition is exact; only
    the oldest plan delivers, the younger ones buffer until every older plan
    is discarded. A monitor checks the oldest plan every ``check_every``
    tuples, state by state (leaves first, then joins bottom-up, so a state
    found clean cannot become dirty again), for an entry older than the
    plan's end.
    """

    name = "parallel-track"

    def __init__(
        self, log: EventLog, window: float, order: Order, *, collect: bool = False, check_every: int = 1000
    ) -> None:
        super().__init__(log, window, order, collect=collect)
        self.tracks = [_Track(self.plan, self.cursor)]
        self.check_every = check_every
        self.since_check = 0
        self.discarded = 0

    def process(self, event: int) -> None:
        log = self.log
        key = log.key[event]
        stream = log.stream[event]
        now = log.ts[event]
        tracks = self.tracks
        if len(tracks) == 1:
            Strategy.process(self, event)
            return
        else:
            # advance / insert inlined as in Strategy.process, so both sides of the comparison get the same care
            last = len(tracks) - 1
            ts, limit = log.ts, now - self.window
            entry = (event, event)
            for i, tr in enumerate(tracks):
                if ts[tr.cursor.lo] <= limit:
                    advance(tr.plan, tr.cursor, log, now, self.window)
                leaf = tr.plan.leaves[stream]
                lst = leaf.state.get(key)  # type: ignore[union-attr]
                if lst is None:
                    leaf.state[key] = [entry]  # type: ignore[index]
                else:
                    lst.append(entry)
                sink = self.emit if i == 0 else tr.buffer.extend
                if i == last:
                    walk_up(leaf, key, entry, sink)
                else:
                    walk_up_old(leaf, key, entry, sink, tr.end)  # type: ignore[arg-type]
            self.since_check += 1
            if self.since_check >= self.check_every:
                self.since_check = 0
                self._monitor()
        self.next_id = event + 1

    def _switch(self, order: Order) -> None:
        self.tracks[-1].end = self.next_id
        plan = Plan(order, self.log.streams)
        self.tracks.append(_Track(plan, Cursor(self.next_id)))
        self.plan, self.cursor = plan, self.tracks[-1].cursor

    def _monitor(self) -> None:
        while len(self.tracks) > 1 and self._clean(self.tracks[0]):
            self._discard_oldest()

    def _clean(self, tr: _Track) -> bool:
        nodes = tr.plan.leaves + tr.plan.joins[:-1]
        end = tr.end
        while tr.checked < len(nodes):
            for lst in nodes[tr.checked].state.values():  # type: ignore[union-attr]
                for m, _ in lst:
                    if m < end:  # type: ignore[operator]
                        return False
            tr.checked += 1
        return True

    def _discard_oldest(self) -> None:
        self.tracks.pop(0)
        self.discarded += 1
        held = self.tracks[0].buffer
        self.tracks[0].buffer = []
        if held:
            self.emit(held)

    def finish(self) -> None:
        """End of input: no old plan can produce more, so deliver every held result in plan order."""
        self.drain()
        while len(self.tracks) > 1:
            self._discard_oldest()
