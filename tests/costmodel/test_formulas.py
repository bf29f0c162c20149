"""Paper 001 §3 cost formulas 1–19, worked by hand.

Every expected value below is a literal computed by hand from the paper's
formula (a calculator was used for the arithmetic, never the code under
test); each docstring shows the inputs, the formula and the arithmetic.

The cost constants are distinct primes, so a formula that uses the wrong
constant (say C_R where C_B belongs) changes the result and fails.

Notation: a stream is (d, l, g); rate r = 1/d; hit(d, k) is the Cardenas
hit probability 1 − (1 − 1/d)^k of formulas 5, 6, 15 and 17.
"""

from __future__ import annotations

import math

import pytest

from armd.costmodel import formulas as f
from armd.costmodel.characteristics import Stream
from armd.costmodel.constants import CostConstants
from armd.costmodel.evaluate import estimate
from armd.costmodel.plan import parse_plan

K = CostConstants(
    C_H=2.0,
    C_B=3.0,
    C_R=5.0,
    C_P=7.0,
    C_F=11.0,
    C_E=13.0,
    C_O=17.0,
    C_L=19.0,
    C_U=23.0,
    C_I=29.0,
    C_S=31.0,
    C_Rd=37.0,
    C_T=41.0,
    C_Q=43.0,
)
"""Distinct constants: a swapped constant changes every result it enters."""

ZERO_K = CostConstants(**{name: 0.0 for name in CostConstants.names() if name not in ("aggregate_size", "buckets")})
"""All per-operation costs 0; ``only(...)`` switches single constants back on."""


def only(**constants: float) -> CostConstants:
    """Constants that are all 0 except the ones given, to isolate one formula's term."""
    return ZERO_K.with_overrides(constants)


def approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=0.0)


def assert_stream(actual: Stream, d: float, l: float, g: float) -> None:  # noqa: E741
    assert actual.d == approx(d) if math.isfinite(d) else math.isinf(actual.d)
    assert actual.l == approx(l) if l else actual.l == 0.0
    assert actual.g == approx(g)


def assert_no_nan(*values: float) -> None:
    assert not any(math.isnan(v) for v in values), values


# --- Cardenas' hit probability (formulas 5, 6, 15, 17) ------------------------------------


def test_hit_probability_is_the_paper_closed_form_for_d_above_1() -> None:
    """d > 1: hit(d, k) = 1 − (1 − 1/d)^k exactly as in the paper.

    d = 4, k = 3: 1 − (3/4)^3 = 1 − 27/64 = 37/64 = 0.578125.
    d = 2, k = 2: 1 − (1/2)^2 = 0.75.
    """
    assert f.hit_probability(4.0, 3.0) == approx(0.578125)
    assert f.hit_probability(2.0, 2.0) == approx(0.75)


def test_hit_probability_keeps_precision_for_rare_elements() -> None:
    """d = 10^6, k = 2: 1 − (1 − 10^−6)^2 = 2·10^−6 − 10^−12 = 1.999999·10^−6.

    Written naively in floats the result is 1.999999000079633e-06 (8 wrong
    digits); the log1p/expm1 form must give the exact value to 1e-12.
    """
    assert f.hit_probability(1e6, 2.0) == approx(1.999999e-6)


def test_hit_probability_poisson_limit_for_d_at_most_1() -> None:
    """d ≤ 1: the base 1 − 1/d of the closed form is ≤ 0, so armd uses the
    Poisson form of Cardenas' argument, 1 − e^(−k/d) (the limit X → ∞ of
    1 − (1 − g/X)^(kX/(g·d)) in the paper's derivation of formula 5).

    d = 0.5, k = 2: 1 − e^(−4) = 1 − 0.01831563888873418 = 0.9816843611112658.
    d = 0.25, k = 1: 1 − e^(−4) = 0.9816843611112658 as well.
    """
    assert f.hit_probability(0.5, 2.0) == approx(0.9816843611112658)
    assert f.hit_probability(0.25, 1.0) == approx(0.9816843611112658)


def test_hit_probability_seam_at_d_equals_1_is_where_the_issue_puts_it() -> None:
    """The closed form is used for d > 1 and the Poisson limit for d ≤ 1 (where 1 − 1/d is not
    positive), so the two forms meet at d = 1 with a step (docs/cost-model.md, "The seam at d = 1"):
    d = 1 + 10^−9, k = 2: 1 − (10^−9/(1 + 10^−9))^2 ≈ 1.0 (closed form);
    d = 1, k = 2: 1 − e^(−2) = 0.8646647167633873 (Poisson)."""
    assert f.hit_probability(1.0 + 1e-9, 2.0) == approx(1.0)
    assert f.hit_probability(1.0, 2.0) == approx(0.8646647167633873)


# --- output characteristics: formulas 1–8 -------------------------------------------------


def test_formula_1_projection_keeps_characteristics() -> None:
    """(1): d' = d, l' = l, g' = g. Input (4, 10, 2) → (4, 10, 2)."""
    assert_stream(f.project_output(Stream(4.0, 10.0, 2.0)), 4.0, 10.0, 2.0)


def test_formula_2_selection_stretches_distance() -> None:
    """(2): d' = d/sel, l' = l, g' = g. Input (4, 10, 1), sel = 0.25:
    d' = 4/0.25 = 16, l' = 10."""
    assert_stream(f.select_output(Stream(4.0, 10.0, 1.0), 0.25), 16.0, 10.0, 1.0)


def test_formula_3_union_adds_rates_and_weights_lengths() -> None:
    """(3): d' = 1/Σ(1/d_i), l' = Σ(l_i/d_i) / Σ(1/d_i).

    Inputs (2, 10, 1), (4, 6, 1), (8, 20, 1):
      Σ 1/d_i = 1/2 + 1/4 + 1/8 = 0.875            → d' = 1/0.875 = 8/7 = 1.1428571428571428
      Σ l_i/d_i = 10/2 + 6/4 + 20/8 = 5 + 1.5 + 2.5 = 9 → l' = 9/0.875 = 72/7 = 10.285714285714286
    """
    out = f.union_output([Stream(2.0, 10.0, 1.0), Stream(4.0, 6.0, 1.0), Stream(8.0, 20.0, 1.0)])
    assert_stream(out, 1.1428571428571428, 10.285714285714286, 1.0)


def test_formula_3_union_with_an_empty_input() -> None:
    """An empty input has rate 1/∞ = 0 and weight 0, so (2, 10, 1) ∪ ∅ = (2, 10, 1):
    d' = 1/(1/2 + 0) = 2, l' = (10/2 + 0)/(1/2) = 10. All inputs empty → empty (§3.3.3)."""
    assert_stream(f.union_output([Stream(2.0, 10.0, 1.0), Stream.empty(1.0)]), 2.0, 10.0, 1.0)
    assert f.union_output([Stream.empty(1.0), Stream.empty(1.0)]).is_empty


def test_formula_4_join_is_cartesian_product_then_selection() -> None:
    """(4) then (2): d' = d1·d2 / ((l1 + l2)·sel), l' = l1·l2/(l1 + l2).

    Inputs (2, 10, 1) and (5, 30, 1):
      sel = 1   (Cartesian product): d' = 2·5/40 = 0.25, l' = 300/40 = 7.5
      sel = 0.1 (theta join):        d' = 0.25/0.1 = 2.5,  l' = 7.5
    """
    a, b = Stream(2.0, 10.0, 1.0), Stream(5.0, 30.0, 1.0)
    assert_stream(f.join_output(a, b, 1.0), 0.25, 7.5, 1.0)
    assert_stream(f.join_output(a, b, 0.1), 2.5, 7.5, 1.0)


def test_formula_5_aggregation_d_below_l() -> None:
    """(5), d < l: d' = l' = g / (1 − (1 − 1/d)^(2g)).

    (4, 100, 1): 1 − (3/4)^2 = 0.4375            → d' = l' = 1/0.4375 = 2.2857142857142856
    (4, 100, 2): 1 − (3/4)^4 = 1 − 0.31640625 = 0.68359375 → d' = l' = 2/0.68359375 = 2.9257142857142857
    (2, 10, 1):  1 − (1/2)^2 = 0.75              → d' = l' = 1/0.75 = 1.3333333333333333
    The last input has l a multiple of d; the paper's estimate d' = l' = d for
    constant-distance streams is NOT applied (not detectable from (d, l, g)).
    """
    assert_stream(f.aggregate_output(Stream(4.0, 100.0, 1.0)), 2.2857142857142856, 2.2857142857142856, 1.0)
    assert_stream(f.aggregate_output(Stream(4.0, 100.0, 2.0)), 2.9257142857142857, 2.9257142857142857, 2.0)
    assert_stream(f.aggregate_output(Stream(2.0, 10.0, 1.0)), 1.3333333333333333, 1.3333333333333333, 1.0)


def test_formula_5_aggregation_d_at_least_l() -> None:
    """(5), d ≥ l: d' = d, l' = l. (50, 20, 1) → (50, 20, 1); boundary d = l: (20, 20, 1) → (20, 20, 1)."""
    assert_stream(f.aggregate_output(Stream(50.0, 20.0, 1.0)), 50.0, 20.0, 1.0)
    assert_stream(f.aggregate_output(Stream(20.0, 20.0, 1.0)), 20.0, 20.0, 1.0)


def test_formula_5_aggregation_poisson_limit() -> None:
    """(5) with d = 0.5 ≤ 1 (two elements per time unit): the closed form's base
    1 − 1/0.5 = −1 is outside Cardenas' argument, so the Poisson form
    1 − e^(−2g/d) is used: (0.5, 100, 1): 1 − e^(−4) = 0.9816843611112658,
    d' = l' = 1/0.9816843611112658 = 1.018657360363774."""
    assert_stream(f.aggregate_output(Stream(0.5, 100.0, 1.0)), 1.018657360363774, 1.018657360363774, 1.0)


def test_formula_6_group_by_n_d_below_l() -> None:
    """(6), n·d < l: l' = g/(1 − (1 − 1/(n·d))^(2g)), d' = l'/n.

    (2, 100, 1), n = 5: n·d = 10 < 100; 1 − 0.9^2 = 0.19;
    l' = 1/0.19 = 5.263157894736843, d' = 5.263157894736843/5 = 1.0526315789473686.
    """
    assert_stream(f.aggregate_output(Stream(2.0, 100.0, 1.0), 5), 1.0526315789473686, 5.263157894736843, 1.0)


def test_formula_6_group_by_n_d_at_least_l() -> None:
    """(6), n·d ≥ l: d' = d, l' = l. (30, 100, 1), n = 5: 150 ≥ 100 → (30, 100, 1)."""
    assert_stream(f.aggregate_output(Stream(30.0, 100.0, 1.0), 5), 30.0, 100.0, 1.0)


def test_formula_6_group_by_poisson_limit() -> None:
    """(6) with n·d = 2·0.25 = 0.5 ≤ 1: l' = 1/(1 − e^(−2·1/0.5)) = 1/(1 − e^(−4))
    = 1.018657360363774, d' = l'/2 = 0.509328680181887."""
    assert_stream(f.aggregate_output(Stream(0.25, 100.0, 1.0), 2), 0.509328680181887, 1.018657360363774, 1.0)


def test_formula_7_time_window() -> None:
    """(7): d' = g·d/l, l' = ⌊(w + 1)/g⌋·g, g' = g.

    (4, 2, 1),  w = 9:  d' = 1·4/2 = 2,   l' = ⌊10/1⌋·1 = 10
    (6, 12, 3), w = 10: d' = 3·6/12 = 1.5, l' = ⌊11/3⌋·3 = 3·3 = 9
    (6, 12, 3), w = 8:  l' = ⌊9/3⌋·3 = 9 (exact multiple)
    (6, 12, 3), w = 7:  l' = ⌊8/3⌋·3 = 2·3 = 6
    """
    assert_stream(f.window_output(Stream(4.0, 2.0, 1.0), 9.0), 2.0, 10.0, 1.0)
    assert_stream(f.window_output(Stream(6.0, 12.0, 3.0), 10.0), 1.5, 9.0, 3.0)
    assert_stream(f.window_output(Stream(6.0, 12.0, 3.0), 8.0), 1.5, 9.0, 3.0)
    assert_stream(f.window_output(Stream(6.0, 12.0, 3.0), 7.0), 1.5, 6.0, 3.0)


def test_formula_7_rounding_is_exact_for_decimal_granularities() -> None:
    """g = 0.1, w = 0.2: ⌊(0.2 + 1)/0.1⌋·0.1 = ⌊12⌋·0.1 = 1.2. In floats
    (0.2 + 1)/0.1 = 11.999999999999998, so a plain floor would give 1.1."""
    assert f.window_output(Stream(1.0, 0.1, 0.1), 0.2).l == pytest.approx(1.2, rel=1e-12)


def test_formula_7_window_shorter_than_a_granule_is_empty() -> None:
    """(7) with w + 1 < g: (6, 3, 3), w = 1: l' = ⌊2/3⌋·3 = 0 → the empty stream (d = ∞, l = 0).
    (Outside the paper's domain w ≫ g.)"""
    out = f.window_output(Stream(6.0, 3.0, 3.0), 1.0)
    assert out.is_empty and out.l == 0.0 and out.g == 3.0


def test_tuple_window_is_a_time_window_of_c_times_d() -> None:
    """§2.4.2: w = c/λ = c·d. c = 5 on (4, 1, 1): w = 20, then (7): d' = 1·4/1 = 4, l' = ⌊21/1⌋·1 = 21."""
    s = Stream(4.0, 1.0, 1.0)
    assert f.tuple_window_size(s, 5.0) == 20.0
    assert_stream(f.window_output(s, f.tuple_window_size(s, 5.0)), 4.0, 21.0, 1.0)


def test_formula_8_granularity_long_elements() -> None:
    """(8), l ≥ 2ĝ: d' = d, l' = l − ĝ, g' = ĝ.
    (3, 10, 1), ĝ = 4: 10 ≥ 8 → (3, 6, 4). Boundary l = 2ĝ: (3, 8, 1) → (3, 4, 4)."""
    assert_stream(f.granularity_output(Stream(3.0, 10.0, 1.0), 4.0), 3.0, 6.0, 4.0)
    assert_stream(f.granularity_output(Stream(3.0, 8.0, 1.0), 4.0), 3.0, 4.0, 4.0)


def test_formula_8_granularity_medium_elements() -> None:
    """(8), ĝ < l < 2ĝ: d' = d·ĝ/(l − ĝ), l' = ĝ, g' = ĝ.
    (3, 6, 1), ĝ = 4: d' = 3·4/(6 − 4) = 6 → (6, 4, 4)."""
    assert_stream(f.granularity_output(Stream(3.0, 6.0, 1.0), 4.0), 6.0, 4.0, 4.0)


def test_formula_8_granularity_short_elements_vanish() -> None:
    """(8), l ≤ ĝ: d' = ∞, l' = 0, g' = ĝ. (3, 4, 1), ĝ = 4 → empty at g = 4; (3, 1, 1), ĝ = 2 → empty."""
    out = f.granularity_output(Stream(3.0, 4.0, 1.0), 4.0)
    assert out.is_empty and out.l == 0.0 and out.g == 4.0
    assert f.granularity_output(Stream(3.0, 1.0, 1.0), 2.0).is_empty


def test_formula_8_same_granularity_is_the_identity() -> None:
    """ĝ == g rounds nothing: (3, 10, 2) with ĝ = 2 stays (3, 10, 2). (Formula 8's
    first case would give l' = 8; the paper requires ĝ > g.)"""
    assert_stream(f.granularity_output(Stream(3.0, 10.0, 2.0), 2.0), 3.0, 10.0, 2.0)


# --- costs of stateless operators (§3.5), window (§3.6.1), granularity (§3.6.2) -------------


def test_section_3_5_stateless_costs() -> None:
    """§3.5: M = 0 for σ, π, ∪.
    C_σ = (1/d)·C_P = (1/4)·7 = 1.75;  C_π = (1/d)·C_F = (1/4)·11 = 2.75;
    C_∪ = (1/d')·C_T with d' = 8/7 from the union test: 0.875·41 = 35.875."""
    s = Stream(4.0, 10.0, 1.0)
    assert f.select_cost(s, K) == (0.0, approx(1.75))
    assert f.project_cost(s, K) == (0.0, approx(2.75))
    out = f.union_output([Stream(2.0, 10.0, 1.0), Stream(4.0, 6.0, 1.0), Stream(8.0, 20.0, 1.0)])
    assert f.union_cost(out, K) == (0.0, approx(35.875))


def test_section_3_6_1_time_window_cost() -> None:
    """§3.6.1 time-based: M = 0, C = (1/d)·C_S = (1/4)·31 = 7.75."""
    assert f.window_cost(Stream(4.0, 1.0, 1.0), K) == (0.0, approx(7.75))


def test_section_3_6_1_tuple_window_cost() -> None:
    """§3.6.1 tuple-based: M = c·s = 5·64 = 320 bytes;
    C = (1/d)·(2·C_Q + C_S) = (1/4)·(2·43 + 31) = 117/4 = 29.25."""
    assert f.tuple_window_cost(Stream(4.0, 1.0, 1.0), 5.0, 64.0, K) == (approx(320.0), approx(29.25))


def test_section_3_6_2_granularity_cost() -> None:
    """§3.6.2: M = 0, C = (1/d)·2·C_Rd = (1/4)·2·37 = 18.5 (the paper's C_R for rounding, C_Rd in armd)."""
    assert f.granularity_cost(Stream(4.0, 10.0, 1.0), K) == (0.0, approx(18.5))


# --- join: formulas 9–14 ---------------------------------------------------------------------

A = Stream(2.0, 10.0, 1.0)  # r1 = 0.5
B = Stream(5.0, 30.0, 1.0)  # r2 = 0.2
JOIN_ARGS = dict(sel=0.1, size_a=64.0, size_b=32.0, buckets_a=4.0, buckets_b=8.0)


def test_formula_9_join_memory() -> None:
    """(9): M = (⌈l1/d1⌉ + d2/(2·d1))·s1 + (⌈l2/d2⌉ + d1/(2·d2))·s2.
    (2, 10), (5, 30), s1 = 64, s2 = 32:
      side 1: ⌈10/2⌉ + 5/(2·2) = 5 + 1.25 = 6.25 → 6.25·64 = 400
      side 2: ⌈30/5⌉ + 2/(2·5) = 6 + 0.2  = 6.2  → 6.2·32  = 198.4
      M = 598.4
    """
    assert f.join_cost(A, B, nested=False, k=K, **JOIN_ARGS).memory == approx(598.4)


def test_formula_9_join_memory_rounds_up_state() -> None:
    """(9) with ⌈⌉ active: (3, 10) and (3, 10), s = 1: ⌈10/3⌉ = ⌈3.33⌉ = 4, 3/(2·3) = 0.5;
    M = 2·(4 + 0.5) = 9."""
    s = Stream(3.0, 10.0, 1.0)
    assert f.join_cost(s, s, 1.0, 1.0, 1.0, 1.0, 1.0, False, K).memory == approx(9.0)


def test_formula_10_join_cpu_is_the_sum_of_11_to_14() -> None:
    """(10) = (11) + (12) + (13) + (14); r1 = 1/2, r2 = 1/5, r1 + r2 = 0.7, #B1 = 4, #B2 = 8, sel = 0.1:
      (11) insert = 0.7·(C_H + C_B + C_R) = 0.7·(2 + 3 + 5) = 7.0
      (12) probe  = r1·r2·(l2/#B2 + l1/#B1)·C_P + 0.7·C_H = 0.1·(30/8 + 10/4)·7 + 0.7·2
                  = 0.1·6.25·7 + 1.4 = 4.375 + 1.4 = 5.775
      (13) result = sel·(l1 + l2)·r1·r2·C_F = 0.1·40·0.1·11 = 4.4
      (14) reorg  = 0.7·(2·C_E + C_B + C_R) = 0.7·(26 + 3 + 5) = 23.8
      C = 7.0 + 5.775 + 4.4 + 23.8 = 40.975
    """
    assert f.join_cost(A, B, nested=False, k=K, **JOIN_ARGS).cpu == approx(40.975)


def test_formula_11_insert_with_its_constants_only() -> None:
    """(11) with only C_H = 2, C_B = 3, C_R = 5 switched on (others 0). These constants
    also enter (12) (the hash call of the probe) and (14) (bucket removal, heap), so:
      (11) 0.7·(2 + 3 + 5) = 7.0;  (12) 0.7·2 = 1.4;  (14) 0.7·(3 + 5) = 5.6;  total 14.0
    """
    k = only(C_H=2.0, C_B=3.0, C_R=5.0)
    assert f.join_cost(A, B, nested=False, k=k, **JOIN_ARGS).cpu == approx(14.0)


def test_formula_12_probe() -> None:
    """(12) predicate part, only C_P = 7: r1·r2·(l2/#B2 + l1/#B1)·C_P = 0.1·(3.75 + 2.5)·7 = 4.375.
    Swapping the bucket counts would give 0.1·(30/4 + 10/8)·7 = 6.125."""
    assert f.join_cost(A, B, nested=False, k=only(C_P=7.0), **JOIN_ARGS).cpu == approx(4.375)


def test_formula_13_result() -> None:
    """(13), only C_F = 11: σ·(l1 + l2)/(d1·d2)·C_F = 0.1·40/10·11 = 4.4."""
    assert f.join_cost(A, B, nested=False, k=only(C_F=11.0), **JOIN_ARGS).cpu == approx(4.4)


def test_formula_14_reorganisation() -> None:
    """(14) expiration-predicate part, only C_E = 13: (r1 + r2)·2·C_E = 0.7·26 = 18.2."""
    assert f.join_cost(A, B, nested=False, k=only(C_E=13.0), **JOIN_ARGS).cpu == approx(18.2)


def test_nested_loops_join_is_one_bucket_and_a_free_hash() -> None:
    """§3.6.3: nested loops = SHJ with #B1 = #B2 = 1 and C_H = 0 (the given 4/8 buckets are ignored):
      (11) 0.7·(0 + 3 + 5) = 5.6
      (12) 0.1·(30/1 + 10/1)·7 + 0 = 28.0
      (13) 4.4;  (14) 23.8
      C = 5.6 + 28 + 4.4 + 23.8 = 61.8;  M unchanged = 598.4
    """
    cost = f.join_cost(A, B, nested=True, k=K, **JOIN_ARGS)
    assert cost.memory == approx(598.4)
    assert cost.cpu == approx(61.8)


def test_join_with_one_empty_side() -> None:
    """B empty: the term d_j/(2·d_i) of (9) for side A is dropped (purges come from
    heartbeats, §2.4.4), and side B holds nothing:
      M = ⌈10/2⌉·64 = 5·64 = 320
      r2 = 0: (11) 0.5·10 = 5; (12) 0 + 0.5·2 = 1; (13) 0; (14) 0.5·34 = 17; C = 23
      output: empty. Symmetric with the empty side first.
    """
    empty = Stream.empty(1.0)
    cost = f.join_cost(A, empty, nested=False, k=K, **JOIN_ARGS)
    assert cost == (approx(320.0), approx(23.0))
    mirrored = f.join_cost(empty, A, 0.1, 32.0, 64.0, 8.0, 4.0, False, K)
    assert mirrored == (approx(320.0), approx(23.0))
    assert f.join_output(A, empty, 0.1).is_empty and f.join_output(empty, A, 0.1).is_empty


def test_formula_9_rounds_up_a_tiny_state_to_one_element() -> None:
    """(9) for rare elements: (10^10, 1, 1) on both sides, s = 1:
    side: ⌈1/10^10⌉ + 10^10/(2·10^10) = 1 + 0.5 = 1.5; M = 3.0. armd returns 1.0."""
    rare = Stream(1e10, 1.0, 1.0)
    assert f.join_cost(rare, rare, 1.0, 1.0, 1.0, 1.0, 1.0, False, K).memory == approx(3.0)


# --- aggregation: formulas 15–19 ---------------------------------------------------------------

AGG = Stream(4.0, 100.0, 2.0)  # d < l
SIZE = 40.0


def test_formula_15_aggregation_memory() -> None:
    """(15), d < l: M = ⌈(l/g)·(1 − (1 − 1/d)^g)⌉·s.
    (4, 100, 2), s = 40: (100/2)·(1 − 0.75^2) = 50·0.4375 = 21.875 → ⌈⌉ = 22 → 22·40 = 880."""
    assert f.scalar_aggregate_cost(AGG, SIZE, K).memory == approx(880.0)


def test_formula_15_aggregation_memory_d_at_least_l() -> None:
    """(15), d ≥ l: M = s (one aggregate). (50, 20, 1) → 40."""
    assert f.scalar_aggregate_cost(Stream(50.0, 20.0, 1.0), SIZE, K).memory == approx(40.0)


def test_formula_16_aggregation_cpu_d_below_l() -> None:
    """(16) = (17) + (18) + (19) for (4, 100, 2):
      (17) (l/(d·g))·(1 − (1 − 1/d)^g)·(C_O + C_U) = (100/8)·0.4375·(17 + 23) = 12.5·0.4375·40 = 218.75
      (18) C_L/d + C_I/(2d) = 19/4 + 29/8 = 4.75 + 3.625 = 8.375
      (19) d' = 2/(1 − 0.75^4) = 2/0.68359375 (formula 5);
           (C_O + C_L)/d' + C_O/d = 36·0.341796875 + 17/4 = 12.3046875 + 4.25 = 16.5546875
      C = 218.75 + 8.375 + 16.5546875 = 243.6796875
    """
    assert f.scalar_aggregate_cost(AGG, SIZE, K).cpu == approx(243.6796875)


def test_formula_17_update() -> None:
    """(17), only C_U = 23 on: 12.5·0.4375·23 = 125.78125 (C_O is shared with (19))."""
    assert f.scalar_aggregate_cost(AGG, SIZE, only(C_U=23.0)).cpu == approx(125.78125)


def test_formula_17_update_is_zero_for_d_at_least_l() -> None:
    """(17), d ≥ l: 0. With only C_U on, (50, 20, 1) costs 0."""
    assert f.scalar_aggregate_cost(Stream(50.0, 20.0, 1.0), SIZE, only(C_U=23.0)).cpu == 0.0


def test_formula_18_new_aggregates() -> None:
    """(18), only C_I = 29 on: d < l: C_I/(2d) = 29/8 = 3.625; d ≥ l (50, 20, 1): C_I/d = 29/50 = 0.58."""
    assert f.scalar_aggregate_cost(AGG, SIZE, only(C_I=29.0)).cpu == approx(3.625)
    assert f.scalar_aggregate_cost(Stream(50.0, 20.0, 1.0), SIZE, only(C_I=29.0)).cpu == approx(0.58)


def test_formula_19_reorganisation() -> None:
    """(19) with d ≥ l (so (17) is 0 and d' = d): (C_O + C_L)/d' + C_O/d.
    only C_O = 17 on, (50, 20, 1): 17/50 + 17/50 = 0.68.
    only C_L = 19 on, (4, 100, 2): (18) 19/4 = 4.75 plus (19) 19/d' = 19·0.341796875 = 6.494140625 → 11.244140625."""
    assert f.scalar_aggregate_cost(Stream(50.0, 20.0, 1.0), SIZE, only(C_O=17.0)).cpu == approx(0.68)
    assert f.scalar_aggregate_cost(AGG, SIZE, only(C_L=19.0)).cpu == approx(11.244140625)


def test_formula_16_aggregation_cpu_d_at_least_l() -> None:
    """(50, 20, 1): (17) 0; (18) (19 + 29)/50 = 0.96; (19) (17 + 19)/50 + 17/50 = 0.72 + 0.34 = 1.06;
    C = 2.02."""
    assert f.scalar_aggregate_cost(Stream(50.0, 20.0, 1.0), SIZE, K).cpu == approx(2.02)


def test_formulas_15_to_19_poisson_limit() -> None:
    """d = 0.5 ≤ 1, (0.5, 10, 1), s = 40; hit(0.5, 1) = 1 − e^(−2) = 0.8646647167633873:
      (15) ⌈10·0.8646647167633873⌉ = ⌈8.6466⌉ = 9 → 360
      (17) (10/(0.5·1))·0.8646647167633873·(17 + 23) = 691.7317734107098
      (18) 19/0.5 + 29/1 = 38 + 29 = 67
      (19) d' = 1/(1 − e^(−4)) = 1.018657360363774; 36/d' + 17/0.5 = 35.34063700000557 + 34 = 69.34063700000557
      C = 691.7317734107098 + 67 + 69.34063700000557 = 828.0724104107154
    """
    cost = f.scalar_aggregate_cost(Stream(0.5, 10.0, 1.0), SIZE, K)
    assert cost.memory == approx(360.0)
    assert cost.cpu == approx(828.0724104107154)


def test_group_by_costs_are_n_scalar_aggregations() -> None:
    """armd extension: group-by with n groups = n × scalar aggregation over (n·d, l, g).
    (2, 100, 1), n = 5 → per group (10, 100, 1), s = 40; hit(10, 1) = 1 − 0.9 = 0.1:
      (15) ⌈100·0.1⌉ = 10 → 400 per group → M = 5·400 = 2000
      (17) (100/10)·0.1·40 = 40;  (18) 19/10 + 29/20 = 3.35
      (19) d' = 1/(1 − 0.9^2) = 1/0.19; 36·0.19 + 17/10 = 6.84 + 1.7 = 8.54
      per group 40 + 3.35 + 8.54 = 51.89 → C = 5·51.89 = 259.45
    """
    cost = f.aggregate_cost(Stream(2.0, 100.0, 1.0), 5, SIZE, K)
    assert cost.memory == approx(2000.0)
    assert cost.cpu == approx(259.45)


def test_scalar_aggregation_is_group_by_with_one_group() -> None:
    """groups = 1 is formulas 15–19 unchanged: 880 bytes and 243.6796875 as above."""
    assert f.aggregate_cost(AGG, 1, SIZE, K) == (approx(880.0), approx(243.6796875))


def test_formula_15_never_rounds_a_nonempty_state_to_zero() -> None:
    """(15) for (10^−12, 10^−11, 1), s = 40: (10^−11/1)·(1 − e^(−10^12)) = 10^−11 → ⌈⌉ = 1 → 40 bytes."""
    assert f.scalar_aggregate_cost(Stream(1e-12, 1e-11, 1.0), SIZE, K).memory == approx(40.0)


# --- the empty stream ------------------------------------------------------------------------


def test_empty_stream_propagates_through_every_operator() -> None:
    """§3.3.3: an operator whose inputs are all empty outputs the empty stream
    (d = ∞, l = 0), and an empty input costs nothing (rate 1/∞ = 0): no NaN."""
    e = Stream.empty(2.0)
    outputs = [
        f.project_output(e),
        f.select_output(e, 0.5),
        f.union_output([e, e]),
        f.join_output(e, e, 0.5),
        f.aggregate_output(e),
        f.aggregate_output(e, 7),
        f.window_output(e, 100.0),
        f.window_output(e, f.tuple_window_size(e, 10.0)),
        f.granularity_output(e, 4.0),
        f.granularity_output(e, 2.0),
    ]
    for out in outputs:
        assert out.is_empty and out.l == 0.0
        assert_no_nan(out.d, out.l, out.g)
    assert f.granularity_output(e, 4.0).g == 4.0
    costs = [
        f.select_cost(e, K),
        f.project_cost(e, K),
        f.union_cost(f.union_output([e, e]), K),
        f.window_cost(e, K),
        f.tuple_window_cost(e, 10.0, 64.0, K),
        f.granularity_cost(e, K),
        f.join_cost(e, e, 0.5, 64.0, 64.0, 8.0, 8.0, False, K),
        f.join_cost(e, e, 0.5, 64.0, 64.0, 8.0, 8.0, True, K),
        f.scalar_aggregate_cost(e, 40.0, K),
        f.aggregate_cost(e, 7, 40.0, K),
    ]
    for cost in costs:
        assert cost == (0.0, 0.0)


def test_empty_stream_propagates_through_a_plan() -> None:
    """A granularity 2 over a source with l = g = 1 empties the stream ((8): l = 1 ≤ ĝ = 2);
    every operator downstream outputs the empty stream and costs 0, and the
    union with a non-empty stream and the join with it behave as above.

    Source B (d = 4, g = 2, size 8) joined with ∅: M = ⌈2/4⌉·8 = 8 (no d_j/(2d_i) term);
    the union ∅ ∪ B outputs B's (4, 2, 2).
    """
    doc = {
        "streams": {"A": {"d": 2, "g": 1, "size": 16}, "B": {"d": 4, "g": 2, "size": 8}},
        "queries": {
            "q": {
                "op": "aggregate",
                "groups": 3,
                "inputs": [
                    {
                        "op": "project",
                        "id": "p",
                        "inputs": [
                            {
                                "op": "select",
                                "sel": 0.5,
                                "inputs": [
                                    {
                                        "op": "window",
                                        "w": 10,
                                        "inputs": [
                                            {
                                                "op": "window",
                                                "c": 3,
                                                "inputs": [
                                                    {
                                                        "op": "granularity",
                                                        "id": "empty",
                                                        "g": 2,
                                                        "inputs": [{"op": "source", "stream": "A"}],
                                                    }
                                                ],
                                            }
                                        ],
                                    }
                                ],
                            }
                        ],
                    }
                ],
            },
            "j": {"op": "join", "sel": 0.5, "inputs": [{"ref": "p"}, {"op": "source", "stream": "B"}]},
            "u": {"op": "union", "inputs": [{"ref": "p"}, {"op": "source", "stream": "B"}]},
        },
    }
    result = estimate(parse_plan(doc))
    for node in result.nodes.values():
        assert_no_nan(node.out.d, node.out.l, node.out.g, node.memory, node.cpu)
    assert result.nodes["empty"].out.is_empty and result.nodes["empty"].out.g == 2.0
    for node_id in ("p.0.0.0", "p.0.0", "p.0", "p", "q"):  # tuple window, window, select, project, aggregate
        node = result.nodes[node_id]
        assert node.out.is_empty, node_id
        assert (node.memory, node.cpu) == (0.0, 0.0), node_id
    assert result.nodes["j"].out.is_empty
    assert result.nodes["j"].memory == approx(8.0)
    assert_stream(result.nodes["u"].out, 4.0, 2.0, 2.0)
