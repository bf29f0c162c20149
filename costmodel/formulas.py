"""Scalar reference implementation of paper 001's cost formulas 1–19.

Each operator has an *output* function (formulas 1–8: the characteristics of
the stream it produces) and a *cost* function (formulas 9–19: memory in bytes
and processing cost per application time unit). Everything is plain Python
on floats, written to be read next to the paper; ``costmodel.batch`` is the
numpy kernel that evaluates thousands of plans at once and must agree with
this module to 1e-9 relative.

Where the paper's closed form is undefined on a valid input, the sound limit
is used instead (see ``hit_probability``); ``docs/cost-model.md`` lists the
domain of every formula.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from .characteristics import Stream
from .constants import CostConstants

ROUNDING_SLACK = 1e-12
"""Relative tolerance for floor/ceil of values that are integral in exact arithmetic."""

GRANULARITY_TOLERANCE = 1e-9
"""Relative tolerance under which two granularities are the same (plan checks use it too)."""


class Cost(NamedTuple):
    memory: float
    """Bytes held in the operator's state at steady state."""
    cpu: float
    """Cost units per application time unit."""


ZERO = Cost(0.0, 0.0)


def hit_probability(d: float, k: float) -> float:
    """Probability that an instant of the granularity is hit by at least one of k timestamps.

    Cardenas' argument of formulas 5, 6, 15 and 17 gives 1 − (1 − 1/d)^k,
    used for d > 1. For d ≤ 1 (one element or more per time unit) the base
    is not positive; there the Poisson form of the same argument,
    1 − e^(−k/d), is the sound limit. The two forms differ near d = 1, so
    the estimate steps there (documented in docs/cost-model.md). Both are written with log1p/expm1 so that
    small 1/d does not lose precision.
    """
    if d > 1.0:
        return -math.expm1(k * math.log1p(-1.0 / d))
    return -math.expm1(-k / d)


def floor_granules(x: float) -> float:
    """⌊x⌋ for a quotient that is integral in exact arithmetic but may carry rounding error.

    The slack is relative, so it never moves the result by more than a
    relative 1e-12, and a tiny positive x is never mistaken for zero.
    """
    return float(math.floor(x * (1.0 + ROUNDING_SLACK)))


def ceil_count(x: float) -> float:
    """⌈x⌉ for a count that is integral in exact arithmetic but may carry rounding error (relative slack)."""
    return float(math.ceil(x * (1.0 - ROUNDING_SLACK)))


# --- output characteristics: formulas 1–8 -------------------------------------------------


def project_output(s: Stream) -> Stream:
    """Formula 1: projection leaves the time intervals untouched."""
    return s


def select_output(s: Stream, sel: float) -> Stream:
    """Formula 2: a selection keeps a fraction sel of the elements."""
    if s.is_empty:
        return s
    return Stream(s.d / sel, s.l, s.g)


def union_output(inputs: Sequence[Stream]) -> Stream:
    """Formula 3: rates add; the output length is the rate-weighted mean length."""
    g = inputs[0].g
    rate = sum(s.rate for s in inputs)
    if rate == 0.0:
        return Stream.empty(g)
    return Stream(1.0 / rate, sum(s.l * s.rate for s in inputs) / rate, g)


def join_output(a: Stream, b: Stream, sel: float) -> Stream:
    """Formula 4 followed by formula 2: Cartesian product, then the join predicate's selectivity."""
    if a.is_empty or b.is_empty:
        return Stream.empty(a.g)
    return Stream(a.d * b.d / ((a.l + b.l) * sel), a.l * b.l / (a.l + b.l), a.g)


def aggregate_output(s: Stream, groups: int = 1) -> Stream:
    """Formula 5 (scalar aggregation, groups = 1) and formula 6 (group-by with n groups)."""
    if s.is_empty:
        return s
    n = groups
    if n * s.d < s.l:
        per_group_length = s.g / hit_probability(n * s.d, 2.0 * s.g)
        return Stream(per_group_length / n, per_group_length, s.g)
    return s


def window_output(s: Stream, w: float) -> Stream:
    """Formula 7: a time-based window of size w extends every instant's validity by w."""
    if s.is_empty:
        return s
    length = floor_granules((w + 1.0) / s.g) * s.g
    if length == 0.0:
        return Stream.empty(s.g)
    return Stream(s.g * s.d / s.l, length, s.g)


def tuple_window_size(s: Stream, c: float) -> float:
    """§2.4.2: a tuple-based window of c elements is modelled as a time window of c/λ = c·d."""
    return c * s.d


def granularity_output(s: Stream, g_new: float) -> Stream:
    """Formula 8: rounding start and end timestamps to a coarser granularity ĝ.

    ĝ equal to the input's granularity rounds nothing and is the identity.
    """
    if s.is_empty:
        return Stream.empty(g_new)
    if math.isclose(g_new, s.g, rel_tol=GRANULARITY_TOLERANCE):
        return s
    if s.l >= 2.0 * g_new:
        return Stream(s.d, s.l - g_new, g_new)
    if s.l > g_new:
        return Stream(s.d * g_new / (s.l - g_new), g_new, g_new)
    return Stream.empty(g_new)


# --- memory and processing cost: formulas 9–19 and §3.5–3.6 -------------------------------


def select_cost(s: Stream, k: CostConstants) -> Cost:
    """§3.5: one predicate evaluation per input element."""
    return Cost(0.0, s.rate * k.C_P)


def project_cost(s: Stream, k: CostConstants) -> Cost:
    """§3.5: one projection-function evaluation per input element."""
    return Cost(0.0, s.rate * k.C_F)


def union_cost(out: Stream, k: CostConstants) -> Cost:
    """§3.5: one append per output element."""
    return Cost(0.0, out.rate * k.C_T)


def window_cost(s: Stream, k: CostConstants) -> Cost:
    """§3.6.1, time-based: no state, one timestamp set per input element."""
    return Cost(0.0, s.rate * k.C_S)


def tuple_window_cost(s: Stream, c: float, size: float, k: CostConstants) -> Cost:
    """§3.6.1, tuple-based: a FIFO queue of c elements; enqueue, dequeue and a timestamp per element."""
    if s.is_empty:
        return ZERO
    return Cost(c * size, s.rate * (2.0 * k.C_Q + k.C_S))


def granularity_cost(s: Stream, k: CostConstants) -> Cost:
    """§3.6.2: two roundings (start and end timestamp) per input element."""
    return Cost(0.0, s.rate * 2.0 * k.C_Rd)


def join_comparisons(a: Stream, b: Stream, buckets_a: float, buckets_b: float, k: CostConstants) -> float:
    """Formula 12's comparisons: each arrival probes the other side's bucket (what herald join skipping saves)."""
    return a.rate * b.rate * (b.l / buckets_b + a.l / buckets_a) * k.C_P


def join_cost(
    a: Stream,
    b: Stream,
    sel: float,
    size_a: float,
    size_b: float,
    buckets_a: float,
    buckets_b: float,
    nested: bool,
    k: CostConstants,
    matched: tuple[float, float] | None = None,
) -> Cost:
    """Formulas 9–14: symmetric hash join; nested loops is one bucket per side and a free hash.

    Formula 9's term d_j/(2·d_i) is the growth of side i between two purges
    triggered by side j; when side j is empty, purging is driven by heartbeats
    (§2.4.4) and that term is 0. ``matched`` are the lengths the results are
    counted with in (13), l_a and l_b unless given (the ``spark`` profile
    holds elements longer than they match, see ``evaluate.spark_join``).
    """
    if nested:
        buckets_a = buckets_b = 1.0
        c_hash = 0.0
    else:
        c_hash = k.C_H
    ra, rb = a.rate, b.rate

    def side_elements(own: Stream, other: Stream) -> float:
        if own.is_empty:
            return 0.0
        growth = 0.0 if other.is_empty else other.d / (2.0 * own.d)
        return ceil_count(own.l / own.d) + growth

    memory = side_elements(a, b) * size_a + side_elements(b, a) * size_b  # (9)
    arrivals = ra + rb
    insert = arrivals * (c_hash + k.C_B + k.C_R)  # (11)
    probe = join_comparisons(a, b, buckets_a, buckets_b, k) + arrivals * c_hash  # (12)
    match_a, match_b = (a.l, b.l) if matched is None else matched
    result = sel * (match_a + match_b) * ra * rb * k.C_F  # (13)
    reorg = arrivals * (2.0 * k.C_E + k.C_B + k.C_R)  # (14)
    return Cost(memory, insert + probe + result + reorg)  # (10)


def scalar_aggregate_cost(s: Stream, size: float, k: CostConstants) -> Cost:
    """Formulas 15–19: the scalar aggregation of Algorithm 1 over input (d, l, g)."""
    if s.is_empty:
        return ZERO
    d, l, g = s.d, s.l, s.g
    if d < l:
        end_hits = hit_probability(d, g)
        memory = ceil_count(l / g * end_hits) * size  # (15)
        update = l / (d * g) * end_hits * (k.C_O + k.C_U)  # (17)
        new = k.C_L / d + k.C_I / (2.0 * d)  # (18)
    else:
        memory = size
        update = 0.0
        new = (k.C_L + k.C_I) / d
    out_d = aggregate_output(s).d
    reorg = (k.C_O + k.C_L) / out_d + k.C_O / d  # (19)
    return Cost(memory, update + new + reorg)  # (16)


def aggregate_cost(s: Stream, groups: int, size: float, k: CostConstants) -> Cost:
    """Group-by with n groups as n scalar aggregations over input (n·d, l, g).

    The paper gives costs for the scalar aggregation only; formula 6 derives
    group-by characteristics by splitting the input evenly into n groups, and
    the same split is applied to the costs here. groups = 1 is formula 15–19.
    """
    if s.is_empty:
        return ZERO
    per_group = scalar_aggregate_cost(Stream(groups * s.d, s.l, s.g), size, k)
    return Cost(groups * per_group.memory, groups * per_group.cpu)
