"""The herald-aware select inside a Spark query, configured at every micro-batch (paper 002 §IV–V on Spark).

A Spark micro-batch is a set of rows, not a sequence, so heralds are placed
by event time: the time-based heralds known to the driver (from the
metadata store, polled once per micro-batch by ``StoreHeralds``) cut the
timeline into spans (``migrations.heralds.spans``), and PredSAT decides each
span once. The select then becomes two filters the engine runs without
Python:

* **select data skipping** — ``ts`` outside the skipped spans: a plain range
  condition on the timestamp, which Spark pushes down to sources that can
  prune by it (Parquet row groups and files by their min/max statistics);
* **select elimination** — a ``CASE`` over ``ts``: ``true`` in spans whose
  heralds imply the predicate, the residual in spans that leave part of it,
  the full predicate elsewhere (the anonymous partition).

``HeraldSelect`` is the ``foreachBatch`` function that does this for a
streaming query: a herald written to the store (``armd herald add …
--seconds S``, or SQL) changes the next micro-batch's plan without a
restart. Count heralds need the stream's order and are not applied on Spark
(``StoreHeralds.missed`` counts them).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from armd.adapters.herald_feed import HeraldFeeds, StoreHeralds
from armd.migrations.heralds import Atom, Attr, SelectReasoner, Verdict
from armd.migrations.heralds.herald import Herald
from armd.migrations.heralds.spans import Span, spans


def column(atoms: Sequence[Atom]) -> Column:
    """A conjunction as a Spark condition (attributes are column names; the empty conjunction is true)."""
    out: Column = F.lit(True)
    for a in atoms:
        left = F.col(a.left.name) if isinstance(a.left, Attr) else F.lit(a.left.value)
        right = F.col(a.right.name) if isinstance(a.right, Attr) else F.lit(a.right.value)
        out = out & (left == right if a.op == "=" else left < right if a.op == "<" else left <= right)
    return out


def _within(t: Column, span: Span) -> Column:
    return (t >= F.lit(span.start)) & (t < F.lit(span.end))


def conditions(plan: Sequence[Span], predicate: Sequence[Atom], ts: str) -> tuple[Column | None, Column]:
    """(the skipping filter on ``ts`` or None, the select per span); ``ts`` in seconds (a timestamp column is cast)."""
    t = F.col(ts).cast("double")
    skipped = [s for s in plan if s.verdict is Verdict.UNSATISFIABLE]
    keep = None
    for s in skipped:
        keep = ~_within(t, s) if keep is None else keep & ~_within(t, s)
    case = None
    whole = tuple(predicate)
    for s in plan:
        if s.verdict is Verdict.UNSATISFIABLE or (s.verdict is Verdict.UNKNOWN and s.residual == whole):
            continue  # skipped above, or nothing to save: the full predicate below serves it
        then = F.lit(True) if s.verdict is Verdict.IMPLIED else column(s.residual)
        case = F.when(_within(t, s), then) if case is None else case.when(_within(t, s), then)
    full = column(predicate)
    return keep, (full if case is None else case.otherwise(full))


def herald_select(df: DataFrame, plan: Sequence[Span], predicate: Sequence[Atom], ts: str) -> DataFrame:
    """``σ_P(df)`` under the spans' decisions: the skipping filter first (so it can be pushed down)."""
    keep, select = conditions(plan, predicate, ts)
    if keep is not None:
        df = df.where(keep)
    return df.where(select)


class HeraldSelect:
    """``foreachBatch`` function: each micro-batch is selected under the heralds the store holds at that moment,
    and handed to ``sink(df, epoch_id)``. ``plans`` keeps each epoch's spans (what was skipped or passed)."""

    def __init__(
        self,
        predicate: Sequence[Atom],
        heralds: StoreHeralds | HeraldFeeds,
        sink: Callable[[DataFrame, int], Any],
        *,
        ts: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.predicate = tuple(predicate)
        self.reasoner = SelectReasoner(self.predicate)
        self.heralds = heralds
        self.sink = sink
        self.ts = ts
        self.clock = clock
        self.plans: dict[int, list[Span]] = {}

    def plan(self, known: Sequence[Herald]) -> list[Span]:
        return spans(known, self.reasoner)

    def __call__(self, df: DataFrame, epoch_id: int) -> None:
        plan = self.plan(self.heralds.timed(self.clock()))
        self.plans[epoch_id] = plan
        self.sink(herald_select(df, plan, self.predicate, self.ts), epoch_id)
