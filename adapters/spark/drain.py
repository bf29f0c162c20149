"""When GenMig's old run stops on Spark, in event time: the fact the predicted trajectory drains at.

Until the old run stops, the query holds both plans' state (paper 001 Fig 7,
``policies.trajectory.predict(..., drain=...)``). The cost model's ideal is
T_split + watermark delay + trigger; Spark's old run stops at the end of a
batch, and a batch's watermark comes from the batches before it, so it can
hold its state up to one batch longer. ``GenMigApplier`` records the
drain it expects (``facts["drain_at"]``) from its own facts when a migration
starts: the position T_split was placed from, T_split, the old plan's
watermark delay and the event time its recent batches covered.
"""

from __future__ import annotations

import math
import statistics

from .listener import ProgressRecord


def expected_drain(t_split: float, delay: float, position: float, batch_span: float, emits: str = "watermark") -> float:
    """Event time at which the old run stops: the end of its last batch, as this applier's rule places it.

    The old run's batches go on from ``position`` (the end of the batch T_split was placed from), ``batch_span``
    event seconds each. A window aggregate is done once a batch's progress shows a watermark at or past T_split
    (``old_plan_done``); Spark takes a batch's watermark from the batches before it, so that is the batch *after*
    the one whose newest event reaches T_split + the watermark delay. A result that is out on arrival is done with
    the batch that reads past T_split. With no batch span known (0) it is that point itself (T_split + delay, or T_split on arrival).
    Paper 001 Fig 7 (``bench/trajectory.py``) compares the old run's last state sample with this.
    """
    if emits == "arrival":  # read past T_split: the first batch whose end offset is at or after it
        if not batch_span > 0:
            return t_split
        return position + max(math.ceil((t_split - position) / batch_span), 0) * batch_span
    point = t_split + delay
    if not batch_span > 0:
        return point
    # the batch [start, end) holding the point has an event at or after it; its watermark shows in the next batch
    reaching = position + (max(math.floor((point - position) / batch_span), -1) + 1) * batch_span
    return reaching + batch_span


def batch_span_seconds(records: list[ProgressRecord], fallback: float = 0.0, recent: int = 5) -> float:
    """Event time one batch of a run covers: the median over its ``recent`` batches with input.

    From event-time offsets where the source has them (``armd-synthetic``: exact), else from the step of the
    newest event time between consecutive batches; ``fallback`` (e.g. ``params.extra["trigger_seconds"]``) when
    the run has too few batches to tell.
    """
    spans = [max(v for v in (s.event_seconds for s in r.sources) if v is not None)
             for r in records if r.input_rows and any(s.event_seconds is not None for s in r.sources)]
    if not spans:
        times = sorted(r.event_max.timestamp() for r in records if r.event_max is not None and r.input_rows)
        spans = [b - a for a, b in zip(times, times[1:]) if b > a]
    spans = spans[-recent:]
    return float(statistics.median(spans)) if spans else float(fallback)
