"""Vectorised (numpy) evaluation of a whole plan set: the fast path of the cost model.

Why this exists: the adaptation policies (paper 001 §4.3) search over window
sizes and granularities, and every step of a search re-estimates the memory
and processing cost of the *whole* workload: thousands to 100,000 plans, many
times per decision. The scalar evaluator (``costmodel.evaluate.estimate``)
walks the DAG node by node in Python and is the readable reference; this
module compiles the DAG once into index arrays and then evaluates all nodes
of the same depth and operator with a handful of numpy calls, optionally for
K settings at once (a trailing axis on ``w``, ``g`` and ``stream_d``).

Semantics are those of ``costmodel.formulas`` exactly (agreement to 1e-9
relative is tested): the empty stream (d = ∞, l = 0) propagates as in the
scalar code, every branch of a formula is selected with a mask and is
computed on safe values or only where it applies, so that no warning or NaN
escapes; the rounding helpers use the same ``ROUNDING_SLACK``. Output characteristics (d, l, g) are computed with the
same floating-point operations in the same order as the scalar code (they
feed the floor/ceil of later nodes); the per-node memory and cpu sums may be
associated differently (a few ulps; they feed nothing but the sums).

Layout (chosen for speed; see ``BatchPlan.compile`` and ``BatchPlan.evaluate``):

* nodes are renumbered level by level: the sources first, then every
  (depth, operator, depth and operator of each input) *block* in a
  contiguous range of positions, so that a block's results are written with
  slice assignment; ``node_ids`` lists the nodes in this order, which is a
  topological order but in general not the plan's;
* within a block, nodes are ordered by their first consumer, so that the
  inputs of one slot of a block are a contiguous slice (a view, no copy) of
  the state arrays whenever no node is shared; other inputs are gathered;
* per-node arrays have shape (N, K) (K = 1 without a trailing axis) and
  kernels write into them with ``out=``, a block at a time in chunks of
  about ``_CHUNK`` elements so that temporaries stay in the CPU cache; node
  constants are (M, 1) columns (or plain floats when a block shares one
  value) that broadcast over K; sources, which do not vary over K unless
  ``stream_d`` has a trailing axis, are read from (S, 1) columns;
* the bytes per element (``size``) depend on the plan alone unless it has a
  union (a rate-weighted mean), so they are computed once at compile time;
* when no node feeds two consumers (a forest, like the §5.4 workload), the
  per-query sums are accumulated block by block as subtree sums; otherwise
  a sparse query × node incidence matrix sums them. Either way every sum
  runs in an order that does not depend on K or the chunks, so a setting
  gets the same numbers, bit for bit, whatever it is evaluated with;
* one block of memory holds every per-node array of an evaluation, and it
  is reused by the next evaluation once the caller holds no array of the
  result any more (fresh memory costs a page fault per page);
* ``BatchPlan.subset`` cuts the plan of some queries out of a compiled one
  without recompiling (the policies re-decide for the queries of one stream
  in a few milliseconds): it keeps the kept rows of every block, in order, so
  the layout stays the same, renumbers the inputs, and derives each block's
  constants from its per-node table (``_Group.table``) as ``compile`` would
  for those nodes alone; all with a few numpy calls per block.
"""

from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from .evaluate import PROFILES
from .formulas import GRANULARITY_TOLERANCE, ROUNDING_SLACK
from .plan import PlanSet

__all__ = ["BatchPlan", "BatchResult"]

_INF = np.inf
_FLOOR_SLACK = 1.0 + ROUNDING_SLACK  # floor_granules
_CEIL_SLACK = 1.0 - ROUNDING_SLACK  # ceil_count


# --- small helpers -------------------------------------------------------------------------


def _column(values: list[float]) -> np.ndarray:
    """Per-node constants of a block as an (M, 1) column that broadcasts over K."""
    return np.asarray(values, dtype=float).reshape(-1, 1)


def _normalise(d: np.ndarray, l: np.ndarray) -> None:  # noqa: E741
    """``Stream.__post_init__`` in place: d = ∞ or l = 0 is the canonical empty stream (∞, 0).

    The masks are only formed when a reduction shows that some element needs them.
    """
    if not l.min() > 0.0:
        np.copyto(d, _INF, where=l == 0.0)
    if not d.max() < _INF:
        np.copyto(l, 0.0, where=d == _INF)


def _rate_times(d: np.ndarray, factor, out: np.ndarray) -> None:
    """out = (1/d)·factor: ``Stream.rate`` (exactly 0 for the empty stream, 1/∞) times a constant."""
    if d.shape == out.shape:
        np.divide(1.0, d, out=out)
        np.multiply(out, factor, out=out)
    else:  # d does not vary over K: compute once per node and broadcast
        out[...] = (1.0 / d) * factor


def _constant_rows(x: np.ndarray) -> np.ndarray:
    """x itself, or its first column when every row of x is constant over K (exact equality)."""
    if x.ndim == 2 and x.shape[1] > 1 and np.equal(x, x[:, :1]).all():
        return x[:, :1]
    return x


# --- per-operator kernels ------------------------------------------------------------------
#
# Every kernel evaluates a chunk of M nodes of one block. It takes the input
# characteristics (d, l, g, size), arrays broadcastable to (M, K) ((M, 1) when
# they do not vary over K), and writes into ``out`` = (d, l, g, size, memory,
# cpu), views of shape (M, K) into the state arrays; ``size`` is None when
# sizes are static. Node constants ``p`` are (M, 1) columns or floats.
# Formula branches are masks; the floating-point operations of d, l and g are
# those of formulas.py, in the same order (they feed the floor/ceil of later
# nodes); memory and cpu may be grouped differently (a few ulps).


def _project(x, out, p, k) -> None:
    """Formula 1 and §3.5: characteristics unchanged, one function call per element; optional new size."""
    d, l, g, size = x  # noqa: E741
    out_d, out_l, out_g, out_size, memory, cpu = out
    out_d[...] = d
    out_l[...] = l
    out_g[...] = g
    if out_size is not None:
        out_size[...] = np.where(p["has_size"], p["new_size"], size)
    memory[...] = 0.0
    _rate_times(d, k.C_F, cpu)


def _select(x, out, p, k) -> None:
    """Formula 2 and §3.5: d/sel (∞/sel stays ∞), one predicate evaluation per input element."""
    d, l, g, size = x  # noqa: E741
    out_d, out_l, out_g, out_size, memory, cpu = out
    np.divide(d, p["sel"], out=out_d)
    out_l[...] = l
    _normalise(out_d, out_l)
    out_g[...] = g
    if out_size is not None:
        out_size[...] = size
    memory[...] = 0.0
    # with heralds (paper 002 eq. 9) an element costs (1 − skip)·C_P + overhead·C_P/partition
    _rate_times(d, p["herald_cpu"] if "herald_cpu" in p else k.C_P, cpu)


def _window(x, out, p, k, w) -> None:
    """Formula 7 and §3.6.1 for time-based windows (size w) and tuple-based ones (c elements).

    A tuple window is the time window of size c·d (§2.4.2), computed per
    evaluation; its state is a FIFO of c elements. ``c``/``is_tuple`` are None
    when the block has no tuple window.
    """
    d, l, g, size = x  # noqa: E741
    out_d, out_l, out_g, out_size, memory, cpu = out
    c, is_tuple = p["c"], p["is_tuple"]
    if k.window_extra is not None:
        w = w + k.window_extra + np.where(d == _INF, 0.0, d)
    if c is not None:
        w = np.where(is_tuple, c * d, w)
    # length = ⌊(w + 1)/g⌋·g, built in out_l
    np.add(w, 1.0, out=out_l)
    np.divide(out_l, g, out=out_l)
    np.multiply(out_l, _FLOOR_SLACK, out=out_l)
    np.floor(out_l, out=out_l)
    np.multiply(out_l, g, out=out_l)
    # d' = g·d/l, or ∞ when nothing is left (length 0). An empty input gives g·∞/0 = ∞ already
    # (no warning), so it needs no mask of its own. Normalisation: l' = 0 wherever d' = ∞,
    # which is where the length is 0 (already) or g·d/l is ∞.
    spacing = g * d / l
    out_d[...] = spacing
    if not out_l.min() > 0.0:
        np.copyto(out_d, _INF, where=out_l == 0.0)
    if not spacing.max() < _INF:
        np.copyto(out_l, 0.0, where=spacing == _INF)
    out_g[...] = g
    if out_size is not None:
        out_size[...] = size
    _rate_times(d, p["cpu_per_element"], cpu)  # C_S, or 2·C_Q + C_S for a tuple window
    if c is None:
        memory[...] = 0.0
    else:
        memory[...] = np.where(is_tuple & (d != _INF), c * size, 0.0)


def _granularity(x, out, p, k, g_new) -> None:
    """Formula 8 and §3.6.2: rounding to ĝ; ĝ == g (math.isclose, GRANULARITY_TOLERANCE) is the identity.

    Cases: l ≥ 2ĝ → (d, l − ĝ); ĝ < l < 2ĝ → (d·ĝ/(l − ĝ), ĝ); otherwise, and
    for an empty input, the empty stream at ĝ.
    """
    d, l, g, size = x  # noqa: E741
    out_d, out_l, out_g, out_size, memory, cpu = out
    long = l >= 2.0 * g_new
    dropped = l <= g_new  # neither long nor short (l > ĝ)
    short = ~(long | dropped)  # ĝ < l < 2ĝ
    np.subtract(l, g_new, out=out_l)  # long: l − ĝ
    out_d[...] = d
    if short.any():
        np.copyto(out_d, d * g_new / np.where(short, out_l, 1.0), where=short)
        np.copyto(out_l, g_new, where=short)
    if dropped.any():
        np.copyto(out_d, _INF, where=dropped)
        np.copyto(out_l, 0.0, where=dropped)
    out_g[...] = g_new
    identity = np.abs(g_new - g) <= GRANULARITY_TOLERANCE * np.maximum(g_new, g)
    if identity.any():
        identity = identity & (d != _INF)
        np.copyto(out_d, d, where=identity)
        np.copyto(out_l, l, where=identity)
        np.copyto(out_g, g, where=identity)
    _normalise(out_d, out_l)
    if out_size is not None:
        out_size[...] = size
    memory[...] = 0.0
    _rate_times(d, p["cpu_per_element"], cpu)  # 2·C_Rd


def _aggregate(x, out, p, k) -> None:
    """Formulas 5–6 (output) and 15–19 (cost) for n groups, each a scalar aggregation over (n·d, l, g).

    Output: n·d < l → l' = g / hit(n·d, 2g), d' = l'/n; otherwise unchanged.
    Cost per group over D = n·d, for D < l: M = ⌈l/g · hit(D, g)⌉·s (15),
    C_update (17), C_new (18); otherwise M = s, no update; C_reorg (19) uses the
    per-group output distance. Memory and cpu are then multiplied by n.

    hit(D, k) = −expm1(x) with x = k·log1p(−1/D) for D > 1 and −k/D otherwise;
    x for k = 2g is exactly twice the one for k = g. The logarithm and the
    exponentials are evaluated once per node when their argument does not vary
    over K.
    """
    d, l, g, size = x  # noqa: E741
    out_d, out_l, out_g, out_size, memory, cpu = out
    groups, agg_size = p["groups"], p["agg_size"]
    held = l + g
    window = None if k.window_extra is None else np.maximum(held - (k.window_extra + np.where(d == _INF, 0.0, d)), 0.0)
    if p.get("growth") is not None:  # per-window model n(w) (evaluate.groups_in_window)
        # spark: averaged over the live windows' ages
        w = held if window is None else window - window * window / (2.0 * held)
        groups = np.maximum(groups + p["growth"] * w, 1.0)
    D = groups * d
    active = D < l  # implies a non-empty input
    D1 = _constant_rows(D)
    big = D1 > 1.0
    if big.all():  # the usual case: no element per time unit or more
        lp = np.log1p(-1.0 / D1)
        exponent = _constant_rows(g * lp)
    else:
        lp = np.log1p(-1.0 / np.where(big, D1, 2.0))
        exponent = _constant_rows(np.where(big, g * lp, -g / D1))
    end_hits = -np.expm1(exponent)
    exponent *= 2.0
    both_hits = -np.expm1(exponent)
    per_group_length = g / np.where(active, both_hits, 1.0)
    out_d[...] = d
    out_l[...] = l
    np.copyto(out_d, per_group_length / groups, where=active)
    np.copyto(out_l, per_group_length, where=active)
    _normalise(out_d, out_l)
    out_g[...] = g
    if out_size is not None:
        out_size[...] = agg_size

    # (15)–(19) per group, times n groups; an empty input (D = ∞) costs nothing
    if k.window_extra is None:
        hits = l / g * end_hits
        hits *= _CEIL_SLACK
        np.ceil(hits, out=hits)
        hits *= agg_size
        np.copyto(hits, agg_size, where=~active)
    else:  # spark: per group, the live windows that hold it (evaluate.spark_aggregate_memory)
        hits = held / g
        if p.get("growth") is None:  # hit(D, w) as the granule's hit above, over the window
            big = D > 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.where(big, window * np.log1p(-1.0 / np.where(big, D, 2.0)), -window / D)
            hits = hits * np.where(D == _INF, 0.0, -np.expm1(x))
        hits = hits * agg_size
    np.multiply(groups, hits, out=memory)  # (15)
    rate = 1.0 / D
    update = l / (D * g) * end_hits
    update *= k.c_update  # (17)
    new = k.C_L * rate + k.C_I * 0.5 * rate  # (18), D < l
    np.copyto(new, k.c_new_sparse * rate, where=~active)  # (18), D ≥ l
    np.copyto(update, 0.0, where=~active)
    update += new
    update += k.c_reorg_hit / np.where(active, per_group_length, D)  # (19)
    update += k.C_O * rate
    np.multiply(groups, update, out=cpu)  # (16)
    empty = D == _INF  # an empty input (or n·d overflowing, which the scalar code also treats as empty)
    if empty.any():
        np.copyto(memory, 0.0, where=empty)
        np.copyto(cpu, 0.0, where=empty)


def _join(a, b, out, p, k) -> None:
    """Formula 4 then 2 (output) and formulas 9–14 (cost) of the symmetric hash join.

    ``a`` and ``b`` are (d, l, g, size) tuples. A nested-loops join arrives here
    with one bucket per side and c_hash = 0 (set at compile time). Formula 9's
    growth term d_j/(2·d_i) is 0 when side j is empty; an empty side holds nothing.
    Under the spark profile the join matches within the logical lengths and holds
    for the retention plus the lag of join-fed inputs (``evaluate.spark_join``; which
    inputs are join-fed is a per-node constant, ``fed_a``/``fed_b``).
    """
    da, la, ga, sa = a
    db, lb, _, sb = b
    out_d, out_l, out_g, out_size, memory, cpu = out
    shape = out_d.shape
    ra = np.divide(1.0, da, out=np.empty(shape))  # 0 for an empty side
    rb = np.divide(1.0, db, out=np.empty(shape))
    neither = True if ra.min() > 0.0 and rb.min() > 0.0 else (ra != 0.0) & (rb != 0.0)  # both non-empty
    # The lengths the join matches within (formula 4, (13)); the states and probes use la, lb.
    # spark (evaluate.spark_join): match within λ = max(l − (D + T + d), g) (0 for an empty side), hold
    # for l + lag, lag = 2λ of the join-fed inputs (the larger); the output is λ' + D + T + d'.
    ma, mb = la, lb
    if k.window_extra is not None:
        ma, mb = (np.where(d == _INF, 0.0, np.maximum(l - (k.window_extra + d), ga)) for d, l in ((da, la), (db, lb)))
        lag = np.maximum(p["fed_a"] * (2.0 * ma), p["fed_b"] * (2.0 * mb))
        la, lb = la + lag, lb + lag
    lsum = np.add(ma, mb, out=np.empty(shape))
    # d' = d_a·d_b/((l_a + l_b)·sel) is ∞ when a side is empty (∞·x/y, and ∞/0 = ∞ for both);
    # l' = l_a·l_b/(l_a + l_b) is computed for non-empty pairs only (0/0 otherwise), then normalised.
    np.multiply(da, db, out=out_d)
    np.divide(out_d, lsum * p["sel"], out=out_d)
    if neither is True:
        np.multiply(ma, mb, out=out_l)
        np.divide(out_l, lsum, out=out_l)
    else:
        out_l[...] = 0.0
        np.multiply(ma, mb, out=out_l, where=neither)
        np.divide(out_l, lsum, out=out_l, where=neither)
    _normalise(out_d, out_l)
    if k.window_extra is not None:
        out_l += k.window_extra + out_d
        _normalise(out_d, out_l)
    out_g[...] = ga
    if out_size is not None:
        out_size[...] = sa + sb

    # (9): (⌈l_a/d_a⌉ + d_b/(2·d_a))·s_a + (⌈l_b/d_b⌉ + d_a/(2·d_b))·s_b; an empty side i holds
    # nothing (l_i/∞ = 0) and contributes no growth term to the other side. d_j/(2·d_i) is
    # computed as (d_j/d_i)·0.5, which is the same number.
    side = np.empty(shape)
    grow = np.empty(shape)
    for d_i, l_i, s_i, d_j, target in ((da, la, sa, db, memory), (db, lb, sb, da, side)):
        np.divide(l_i, d_i, out=side)
        side *= _CEIL_SLACK
        np.ceil(side, out=side)
        if neither is True:
            np.divide(d_j, d_i, out=grow)
            grow *= 0.5
            side += grow
        else:
            np.divide(d_j, d_i, out=grow, where=neither)
            np.multiply(grow, 0.5, out=grow, where=neither)
            np.add(side, grow, out=side, where=neither)
        np.multiply(side, s_i, out=target)
    memory += side

    # (10) = (11) + (12) + (13) + (14), grouped by the rates:
    # (r_a + r_b)·(c_insert + c_hash + c_reorg) + r_a·r_b·(l_b·C_P/B_b + l_a·C_P/B_a + (l_a + l_b)·sel·C_F)
    per_pair = grow
    if "probe_a" not in p:  # B_a = B_b: r_a·r_b·(l_a + l_b)·(C_P/B + sel·C_F)
        np.multiply(lsum, p["pair"], out=per_pair)
    else:
        np.multiply(lb, p["probe_b"], out=per_pair)
        np.multiply(la, p["probe_a"], out=side)
        per_pair += side
        np.multiply(lsum, p["result"], out=side)
        per_pair += side
        if "equal" in p:  # the joins with B_a = B_b of a mixed block: the form (and rounding) they get alone
            np.multiply(lsum, p["pair"], out=per_pair, where=p["equal"])
    per_pair *= ra
    per_pair *= rb
    np.add(ra, rb, out=cpu)
    cpu *= p["per_arrival"]
    cpu += per_pair
    if "herald_skip" in p:  # paper 002 eq. 9: less (12)'s probes of skipped pairs, plus an overhead per herald
        _herald_join(a[1], b[1], ra, rb, cpu, p)


def _herald_join(la, lb, ra, rb, cpu, p) -> None:
    """``evaluate``'s ``herald_cpu`` for joins: cpu − skip·r_a·r_b·(l_b·C_P/B_b + l_a·C_P/B_a) (the probes of
    formula 12 over the inputs' lengths), at least 0, plus (r_a + r_b)·overhead·C_P/partition."""
    probes = ra * rb * (lb * p["herald_probe_b"] + la * p["herald_probe_a"])
    probes *= p["herald_skip"]
    np.subtract(cpu, probes, out=cpu)
    np.maximum(cpu, 0.0, out=cpu)
    cpu += (ra + rb) * p["herald_per_tuple"]


def _union(rates, l_rates, size_rates, g, first_size, out, k) -> None:
    """Formula 3 and §3.5 from per-union segment sums: Σ1/d_i, Σl_i/d_i, Σs_i/d_i.

    d' = 1/Σr, l' = Σ(l·r)/Σr; an all-empty union is the empty stream. The
    output size is the rate-weighted mean of the input sizes (the first input's
    size for an empty output); one append per output element.
    """
    out_d, out_l, out_g, out_size, memory, cpu = out
    empty = rates == 0.0
    safe = np.where(empty, 1.0, rates)
    out_d[...] = np.where(empty, _INF, 1.0 / safe)
    out_l[...] = np.where(empty, 0.0, l_rates / safe)
    _normalise(out_d, out_l)
    out_g[...] = g
    out_rate = 1.0 / out_d
    if out_size is not None:
        out_empty = out_d == _INF
        out_size[...] = np.where(out_empty, first_size, size_rates / np.where(out_empty, 1.0, out_rate))
    memory[...] = 0.0
    np.multiply(out_rate, k.C_T, out=cpu)


# --- compiled plan -------------------------------------------------------------------------

_CHUNK = 65536
"""Elements (nodes × K) per kernel call: big enough to amortise numpy's per-call overhead, small
enough that a kernel's temporaries (512 KB each) stay in the CPU cache."""

_SPARE_BYTES = 1 << 30
"""Most memory a BatchPlan keeps between evaluations for reuse (see ``BatchPlan.evaluate``)."""

_SPARE_REUSE = 4
"""A spare serves evaluations down to a quarter of its size (a larger one is not tied up by a small one)."""


def _pop_spare(spares: dict, size: int) -> tuple[np.ndarray | None, int]:
    """Remove the smallest spare of ``size`` to ``_SPARE_REUSE``·``size`` elements and return it
    with its reference count as seen here (0 when absent).

    A larger spare serves a smaller evaluation through its first ``size`` elements, so that a
    search alternating between a few widths K (a policy's grid, refinement and lift) keeps one
    block mapped instead of page-faulting a fresh one for every width. The count of an array
    nothing else refers to is measured once, below, through this same function, so that it does
    not depend on how the interpreter counts a call's references.
    """
    fitting = [key for key in list(spares) if size <= key <= _SPARE_REUSE * size]
    array = spares.pop(min(fitting), None) if fitting else None
    return array, 0 if array is None else sys.getrefcount(array)


_UNREFERENCED = (
    _pop_spare({1: np.empty(1)}, 1)[1]
    if sys.implementation.name == "cpython" and not sysconfig.get_config_var("Py_GIL_DISABLED")
    else -1
)
"""Reference count of a spare nobody else holds; -1 (no reuse) where counts are not exact."""


class _Constants:
    """The plan's cost constants plus the sums formulas.py forms from them, precomputed once."""

    def __init__(self, constants, profile: str = "paper") -> None:
        for name, value in constants.as_dict().items():
            setattr(self, name, value)
        k = constants
        self.profile = profile
        # spark: a time window holds its elements for w + D + T + d (evaluate.retention_extra); joins: _join
        self.window_extra = None if profile == "paper" else k.watermark_delay + k.trigger_interval
        self.c_update = k.C_O + k.C_U  # (17)
        self.c_new_sparse = k.C_L + k.C_I  # (18), d ≥ l
        self.c_reorg_hit = k.C_O + k.C_L  # (19)
        self.c_join_reorg = 2.0 * k.C_E + k.C_B + k.C_R  # (14)
        self.tuple_window = 2.0 * k.C_Q + k.C_S  # §3.6.1


@dataclass(frozen=True, eq=False)
class _Group:
    """One block: nodes of one depth, operator and input operators, at positions start:stop."""

    op: str
    level: int
    start: int
    stop: int
    inputs: tuple
    """Unary ops and join: one (depth of the inputs, slice or position array) per input slot;
    union: (flat input positions, segment starts, first inputs)."""
    params: dict
    """Node constants: (M, 1) columns, or scalars and None that hold for the whole block."""
    table: np.ndarray | None
    """The node constants as compiled, an (M, C) array (columns ``_TABLES[op]``), from which
    ``_params`` derives ``params``: kept so that ``BatchPlan.subset`` derives the params of
    some rows the way ``compile`` would. None when the params are ``uniform`` (the same for
    any rows)."""

    @property
    def uniform(self) -> bool:
        """No node constant is an array: any rows of the block have these same params."""
        return not any(isinstance(value, np.ndarray) for value in self.params.values())


@dataclass(frozen=True, eq=False)
class _Compiled:
    """What a compiled plan's subsets share with it (read-only), to build ``node_ids`` and ``plan``
    on demand. Arrays are per node, in the compiled ``node_ids`` order."""

    plan: PlanSet
    ids: np.ndarray
    """Node ids (object array)."""
    nodes: np.ndarray
    """Node objects (object array)."""
    granularity: np.ndarray
    """Declared output granularity (``plan.granularities``)."""
    order: np.ndarray
    """Position in ``plan.nodes``."""


@dataclass(frozen=True)
class BatchResult:
    """Estimates of one evaluation; every array gains a trailing axis K for K settings at once."""

    d: np.ndarray
    """(N,) or (N, K): output distance d per node (∞ for the empty stream)."""
    l: np.ndarray  # noqa: E741
    """(N,) or (N, K): output length l per node."""
    g: np.ndarray
    """(N,) or (N, K): output granularity per node."""
    size: np.ndarray
    """(N,) or (N, K): bytes per output element."""
    memory: np.ndarray
    """(N,) or (N, K): bytes held in each node's state."""
    cpu: np.ndarray
    """(N,) or (N, K): cost units per time unit of each node."""
    query_memory: np.ndarray
    """(Q,) or (Q, K): memory of the nodes each query uses (a shared node counts in every query using it)."""
    query_cpu: np.ndarray
    """(Q,) or (Q, K): cpu of the nodes each query uses."""
    total_memory: float | np.ndarray
    """Scalar or (K,): memory of all nodes, each counted once."""
    total_cpu: float | np.ndarray
    """Scalar or (K,): cpu of all nodes, each counted once."""


def _compact(params: dict) -> dict:
    """Float columns whose values are all equal become Python floats (cheaper than a broadcast column)."""
    return {key: float(value[0, 0]) if isinstance(value, np.ndarray) and value.dtype == float and value.size
            and (value == value[0, 0]).all() else value for key, value in params.items()}


def _as_index(positions) -> slice | np.ndarray:
    """A slice when the positions are consecutive (a view instead of a gather), else an index array."""
    array = np.asarray(positions, dtype=np.intp)
    if array.size and array[-1] - array[0] == array.size - 1 and (array[1:] - array[:-1] == 1).all():
        return slice(int(array[0]), int(array[-1]) + 1)
    return array


def _ascending_index(positions: np.ndarray) -> slice | np.ndarray:
    """``_as_index`` of strictly increasing positions: consecutive when they span their count."""
    if positions.size and positions[-1] - positions[0] == positions.size - 1:
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


def _take(array: np.ndarray, index: slice | np.ndarray) -> np.ndarray:
    return array[index] if isinstance(index, slice) else np.take(array, index, axis=0)


def _rows(index: slice | np.ndarray, a: int, b: int) -> slice | np.ndarray:
    """Rows a:b of a block's input index."""
    if isinstance(index, slice):
        return slice(index.start + a, index.start + b)
    return index[a:b]


def _ones_row(width: int) -> sp.csr_matrix:
    """A (1, width) CSR row of ones: a sum over rows in a fixed order whatever K (csr_matvecs)."""
    return sp.csr_matrix((np.ones(width), np.arange(width, dtype=np.intp), np.array([0, width], dtype=np.intp)),
                         shape=(1, width))


def _at(index: slice | np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Entries ``rows`` of a block's input index, as positions."""
    if isinstance(index, slice):
        return rows + index.start
    return index[rows]


def _segments(first: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions first[i]:stop[i] for every i, concatenated, and where each range begins in that."""
    count = stop - first
    ends = np.cumsum(count)
    begins = ends - count
    return np.repeat(first - begins, count) + np.arange(ends[-1] if ends.size else 0), begins


def _union_bounds(starts: np.ndarray, total: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the flat inputs of unions ``rows`` of a block begin and end (``total`` flat inputs)."""
    return starts[rows], np.append(starts[1:], total)[rows]


def _shift(index: slice | np.ndarray, offset: int) -> slice | np.ndarray:
    if isinstance(index, slice):
        return slice(index.start + offset, index.stop + offset)
    return index + offset


_TABLES = {
    "join": ("sel", "per_arrival", "equal_buckets", "probe_a", "probe_b", "result", "pair", "fed_a", "fed_b",
             "herald_skip", "herald_probe_a", "herald_probe_b", "herald_per_tuple"),
    "select": ("sel", "herald_cpu"),
    "project": ("size",),
    "window": ("c",),
    "aggregate": ("groups", "agg_size", "growth"),
}
"""Operator → the per-node constants in the columns of a block's table (see ``_Group.table``)."""


def _per_tuple(heralds, k) -> float:
    """A herald's overhead spread over the input tuples of its partition: overhead·C_P/partition (0: no heralds)."""
    return heralds.overhead * k.C_P / heralds.partition if heralds is not None else 0.0


def _join_fed(position: int, ordered: list, ins: list) -> bool:
    """``evaluate.join_fed`` on compiled positions: a join's output, directly or through projections and selections."""
    while ordered[position].op in ("project", "select"):
        position = ins[position][0]
    return ordered[position].op == "join"


def _params(op: str, table: np.ndarray | None, k: _Constants) -> dict:
    """A block's kernel constants from its table (see ``_Group``): (M, 1) columns, or Python
    floats for columns whose values are all equal (cheaper than a broadcast column).

    Each choice depends on the block's rows only (a tuple window among them, equal bucket
    counts on both sides of every join, equal values in a column), so a block restricted to
    some rows gets the constants a compilation of those nodes alone would give.
    """
    if table is None:  # granularity and union (union: everything is per evaluation)
        return {"cpu_per_element": 2.0 * k.C_Rd} if op == "granularity" else {}
    same = (table == table[0]).all(axis=0)  # per column: all values equal (NaN never is)

    def column(name: str):
        j = _TABLES[op].index(name)
        return float(table[0, j]) if same[j] else table[:, j:j + 1]

    if op == "join":
        params = {"sel": column("sel"), "per_arrival": column("per_arrival")}
        # equal bucket counts: (12) + (13) per pair and unit of l_a + l_b; not under spark, where a
        # join probes its held lengths and counts results over the matched ones
        equal = table[:, 2:3] == 1.0 if k.window_extra is None else np.zeros((len(table), 1), dtype=bool)
        if k.window_extra is not None:
            params.update(fed_a=column("fed_a"), fed_b=column("fed_b"))  # 1: the input is a join's output
        if equal.any():
            params["pair"] = column("pair")
        if not equal.all():
            params.update(probe_a=column("probe_a"), probe_b=column("probe_b"), result=column("result"))
            if equal.any():
                params["equal"] = equal
        if (table[:, _TABLES["join"].index("herald_per_tuple")] != 0.0).any() or \
                (table[:, _TABLES["join"].index("herald_skip")] != 0.0).any():  # some join of the block has heralds
            params.update({name: column(name) for name in ("herald_skip", "herald_probe_a", "herald_probe_b",
                                                           "herald_per_tuple")})
    elif op == "select":
        params = {"sel": column("sel")}
        if (table[:, 1] != k.C_P).any():  # some select of the block has heralds
            params["herald_cpu"] = column("herald_cpu")
    elif op == "project":
        params = {"new_size": column("size"), "has_size": table[:, 0:1] != 0.0}  # 0: keep the input's size
    elif op == "window":
        c = table[:, 0:1]
        is_tuple = ~np.isnan(c)  # a tuple window
        if is_tuple.any():
            params = _compact({
                "c": np.where(is_tuple, c, 1.0),  # 1 for a time window: no 0·∞
                "is_tuple": is_tuple,
                "cpu_per_element": np.where(is_tuple, float(k.tuple_window), float(k.C_S)),  # 2·C_Q + C_S, or C_S
            })
        else:
            params = {"c": None, "is_tuple": None, "cpu_per_element": k.C_S}
    else:  # aggregate
        params = {"groups": column("groups"), "agg_size": column("agg_size")}
        growth = np.where(np.isnan(table[:, 2:3]), 0.0, table[:, 2:3])  # NaN: a constant count
        params["growth"] = None if np.isnan(table[:, 2]).all() else float(growth[0, 0]) if (growth == growth[0]).all() else growth
    for value in params.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False  # shared by the chunks of every evaluation (and by subsets)
    return params


class BatchPlan:
    """A PlanSet compiled into index arrays for vectorised evaluation (see the module docstring).

    ``node_ids`` is the order of every per-node array (``w``, ``g``, the
    overrides and the results): a topological order grouped by depth level
    (sources first), in general *not* the order of ``plan.nodes``; index by
    position in ``node_ids``. ``w``, ``g`` and ``stream_d`` hold the plan's
    own values and are the defaults of ``evaluate``; they are read-only (copy
    them to build overrides). ``window_index`` and ``granularity_index`` are
    the positions of the time-based windows and granularity nodes (where ``w``
    / ``g`` are not NaN), ``levels`` the plan's depth and ``plan`` the
    compiled PlanSet. ``subset`` slices a BatchPlan of some queries out of
    this one (then ``parent_positions`` maps its nodes to this one's and
    ``plan`` is the restricted PlanSet; None and the compiled one here).
    """

    query_names: tuple[str, ...]
    stream_names: tuple[str, ...]
    w: np.ndarray
    g: np.ndarray
    stream_d: np.ndarray
    window_index: np.ndarray
    granularity_index: np.ndarray
    levels: int
    parent_positions: np.ndarray | None

    def __init__(self) -> None:  # use BatchPlan.compile
        raise TypeError("build a BatchPlan with BatchPlan.compile(plan)")

    @classmethod
    def compile(cls, plan: PlanSet, profile: str = "paper") -> BatchPlan:
        """Precompute levels, blocks, the node order, input slices, node constants and the query sums.

        Blocks are keyed by (depth, operator, (depth, operator) of each input)
        and laid out in key order after the sources. Block order is fixed from
        the top level down: a block's nodes are sorted by their first consumer
        (consumer block, input slot, consumer's position), so the inputs of one
        slot of a consumer block are consecutive whenever no node is shared.
        """
        if profile not in PROFILES:
            raise LookupError(f"unknown engine profile {profile!r}; available: {', '.join(PROFILES)}")
        self = object.__new__(cls)
        k = plan.constants
        self._init_state(None, _Constants(k, profile), plan)
        self.query_names = tuple(plan.queries)
        self.stream_names = tuple(plan.streams)
        stream_position = {name: i for i, name in enumerate(self.stream_names)}

        nodes = list(plan.nodes.values())  # plan order (topological)
        n = len(nodes)
        plan_position = {node.id: i for i, node in enumerate(nodes)}
        # tuples, not lists: tuples of numbers leave the cyclic GC's tracking, which keeps a large
        # compilation from triggering full collections over the whole plan
        inputs = [tuple([plan_position[j] for j in node.inputs]) for node in nodes]
        level = [0] * n
        kinds = [(0, "source")] * n
        keys = [(0, "source", ())] * n
        for i, node in enumerate(nodes):
            if node.op != "source":
                inp = inputs[i]
                depth = level[i] = 1 + max(map(level.__getitem__, inp))
                kinds[i] = (depth, node.op)
                keys[i] = (depth, node.op, () if node.op == "union" else tuple(map(kinds.__getitem__, inp)))
        self.levels = max(level)

        block_keys = sorted(set(keys))
        block_of = {key: b for b, key in enumerate(block_keys)}
        members: list[list[int]] = [[] for _ in block_keys]
        for i, key in enumerate(keys):
            members[block_of[key]].append(i)
        # Order blocks top-down: all consumers of a block are in later (deeper) blocks. The first
        # use (consumer block, slot, consumer's position) is encoded as one integer.
        width = sum(map(len, inputs)) + 1
        first_use = [len(block_keys) * 2 * width] * n  # unconsumed: after every use
        for b in reversed(range(len(block_keys))):
            block = members[b]
            block.sort(key=first_use.__getitem__)  # stable: ties keep the plan order
            if block_keys[b][1] == "union":
                slots = [[j for i in block for j in inputs[i]]]
            else:
                slots = [[inputs[i][slot] for i in block] for slot in range(len(block_keys[b][2]))]
            for slot, used in enumerate(slots):
                base = (2 * b + slot) * width
                for c, j in enumerate(used, base):
                    if c < first_use[j]:
                        first_use[j] = c
        order = [i for block in members for i in block]
        new_position = [0] * n
        for p, i in enumerate(order):
            new_position[i] = p
        ordered = [nodes[i] for i in order]
        self._node_ids = tuple([node.id for node in ordered])
        # for subset (made here, so that the first subset is as fast as the next)
        self._base = _Compiled(
            plan,
            np.fromiter(self._node_ids, dtype=object, count=n),
            np.fromiter(ordered, dtype=object, count=n),
            np.array([plan.granularities[node.id] for node in ordered], dtype=float),
            np.asarray(order, dtype=np.intp),
        )
        self._name_objects = np.fromiter(self.query_names, dtype=object, count=len(self.query_names))
        ins = [tuple([new_position[j] for j in inputs[i]]) for i in order]

        n_sources = len(members[0]) if block_keys[0][1] == "source" else 0
        self._n_sources = n_sources
        self._groups = []
        start = n_sources
        for b in range(1 if n_sources else 0, len(block_keys)):
            stop = start + len(members[b])
            self._groups.append(self._group(block_keys[b], start, stop, ordered, ins, self._k))
            start = stop

        # Per node: window size w, granularity g (NaN elsewhere) and the bytes per element, which
        # depend on the plan alone unless a union weights them by rates.
        w = np.full(n, np.nan)
        g = np.full(n, np.nan)
        sizes = [0.0] * n
        for p, node in enumerate(ordered):
            op = node.op
            if op == "source":
                sizes[p] = plan.streams[node.stream].size
            elif op == "join":
                sizes[p] = sizes[ins[p][0]] + sizes[ins[p][1]]
            elif op == "aggregate":
                sizes[p] = node.size or k.aggregate_size
            elif op == "project":
                sizes[p] = node.size or sizes[ins[p][0]]
            elif op != "union":  # select, window, granularity; a union's size is per evaluation
                sizes[p] = sizes[ins[p][0]]
                if op == "window" and node.c is None:
                    w[p] = node.w
                elif op == "granularity":
                    g[p] = node.g
        streams = [plan.streams[name] for name in self.stream_names]
        self.stream_d = np.array([stream.d for stream in streams], dtype=float)
        self._stream_g = np.array([stream.g for stream in streams], dtype=float)
        self._stream_size = np.array([stream.size for stream in streams], dtype=float)
        self._set_sources(np.asarray([stream_position[ordered[p].stream] for p in range(n_sources)], dtype=np.intp))
        # exact for every node that no union feeds, which is every node when there is no union
        self._set_values(np.column_stack((w, g, np.asarray(sizes, dtype=float))))
        for array in (self.stream_d, self._stream_g, self._stream_size, self._base.ids, self._base.nodes,
                      self._base.granularity, self._base.order, self._name_objects):
            array.flags.writeable = False

        # Per-query sums. When no node feeds two consumers and there is no union (a forest, like
        # the §5.4 workload), a query's sum is the sum over the subtree of its root, accumulated
        # block by block during the evaluation ("subtree sums"; for a node of depth 1 that is its
        # own cost, as sources cost nothing), and the total is the sum over the nodes no other node
        # consumes. Otherwise: a sparse incidence matrix, rows 0..Q-1 queries × nodes, last row
        # every node once (the total).
        roots = [new_position[plan_position[plan.queries[name]]] for name in self.query_names]
        self._roots = np.asarray(roots, dtype=np.intp)
        self._roots.flags.writeable = False
        consumers = [0] * n
        for node_inputs in ins:
            for j in node_inputs:
                consumers[j] += 1
        self._forest = self._static_size is not None and max(consumers, default=0) <= 1  # and no union
        if self._forest:
            self._first_deep = next((group.start for group in self._groups if group.level >= 2), n)
            tops = [p for p in range(n) if consumers[p] == 0]
            self._query_sums = self._sum_rows(self._roots)
            # The total is the sum over the queries when each top node is the root of exactly one
            # query. Sums over rows go through a sparse row of ones: csr_matvecs adds rows in a
            # fixed order whatever K, so a setting's totals do not depend on the other settings.
            self._total_sums = None if sorted(tops) == sorted(roots) else self._sum_rows(np.asarray(tops, dtype=np.intp))
            self._sum_width = len(roots) if self._total_sums is None else len(tops)
            return self
        # Membership is the set plan.query_nodes(q) returns, found here by a walk over input
        # positions: query_nodes scans every node of the plan per query (O(Q·N)).
        rows, cols = [], []
        for q, root in enumerate(roots):
            reached = {root}
            stack = [root]
            while stack:
                for j in ins[stack.pop()]:
                    if j not in reached:
                        reached.add(j)
                        stack.append(j)
            rows.extend([q] * len(reached))
            cols.extend(reached)
        q_count = len(self.query_names)
        rows.extend([q_count] * n)
        cols.extend(range(n))
        self._incidence = sp.csr_matrix(
            (np.ones(len(rows)), (np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp))),
            shape=(q_count + 1, n),
        )
        self._incidence.sort_indices()  # sums run in node_ids order (topological)
        return self

    @property
    def source_streams(self) -> np.ndarray:
        """Per source node (the first ``len(source_streams)`` positions of ``node_ids``): its stream's index."""
        return self._source_streams

    @property
    def node_ids(self) -> tuple[str, ...]:
        """Node ids in the order of every per-node array (see the class docstring)."""
        ids = self._node_ids
        if ids is None:  # a subset's, made on first use: a tuple of many strings costs a cache miss each
            ids = self._node_ids = tuple(self._base.ids[self._base_positions].tolist())
        return ids

    @property
    def plan(self) -> PlanSet:
        """The PlanSet this plan evaluates.

        For a compiled plan, the one given to ``compile``. For a ``subset``, the
        restricted PlanSet: the compiled PlanSet's streams and constants, the
        kept nodes in the compiled PlanSet's order with their granularities, and
        the kept queries in ``query_names`` order. A subset builds it on first
        access and keeps it (0.4–1 ms for the 2,000 nodes of the §5.4 queries
        of one stream, 1.3 µs a node at most), so that a subset that is only
        evaluated never pays for it.
        """
        plan = self._plan
        if plan is None:
            base = self._base
            positions = self._base_positions
            positions = positions[np.argsort(base.order[positions])]  # the compiled PlanSet's order
            ids = base.ids[positions].tolist()
            plan = self._plan = PlanSet(
                base.plan.streams,
                base.plan.constants,
                dict(zip(ids, base.nodes[positions].tolist())),
                {name: base.plan.queries[name] for name in self.query_names},
                dict(zip(ids, base.granularity[positions].tolist())),
            )
        return plan

    def subset(self, query_indices: np.ndarray) -> BatchPlan:
        """A BatchPlan of some of the queries and the nodes they reach, sliced out of this one.

        ``query_indices`` are distinct positions in ``query_names`` (ascending,
        as a rule; any order is accepted and is the order of the result's
        queries). The result evaluates like ``BatchPlan.compile`` of the
        restricted PlanSet (these queries, the nodes they reach, the same
        streams and constants; see ``plan``): the same numbers per node, bit
        for bit, the same per-query sums and, as total, the sum over the kept
        nodes, each once. Sums are bit for bit those of the compilation too
        unless nodes are shared or a query's root feeds another query; then
        they may be associated differently (a few ulps).

        It has the attributes of a compiled plan: ``node_ids``, the kept nodes
        in this plan's order (the order of its ``w``, ``g``, ``window_index``,
        ``granularity_index`` and results); ``parent_positions``, their
        positions in this plan (ascending; None on a compiled plan);
        ``query_names``, the chosen queries in the given order; ``stream_names``
        and ``stream_d``, this plan's, every stream, so that a ``stream_d``
        override of this plan applies unchanged; ``levels``; ``plan``, built on
        first access, and so are ``node_ids``.

        Everything is derived from this plan's arrays with a few numpy
        operations per block, never with a Python loop over nodes, so the cost
        grows with the kept nodes (and, a little, with this plan's size). The
        subset has its own evaluation memory and caches: evaluations of the
        two never share a buffer, and each may keep its results as long as it
        likes. It shares this plan's read-only constant arrays; this plan keeps
        two scratch arrays of its size (9 bytes a node) for the next subset.
        """
        chosen = np.asarray(query_indices)
        if chosen.ndim != 1 or (chosen.size and chosen.dtype.kind not in "iu"):
            raise ValueError(f"query_indices must be a 1-D array of integers, got {chosen.dtype} {chosen.shape}")
        chosen = chosen.astype(np.intp, copy=False)
        q_count = len(self.query_names)
        if chosen.size:
            if chosen.min() < 0 or chosen.max() >= q_count:
                raise ValueError(f"query_indices must lie in [0, {q_count}), got {chosen.min()}..{chosen.max()}")
            if not (chosen[1:] > chosen[:-1]).all() and np.unique(chosen).size != chosen.size:
                raise ValueError("query_indices must be distinct")
        k = self._k
        groups = self._groups
        n_sources = self._n_sources

        # Scratch of this plan's size, reused (its pages stay mapped): a mask of the kept nodes,
        # all False between calls, and their new positions. Taken with dict.pop, so that another
        # thread's subset makes its own.
        scratch = self._scratch.pop(0, None)
        if scratch is None:
            scratch = (np.zeros(len(self.w), dtype=bool), np.empty(len(self.w), dtype=np.intp))
        keep, renumber = scratch

        # The nodes the chosen queries reach: from their roots down, block by block (every consumer
        # of a block is in a later block, of a greater depth).
        keep[self._roots[chosen]] = True
        rows: list = [None] * len(groups)
        for b in range(len(groups) - 1, -1, -1):
            group = groups[b]
            kept_rows = rows[b] = keep[group.start:group.stop].nonzero()[0]
            if not kept_rows.size:
                continue
            if group.op == "union":
                flat, starts, _ = group.inputs
                keep[flat[_segments(*_union_bounds(starts, len(flat), kept_rows))[0]]] = True
            else:
                for _, index in group.inputs:
                    keep[_at(index, kept_rows)] = True
        kept_sources = keep[:n_sources].nonzero()[0]
        kept = np.concatenate([kept_sources] + [group.start + r for group, r in zip(groups, rows)])
        n = len(kept)
        keep[kept] = False
        renumber[kept] = np.arange(n)  # position here → position in the subset

        sub = object.__new__(BatchPlan)
        sub._init_state(self._base, k, None)
        sub._base_positions = kept if self._base_positions is None else self._base_positions[kept]
        sub.parent_positions = kept
        sub._name_objects = self._name_objects[chosen]
        sub.query_names = tuple(sub._name_objects.tolist())
        sub.stream_names = self.stream_names
        sub.stream_d = self.stream_d

        # Blocks: the kept rows of each block, in the same order, so each block is contiguous again.
        sub._n_sources = len(kept_sources)
        sub._groups = []
        inputs_used = []
        start = sub._n_sources
        for group, kept_rows in zip(groups, rows):
            m = kept_rows.size
            if not m:
                continue
            if group.op == "union":
                flat, starts, _ = group.inputs
                picked, new_starts = _segments(*_union_bounds(starts, len(flat), kept_rows))
                new_flat = renumber[flat[picked]]
                inputs = (new_flat, new_starts, new_flat[new_starts])
                inputs_used.append(new_flat)
                table, params = None, group.params
            else:
                slots = []
                for depth, index in group.inputs:
                    new = renumber[_at(index, kept_rows)]
                    inputs_used.append(new)
                    if isinstance(index, slice):  # increasing positions stay increasing: consecutive
                        first = int(new[0])      # if they span m positions
                        slots.append((depth, slice(first, first + m) if int(new[-1]) - first == m - 1 else new))
                    else:
                        slots.append((depth, _as_index(new)))
                inputs = tuple(slots)
                # Constants that hold for the whole block (no array) hold for any of its rows, and
                # so do the choices _params makes (no tuple window, equal bucket counts).
                if m == group.stop - group.start or group.table is None:
                    table, params = group.table, group.params
                else:
                    table = np.take(group.table, kept_rows, axis=0)
                    table.flags.writeable = False
                    params = _params(group.op, table, k)
            sub._groups.append(_Group(group.op, group.level, start, start + m, inputs, params, table))
            start += m
        sub.levels = max((group.level for group in sub._groups), default=0)
        sub._roots = renumber[self._roots[chosen]]
        if self._incidence is not None:
            incidence_rows = _segments(self._incidence.indptr[chosen], self._incidence.indptr[chosen + 1])
            incidence_columns = renumber[self._incidence.indices[incidence_rows[0]]]
        self._scratch[0] = scratch  # renumber is not read any more

        # Sources and per-node values
        sub._stream_g, sub._stream_size = self._stream_g, self._stream_size
        sub._set_sources(self._source_streams[kept_sources])
        sub._set_values(np.take(self._values, kept, axis=0))  # take: faster than [kept] for rows
        kept.flags.writeable = False
        sub._roots.flags.writeable = False

        # Per-query sums, chosen as compile chooses them: subtree sums for a forest, else the rows
        # of the chosen queries of this plan's incidence matrix, renumbered (still ascending).
        # Part of a forest is a forest; and when every top node of this plan is the root of exactly
        # one query, so is every top node of the part (a kept node that no kept node consumes was
        # kept as a root), so the total is the sum over the queries again.
        tops_are_roots = self._forest and self._total_sums is None
        consumers = None
        if not tops_are_roots:
            consumers = np.bincount(np.concatenate(inputs_used), minlength=n) if inputs_used else np.zeros(n, np.intp)
        sub._forest = self._forest or (sub._static_size is not None and consumers.max(initial=0) <= 1)
        if sub._forest:
            sub._first_deep = next((group.start for group in sub._groups if group.level >= 2), n)
            sub._query_sums = sub._sum_rows(sub._roots)
            if tops_are_roots:
                sub._total_sums, sub._sum_width = None, len(chosen)
            else:
                tops = np.flatnonzero(consumers == 0)
                sub._total_sums = None if np.array_equal(tops, np.sort(sub._roots)) else sub._sum_rows(tops)
                sub._sum_width = len(sub._roots) if sub._total_sums is None else len(tops)
            return sub
        entries = len(incidence_columns)
        sub._incidence = sp.csr_matrix(
            (
                np.ones(entries + n),
                np.concatenate((incidence_columns, np.arange(n))),
                np.concatenate((incidence_rows[1], [entries, entries + n])),
            ),
            shape=(len(chosen) + 1, n),
        )
        sub._incidence.sort_indices()  # a no-op, and the check that sums run in node_ids order
        return sub

    def _set_sources(self, streams: np.ndarray) -> None:
        """The sources' streams and what they read: (S, 1) columns of d, l and g, the sizes."""
        self._source_streams = streams
        self._source_g = self._stream_g[streams].reshape(-1, 1)
        self._source_d = self.stream_d[streams].reshape(-1, 1)
        self._source_l = np.where(self._source_d == _INF, 0.0, self._source_g)
        self._source_size = self._stream_size[streams].reshape(-1, 1)
        # what consumers of sources read: a float when every source has the same g (or size)
        self._source_g_read = _compact({"g": self._source_g})["g"]
        self._source_size_read = _compact({"s": self._source_size})["s"]
        for array in (streams, self._source_g, self._source_d, self._source_l, self._source_size):
            array.flags.writeable = False

    def _set_values(self, values: np.ndarray) -> None:
        """w, g and the bytes per element of every node, from an (N, 3) array; the window and
        granularity positions; the static sizes (None when a union makes sizes per evaluation).

        The sizes are exact for every node that no union feeds. The (N, 3) array is kept for
        ``subset``, which selects from it with one gather (one cache line a node).
        """
        self._values = values
        self.w, self.g, self._sizes = (np.ascontiguousarray(values[:, j]) for j in range(3))
        self.window_index = np.flatnonzero(~np.isnan(self.w))
        self.granularity_index = np.flatnonzero(~np.isnan(self.g))
        self._window_check = _ascending_index(self.window_index)
        self._granularity_check = _ascending_index(self.granularity_index)
        has_union = any(group.op == "union" for group in self._groups)
        self._static_size = None if has_union else self._sizes.reshape(-1, 1)
        for array in (values, self.w, self.g, self._sizes):
            array.flags.writeable = False

    def _init_state(self, base: _Compiled | None, k: _Constants, plan: PlanSet | None) -> None:
        """What every BatchPlan starts with: its caches, its evaluation memory and no parent."""
        self._plan = plan
        self._base = base  # a compiled plan's is made by compile
        self._base_positions = None  # a subset's: positions of its nodes in the compiled plan
        self._k = k
        self._node_ids = None
        self.parent_positions = None
        self._spares: dict[int, np.ndarray] = {}
        self._chunk_plans: dict[int, list] = {}
        self._scratch: dict[int, tuple] = {}
        self._incidence = None
        self._sum_all = None  # _ones_row(self._sum_width) for a forest, made by the first evaluation

    def _sum_rows(self, positions: np.ndarray) -> tuple:
        """Where the subtree sums of these nodes are: (entries, own positions, entries, subtree rows).

        A source's sum is 0 (no entry); a depth-1 node's is its own memory and cpu; a deeper
        node's is a row of the subtree-sum arrays (position − first deep position).
        """
        deep = positions >= self._first_deep
        if deep.all():  # the common case: one gather
            return None, None, None, positions - self._first_deep
        own = (positions >= self._n_sources) & ~deep
        entries = np.arange(len(positions))
        return entries[own], positions[own], entries[deep], positions[deep] - self._first_deep

    @staticmethod
    def _group(key: tuple, start: int, stop: int, ordered: list, ins: list, k) -> _Group:
        level, op, signature = key
        group_nodes = ordered[start:stop]
        group_inputs = ins[start:stop]

        def slot(j: int) -> tuple[int, slice | np.ndarray]:
            return signature[j][0], _as_index([i[j] for i in group_inputs])

        if op == "union":
            flat, starts = [], []
            for i in group_inputs:
                starts.append(len(flat))
                flat.extend(i)
            flat_idx = np.asarray(flat, dtype=np.intp)
            starts_idx = np.asarray(starts, dtype=np.intp)
            return _Group(op, level, start, stop, (flat_idx, starts_idx, flat_idx[starts_idx]), {}, None)
        columns: list = []
        if op == "join":
            nested = [node.kind == "nested" for node in group_nodes]
            pairs = [(1.0, 1.0) if is_nested else (node.buckets or (k.buckets, k.buckets))
                     for node, is_nested in zip(group_nodes, nested)]
            sel = _column([node.sel for node in group_nodes])
            a = _column([float(a) for a, _ in pairs])
            b = _column([float(b) for _, b in pairs])
            c_hash = np.where(_column(nested) != 0.0, 0.0, k.C_H)  # nested loops: one bucket a side, no hash
            probe_a = k.C_P / a  # (12)
            result = sel * k.C_F  # (13)
            columns = [  # in the order of _TABLES["join"]
                sel,
                # (11) + (12) + (14) per arriving element: (C_H + C_B + C_R) + C_H + (2·C_E + C_B + C_R)
                c_hash + k.C_B + k.C_R + c_hash + k.c_join_reorg,
                (a == b).astype(float),
                probe_a,
                k.C_P / b,
                result,
                probe_a + result,  # (12) + (13) per pair and unit of l_a + l_b, when a = b
                *(_column([float(_join_fed(p, ordered, ins)) for p in inputs]) for inputs in zip(*group_inputs)),
                # heralds (paper 002 eq. 9): the fraction of (12)'s probes skipped, (12) over the inputs' own
                # bucket counts (a nested join: one a side), the overhead per input tuple; 0 without heralds
                _column([node.heralds.skip if node.heralds else 0.0 for node in group_nodes]),
                k.C_P / _column([float(p[0]) for p in pairs]),
                k.C_P / _column([float(p[1]) for p in pairs]),
                _column([_per_tuple(node.heralds, k) for node in group_nodes]),
            ]
        elif op == "select":
            columns = [_column([node.sel for node in group_nodes]),
                       _column([(1.0 - node.heralds.skip) * k.C_P + _per_tuple(node.heralds, k) if node.heralds else k.C_P
                                for node in group_nodes])]
        elif op == "project":
            columns = [_column([node.size or 0.0 for node in group_nodes])]  # 0: keep the input's size
        elif op == "window":
            columns = [_column([np.nan if node.c is None else node.c for node in group_nodes])]  # NaN: a time window
        elif op == "aggregate":
            columns = [
                _column([float(node.groups) for node in group_nodes]),
                _column([node.size or k.aggregate_size for node in group_nodes]),
                _column([np.nan if node.group_growth is None else node.group_growth for node in group_nodes]),  # NaN: constant
            ]
        table = np.hstack(columns) if columns else None
        if table is not None:
            table.flags.writeable = False
        inputs = (slot(0), slot(1)) if op == "join" else (slot(0),)
        group = _Group(op, level, start, stop, inputs, _params(op, table, k), table)
        return replace(group, table=None) if group.uniform else group

    # --- evaluation --------------------------------------------------------------------

    def _override(self, name: str, value, default: np.ndarray, positions, allow_inf: bool) -> np.ndarray:
        """A checked (rows, 1) or (rows, K) float array; only ``positions`` are inspected."""
        if value is None:
            return default[:, None]
        array = np.asarray(value, dtype=float)
        rows = default.shape[0]
        if array.ndim not in (1, 2) or array.shape[0] != rows:
            raise ValueError(f"{name} must have shape ({rows},) or ({rows}, K), got {array.shape}")
        used = _take(array, positions)
        # min and max propagate NaN, which fails both comparisons
        if used.size and not (used.min() > 0.0 and (allow_inf or used.max() < _INF)):
            bound = "> 0 (∞ for an empty stream)" if allow_inf else "finite and > 0"
            raise ValueError(f"{name}: every value at a {name} position must be {bound}")
        return array if array.ndim == 2 else array[:, None]

    def evaluate(self, w=None, g=None, stream_d=None, source_keep=None) -> BatchResult:
        """Estimate every node, query and the total, optionally with other w, g or stream d.

        ``source_keep`` (shape (sources,) or with the trailing axis, in
        ``node_ids`` order: the sources come first) is the share of its
        stream's elements each source node passes on, as if a selection of
        that selectivity followed it (load shedding, without the selection's
        own cost); values in (0, 1].

        Each override has shape (N,) (or (S,) for stream_d) or with a trailing
        axis K; then all K settings are evaluated at once and every result array
        gains the trailing axis. Node arrays are in ``node_ids`` order. Values at
        positions that are not time-based windows (for w) or granularity nodes
        (for g) are ignored.

        The six per-node result arrays are views of one block of memory. The
        next evaluation reuses that block (instead of fresh pages) only when no
        array of this result, and no view of one, is referenced any more, so a
        result stays valid for as long as it is held. Up to ``_SPARE_BYTES``
        (two blocks at most) stay allocated between evaluations for this; a kept
        block also serves evaluations of up to four times fewer settings.
        """
        w_all = self._override("w", w, self.w, self._window_check, allow_inf=False)
        g_all = self._override("g", g, self.g, self._granularity_check, allow_inf=False)
        d_src = self._override("stream_d", stream_d, self.stream_d, slice(None), allow_inf=True)
        keep = None if source_keep is None else np.asarray(source_keep, dtype=float)
        if keep is not None and (keep.shape[0] != self._n_sources or keep.ndim > 2):
            raise ValueError(f"source_keep must have {self._n_sources} rows (one per source node), got shape {keep.shape}")
        widths = {a.shape[1] for a, given in ((w_all, w), (g_all, g), (d_src, stream_d), (keep, source_keep))
                  if given is not None and np.ndim(given) == 2}
        if len(widths) > 1:
            raise ValueError(f"the trailing axes of w, g and stream_d differ: {sorted(widths)}")
        trailing = bool(widths)
        K = widths.pop() if widths else 1

        n = len(self.w)
        ns = self._n_sources
        forest = self._forest
        deep = n - self._first_deep if forest else 0
        # One allocation for every per-node array (fresh memory is costly per page; one large
        # block gets huge pages): the six results and the subtree sums of the deeper nodes.
        if K == 0:  # no setting at all
            nothing = np.empty((n, 0))
            q_nothing = np.empty((len(self.query_names), 0))
            return BatchResult(nothing, nothing.copy(), nothing.copy(), nothing.copy(), nothing.copy(),
                               nothing.copy(), q_nothing, q_nothing.copy(), np.empty(0), np.empty(0))
        size = (6 * n + 2 * deep) * K
        arena, references = _pop_spare(self._spares, size)
        if references != _UNREFERENCED:  # absent, or a result of an earlier evaluation is still held
            arena = np.empty(size)
        D, L, G, S, M, C = arena[:6 * n * K].reshape(6, n, K)
        sub_m, sub_c = arena[6 * n * K:size].reshape(2, deep, K)  # a reused spare may be larger
        static_size = self._static_size
        if static_size is None:
            S[:ns] = self._source_size_read
        else:  # written first: kernels read sizes as (M, K) rows, faster than (M, 1) columns
            S[...] = static_size
        M[:ns] = 0.0  # sources cost nothing
        C[:ns] = 0.0

        # Level 0: sources (d, l = g, g), the empty stream when d = ∞; (S, 1) columns unless
        # stream_d has a trailing axis. Consumers read these instead of the (S, K) rows.
        if stream_d is None and keep is None:
            d0, l0 = self._source_d, self._source_l
        else:
            d0 = d_src[self._source_streams]
            if keep is not None:  # formula 2: a selection keeping a share s divides d by s
                d0 = d0 / (keep if keep.ndim == 2 else keep.reshape(-1, 1))
            l0 = np.where(d0 == _INF, 0.0, self._source_g)
        sources = (d0, l0, self._source_g_read, self._source_size_read)
        state = (D, L, G, S)
        D[:ns] = d0
        L[:ns] = l0
        G[:ns] = self._source_g_read

        k = self._k
        dynamic_size = static_size is None
        with np.errstate(over="ignore", under="ignore"):
            for group, chunks in self._chunk_plan(max(1, _CHUNK // K)):
                if chunks is None:
                    self._union_block(group, state, M, C, dynamic_size)
                    continue
                op = group.op
                for o, p, inputs, so, below in chunks:
                    out = (D[o], L[o], G[o], S[o] if dynamic_size else None, M[o], C[o])
                    xs = [tuple([_take(array, rows) if isinstance(array, np.ndarray) else array
                                 for array in (sources if depth == 0 else state)]) for depth, rows in inputs]
                    if op == "join":
                        _join(xs[0], xs[1], out, p, k)
                    elif op == "window":
                        _window(xs[0], out, p, k, w=w_all[o])
                    elif op == "granularity":
                        _granularity(xs[0], out, p, k, g_new=g_all[o])
                    else:
                        _KERNELS[op](xs[0], out, p, k)
                    if so is not None:  # subtree sum = own cost + the inputs' subtree sums (0 for a source)
                        for sub, own in ((sub_m, M), (sub_c, C)):
                            target = sub[so]
                            (is_own, rows), *more = below
                            np.add(own[o], _take(own if is_own else sub, rows), out=target)
                            for is_own, rows in more:
                                target += _take(own if is_own else sub, rows)

        if forest:
            query_memory, query_cpu = (self._gather_sums(self._query_sums, own, sub, len(self.query_names), K)
                                       for own, sub in ((M, sub_m), (C, sub_c)))
            if self._total_sums is None:
                tops_memory, tops_cpu = query_memory, query_cpu
            else:
                tops_memory, tops_cpu = (self._gather_sums(self._total_sums, own, sub, self._sum_width, K)
                                         for own, sub in ((M, sub_m), (C, sub_c)))
            sum_all = self._sum_all
            if sum_all is None:
                sum_all = self._sum_all = _ones_row(self._sum_width)
            total_memory, total_cpu = ((sum_all @ tops)[0] for tops in (tops_memory, tops_cpu))
        else:
            sums = self._incidence @ np.hstack((M, C))  # (Q + 1, 2K); sequential sums in node_ids order
            query_memory, query_cpu = sums[:-1, :K], sums[:-1, K:]
            total_memory, total_cpu = sums[-1, :K], sums[-1, K:]
        self._keep(arena.size, arena)
        if not trailing:
            return BatchResult(
                D[:, 0], L[:, 0], G[:, 0], S[:, 0], M[:, 0], C[:, 0],
                query_memory[:, 0], query_cpu[:, 0], float(total_memory[0]), float(total_cpu[0]),
            )
        return BatchResult(D, L, G, S, M, C, query_memory, query_cpu, total_memory, total_cpu)

    def _chunk_plan(self, step: int) -> list:
        """Per block: (group, chunks of at most ``step`` nodes), or (group, None) for a union block.

        A chunk is (positions, its node constants, (depth, rows) per input slot, its rows in the
        subtree sums or None, and (input is of depth 1, rows) for the inputs whose subtree sums
        it adds). Cached per step.
        """
        plan = self._chunk_plans.get(step)
        if plan is not None:
            return plan
        first_deep = self._first_deep if self._forest else len(self.w)
        plan = []
        for group in self._groups:
            if group.op == "union":
                plan.append((group, None))
                continue
            chunks = []
            for a in range(group.start, group.stop, step):
                b = min(a + step, group.stop)
                ra, rb = a - group.start, b - group.start
                params = {key: value[ra:rb] if isinstance(value, np.ndarray) else value
                          for key, value in group.params.items()}
                inputs = [(depth, _rows(index, ra, rb)) for depth, index in group.inputs]
                so = below = None
                if self._forest and group.level >= 2:
                    so = slice(a - first_deep, b - first_deep)
                    below = [(depth == 1, rows if depth == 1 else _shift(rows, -first_deep))
                             for depth, rows in inputs if depth >= 1]
                chunks.append((slice(a, b), params, inputs, so, below))
            plan.append((group, chunks))
        if len(self._chunk_plans) >= 8:
            self._chunk_plans.clear()
        self._chunk_plans[step] = plan
        return plan

    def _keep(self, size: int, arena: np.ndarray) -> None:
        """Keep the memory of this evaluation for the next ones (at most two sizes, _SPARE_BYTES)."""
        if arena.nbytes > _SPARE_BYTES:
            return
        spares = self._spares
        spares[size] = arena
        try:
            while len(spares) > 2 or sum(a.nbytes for a in list(spares.values())) > _SPARE_BYTES:
                oldest = next(iter(spares))
                if oldest == size:
                    break
                spares.pop(oldest, None)
        except (RuntimeError, StopIteration):  # changed by another thread meanwhile; nothing to undo
            pass

    @staticmethod
    def _gather_sums(where: tuple, own: np.ndarray, sub: np.ndarray, count: int, K: int) -> np.ndarray:
        """Subtree sums of ``count`` nodes (see ``_sum_rows``) as (count, K) rows."""
        own_entries, own_positions, deep_entries, deep_rows = where
        if own_entries is None:  # every node is deep, in entry order
            return np.take(sub, deep_rows, axis=0)
        sums = np.zeros((count, K))
        sums[own_entries] = own[own_positions]
        sums[deep_entries] = sub[deep_rows]
        return sums

    def _union_block(self, group: _Group, state: tuple, M: np.ndarray, C: np.ndarray, dynamic_size: bool) -> None:
        """A union block in one piece: its inputs are gathered and summed per union (np.add.reduceat)."""
        D, L, G, S = state
        o = slice(group.start, group.stop)
        flat, starts, first = group.inputs
        r = 1.0 / np.take(D, flat, axis=0)
        lr = np.take(L, flat, axis=0) * r
        sr = _take(S, flat) * r
        sums = [np.add.reduceat(a, starts, axis=0) for a in (r, lr, sr)]
        out = (D[o], L[o], G[o], S[o] if dynamic_size else None, M[o], C[o])
        _union(*sums, np.take(G, first, axis=0), _take(S, first), out, self._k)


_KERNELS = {"project": _project, "select": _select, "aggregate": _aggregate}
