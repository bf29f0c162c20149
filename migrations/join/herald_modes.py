"""Which tuples of the n-way equi-join heralds prove joinless: join data skipping by time span (paper 002 §IV–V).

Why this module: the n-way join (``pipeline``, and on Spark
``adapters/spark/jisc.py``) joins one key common to every stream, by hash.
A hash probe never looks at a partner with another key, so there is no
predicate left to simplify; what heralds can still save is the tuples that
can be in no result at all. A result needs one tuple of *every* stream, all
with the same key, all less than the window W apart. So a tuple of stream
s at time t whose herald says its key lies in R is joinless when some other
stream o has, over the whole of (t − W, t + W), heralds whose key ranges
are disjoint from R: PredSAT finds ``s.key = o.key`` unsatisfiable under
the two heralds. Such a tuple is neither stored nor probed (the paper's
join data skipping); every other tuple is processed as usual.

On engines that see a micro-batch as a set (Spark) heralds are placed by
event time, as for the select (``migrations/heralds/spans.py``): each
stream's time heralds cut its timeline into spans, the heralds covering a
span are intersected, and a span whose heralds contradict each other is
trusted with nothing. ``skip_spans`` decides each span once and returns,
per stream, the time intervals whose tuples the join may drop: its *mode
table*, which the Spark host reads at every micro-batch. Everything outside
them is the normal mode. Count heralds need the stream's order and are not
placed here (as for the select on Spark).

Exactness rests on the heralds alone: a herald is a promise about the
tuples in its span, and a skipped tuple has, by the promises of the other
stream, no partner in its window — whether those partners arrived before
or after the herald did.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from armd.migrations.heralds.herald import Herald, Patterns, intersect
from armd.migrations.heralds.predicates import conjunction
from armd.migrations.heralds.predsat import JoinReasoner, Verdict

__all__ = ["covered_spans", "skip_spans"]

Interval = tuple[float, float]
"""``[start, end)`` in the heralds' time units."""


def covered_spans(heralds: Sequence[Herald]) -> list[tuple[float, float, Patterns]]:
    """A stream's timeline under its time heralds: ``(start, end, merged patterns)`` in time order.

    Spans no herald covers are left out, and so are spans whose heralds
    contradict each other (a promise that cannot hold is not trusted).
    """
    covers = [(h.ts, h.ts + h.lifespan.value, h.patterns) for h in heralds if h.lifespan.kind == "time"]
    cuts = sorted({t for start, end, _ in covers for t in (start, end)})
    out = []
    for start, end in zip(cuts, cuts[1:]):
        merged: Patterns | None = None
        for s, e, patterns in covers:
            if s <= start and end <= e:
                merged = patterns if merged is None else intersect(merged, patterns)
        if merged is not None and not any(r.empty for _, r in merged):
            out.append((start, end, merged))
    return out


def _disjoint_throughout(
    reasoner: JoinReasoner, mine: Patterns, other: list[tuple[float, float, Patterns]], low: float, high: float
) -> bool:
    """True when ``other``'s spans cover ``[low, high)`` without a gap and each contradicts ``mine`` on the key."""
    at = low
    for start, end, patterns in other:
        if end <= at:
            continue
        if start > at:
            return False  # a gap: tuples of the other stream there are under no herald
        if reasoner.decide(mine, patterns).verdict is not Verdict.UNSATISFIABLE:
            return False
        at = end
        if at >= high:
            return True
    return False


def skip_spans(
    heralds: Mapping[str, Sequence[Herald]], keys: Mapping[str, str], window: float
) -> dict[str, list[Interval]]:
    """Per stream, the time intervals whose tuples can join nothing (join data skipping), merged and in order.

    ``heralds`` maps every stream of the join to its heralds (time-based ones
    are used), ``keys`` each stream to the attribute its heralds call the
    join key, ``window`` is W in the heralds' time units. A span of stream s
    is skipped when another stream's spans cover ``[start − W, end + W)``
    and every one of them makes ``s.key = o.key`` unsatisfiable with s's
    span (PredSAT on the two heralds' key ranges).
    """
    missing = sorted(set(heralds) - set(keys))
    if missing:
        raise ValueError(f"no join key attribute given for stream(s) {missing}")
    if not window > 0:
        raise ValueError(f"window must be > 0, got {window!r}")
    spans = {s: covered_spans(h) for s, h in heralds.items()}
    reasoners = {(s, o): JoinReasoner(conjunction((f"L.{keys[s]}", "=", f"R.{keys[o]}")))
                 for s in spans for o in spans if s != o}
    out: dict[str, list[Interval]] = {}
    for s, mine in spans.items():
        skipped: list[Interval] = []
        for start, end, patterns in mine:
            for o, theirs in spans.items():
                if o == s:
                    continue
                if _disjoint_throughout(reasoners[s, o], patterns, theirs, start - window, end + window):
                    if skipped and skipped[-1][1] == start:
                        skipped[-1] = (skipped[-1][0], end)
                    else:
                        skipped.append((start, end))
                    break
        out[s] = skipped
    return out
