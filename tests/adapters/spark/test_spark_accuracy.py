"""bench/accuracy.py's measurement on real local Spark: one shape, predicted by the spark profile, measured by Spark."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import replace

from support import REPO
from support.spark import progress_listener, spark  # noqa: F401

sys.path.insert(0, str(REPO / "bench"))
import accuracy  # noqa: E402


def test_the_spark_profile_predicts_a_windowed_count_and_the_paper_profile_does_not(spark, progress_listener):  # noqa: F811
    case = replace(accuracy.CASES[0], seconds=30)  # count per key, w 10 s, slide 2 s, delay 2 s, T 1 s
    measured = accuracy.measure(spark, progress_listener, case, math.floor(time.time()) - 50_000)
    assert measured["name"] == "count per key w=10 slide=2 delay=2 T=1" and measured["batches"] >= 25
    assert measured["measured_rows"] > 0 and measured["measured_bytes"] > measured["measured_rows"]
    assert accuracy.relative(measured["measured_rows"], measured["predicted_rows"]) <= 0.15
    # Without the watermark's retention the model misses a fifth of Spark's state.
    paper = accuracy.estimate(accuracy.parse_plan(case.plan()), "paper").total.memory
    assert accuracy.relative(measured["measured_rows"], paper) > 0.15
