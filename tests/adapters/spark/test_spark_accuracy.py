"""bench/accuracy.py's measurement on real local Spark: one shape, its plan derived, its inputs measured by armd."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import replace

import pytest
from support import REPO
from support.spark import progress_listener, spark  # noqa: F401

sys.path.insert(0, str(REPO / "bench"))
import accuracy  # noqa: E402


def test_a_derived_plan_with_measured_inputs_predicts_a_windowed_count_and_the_paper_profile_does_not(
        spark, progress_listener):  # noqa: F811
    case = replace(accuracy.CASES[0], seconds=30)  # count per key, w 10 s, slide 2 s, delay 2 s, T 1 s
    m = accuracy.run_case(spark, progress_listener, case, math.floor(time.time()) - 50_000, 0)
    assert m.document["queries"]["acc0"]["op"] == "aggregate" and m.batches >= 25  # derived, not written by hand
    assert m.rows > 0 and m.bytes > m.rows
    base, growth = m.group_models["agg"]  # 5 uniform keys: a constant count
    assert base == pytest.approx(5, rel=0.1) and growth < 0.05
    assert 100 < m.bytes_per_row["agg"] < 2000
    rows, size = accuracy.predict(m, m)
    assert accuracy.relative(m.rows, rows) <= 0.15 and accuracy.relative(m.bytes, size) <= 0.2
    # Without the watermark's retention the model misses a fifth of Spark's state.
    doc, _ = accuracy.with_inputs(m, m)
    assert accuracy.relative(m.rows, accuracy.estimate(accuracy.parse_plan(doc), "paper").total.memory) > 0.15
