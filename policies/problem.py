"""The decision problem a policy solves, compiled once into arrays.

A ``Problem`` joins a plan set, the queries' QoS declarations and the
vectorised cost model: it maps per-query fractions (one for the query's
windows, one for its granularity) to allowed values, estimates memory and CPU
for them, and scores the QoS they achieve. Every policy works through it, so
all policies see the same values, the same estimates and the same score.

The achieved QoS of a query is the mean position of its knobs in their ranges
(each window node one knob, the granularity one knob): 1 at the maxima and
finest granularity, 0 at the minima and coarsest granularity. The weighted
QoS of a set of queries is Σ weight·QoS / Σ weight over queries with knobs.

Load shedding (a query's ``drop_rate`` range) is a third knob per query,
given as drop fractions ``fd``: it is priced as a selection of 1 − p after
the query's sources and scales the query's QoS by the share of results kept
(``policies/shedding.py``). When no query may shed, nothing of it is computed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import scipy.sparse as sp

from armd.costmodel.batch import BatchPlan
from armd.costmodel.plan import PlanSet

from .qos import (
    QoSError,
    QueryQoS,
    granularity_fractions,
    granularity_values,
    window_fractions,
    window_values,
)
from .shedding import Drops

_SUBPROBLEMS = 1
"""Sub-problems a problem keeps, the most recent ones. Each holds its own evaluation memory, so few
are kept, and the oldest is dropped before a new one is built: the new one reuses its memory (fresh
pages cost a page fault each, more than the rest of a re-decision's evaluation)."""
_SLOT_CELLS = 1 << 16
"""Window scores are summed from a padded table of knob positions when queries × most knobs of a
query × settings is at most this (a 512 KiB temporary); otherwise with a sparse matrix."""


@dataclass(frozen=True)
class Bounds:
    """Resource bounds of the whole system."""

    memory: float
    """Memory bound M in bytes."""
    cpu: float
    """Processing bound C in cost units per time unit."""
    reserve: float = 0.0
    """Fraction of both bounds kept free for bursts (paper 001 §4.1.2), in [0, 1)."""

    def __post_init__(self) -> None:
        for name in ("memory", "cpu"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"bound {name} must be a number > 0, got {value!r}")
        if not 0 <= self.reserve < 1:
            raise ValueError(f"reserve must be in [0, 1), got {self.reserve!r}")

    @property
    def usable_memory(self) -> float:
        return self.memory * (1.0 - self.reserve)

    @property
    def usable_cpu(self) -> float:
        return self.cpu * (1.0 - self.reserve)


@dataclass(frozen=True)
class Outcome:
    """Estimates and achieved QoS for one or K settings (trailing axis K when given)."""

    query_memory: np.ndarray
    query_cpu: np.ndarray
    total_memory: np.ndarray
    total_cpu: np.ndarray
    qos: np.ndarray | None
    """Per query achieved QoS in [0, 1] (None when not asked for)."""

    def fits(self, bounds: Bounds) -> np.ndarray:
        return self.fits_budget(bounds.usable_memory, bounds.usable_cpu)

    def fits_budget(self, memory: float, cpu: float) -> np.ndarray:
        return (self.total_memory <= memory) & (self.total_cpu <= cpu)


@dataclass(frozen=True)
class Part:
    """One kind of knob (windows or granularities) for K settings, ready to be estimated.

    ``values`` (knobs of that kind, K) are the allowed values the fractions
    round to, ``score`` (Q, K) each query's sum of those knobs' positions in
    their ranges (0 for a query without such a knob). A setting's window part
    and granularity part are independent, so a search that moves one kind of
    knob (or re-prices a fixed grid) reuses the other part instead of rounding
    and scoring every knob again; see ``Problem.evaluate_parts``.
    """

    values: np.ndarray
    score: np.ndarray

    @property
    def width(self) -> int:
        return self.score.shape[1]

    def take(self, columns) -> Part:
        """The given settings (columns), in the given order (C-ordered: rows slice and copy fast)."""
        return Part(np.take(self.values, columns, axis=1), np.take(self.score, columns, axis=1))


class Problem:
    """A plan set with QoS ranges, ready for repeated vectorised evaluation."""

    memory_scale: np.ndarray | None = None
    """Per query, the factor its memory estimate is multiplied by (closed-loop feedback, ``corrected``); None: 1."""
    cpu_scale: np.ndarray | None = None
    """Per query, the factor its CPU estimate is multiplied by; None: 1."""

    def __init__(self, plan: PlanSet, qos: Mapping[str, QueryQoS], batch: BatchPlan | None = None, profile: str = "paper") -> None:
        unknown = set(qos) - set(plan.queries)
        if unknown:
            raise QoSError(f"QoS declared for unknown quer{'y' if len(unknown) == 1 else 'ies'} {sorted(unknown)}")
        self._qos_specs = dict(qos)
        self.batch = batch or BatchPlan.compile(plan, profile)
        self.queries: tuple[str, ...] = tuple(self.batch.query_names)
        index = {node_id: i for i, node_id in enumerate(self.batch.node_ids)}
        self.weights = np.array([qos.get(q, QueryQoS()).weight for q in self.queries], dtype=float)

        win_idx, win_query, win_low, win_high = [], [], [], []
        gran_idx, gran_query = [], []
        g_coarse = np.full(len(self.queries), np.nan)
        g_fine = np.full(len(self.queries), np.nan)
        owner: dict[str, str] = {}
        users: dict[str, int] = {}
        readers: dict[str, set[int]] = {}
        for qi, query in enumerate(self.queries):
            for node_id in plan.query_nodes(query):
                users[node_id] = users.get(node_id, 0) + 1
                node = plan.nodes[node_id]
                if node.op == "source":
                    readers.setdefault(node.stream, set()).add(qi)
        self.shares_nodes = any(count > 1 and plan.nodes[n].op != "source" for n, count in users.items())
        """True when some operator (other than a source) serves several queries."""
        self._readers = {stream: np.array(sorted(qs), dtype=np.intp) for stream, qs in readers.items()}
        for qi, query in enumerate(self.queries):
            spec = qos.get(query)
            if spec is None:
                continue
            spec.validate(query)
            members = plan.query_nodes(query)
            windows = [n for n in members if plan.nodes[n].op == "window" and plan.nodes[n].w is not None]
            for node_id in spec.windows:
                if node_id not in windows:
                    raise QoSError(
                        f"{node_id!r} is not a time-based window of the query; its windows: {', '.join(windows) or 'none'}",
                        query,
                    )
            for node_id in windows:
                bounds = spec.windows.get(node_id, spec.window)
                if bounds is None:
                    continue
                self._claim(owner, node_id, query)
                win_idx.append(index[node_id])
                win_query.append(qi)
                win_low.append(float(bounds[0]))
                win_high.append(float(bounds[1]))
            if spec.granularity is not None:
                grans = [n for n in members if plan.nodes[n].op == "granularity"]
                if not grans:
                    raise QoSError("a granularity range is declared but the plan has no granularity node", query)
                coarse, fine = map(float, spec.granularity)
                for node_id in grans:
                    self._claim(owner, node_id, query)
                    below = plan.granularities[plan.nodes[node_id].inputs[0]]
                    multiple = fine / below
                    if abs(multiple - round(multiple)) > 1e-9 * multiple:
                        raise QoSError(
                            f"finest granularity {fine:g} is not a whole multiple of the "
                            f"granularity {below:g} entering node {node_id!r}",
                            query,
                        )
                    gran_idx.append(index[node_id])
                    gran_query.append(qi)
                self._check_binary_inputs(query, members, set(grans))
                g_coarse[qi], g_fine[qi] = coarse, fine

        self.drops = Drops.of(plan, qos, self.queries, index, users)
        self.win_idx = np.array(win_idx, dtype=np.intp)
        self.win_query = np.array(win_query, dtype=np.intp)
        self.win_low = np.array(win_low, dtype=float)
        self.win_high = np.array(win_high, dtype=float)
        self.gran_idx = np.array(gran_idx, dtype=np.intp)
        self.gran_query = np.array(gran_query, dtype=np.intp)
        self.g_coarse, self.g_fine = g_coarse, g_fine
        self._derive()

    @property
    def has_drop(self) -> np.ndarray:
        """Per query: True when its QoS allows load shedding."""
        return self.drops.allowed

    def drop_rates(self, fd: np.ndarray | None) -> np.ndarray:
        """Per-query drop rates for drop fractions of shape (Q,) or (Q, K) (None: the least shedding); 0 without a range."""
        return self.drops.rates(fd)

    def _outcome(self, result, qos: np.ndarray | None, shed, trailing: bool) -> Outcome:
        """The Outcome of a batch result, with the drops' CPU and results kept when something sheds."""
        # Copies: the per-node result arrays are views into a block the evaluator reuses once
        # nothing refers to it, which saves page faults on every later call.
        query_memory, query_cpu = result.query_memory.copy(), result.query_cpu.copy()
        total_memory, total_cpu = np.copy(result.total_memory), np.copy(result.total_cpu)
        if shed is not None:
            _, cpu, kept = shed
            if not trailing:
                cpu, kept = cpu[:, 0], kept[:, 0]
            query_cpu += cpu
            total_cpu = total_cpu + cpu.sum(axis=0)
            if qos is not None:
                qos = qos * kept
        if self.memory_scale is not None:
            query_memory, total_memory = _rescaled(query_memory, total_memory, self.memory_scale)
        if self.cpu_scale is not None:
            query_cpu, total_cpu = _rescaled(query_cpu, total_cpu, self.cpu_scale)
        return Outcome(query_memory, query_cpu, total_memory, total_cpu, qos)

    def _derive(self, offsets: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Everything that follows from the knob arrays (shared by ``__init__`` and ``subproblem``).

        ``offsets`` are the window and granularity knob offsets when the caller knows them.
        """
        n_queries = len(self.queries)
        self.has_granularity = ~np.isnan(self.g_coarse)
        # Where each query's knobs lie in the knob arrays: as built (and sliced), a query's knobs
        # are consecutive and in query order, so offsets say it; otherwise (None) positions do.
        if offsets is None:
            counts = np.bincount(self.win_query, minlength=n_queries)
            self._win_offsets = _offsets(self.win_query, counts)
            self._gran_offsets = _offsets(self.gran_query, np.bincount(self.gran_query, minlength=n_queries))
        else:
            self._win_offsets, self._gran_offsets = offsets
            counts = np.diff(self._win_offsets)
        self.window_knobs = counts.astype(float)
        self.knobs = self.window_knobs + self.has_granularity
        self.sheds = self.drops.sheds
        """True when some query may shed load."""
        self.adjustable = (self.knobs > 0) | self.drops.allowed
        # Window-knob fractions are summed per query in knob order, as a sparse row sum does (bit for
        # bit): for few queries and settings (a re-decision's) from a (Q, most knobs a query has)
        # table of knob positions, padded with a zero row, else with a sparse matrix built on first use.
        most = int(counts.max(initial=0))
        self._window_slots = self._window_owner = None
        if n_queries * most <= _SLOT_CELLS:
            rank = np.arange(most)
            valid = rank < counts[:, None]
            if self._win_offsets is not None:
                slots = self._win_offsets[:-1, None] + rank
            else:  # the k-th knob of a query in knob order
                first = np.concatenate(([0], np.cumsum(counts)[:-1]))
                slots = np.argsort(self.win_query, kind="stable")[np.where(valid, first[:, None] + rank, 0)]
            self._window_slots = np.where(valid, slots, len(self.win_query))
        if self._gran_offsets is not None:
            self._gran_first = self._gran_offsets[:-1][np.diff(self._gran_offsets) > 0]
        else:
            self._gran_first = np.unique(self.gran_query, return_index=True)[1]
        """Position (in the granularity knobs) of each query's first granularity node."""
        self._buffers: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._grids: dict[tuple, tuple[Part, Part]] = {}
        self._subproblems: dict[tuple[int, ...], Problem] = {}

    @property
    def qos_specs(self) -> dict[str, QueryQoS]:
        """The QoS declarations of this problem's queries."""
        if self._qos_specs is None:
            parent = self._parent_specs
            self._qos_specs = {q: parent[q] for q in self.queries if q in parent}
        return self._qos_specs

    @property
    def plan(self) -> PlanSet:
        """The plan set (built on first use for a sub-problem)."""
        return self.batch.plan

    def queries_reading(self, streams: frozenset[str]) -> np.ndarray:
        """Indices of the queries that read any of ``streams``."""
        parts = [self._readers[s] for s in streams if s in self._readers]
        if len(parts) == 1:
            return parts[0].copy()  # already ascending and distinct
        return np.unique(np.concatenate(parts)) if parts else np.array([], dtype=np.intp)

    def subproblem(self, query_indices: np.ndarray) -> Problem:
        """The same problem restricted to some queries (indices, ascending); cached.

        It is sliced out of this problem's arrays and compiled plan without
        re-reading the plan, so it is cheap enough for every re-decision: for
        ascending indices the knobs of the kept queries are found from
        per-query offsets, so the work grows with the kept queries, not with
        this problem. Its streams are this problem's streams, so ``stream_d``
        carries over. The last ``_SUBPROBLEMS`` sub-problems are kept.
        """
        keep = np.asarray(query_indices, dtype=np.intp).ravel()
        key = tuple(keep.tolist())
        cached = self._subproblems.get(key)
        if cached is not None:
            return cached
        while len(self._subproblems) >= _SUBPROBLEMS:  # dropped first: its memory serves the new one
            try:
                self._subproblems.pop(next(iter(self._subproblems)))
            except (StopIteration, KeyError, RuntimeError):  # emptied or changed by another thread
                break
        batch = self.batch.subset(keep)
        sub = object.__new__(Problem)
        sub.batch = batch
        sub.queries = tuple(batch.query_names)
        sub._parent_specs = self.qos_specs  # the sub-problem's own mapping is built on first use
        sub.weights = self.weights[keep]
        sub.shares_nodes = self.shares_nodes
        ascending = bool(np.all(keep[1:] > keep[:-1]))
        positions = batch.parent_positions
        offsets = None
        if ascending and self._win_offsets is not None and self._gran_offsets is not None:
            windows, sub.win_query, win_offsets = _kept_knobs(self._win_offsets, keep)
            granularities, sub.gran_query, gran_offsets = _kept_knobs(self._gran_offsets, keep)
            offsets = (win_offsets, gran_offsets)
            # parent_positions is ascending: a kept node's position there is its position here
            sub.win_idx = np.searchsorted(positions, self.win_idx[windows])
            sub.gran_idx = np.searchsorted(positions, self.gran_idx[granularities])
        else:
            query_rank = np.full(len(self.queries), -1, dtype=np.intp)
            query_rank[keep] = np.arange(len(keep))
            node_rank = np.full(len(self.batch.w), -1, dtype=np.intp)
            node_rank[positions] = np.arange(len(positions))
            windows = np.flatnonzero(query_rank[self.win_query] >= 0)
            granularities = np.flatnonzero(query_rank[self.gran_query] >= 0)
            sub.win_idx, sub.win_query = node_rank[self.win_idx[windows]], query_rank[self.win_query[windows]]
            sub.gran_idx, sub.gran_query = node_rank[self.gran_idx[granularities]], query_rank[self.gran_query[granularities]]
        sub.win_low, sub.win_high = self.win_low[windows], self.win_high[windows]
        sub.drops = self.drops.subset(keep, positions, len(self.batch.w))
        sub.g_coarse, sub.g_fine = self.g_coarse[keep], self.g_fine[keep]
        sub._readers = {}
        sub._qos_specs = None
        sub.memory_scale = None if self.memory_scale is None else self.memory_scale[keep]
        sub.cpu_scale = None if self.cpu_scale is None else self.cpu_scale[keep]
        sub._derive(offsets)
        for grid, (grid_w, grid_g) in self._grids.items():  # the grid's parts, by rows
            sub._grids[grid] = (
                Part(np.take(grid_w.values, windows, axis=0), np.take(grid_w.score, keep, axis=0)),
                Part(np.take(grid_g.values, granularities, axis=0), np.take(grid_g.score, keep, axis=0)),
            )
        self._subproblems[key] = sub
        return sub

    def _claim(self, owner: dict[str, str], node_id: str, query: str) -> None:
        if owner.setdefault(node_id, query) != query:
            raise QoSError(
                f"node {node_id!r} is shared by queries {owner[node_id]!r} and {query!r}; "
                "a window or granularity node can have a QoS range in one query only"
            )

    def _check_binary_inputs(self, query: str, members: tuple[str, ...], grans: set[str]) -> None:
        """A granularity knob must reach every input of a binary operator or none (equal g)."""
        tuned: set[str] = set()
        for node_id in members:
            node = self.plan.nodes[node_id]
            flags = [i in tuned for i in node.inputs]
            if node.op in ("join", "union") and any(flags) and not all(flags):
                raise QoSError(
                    f"node {node_id!r} ({node.op}) joins inputs with and without the query's "
                    "granularity operator; put a granularity node on every input so they change together",
                    query,
                )
            if node_id in grans or any(flags):
                tuned.add(node_id)

    # --- fractions → values → estimates ------------------------------------------------------

    def values(self, fw: np.ndarray, fg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Window and granularity arrays for the batch evaluator, from per-query fractions.

        ``fw`` and ``fg`` have shape (Q,) or (Q, K); the result has shape (N,) or (N, K).
        """
        fw, fg = np.asarray(fw, dtype=float), np.asarray(fg, dtype=float)
        w, g = self._fill(*self._knob_values(fw, fg), fw.shape[1:], reuse=False)
        return w, g

    def qos(self, w: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Achieved QoS per query for the given value arrays; 1 for queries without knobs."""
        return self._qos(w[self.win_idx], g[self.gran_idx], w.shape[1:])

    def evaluate(
        self, fw: np.ndarray, fg: np.ndarray, stream_d: np.ndarray | None = None, with_qos: bool = True,
        fd: np.ndarray | None = None,
    ) -> Outcome:
        """Estimates and achieved QoS for per-query fractions of shape (Q,) or (Q, K).

        ``with_qos=False`` skips scoring the QoS (``Outcome.qos`` is None) when only the estimates matter.
        ``fd`` are the drop fractions (None: the least shedding each range allows).
        """
        fw, fg = np.asarray(fw, dtype=float), np.asarray(fg, dtype=float)
        tail = fw.shape[1:]
        window_knobs, granularity_knobs = self._knob_values(fw, fg)
        w, g = self._fill(window_knobs, granularity_knobs, tail, reuse=True)
        shed = self.drops.price(fd, tail[0] if tail else 1, stream_d, self.batch)
        keep = None if shed is None else (shed[0] if tail else shed[0][:, 0])
        result = self.batch.evaluate(w=w, g=g, stream_d=stream_d, source_keep=keep)
        qos = self._qos(window_knobs, granularity_knobs, tail) if with_qos else None
        return self._outcome(result, qos, shed, bool(tail))

    def corrected(self, memory: np.ndarray, cpu: np.ndarray) -> Problem:
        """The same problem with each query's memory and CPU estimates multiplied by its factor.

        This is where measurements correct the model (``control/feedback.py``):
        every policy, the guardrails and admission evaluate through ``evaluate``
        or ``evaluate_parts``, so all of them decide on the corrected figures. A
        query's correction is added to the totals in full, so an operator shared
        by several queries has its correction counted once per query: the
        corrected total errs on the large side.
        """
        memory, cpu = np.asarray(memory, dtype=float), np.asarray(cpu, dtype=float)
        for name, factors in (("memory", memory), ("cpu", cpu)):
            if factors.shape != (len(self.queries),) or not np.all(np.isfinite(factors) & (factors > 0)):
                raise ValueError(f"{name} correction must hold one finite factor > 0 per query ({len(self.queries)}), "
                                 f"got {factors!r}")
        twin = copy.copy(self)
        twin.memory_scale, twin.cpu_scale = memory, cpu
        twin._subproblems = {}  # the cache holds uncorrected sub-problems of the original
        return twin

    def score(self, fw: np.ndarray, fg: np.ndarray, fd: np.ndarray | None = None) -> np.ndarray:
        """Achieved QoS per query for per-query fractions, without estimating anything."""
        fw, fg = np.asarray(fw, dtype=float), np.asarray(fg, dtype=float)
        qos = self._qos(*self._knob_values(fw, fg), fw.shape[1:])
        if self.sheds:
            qos = qos * self.drops.kept(fd, fw.shape[1:])
        return qos

    # --- parts: knob values and scores computed once, estimated many times ----------------------

    def window_part(self, fw: np.ndarray) -> Part:
        """Window values and scores for per-query window fractions of shape (Q,) (one setting) or (Q, K)."""
        fw = np.asarray(fw, dtype=float)
        fw = fw.reshape(len(fw), -1)
        tail = fw.shape[1:]
        low, high = self._column(self.win_low, tail), self._column(self.win_high, tail)
        values = window_values(fw[self.win_query], low, high)
        return Part(values, self._window_score(values, tail))

    def granularity_part(self, fg: np.ndarray) -> Part:
        """Granularity values and scores for per-query granularity fractions of shape (Q,) or (Q, K)."""
        fg = np.asarray(fg, dtype=float)
        fg = fg.reshape(len(fg), -1)
        tail = fg.shape[1:]
        q = self.gran_query
        values = granularity_values(fg[q], self._column(self.g_coarse[q], tail), self._column(self.g_fine[q], tail))
        return Part(values, self._granularity_score(values, tail))

    def grid_parts(self, levels_w, levels_g) -> tuple[Part, Part]:
        """Window and granularity parts of the grid: every query at (levels_w[i], levels_g[j]).

        Settings are ordered i-major (column i·len(levels_g) + j). Computed once
        per problem and grid, since they do not depend on the streams.
        """
        key = (tuple(map(float, levels_w)), tuple(map(float, levels_g)))
        parts = self._grids.get(key)
        if parts is None:
            n = len(self.queries)
            windows = self.window_part(np.tile(np.asarray(key[0]), (n, 1)))
            granularities = self.granularity_part(np.tile(np.asarray(key[1]), (n, 1)))
            parts = (
                windows.take(np.repeat(np.arange(len(key[0])), len(key[1]))),
                granularities.take(np.tile(np.arange(len(key[1])), len(key[0]))),
            )
            for part in parts:
                part.values.flags.writeable = part.score.flags.writeable = False
            self._grids[key] = parts
        return parts

    def evaluate_parts(
        self,
        windows: Part | list[Part],
        granularities: Part | list[Part],
        stream_d: np.ndarray | None = None,
        with_qos: bool = True,
        fd: np.ndarray | None = None,
    ) -> Outcome:
        """``evaluate`` for settings given as parts (always with the trailing axis K).

        A list of parts stands for their settings side by side (without joining
        them into one array); a part of width 1 stands for the same value in
        all K settings. ``fd``, the drop fractions, has shape (Q,) (the same in
        every setting) or (Q, K); None is the least shedding.
        """
        windows = windows if isinstance(windows, list) else [windows]
        granularities = granularities if isinstance(granularities, list) else [granularities]
        K = max(sum(p.width for p in windows), sum(p.width for p in granularities))
        w, g = self._buffer((K,))
        for target, index, parts in ((w, self.win_idx, windows), (g, self.gran_idx, granularities)):
            column = 0
            for part in parts:
                width = part.width if len(parts) > 1 else K
                target[index, column:column + width] = part.values
                column += width
        shed = self.drops.price(fd, K, stream_d, self.batch)
        result = self.batch.evaluate(w=w, g=g, stream_d=stream_d, source_keep=None if shed is None else shed[0])
        qos = None
        if with_qos:
            score = np.hstack([p.score for p in windows]) if len(windows) > 1 else windows[0].score
            score = score + (np.hstack([p.score for p in granularities]) if len(granularities) > 1
                             else granularities[0].score)
            qos = self._mean_position(score, (K,))
        return self._outcome(result, qos, shed, True)

    def _knob_values(self, fw: np.ndarray, fg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tail = fw.shape[1:]
        windows = window_values(fw[self.win_query], self._column(self.win_low, tail), self._column(self.win_high, tail))
        q = self.gran_query
        coarse, fine = self._column(self.g_coarse[q], tail), self._column(self.g_fine[q], tail)
        return windows, granularity_values(fg[q], coarse, fine)

    def _fill(self, windows: np.ndarray, granularities: np.ndarray, tail: tuple[int, ...], reuse: bool):
        """Full (N, …) value arrays: the plan's values with the knobs replaced.

        With ``reuse`` the arrays are scratch buffers kept per shape (only the
        knob rows change between calls), for the batch evaluator that does not
        keep them.
        """
        w, g = self._buffer(tail) if reuse else self._plan_values(tail)
        w[self.win_idx] = windows
        g[self.gran_idx] = granularities
        return w, g

    def _buffer(self, tail: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Scratch (N, …) value arrays kept per shape; only their knob rows are ever written."""
        buffers = self._buffers.get(tail)
        if buffers is None:
            buffers = self._buffers[tail] = self._plan_values(tail)
        return buffers

    def _plan_values(self, tail: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        shape = (len(self.batch.w), *tail)
        return (
            np.broadcast_to(self.batch.w.reshape(-1, *([1] * len(tail))), shape).copy(),
            np.broadcast_to(self.batch.g.reshape(-1, *([1] * len(tail))), shape).copy(),
        )

    def _qos(self, windows: np.ndarray, granularities: np.ndarray, tail: tuple[int, ...]) -> np.ndarray:
        total = self._window_score(windows, tail)
        total += self._granularity_score(granularities, tail)
        return self._mean_position(total, tail)

    def _window_score(self, windows: np.ndarray, tail: tuple[int, ...]) -> np.ndarray:
        """Per query, the sum of its window knobs' positions in their ranges."""
        total = np.zeros((len(self.queries), *tail))
        if len(self.win_idx):
            low, high = self._column(self.win_low, tail), self._column(self.win_high, tail)
            fractions = window_fractions(windows, low, high)
            slots = self._window_slots
            if slots is None or slots.size * fractions[0].size > _SLOT_CELLS:
                if self._window_owner is None:
                    knobs = len(self.win_query)
                    self._window_owner = sp.csr_matrix(
                        (np.ones(knobs), (self.win_query, np.arange(knobs))), shape=(len(self.queries), knobs)
                    )
                total += self._window_owner @ fractions
            else:
                padded = np.concatenate((fractions, np.zeros((1, *tail))))
                gathered = padded[slots]  # (Q, most knobs, …): each query's knobs in order, then zeros
                total += gathered[:, 0]
                for j in range(1, slots.shape[1]):
                    total += gathered[:, j]
        return total

    def _granularity_score(self, granularities: np.ndarray, tail: tuple[int, ...]) -> np.ndarray:
        """Per query, its granularity knob's position in its range (0 without one)."""
        total = np.zeros((len(self.queries), *tail))
        if len(self._gran_first):
            q = self.gran_query[self._gran_first]
            coarse, fine = self._column(self.g_coarse[q], tail), self._column(self.g_fine[q], tail)
            total[q] = granularity_fractions(granularities[self._gran_first], coarse, fine)
        return total

    def _mean_position(self, total: np.ndarray, tail: tuple[int, ...]) -> np.ndarray:
        has_knobs = self.knobs > 0  # a query whose only knob is its drop rate scores 1 here
        knobs = self._column(np.where(has_knobs, self.knobs, 1.0), tail)
        return np.where(self._column(has_knobs, tail), total / knobs, 1.0)

    def weighted_qos(self, qos: np.ndarray) -> np.ndarray:
        """Σ weight·QoS / Σ weight over the queries that have knobs (1.0 when none has)."""
        weights = np.where(self.adjustable, self.weights, 0.0)
        total = weights.sum()
        if total == 0:
            return np.ones(qos.shape[1:]) if qos.ndim > 1 else np.float64(1.0)
        return np.tensordot(weights, qos, axes=(0, 0)) / total

    @staticmethod
    def _column(values: np.ndarray, tail: tuple[int, ...]) -> np.ndarray:
        return values.reshape(-1, *([1] * len(tail)))


def _rescaled(per_query: np.ndarray, total: np.ndarray, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-query figures (Q,) or (Q, K) times their query's factor, and the total moved by the same amounts."""
    scaled = per_query * factors.reshape(factors.shape + (1,) * (per_query.ndim - 1))
    return scaled, total + (scaled - per_query).sum(axis=0)


def _offsets(owners: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """Start of each query's knobs (and the end, Q + 1 entries) when they are consecutive in query order, else None."""
    if len(owners) > 1 and not np.all(owners[1:] >= owners[:-1]):
        return None
    return np.concatenate(([0], np.cumsum(counts))).astype(np.intp)


def _kept_knobs(offsets: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the kept queries' knobs (ascending for ascending ``keep``), their new owners and offsets."""
    starts = offsets[keep]
    counts = offsets[keep + 1] - starts
    owners = np.repeat(np.arange(len(keep), dtype=np.intp), counts)
    new_offsets = np.zeros(len(keep) + 1, dtype=np.intp)
    np.cumsum(counts, out=new_offsets[1:])
    # each knob's position: its query's start plus its rank among that query's knobs
    shift = starts - new_offsets[:-1]
    return np.arange(new_offsets[-1], dtype=np.intp) + shift[owners], owners, new_offsets
