"""Spark's state in the terms of paper 001's model: the formulas measured in docs/spark-mapping.md.

The paper's operators (PIPES) drop an element the moment its validity
ends. Spark keeps it until the *watermark* passes, and the watermark is
computed once per micro-batch from the newest event time seen so far. So
an element stays in Spark's state for its logical validity plus

    D      the watermark delay (``withWatermark``),
    T      the trigger interval in event time (the watermark lags one batch),
    1/r    the mean age of the newest element when the watermark was taken
           (r = rate of the stream(s) that set the watermark).

``retention`` is that sum. The window slide is the model's granularity g.
Pure functions, no pyspark. ``retention`` is the cost model's
``spark_retention`` (costmodel/evaluate.py), the one place of the rule.
"""

from __future__ import annotations

import math

from armd.costmodel.evaluate import spark_retention


def retention(validity: float, delay: float, trigger: float, rate: float) -> float:
    """Seconds an element (or window) stays in Spark's state: validity + D + T + 1/r (the cost model's rule)."""
    return spark_retention(validity, delay, trigger, 1.0 / rate if rate > 0 else math.inf)


def window_aggregation_rows(
    window: float, slide: float, delay: float, trigger: float, rate: float, groups: int = 1
) -> float:
    """Mean state rows of ``groupBy(window(t, w, slide), keys)``: one row per live (window, group) with data.

    Windows end every ``slide``; a window is live from its first element
    until the watermark passes its end, i.e. over ``retention(w, D, T, 1/r)``,
    so (w + D + T + 1/r) / slide windows per group are live on average, each
    holding a row when the group got an element in it: 1 − exp(−(r/groups)·w).
    The issue's first-order form ⌈(w + D)/slide⌉ is this with T = 1/r = 0 and
    every group hit.
    """
    if slide <= 0 or window <= 0 or groups < 1:
        raise ValueError("window and slide must be > 0 and groups >= 1")
    hit = 1.0 - math.exp(-(rate / groups) * window)
    return groups * retention(window, delay, trigger, rate) / slide * hit


def join_rows(rates: tuple[float, float], ranges: tuple[float, float], delays: tuple[float, float], trigger: float) -> float:
    """Mean state rows of a stream-stream range join, both sides together.

    Side i keeps its rows until the other side's watermark makes a match
    impossible: over range_i + the other side's delay + T + 1/r (the global
    watermark is the minimum of both sides'), so per side
    r_i · (range_i + D_j + T) + 1 rows.
    """
    (r1, r2), (a1, a2), (d1, d2) = rates, ranges, delays
    rate = min(r for r in rates if r > 0) if any(r > 0 for r in rates) else 0.0
    return r1 * retention(a1, d2, trigger, rate) + r2 * retention(a2, d1, trigger, rate)


def three_way_join_rows(rates: tuple[float, float, float], span: float, delay: float, trigger: float, keys: int = 1) -> float:
    """Mean state rows of ``builders.three_way_join``: (a ⋈ b) ⋈ c on equal keys, b and c within ``span`` of a.

    The first join holds a's and b's rows as ``join_rows``. It emits
    r_a · r_b · 2·span / keys results per second, stamped with a's event
    time t and emitted when the later partner arrives (on average span/4
    after t). The second join keeps them, and c's rows, until the watermark
    passes t + span; the watermark it sees is the first join's output
    watermark, which appears to lag its input's by the span again (inferred
    from the measurements, not checked in Spark's source). So a first-join result stays 2·span − span/4 + D + T + 1/r
    and a c row 2·span + D + T + 1/r. Within 5 % of the measurements in
    docs/spark-mapping.md.
    """
    ra, rb, rc = rates
    rate = min((r for r in rates if r > 0), default=0.0)
    first = join_rows((ra, rb), (span, span), (delay, delay), trigger)
    results = ra * rb * 2.0 * span / keys
    return first + results * retention(1.75 * span, delay, trigger, rate) + rc * retention(2.0 * span, delay, trigger, rate)
