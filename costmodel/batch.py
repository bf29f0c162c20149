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
scalar code, every branch of a formula is selected with ``np.where`` and is
computed on substituted "safe" values so that no warning or NaN escapes, and
the rounding helpers use the same ``ROUNDING_SLACK``.

Layout: per-node state arrays have shape (N, K) (K = 1 without a trailing
axis); node constants (selectivities, bucket counts, …) are stored per group
with shape (M, 1) so that they broadcast over K.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .formulas import GRANULARITY_TOLERANCE, ROUNDING_SLACK
from .plan import PlanSet

__all__ = ["BatchPlan", "BatchResult"]

_INF = np.inf


# --- small helpers -------------------------------------------------------------------------


def _normalise(d: np.ndarray, l: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # noqa: E741
    """``Stream.__post_init__``: a stream with d = ∞ or l = 0 is the canonical empty stream (∞, 0)."""
    d = np.where(l == 0.0, _INF, d)
    return d, np.where(d == _INF, 0.0, l)


def _rate(d: np.ndarray) -> np.ndarray:
    """``Stream.rate``: 1/d, which is exactly 0 for the empty stream (1/∞)."""
    return 1.0 / d


def _column(values: list[float]) -> np.ndarray:
    """Per-node constants of a group as an (M, 1) column that broadcasts over K."""
    return np.asarray(values, dtype=float).reshape(-1, 1)


# --- per-operator kernels ------------------------------------------------------------------
#
# Every kernel takes the gathered input characteristics (arrays of shape
# (M, K) or broadcastable to it) and returns (d, l, g, size, memory, cpu) of
# its M nodes. Scalar branches become np.where; the order of floating-point
# operations follows formulas.py so that results agree to the last few ulps.


def _project(d, l, g, size, new_size, has_size, k):  # noqa: E741
    """Formula 1 and §3.5: characteristics unchanged, one function call per element; optional new size."""
    cpu = _rate(d) * k.C_F
    size = np.where(has_size, new_size, size)
    return d, l, g, size, 0.0, cpu


def _select(d, l, g, size, sel, k):  # noqa: E741
    """Formula 2 and §3.5: d/sel (∞/sel stays ∞), one predicate evaluation per input element."""
    cpu = _rate(d) * k.C_P
    out_d, out_l = _normalise(d / sel, l)
    return out_d, out_l, g, size, 0.0, cpu


def _window(d, l, g, size, w, c, is_tuple, tuple_cpu, k):  # noqa: E741
    """Formula 7 and §3.6.1 for time-based windows (size w) and tuple-based ones (c elements).

    A tuple window is the time window of size c·d (§2.4.2), computed per
    evaluation; its state is a FIFO of c elements. ``c``/``is_tuple`` are None
    when the group has no tuple window.
    """
    empty = d == _INF
    rate = _rate(d)
    if c is not None:
        w = np.where(is_tuple, c * d, w)
    length = np.floor((w + 1.0) / g * (1.0 + ROUNDING_SLACK)) * g
    dropped = empty | (length == 0.0)
    # For an empty input l = 0 and g·d/l = ∞/0 = ∞ (no warning); the branch discards it anyway.
    out_d = np.where(dropped, _INF, g * d / l)
    out_l = np.where(dropped, 0.0, length)
    out_d, out_l = _normalise(out_d, out_l)
    if c is None:
        return out_d, out_l, g, size, 0.0, rate * k.C_S
    memory = np.where(is_tuple & ~empty, c * size, 0.0)
    cpu = np.where(is_tuple, rate * tuple_cpu, rate * k.C_S)
    return out_d, out_l, g, size, memory, cpu


def _granularity(d, l, g, size, g_new, k):  # noqa: E741
    """Formula 8 and §3.6.2: rounding to ĝ; ĝ == g (math.isclose, GRANULARITY_TOLERANCE) is the identity.

    Cases: l ≥ 2ĝ → (d, l − ĝ); ĝ < l < 2ĝ → (d·ĝ/(l − ĝ), ĝ); otherwise, and
    for an empty input, the empty stream at ĝ.
    """
    empty = d == _INF
    identity = (np.abs(g_new - g) <= GRANULARITY_TOLERANCE * np.maximum(g_new, g)) & ~empty
    long = l >= 2.0 * g_new
    short = (l > g_new) & ~long  # ĝ < l < 2ĝ
    cut = l - g_new
    out_d = np.where(long, d, np.where(short, d * g_new / np.where(short, cut, 1.0), _INF))
    out_l = np.where(long, cut, np.where(short, g_new, 0.0))
    out_d = np.where(identity, d, out_d)
    out_l = np.where(identity, l, out_l)
    out_g = np.where(identity, g, g_new)
    out_d, out_l = _normalise(out_d, out_l)
    cpu = _rate(d) * 2.0 * k.C_Rd
    return out_d, out_l, out_g, size, 0.0, cpu


def _hit_exponents(D, lp, k):
    """Exponent x of ``hit_probability(D, k) = −expm1(x)``: k·log1p(−1/D) for D > 1, −k/D otherwise."""
    return np.where(D > 1.0, k * lp, -k / D)


def _aggregate(d, l, g, size, groups, agg_size, k):  # noqa: E741
    """Formulas 5–6 (output) and 15–19 (cost) for n groups, each a scalar aggregation over (n·d, l, g).

    Output: n·d < l → l' = g / hit(n·d, 2g), d' = l'/n; otherwise unchanged.
    Cost per group over D = n·d, for D < l: M = ⌈l/g · hit(D, g)⌉·s (15),
    C_update (17), C_new (18); otherwise M = s, no update; C_reorg (19) uses the
    per-group output distance. Memory and cpu are then multiplied by n.
    """
    D = groups * d
    empty = D == _INF  # an empty input (or n·d overflowing, which the scalar code also treats as empty)
    active = D < l  # implies a non-empty input
    lp = np.log1p(-1.0 / np.where(D > 1.0, D, 2.0))
    end_hits = -np.expm1(_hit_exponents(D, lp, g))
    both_hits = -np.expm1(_hit_exponents(D, lp, 2.0 * g))
    per_group_length = g / np.where(active, both_hits, 1.0)
    out_d = np.where(active, per_group_length / groups, d)
    out_l = np.where(active, per_group_length, l)
    out_d, out_l = _normalise(out_d, out_l)

    memory = np.where(active, np.ceil(l / g * end_hits * (1.0 - ROUNDING_SLACK)) * agg_size, agg_size)  # (15)
    update = np.where(active, l / (D * g) * end_hits * k.c_update, 0.0)  # (17)
    new = np.where(active, k.C_L / D + k.C_I / (2.0 * D), k.c_new_sparse / D)  # (18)
    group_out_d = np.where(active, per_group_length, D)
    reorg = k.c_reorg_hit / group_out_d + k.C_O / D  # (19)
    cpu = update + new + reorg  # (16)
    memory = np.where(empty, 0.0, groups * memory)
    cpu = np.where(empty, 0.0, groups * cpu)
    return out_d, out_l, g, agg_size, memory, cpu


def _join(a, b, sel, buckets_a, buckets_b, c_hash, c_insert, k):
    """Formula 4 then 2 (output) and formulas 9–14 (cost) of the symmetric hash join.

    ``a`` and ``b`` are (d, l, g, size) tuples. A nested-loops join arrives here
    with one bucket per side and c_hash = 0 (set at compile time). Formula 9's
    growth term d_j/(2·d_i) is 0 when side j is empty; an empty side holds nothing.
    """
    da, la, ga, sa = a
    db, lb, _, sb = b
    empty_a = da == _INF
    empty_b = db == _INF
    either = empty_a | empty_b
    lsum = la + lb
    safe_lsum = np.where(either, 1.0, lsum)  # both empty would give 0/0
    out_d = np.where(either, _INF, da * db / (safe_lsum * sel))
    out_l = np.where(either, 0.0, la * lb / safe_lsum)
    out_d, out_l = _normalise(out_d, out_l)

    ra, rb = _rate(da), _rate(db)
    # (9): ⌈l_i/d_i⌉ + d_j/(2·d_i) per side; d_j → 0 for an empty side j, x/∞ = 0 for an empty side i.
    grow_a = np.where(empty_b, 0.0, db) / (2.0 * da)
    grow_b = np.where(empty_a, 0.0, da) / (2.0 * db)
    side_a = np.where(empty_a, 0.0, np.ceil(la / da * (1.0 - ROUNDING_SLACK)) + grow_a)
    side_b = np.where(empty_b, 0.0, np.ceil(lb / db * (1.0 - ROUNDING_SLACK)) + grow_b)
    memory = side_a * sa + side_b * sb
    arrivals = ra + rb
    rarb = ra * rb
    insert = arrivals * c_insert  # (11)
    probe = rarb * (lb / buckets_b + la / buckets_a) * k.C_P + arrivals * c_hash  # (12)
    result = sel * lsum * ra * rb * k.C_F  # (13)
    reorg = arrivals * k.c_join_reorg  # (14)
    cpu = insert + probe + result + reorg  # (10)
    return out_d, out_l, ga, sa + sb, memory, cpu


def _union(rates, l_rates, size_rates, g, first_size, k):
    """Formula 3 and §3.5 from per-union segment sums: Σ1/d_i, Σl_i/d_i, Σs_i/d_i.

    d' = 1/Σr, l' = Σ(l·r)/Σr; an all-empty union is the empty stream. The
    output size is the rate-weighted mean of the input sizes (the first input's
    size for an empty output); one append per output element.
    """
    empty = rates == 0.0
    safe = np.where(empty, 1.0, rates)
    out_d = np.where(empty, _INF, 1.0 / safe)
    out_l = np.where(empty, 0.0, l_rates / safe)
    out_d, out_l = _normalise(out_d, out_l)
    out_rate = _rate(out_d)
    out_empty = out_d == _INF
    size = np.where(out_empty, first_size, size_rates / np.where(out_empty, 1.0, out_rate))
    return out_d, out_l, g, size, 0.0, out_rate * k.C_T


# --- compiled plan -------------------------------------------------------------------------


class _Constants:
    """The plan's cost constants plus the sums formulas.py forms from them, precomputed once."""

    def __init__(self, constants) -> None:
        for name, value in constants.as_dict().items():
            setattr(self, name, value)
        k = constants
        self.c_update = k.C_O + k.C_U  # (17)
        self.c_new_sparse = k.C_L + k.C_I  # (18), d ≥ l
        self.c_reorg_hit = k.C_O + k.C_L  # (19)
        self.c_join_reorg = 2.0 * k.C_E + k.C_B + k.C_R  # (14)
        self.tuple_window = 2.0 * k.C_Q + k.C_S  # §3.6.1


@dataclass(frozen=True, eq=False)
class _Group:
    """Nodes of one depth level and one operator, with everything that does not depend on w/g/stream_d."""

    op: str
    idx: np.ndarray
    """Positions of the group's nodes (into node_ids)."""
    inputs: tuple[np.ndarray, ...]
    """Unary ops and join: one position array per input slot; union: (flat input positions, segment starts, first inputs)."""
    params: dict


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


class BatchPlan:
    """A PlanSet compiled into index arrays for vectorised evaluation (see the module docstring).

    ``w``, ``g`` and ``stream_d`` hold the plan's own values and are the
    defaults of ``evaluate``; they are read-only (copy them to build overrides).
    ``window_index`` and ``granularity_index`` are the positions of the
    time-based windows and granularity nodes (where ``w`` / ``g`` are not NaN),
    ``levels`` the plan's depth and ``plan`` the compiled PlanSet.
    """

    node_ids: tuple[str, ...]
    query_names: tuple[str, ...]
    stream_names: tuple[str, ...]
    w: np.ndarray
    g: np.ndarray
    stream_d: np.ndarray

    def __init__(self) -> None:  # use BatchPlan.compile
        raise TypeError("build a BatchPlan with BatchPlan.compile(plan)")

    @classmethod
    def compile(cls, plan: PlanSet) -> BatchPlan:
        """Precompute levels, operator groups, gather indices, node constants and the query incidence."""
        self = object.__new__(cls)
        self.plan = plan
        k = plan.constants
        self._k = _Constants(k)
        self.node_ids = tuple(plan.nodes)
        self.query_names = tuple(plan.queries)
        self.stream_names = tuple(plan.streams)
        position = {node_id: i for i, node_id in enumerate(self.node_ids)}
        stream_position = {name: i for i, name in enumerate(self.stream_names)}
        n = len(self.node_ids)

        w = np.full(n, np.nan)
        g = np.full(n, np.nan)
        level = [0] * n
        buckets: dict[tuple[int, str], list[int]] = {}
        sources: list[int] = []
        source_streams: list[int] = []
        for i, node in enumerate(plan.nodes.values()):
            if node.op == "source":
                sources.append(i)
                source_streams.append(stream_position[node.stream])
                continue
            level[i] = 1 + max(level[position[j]] for j in node.inputs)
            if node.op == "window" and node.c is None:
                w[i] = node.w
            elif node.op == "granularity":
                g[i] = node.g
            buckets.setdefault((level[i], node.op), []).append(i)
        nodes = list(plan.nodes.values())
        self._groups = [self._group(op, members, nodes, position, k) for (_, op), members in sorted(buckets.items())]
        self.levels = max(level)

        self._sources = np.asarray(sources, dtype=np.intp)
        self._source_streams = np.asarray(source_streams, dtype=np.intp)
        self._source_g = _column([plan.streams[self.stream_names[s]].g for s in source_streams])
        self._source_size = _column([plan.streams[self.stream_names[s]].size for s in source_streams])
        self.w, self.g = w, g
        self.stream_d = np.array([plan.streams[name].d for name in self.stream_names], dtype=float)
        for array in (self.w, self.g, self.stream_d):
            array.flags.writeable = False
        self.window_index = np.flatnonzero(~np.isnan(w))
        self.granularity_index = np.flatnonzero(~np.isnan(g))

        # Rows 0..Q-1: queries × nodes incidence; last row: every node once (the total).
        # Membership is the set plan.query_nodes(q) returns, found here by a walk over input
        # positions: query_nodes scans every node of the plan per query (O(Q·N)).
        inputs = [[position[j] for j in node.inputs] for node in nodes]
        rows, cols = [], []
        for q, name in enumerate(self.query_names):
            reached = {position[plan.queries[name]]}
            stack = list(reached)
            while stack:
                for j in inputs[stack.pop()]:
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
        self._incidence.sort_indices()  # sums run in topological order, like the scalar evaluator
        return self

    @staticmethod
    def _group(op: str, members: list[int], nodes: list, position: dict[str, int], k) -> _Group:
        idx = np.asarray(members, dtype=np.intp)
        group_nodes = [nodes[i] for i in members]

        def slot(j: int) -> np.ndarray:
            return np.asarray([position[node.inputs[j]] for node in group_nodes], dtype=np.intp)

        params: dict = {}
        if op == "union":
            flat, starts = [], []
            for node in group_nodes:
                starts.append(len(flat))
                flat.extend(position[i] for i in node.inputs)
            flat_idx = np.asarray(flat, dtype=np.intp)
            starts_idx = np.asarray(starts, dtype=np.intp)
            return _Group(op, idx, (flat_idx, starts_idx, flat_idx[starts_idx]), params)
        if op == "join":
            nested = [node.kind == "nested" for node in group_nodes]
            pairs = [(1.0, 1.0) if is_nested else (node.buckets or (k.buckets, k.buckets))
                     for node, is_nested in zip(group_nodes, nested)]
            c_hash = [0.0 if is_nested else k.C_H for is_nested in nested]
            params = {
                "sel": _column([node.sel for node in group_nodes]),
                "buckets_a": _column([float(a) for a, _ in pairs]),
                "buckets_b": _column([float(b) for _, b in pairs]),
                "c_hash": _column(c_hash),
                "c_insert": _column([h + k.C_B + k.C_R for h in c_hash]),  # (11): (C_H + C_B + C_R)
            }
            return _Group(op, idx, (slot(0), slot(1)), params)
        if op == "select":
            params = {"sel": _column([node.sel for node in group_nodes])}
        elif op == "project":
            sizes = [node.size for node in group_nodes]
            params = {
                "new_size": _column([s if s else 0.0 for s in sizes]),
                "has_size": _column([bool(s) for s in sizes]).astype(bool),
            }
        elif op == "window":
            is_tuple = [node.c is not None for node in group_nodes]
            if any(is_tuple):
                params = {
                    "c": _column([node.c if node.c is not None else 1.0 for node in group_nodes]),  # 1: no 0·∞
                    "is_tuple": _column(is_tuple).astype(bool),
                }
            else:
                params = {"c": None, "is_tuple": None}
        elif op == "aggregate":
            params = {
                "groups": _column([float(node.groups) for node in group_nodes]),
                "agg_size": _column([node.size or k.aggregate_size for node in group_nodes]),
            }
        return _Group(op, idx, (slot(0),), params)

    # --- evaluation --------------------------------------------------------------------

    def _override(self, name: str, value, default: np.ndarray, positions: np.ndarray, allow_inf: bool) -> np.ndarray:
        """A checked (rows, 1) or (rows, K) float array; only ``positions`` are inspected."""
        if value is None:
            return default[:, None]
        array = np.asarray(value, dtype=float)
        rows = default.shape[0]
        if array.ndim not in (1, 2) or array.shape[0] != rows:
            raise ValueError(f"{name} must have shape ({rows},) or ({rows}, K), got {array.shape}")
        used = array[positions]
        ok = (used > 0.0) if allow_inf else (used > 0.0) & (used < _INF)
        if not ok.all():
            bound = "> 0 (∞ for an empty stream)" if allow_inf else "finite and > 0"
            raise ValueError(f"{name}: every value at a {name} position must be {bound}")
        return array if array.ndim == 2 else array[:, None]

    def evaluate(self, w=None, g=None, stream_d=None) -> BatchResult:
        """Estimate every node, query and the total, optionally with other w, g or stream d.

        Each override has shape (N,) (or (S,) for stream_d) or with a trailing
        axis K; then all K settings are evaluated at once and every result array
        gains the trailing axis. Values at positions that are not time-based
        windows (for w) or granularity nodes (for g) are ignored.
        """
        w_all = self._override("w", w, self.w, self.window_index, allow_inf=False)
        g_all = self._override("g", g, self.g, self.granularity_index, allow_inf=False)
        d_src = self._override("stream_d", stream_d, self.stream_d, slice(None), allow_inf=True)
        widths = {a.shape[1] for a, given in ((w_all, w), (g_all, g), (d_src, stream_d))
                  if given is not None and np.ndim(given) == 2}
        if len(widths) > 1:
            raise ValueError(f"the trailing axes of w, g and stream_d differ: {sorted(widths)}")
        trailing = bool(widths)
        K = widths.pop() if widths else 1

        n = len(self.node_ids)
        D = np.empty((n, K))
        L = np.empty((n, K))
        G = np.empty((n, K))
        S = np.empty((n, K))
        costs = np.zeros((n, 2 * K))  # [memory | cpu]; sources cost nothing
        M, C = costs[:, :K], costs[:, K:]

        # Level 0: sources (d, l = g, g), the empty stream when d = ∞.
        src = self._sources
        d0 = d_src[self._source_streams]
        D[src] = d0
        L[src] = np.where(d0 == _INF, 0.0, self._source_g)
        G[src] = self._source_g
        S[src] = self._source_size

        k = self._k
        with np.errstate(over="ignore", under="ignore"):
            for group in self._groups:
                idx, p = group.idx, group.params
                if group.op == "union":
                    flat, starts, first = group.inputs
                    r = _rate(D[flat])
                    sums = np.add.reduceat(np.concatenate((r, L[flat] * r, S[flat] * r), axis=1), starts, axis=0)
                    out = _union(sums[:, :K], sums[:, K:2 * K], sums[:, 2 * K:], G[first], S[first], k)
                elif group.op == "join":
                    ia, ib = group.inputs
                    out = _join((D[ia], L[ia], G[ia], S[ia]), (D[ib], L[ib], None, S[ib]), k=k, **p)
                else:
                    (i,) = group.inputs
                    args = (D[i], L[i], G[i], S[i])
                    if group.op == "window":
                        out = _window(*args, w=w_all[idx], tuple_cpu=k.tuple_window, k=k, **p)
                    elif group.op == "granularity":
                        out = _granularity(*args, g_new=g_all[idx], k=k)
                    else:
                        out = _KERNELS[group.op](*args, k=k, **p)
                D[idx], L[idx], G[idx], S[idx], M[idx], C[idx] = out

        sums = self._incidence @ costs  # (Q + 1, 2K); sequential sums in topological order
        query_memory, query_cpu = sums[:-1, :K], sums[:-1, K:]
        total_memory, total_cpu = sums[-1, :K], sums[-1, K:]
        if not trailing:
            return BatchResult(
                D[:, 0], L[:, 0], G[:, 0], S[:, 0], M[:, 0], C[:, 0],
                query_memory[:, 0], query_cpu[:, 0], float(total_memory[0]), float(total_cpu[0]),
            )
        return BatchResult(D, L, G, S, M, C, query_memory, query_cpu, total_memory, total_cpu)


_KERNELS: dict[str, Callable] = {"project": _project, "select": _select, "aggregate": _aggregate}
