"""Distinct keys over several batch spans, from the HLL sketches ``instrument.py`` has Spark compute.

Why sketches: the group model n(w) = base + growth·w (``costmodel/inputs.py``)
needs distinct keys over *several* spans of event time, and a per-batch
distinct count only gives one span. Spark's ``hll_sketch_agg`` returns an
Apache DataSketches HLL sketch per batch (in the progress event, base64);
sketches merge, so the union of k consecutive batches' sketches is the
distinct count over their k spans. The ``datasketches`` library reads
Spark's format (both are DataSketches HLL).
"""

from __future__ import annotations

import base64
from collections import deque
from typing import Any

from datasketches import hll_sketch, hll_union

__all__ = ["GroupSketches"]

LG_K = 12
"""Spark's default ``lgConfigK`` of ``hll_sketch_agg`` (relative error about 1.6 %)."""


class GroupSketches:
    """Per (run, node) the sketches and event-time spans of the last ``depth`` batches."""

    def __init__(self, depth: int = 16, runs: int = 64) -> None:
        self.depth = depth
        self.runs = runs
        self._batches: dict[tuple[str, str], deque[tuple[float, Any]]] = {}

    def add(self, run: str, node: str, span_seconds: float, sketch: str | bytes | None) -> None:
        """One batch's sketch (base64 text as in the progress JSON, or bytes) over ``span_seconds`` of event time."""
        if sketch is None or not span_seconds > 0:
            return
        raw = base64.b64decode(sketch) if isinstance(sketch, str) else bytes(sketch)
        key = (run, node)
        if key not in self._batches and len(self._batches) >= self.runs:
            del self._batches[next(iter(self._batches))]  # the oldest run's buffer
        self._batches.setdefault(key, deque(maxlen=self.depth)).append((span_seconds, hll_sketch.deserialize(raw)))

    def points(self, run: str, node: str) -> list[tuple[float, float]]:
        """(event time spanned, distinct keys) for every run of consecutive buffered batches (1 to ``depth``)."""
        batches = list(self._batches.get((run, node), ()))
        out = []
        for first in range(len(batches)):
            union, span = hll_union(LG_K), 0.0
            for seconds, sketch in batches[first:]:
                union.update(sketch)
                span += seconds
                out.append((span, union.get_estimate()))
        return out
