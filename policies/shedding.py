"""Load shedding as a knob of the decision problem (paper 001 §5.3).

A query whose QoS allows a drop rate p has armd drop each element arriving
at it with probability p, before any window. For the cost model that is a
selection of selectivity 1 − p right after each of the query's source nodes
(§3, formula 2): the sources' d is divided by 1 − p, and while p > 0 the
drop costs one predicate evaluation (C_P) per arriving element. A result of
a query combines one element of each of its k inputs, so it survives with
probability (1 − p)^k; that share scales the query's QoS.

The drop must not reach other queries, so a query that sheds must own all its
plan nodes, sources included. ``Problem`` holds one ``Drops`` and asks it for
the sources' shares kept, the drops' CPU and the results kept; when no query
may shed, ``Drops.sheds`` is False and nothing here is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from armd.costmodel.batch import BatchPlan
from armd.costmodel.plan import PlanSet

from .qos import QoSError, QueryQoS, drop_values, results_kept


@dataclass(frozen=True)
class Drops:
    """The drop knobs of a problem's queries."""

    low: np.ndarray
    """Per query the least drop rate of its range (NaN without a range)."""
    high: np.ndarray
    """Per query the most drop rate of its range (NaN without a range)."""
    inputs: np.ndarray
    """Per query the number of source nodes it drops on (k of (1 − p)^k)."""
    sources: np.ndarray
    """Positions (in the compiled plan's ``node_ids``) of the source nodes dropped on."""
    owners: np.ndarray
    """The query of each of those source nodes."""

    @classmethod
    def of(cls, plan: PlanSet, qos: Mapping[str, QueryQoS], queries: tuple[str, ...], index: Mapping[str, int],
           users: Mapping[str, int]) -> Drops:
        """The drop knobs of ``queries`` (validated QoS); ``users`` counts the queries using each node."""
        n = len(queries)
        low, high, inputs = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
        sources: list[int] = []
        owners: list[int] = []
        for qi, query in enumerate(queries):
            spec = qos.get(query)
            if spec is None or not spec.sheds:
                continue
            members = plan.query_nodes(query)
            shared = [m for m in members if users[m] > 1]
            if shared:
                raise QoSError(
                    f"a drop_rate range needs a query whose nodes (sources included) are its own; "
                    f"{', '.join(map(repr, shared))} also serve other queries",
                    query,
                )
            own = [index[m] for m in members if plan.nodes[m].op == "source"]
            low[qi], high[qi] = map(float, spec.drop_rate)
            inputs[qi] = len(own)
            sources.extend(own)
            owners.extend([qi] * len(own))
        return cls(low, high, inputs, np.array(sources, dtype=np.intp), np.array(owners, dtype=np.intp))

    @property
    def sheds(self) -> bool:
        """True when some query may shed load."""
        return bool(len(self.sources))

    @property
    def allowed(self) -> np.ndarray:
        """Per query: True when its QoS allows load shedding."""
        return ~np.isnan(self.high)

    def rates(self, fd: np.ndarray | None) -> np.ndarray:
        """Drop rates for drop fractions of shape (Q,) or (Q, K) (None: the least shedding); 0 without a range."""
        if fd is None:
            fd = np.ones(len(self.low))
        fd = np.asarray(fd, dtype=float)
        shape = (-1, *([1] * (fd.ndim - 1)))
        return drop_values(fd, np.nan_to_num(self.low).reshape(shape), np.nan_to_num(self.high).reshape(shape))

    def fractions(self, rates: np.ndarray) -> np.ndarray:
        """The drop fractions of per-query drop rates (1 at the low end of a range, 0 at the high end)."""
        low, high = np.nan_to_num(self.low), np.nan_to_num(self.high)
        span = np.where(high > low, high - low, 1.0)
        return np.where(high > low, np.clip((high - rates) / span, 0.0, 1.0), 1.0)

    def kept(self, fd: np.ndarray | None, tail: tuple[int, ...]) -> np.ndarray:
        """Per query the share of its results the drop rates keep, shaped (Q, …tail)."""
        return results_kept(self.rates(fd), self.inputs.reshape(-1, *([1] * len(tail))))

    def price(self, fd: np.ndarray | None, K: int, stream_d: np.ndarray | None, batch: BatchPlan):
        """Source shares kept (sources, K), the drops' own CPU (Q, K) and results kept (Q, K); None when nothing drops."""
        if not self.sheds:
            return None
        n = len(self.low)
        p = np.broadcast_to(self.rates(fd).reshape(n, -1), (n, K))
        if not p.any():
            return None
        keep = np.ones((batch.source_streams.shape[0], K))
        keep[self.sources] = 1.0 - p[self.owners]
        d = batch.stream_d if stream_d is None else np.asarray(stream_d, dtype=float)
        d = d[batch.source_streams[self.sources]]
        rate = 1.0 / (d if d.ndim == 2 else d[:, None])  # 0 for an empty stream (d = ∞)
        cpu_rows = np.where(p[self.owners] > 0, rate * batch.plan.constants.C_P, 0.0)
        cpu = np.zeros((n, K))
        np.add.at(cpu, self.owners, cpu_rows)
        return keep, cpu, results_kept(p, self.inputs[:, None])

    def subset(self, keep: np.ndarray, positions: np.ndarray, nodes: int) -> Drops:
        """The drop knobs of the queries ``keep`` in a sub-plan holding the parent's nodes ``positions`` (of ``nodes``)."""
        if not self.sheds:
            return Drops(self.low[keep], self.high[keep], self.inputs[keep], self.sources, self.owners)
        query_rank = np.full(len(self.low), -1, dtype=np.intp)
        query_rank[keep] = np.arange(len(keep))
        node_rank = np.full(nodes, -1, dtype=np.intp)
        node_rank[positions] = np.arange(len(positions))
        kept = np.flatnonzero(query_rank[self.owners] >= 0)
        return Drops(self.low[keep], self.high[keep], self.inputs[keep],
                     node_rank[self.sources[kept]], query_rank[self.owners[kept]])
