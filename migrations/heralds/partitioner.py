"""Cut a punctuated stream into herald partitions with ids (paper 002 §V.E).

Heralds arrive in-stream as punctuation rows: a ``Herald`` object where a
data row (a tuple) would be. The partitioner removes them, keeps the heralds
in force (``InForce``), and hands out the data rows as slices, each tagged
with a partition id: one id per stretch of tuples under the same merged
herald. A new herald, or a herald running out, starts a new partition; id 0
is reserved for anonymous tuples, under no herald at all. A partition may
span several batches; ``Partitioner.closed`` lists the ids that ended, so
operators can drop their control-table entries.

Finding punctuation costs one C-level pass per batch (``map(type, …)``,
then ``count(tuple)``, an identity test per row) rather than a Python test
per row: a herald is looked for where the count in force runs out, which is
where exactly counted heralds follow each other, and ``list.index`` (which
compares every row's type with ``Herald`` the slow way) searches only when
it is not there. Rows between two heralds are sliced, not copied one by
one. Heralds may also come beside the batch, with the position they apply
from (a herald column, a side stream), which spares that pass.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Mapping, NamedTuple, Sequence

from .herald import Herald, HeraldViolation, InForce, Patterns

ANONYMOUS = 0
_tuple_new = tuple.__new__


class Partition(NamedTuple):
    """Consecutive data rows of one partition; ``herald`` is the merged patterns in force (None: anonymous)."""

    pid: int
    herald: Patterns | None
    rows: Sequence[tuple[Any, ...]]


def partition(pid: int, herald: Patterns | None, rows: Sequence[tuple[Any, ...]]) -> Partition:
    """``Partition(pid, herald, rows)`` without the named tuple's Python-level ``__new__``: the hot paths make
    one per slice."""
    return _tuple_new(Partition, (pid, herald, rows))


class Partitioner:
    """Partitions one stream; ``position`` maps attribute names to row indices.

    ``ts`` names the timestamp attribute, needed once a time-based herald
    arrives (rows must come in timestamp order, as the punctuation model
    assumes). With ``check=True`` every row is verified against the herald
    covering it (``HeraldViolation``); the operators assume heralds are
    truthful and do not check.
    """

    def __init__(self, position: Mapping[str, int], *, ts: str | None = None, check: bool = False) -> None:
        self.position = dict(position)
        self.ts_index = self.position[ts] if ts is not None else None
        self.check = check
        self.in_force = InForce()
        self.pid = ANONYMOUS
        self.next_pid = 1
        self.heralds_seen = 0
        self.closed: list[int] = []
        """Partition ids that ended during the last ``feed``."""

    def feed(self, batch: Sequence[Any], heralds: Sequence[tuple[int, Herald]] | None = None) -> list[Partition]:
        """Split one batch into partition slices, in stream order.

        Heralds are punctuation rows in ``batch`` (``Herald`` objects among
        the tuples), or, when ``heralds`` is given, they come beside a batch
        of tuples only: ``(i, herald)`` pairs in order, each herald in force
        from the batch's i-th tuple on — the form a herald column or a side
        stream takes, which needs no pass over the rows to find them.
        """
        self.closed = []
        out: list[Partition] = []
        n = len(batch)
        if heralds is not None:
            start = 0
            for at, herald in heralds:
                if at > start:
                    self._rows(batch, start, at, out)
                    start = at
                self._herald(herald)
            if start < n:
                self._rows(batch, start, n, out)
            return out
        types = list(map(type, batch))
        index = types.index
        # Punctuation is found by the rows' types. ``list.index(Herald)`` compares every row's type with
        # Herald the slow way (they are not the same object), while ``count(tuple)`` is an identity test per
        # row; so a herald is looked for where the count in force runs out (exactly counted heralds follow
        # each other there) and accepted when the rows before it are all tuples, and once every non-tuple
        # of the batch is a herald found, none is left ahead.
        others = n - types.count(tuple)
        in_force = self.in_force
        inf, check = math.inf, self.check
        start = found = 0
        while start <= n:
            if found == others:
                stop = n
            else:
                left = in_force.rows_left
                guess = start + int(left) if left != inf else n
                if guess < n and types[guess] is Herald and types[start:guess].count(tuple) == left:
                    stop = guess
                else:
                    try:
                        stop = index(Herald, start)
                    except ValueError:
                        stop = n
                        found = others
            if stop > start:
                left = in_force.rows_left
                if left >= stop - start and in_force.time_left == inf and not check:
                    # the common case, inline: the rows up to the next herald are one slice of the partition
                    # in force (a count herald covering them all, or none)
                    out.append(_tuple_new(Partition, (self.pid, in_force.merged, batch[start:stop])))
                    if left != inf and in_force.consume(stop - start):
                        self._new_partition()
                else:
                    self._rows(batch, start, stop, out)
            if stop < n:
                found += 1
                self._herald(batch[stop])
            start = stop + 1
        return out

    def _herald(self, herald: Herald) -> None:
        if herald.lifespan.kind == "time" and self.ts_index is None:
            raise ValueError("a herald with a time-based lifespan arrived, but the partitioner was given no ts attribute")
        self.heralds_seen += 1
        self.in_force.arrive(herald)
        # a new partition; a herald is in force now, so it is never anonymous
        if self.pid != ANONYMOUS:
            self.closed.append(self.pid)
        self.pid = self.next_pid
        self.next_pid += 1

    def _new_partition(self) -> None:
        if self.pid != ANONYMOUS:
            self.closed.append(self.pid)
        if self.in_force.merged is None:
            self.pid = ANONYMOUS
        else:
            self.pid = self.next_pid
            self.next_pid += 1

    def _rows(self, batch: Sequence[Any], start: int, stop: int, out: list[Partition]) -> None:
        in_force = self.in_force
        while start < stop:
            if in_force.time_left != math.inf:
                start = self._timed_rows(batch, start, stop, out)
                continue
            # count-based heralds or none: the slice ends where the batch or the first count runs out
            left = in_force.rows_left
            end = stop if left >= stop - start else start + int(left)
            merged = in_force.merged
            if self.check and merged is not None:
                self._verify(batch[start:end], merged)
            out.append(_tuple_new(Partition, (self.pid, merged, batch[start:end])))
            if left != math.inf and in_force.consume(end - start):
                self._new_partition()
            start = end

    def _timed_rows(self, batch: Sequence[Any], start: int, stop: int, out: list[Partition]) -> int:
        """One slice under a time-based herald (or none, when the herald's span is already over); the next start."""
        in_force = self.in_force
        ts_index = self.ts_index
        until = in_force.time_left
        if batch[start][ts_index] >= until:  # type: ignore[index]
            in_force.expire(batch[start][ts_index])  # type: ignore[index]
            self._new_partition()
            return start
        left = in_force.rows_left
        end = stop if left >= stop - start else start + int(left)
        end = bisect_left(batch, until, start, end, key=lambda row: row[ts_index])  # type: ignore[index]
        rows = batch[start:end]
        merged = in_force.merged
        if self.check and merged is not None:
            self._verify(rows, merged)
        out.append(Partition(self.pid, merged, rows))
        if left != math.inf and in_force.consume(end - start):
            self._new_partition()
        return end

    def _verify(self, rows: Sequence[tuple[Any, ...]], patterns: Patterns) -> None:
        for row in rows:
            for attribute, r in patterns:
                value = row[self.position[attribute]]
                if not r.contains(value):
                    raise HeraldViolation(f"row {row!r} has {attribute}={value!r}, outside the herald's {r}")
