"""The random workload of paper 001 §5.4 (Table 3) as a plan document with QoS ranges.

Pure: no IO, no clock; the same (n_queries, n_streams, seed) always gives the
same workload (``numpy.random.default_rng(seed)``).

Units and distributions (paper 001 §5.4):

* time unit: milliseconds; every stream has g = 1 ms and elements of 64 bytes;
* streams: Poisson arrival rates uniform in 2–600 elements per minute, so
  d = 60000 / rate ms;
* plan types (Table 3), drawn per query with probabilities 30/20/10/10/10/10/10 %:
  ``join2``  ω(S1) ⋈ ω(S2);
  ``join3``  (ω(S1) ⋈ ω(S2)) ⋈ ω(S3);
  ``join4``  ((ω(S1) ⋈ ω(S2)) ⋈ ω(S3)) ⋈ ω(S4);
  ``bushy``  (ω(S1) ⋈ ω(S2)) ⋈ (ω(S3) ⋈ ω(S4));
  ``agg``    α(Γ(ω(S)));
  ``agg_join``  α(Γ(ω(S1))) ⋈ Γ(ω(S2));
  ``agg_agg``   α(Γ(ω(S1))) ⋈ α(Γ(ω(S2)));
  a join's two inputs must have the same granularity (§3.3.2, enforced by
  ``parse_plan``), so in ``agg_join`` the plain branch gets a granularity
  operator too, with the query's one granularity;
* joins: 67 % hash, 33 % nested loops; selectivity uniform in 0.005–0.02;
  the streams of one query are distinct when there are enough streams;
* aggregations are scalar (α, one group).

QoS (what a policy may change): every time-based window of a query has its
own range [w_min, w_max] ms and every query with granularity operators one
range [g_coarse, g_fine] ms, shared by all its granularity nodes. The plan
starts at the best quality: each window at w_max (drawn uniformly, as an
integer number of ms, in 1–30 minutes) with w_min uniform in [1 min, w_max];
each granularity at g_fine (uniform integer in 1–10,000 ms) with g_coarse
uniform in [g_fine, 10,000]. All values are integers, so every granularity
is a whole multiple of the streams' g = 1.

Node ids: ``{q}.s{i}`` sources, ``{q}.w{i}`` windows (i = 1, 2, …, the
i-th stream of the query), ``{q}.g{i}`` granularity, ``{q}.a{i}`` aggregate
over window i, ``{q}.j{i}`` joins (the query's root is its last join, or the
aggregate), with query names ``q00000``, ``q00001``, ….
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

MINUTE_MS = 60_000
WINDOW_RANGE_MS = (1 * MINUTE_MS, 30 * MINUTE_MS)
"""Window sizes and their QoS ranges lie in 1–30 minutes."""
GRANULARITY_RANGE_MS = (1, 10_000)
"""Granularities and their QoS ranges lie in 1–10,000 ms."""
RATE_RANGE_PER_MINUTE = (2.0, 600.0)
SELECTIVITY_RANGE = (0.005, 0.02)
NESTED_SHARE = 0.33
ELEMENT_SIZE = 64

PLAN_TYPES: dict[str, float] = {
    "join2": 0.30,
    "join3": 0.20,
    "join4": 0.10,
    "bushy": 0.10,
    "agg": 0.10,
    "agg_join": 0.10,
    "agg_agg": 0.10,
}
"""Table 3: plan type → share of the queries."""

_STREAMS_PER_TYPE = {"join2": 2, "join3": 3, "join4": 4, "bushy": 4, "agg": 1, "agg_join": 2, "agg_agg": 2}
_JOINS_PER_TYPE = {"join2": 1, "join3": 2, "join4": 3, "bushy": 3, "agg": 0, "agg_join": 1, "agg_agg": 1}
_MAX_STREAMS = 4
_MAX_JOINS = 3


@dataclass(frozen=True)
class QueryRanges:
    """The adjustable parameters of one query and the ranges they may take.

    ``windows`` and ``granularity`` have the meaning (and order) of the fields
    of the same name in ``armd.policies.qos.QueryQoS``, so
    ``QueryQoS(windows=r.windows, granularity=r.granularity)`` declares them to
    a policy (the cost model may not import the policies).
    """

    plan_type: str
    """Key of ``PLAN_TYPES``."""
    windows: Mapping[str, tuple[int, int]]
    """Window node id → (w_min, w_max) in ms; the plan starts at w_max."""
    granularity: tuple[int, int] | None
    """(g_coarse, g_fine) in ms, g_coarse ≥ g_fine; the plan starts at g_fine. None without granularity nodes."""
    granularity_nodes: tuple[str, ...]
    """Ids of the query's granularity nodes, which always carry the same g."""


@dataclass(frozen=True)
class Workload:
    """A §5.4 workload: the plan document for ``parse_plan`` and the QoS of every query."""

    doc: dict[str, Any]
    qos: Mapping[str, QueryRanges]
    """Query name → its QoS ranges."""

    def bounds(self, node_ids: tuple[str, ...] | list[str]) -> dict[str, np.ndarray]:
        """Per-node QoS bounds aligned with ``node_ids`` (e.g. ``BatchPlan.node_ids``), NaN elsewhere.

        Keys: ``w_min``, ``w_max`` (window nodes), ``g_coarse``, ``g_fine`` (granularity nodes).
        """
        position = {node_id: i for i, node_id in enumerate(node_ids)}
        out = {key: np.full(len(position), np.nan) for key in ("w_min", "w_max", "g_coarse", "g_fine")}
        for q in self.qos.values():
            for node_id, (low, high) in q.windows.items():
                out["w_min"][position[node_id]] = low
                out["w_max"][position[node_id]] = high
            for node_id in q.granularity_nodes:
                out["g_coarse"][position[node_id]], out["g_fine"][position[node_id]] = q.granularity
        return out


def section54(n_queries: int, n_streams: int = 50, seed: int = 0) -> Workload:
    """Generate the §5.4 workload of ``n_queries`` queries over ``n_streams`` streams (see the module docstring)."""
    if isinstance(n_queries, bool) or not isinstance(n_queries, (int, np.integer)) or n_queries < 1:
        raise ValueError(f"n_queries must be a whole number ≥ 1, got {n_queries!r}")
    if isinstance(n_streams, bool) or not isinstance(n_streams, (int, np.integer)) or n_streams < 1:
        raise ValueError(f"n_streams must be a whole number ≥ 1, got {n_streams!r}")
    rng = np.random.default_rng(seed)
    n = int(n_queries)

    rates = rng.uniform(*RATE_RANGE_PER_MINUTE, size=n_streams)
    stream_names = [f"S{i:02d}" for i in range(n_streams)]
    streams = {
        name: {"d": MINUTE_MS / float(rate), "g": 1, "size": ELEMENT_SIZE} for name, rate in zip(stream_names, rates)
    }

    # All random draws up front, in bulk; each query uses a prefix of its row.
    types = list(PLAN_TYPES)
    type_of = rng.choice(len(types), size=n, p=list(PLAN_TYPES.values()))
    if n_streams >= _MAX_STREAMS:
        chosen = np.argsort(rng.random((n, n_streams)), axis=1)[:, :_MAX_STREAMS]  # distinct per query
    else:
        chosen = rng.integers(0, n_streams, size=(n, _MAX_STREAMS))
    w_max = rng.integers(WINDOW_RANGE_MS[0], WINDOW_RANGE_MS[1], size=(n, _MAX_STREAMS), endpoint=True)
    w_min = rng.integers(WINDOW_RANGE_MS[0], w_max, endpoint=True)
    g_fine = rng.integers(GRANULARITY_RANGE_MS[0], GRANULARITY_RANGE_MS[1], size=n, endpoint=True)
    g_coarse = rng.integers(g_fine, GRANULARITY_RANGE_MS[1], endpoint=True)
    sel = rng.uniform(*SELECTIVITY_RANGE, size=(n, _MAX_JOINS))
    nested = rng.random((n, _MAX_JOINS)) < NESTED_SHARE

    queries: dict[str, Any] = {}
    qos: dict[str, QueryRanges] = {}
    for i in range(n):
        q = f"q{i:05d}"
        plan_type = types[type_of[i]]
        g = int(g_fine[i])
        gran_nodes: list[str] = []

        def window(j: int) -> dict[str, Any]:
            """ω over the query's j-th stream (1-based)."""
            source = {"op": "source", "id": f"{q}.s{j}", "stream": stream_names[chosen[i, j - 1]]}
            return {"op": "window", "id": f"{q}.w{j}", "w": int(w_max[i, j - 1]), "inputs": [source]}

        def granular(j: int) -> dict[str, Any]:
            """Γ(ω(S_j)) at the query's granularity."""
            gran_nodes.append(f"{q}.g{j}")
            return {"op": "granularity", "id": f"{q}.g{j}", "g": g, "inputs": [window(j)]}

        def aggregate(j: int) -> dict[str, Any]:
            """α(Γ(ω(S_j)))."""
            return {"op": "aggregate", "id": f"{q}.a{j}", "inputs": [granular(j)]}

        def join(j: int, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
            kind = "nested" if nested[i, j - 1] else "hash"
            return {"op": "join", "id": f"{q}.j{j}", "sel": float(sel[i, j - 1]), "kind": kind, "inputs": [left, right]}

        if plan_type == "join2":
            tree = join(1, window(1), window(2))
        elif plan_type == "join3":
            tree = join(2, join(1, window(1), window(2)), window(3))
        elif plan_type == "join4":
            tree = join(3, join(2, join(1, window(1), window(2)), window(3)), window(4))
        elif plan_type == "bushy":
            tree = join(3, join(1, window(1), window(2)), join(2, window(3), window(4)))
        elif plan_type == "agg":
            tree = aggregate(1)
        elif plan_type == "agg_join":
            tree = join(1, aggregate(1), granular(2))
        else:  # agg_agg
            tree = join(1, aggregate(1), aggregate(2))
        queries[q] = tree

        count = _STREAMS_PER_TYPE[plan_type]
        qos[q] = QueryRanges(
            plan_type=plan_type,
            windows={f"{q}.w{j}": (int(w_min[i, j - 1]), int(w_max[i, j - 1])) for j in range(1, count + 1)},
            granularity=(int(g_coarse[i]), g) if gran_nodes else None,
            granularity_nodes=tuple(gran_nodes),
        )

    return Workload({"streams": streams, "queries": queries}, qos)


def section54_workload(n_queries: int, n_streams: int = 50, seed: int = 0) -> dict:
    """The plan document of ``section54(n_queries, n_streams, seed)`` (without the QoS ranges)."""
    return section54(n_queries, n_streams, seed).doc
