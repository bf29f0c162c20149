"""A herald creation operator: announce a buffered cluster of tuples before releasing it (paper 002 §VIII.D).

Heralds may come from the source, or from the stream system itself when it
already buffers input (to sort, to shed load): for each buffered cluster it
can state the exact range of the attributes that queries filter on and put
that herald in front of the cluster. The bench uses this to measure what
creating heralds costs next to what they save.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Iterable, Mapping, Sequence

from .herald import Herald
from .patterns import Range


def herald_for(rows: Sequence[tuple[Any, ...]], attributes: Iterable[str], position: Mapping[str, int]) -> Herald:
    """The tightest herald for ``rows``: closed [min, max] per attribute, for exactly ``len(rows)`` tuples."""
    if not rows:
        raise ValueError("a herald announces at least one tuple; the cluster is empty")
    patterns = {}
    for name in attributes:
        values = list(map(itemgetter(position[name]), rows))
        patterns[name] = Range(min(values), max(values))
    return Herald.of(patterns, count=len(rows))


def punctuate(clusters: Iterable[Sequence[tuple[Any, ...]]], attributes: Sequence[str], position: Mapping[str, int]) -> list:
    """A stream with a herald in front of every cluster."""
    out: list = []
    for rows in clusters:
        out.append(herald_for(rows, attributes, position))
        out.extend(rows)
    return out
