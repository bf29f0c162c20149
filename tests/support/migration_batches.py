"""The micro-batch length at which tests run bench/migration.py's scenarios: 6 s of event time, not the benchmark's 2 s.

Why: a test's scenario runs last as long as their micro-batches, and a batch costs Spark's scheduling and planning
(stateful operators, the source's Python workers) far more than its few rows, so a third of the batches takes about
a third of the time, on local Spark, a standalone cluster and Spark Connect alike. What the tests check does not
depend on the batch length: every run reads the same replayed rows, GenMig places T_split past the positions the old
run has read wherever its batches end, and the oracle is exact at any length. The benchmark keeps its 2 s batches,
because its output gaps and migration durations are measured in them.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import migration  # noqa: E402

BATCH_SECONDS = 6.0


@contextmanager
def longer_batches() -> Iterator[None]:
    """Scenario runs started inside cover ``BATCH_SECONDS`` of event time per micro-batch (``migration.BATCH``)."""
    kept, migration.BATCH = migration.BATCH, BATCH_SECONDS
    try:
        yield
    finally:
        migration.BATCH = kept
