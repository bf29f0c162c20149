"""Which join order a multi-way stream join should run, and when to change it.

A pure function of measured rates, windows and key selectivities: the cost
of an order is the sum over its joins of the symmetric-hash-join cost of
paper 001 (formulas 9–14, ``costmodel.formulas.join_cost``), with each
intermediate stream's characteristics from formula 4 (``join_output``).
The cheapest order is found exactly by dynamic programming over stream
subsets up to ``exact_limit`` streams and greedily beyond. A migration is
proposed only when the best order is cheaper than the running one by more
than a relative margin and the last migration is at least a cool-down ago;
time is passed in. The executor (JISC, ``armd.migrations.join``) applies it.

Selectivity of joining two subtrees. The join is on one key common to all
streams, so joining a set S of streams takes |S| − 1 key equalities, and
armd estimates the fraction of S's Cartesian product that survives as
g(S) = s̄(S)^(|S|−1), with s̄(S) the geometric mean of the measured pairwise
key-match selectivities inside S. The join of subtrees A and B then has
selectivity g(A ∪ B) / (g(A) · g(B)): exactly the pair's value for two
streams, exactly 1/keys for every cut when keys are uniform, and, because
the product over a tree's cuts telescopes to g(all) / Π g(stream), every
set's output characteristics are the same whatever the tree below it, so
the dynamic programme is exact (Bellman's principle holds).

The cost model's view. A JISC join's query is written in the plan in one
order but runs in whichever order armd last published: ``plan_in_order``
rebuilds the query's joins in the running order, each with the selectivity
of the cut it makes, so that memory and CPU are estimated for what runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from armd.costmodel.characteristics import Stream
from armd.costmodel.constants import CostConstants
from armd.costmodel.formulas import join_cost, join_output, window_output
from armd.costmodel.measured import pair_selectivity  # noqa: F401  (re-exported: callers of the policy import it from here)
from armd.costmodel.plan import PlanSet

from .migration_cost import parallel_track

Order = Any
"""A stream name or a pair of orders (as in ``armd.migrations.join``)."""

SHAPES = ("left-deep", "bushy")


@dataclass(frozen=True)
class JoinStats:
    """Measured characteristics of the streams of one multi-way join."""

    rates: Mapping[str, float]
    """Tuples per time unit, per stream (> 0)."""
    windows: Mapping[str, float]
    """Window size per stream in time units (> 0)."""
    selectivity: Mapping[frozenset[str], float] = field(default_factory=dict)
    """Key-match selectivity per pair of streams, in (0, 1]; missing pairs use ``default_selectivity``."""
    default_selectivity: float = 0.01
    sizes: Mapping[str, float] = field(default_factory=dict)
    """Bytes per tuple per stream; missing ones are 64."""
    granularity: float = 1.0

    def __post_init__(self) -> None:
        if set(self.rates) != set(self.windows):
            raise ValueError(
                f"rates and windows must name the same streams: {sorted(self.rates)} vs {sorted(self.windows)}")
        for name, rate in self.rates.items():
            if not (rate > 0 and math.isfinite(rate)):
                raise ValueError(f"rate of stream {name!r} must be a finite number > 0, got {rate!r}")
        for name, w in self.windows.items():
            if not (w > 0 and math.isfinite(w)):
                raise ValueError(f"window of stream {name!r} must be a finite number > 0, got {w!r}")
        for pair, sel in {**self.selectivity, frozenset({"default"}): self.default_selectivity}.items():
            if not 0 < sel <= 1:
                raise ValueError(f"selectivity {sorted(pair)} must be in (0, 1], got {sel!r}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.rates))

    def pair(self, a: str, b: str) -> float:
        return self.selectivity.get(frozenset((a, b)), self.default_selectivity)

    def cut(self, left: frozenset[str], right: frozenset[str]) -> float:
        """Selectivity of joining the streams of ``left`` with those of ``right``."""
        return cut_selectivity(left, right, self.pair)


def cut_selectivity(left: frozenset[str], right: frozenset[str], pair: Callable[[str, str], float]) -> float:
    """g(L ∪ R) / (g(L) · g(R)): the selectivity of joining two subtrees, from pairwise selectivities ``pair(a, b)``."""
    return math.exp(_log_g(left | right, pair) - _log_g(left, pair) - _log_g(right, pair))


def _log_g(streams: frozenset[str], pair: Callable[[str, str], float]) -> float:
    """log of g(S) = s̄(S)^(|S|−1), the surviving fraction of S's Cartesian product."""
    names = sorted(streams)
    if len(names) < 2:
        return 0.0
    logs = [math.log(pair(a, b)) for a, b in zip_pairs(names)]
    return sum(logs) / len(logs) * (len(names) - 1)


def zip_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


@dataclass(frozen=True)
class _Sub:
    cost: float
    order: Order
    stream: Stream
    size: float


def _leaf(name: str, stats: JoinStats) -> _Sub:
    source = Stream.source(1.0 / stats.rates[name], stats.granularity)
    return _Sub(0.0, name, window_output(source, stats.windows[name]), stats.sizes.get(name, 64.0))


def _join(a: _Sub, b: _Sub, sa: frozenset[str], sb: frozenset[str], stats: JoinStats, k: CostConstants) -> _Sub:
    sel = stats.cut(sa, sb)
    cost = join_cost(a.stream, b.stream, sel, a.size, b.size, k.buckets, k.buckets, False, k)
    return _Sub(a.cost + b.cost + cost.cpu, (a.order, b.order), join_output(a.stream, b.stream, sel), a.size + b.size)


def _streams(order: Order) -> frozenset[str]:
    if isinstance(order, str):
        return frozenset((order,))
    return _streams(order[0]) | _streams(order[1])


def plan_cost(order: Order, stats: JoinStats, constants: CostConstants | None = None) -> float:
    """CPU cost units per time unit of an order: the sum of its joins' formula 10."""
    k = constants or CostConstants()

    def walk(o: Order) -> tuple[_Sub, frozenset[str]]:
        if isinstance(o, str):
            if o not in stats.rates:
                raise ValueError(f"stream {o!r} of the order has no measured rate; known: {', '.join(stats.names)}")
            return _leaf(o, stats), frozenset((o,))
        (a, sa), (b, sb) = walk(o[0]), walk(o[1])
        return _join(a, b, sa, sb, stats, k), sa | sb

    sub, streams = walk(order)
    if streams != set(stats.rates):
        raise ValueError(f"order covers {sorted(streams)} but the join has {list(stats.names)}")
    return sub.cost


def shape_of(order: Order) -> frozenset[frozenset[str]]:
    """An order up to swapping the two inputs of a join (the cost is symmetric in them)."""
    if isinstance(order, str):
        return frozenset()
    return frozenset({_streams(order)}) | shape_of(order[0]) | shape_of(order[1])


def best_order(
    stats: JoinStats, shape: str = "left-deep", constants: CostConstants | None = None, *, exact_limit: int = 12
) -> tuple[Order, float]:
    """The cheapest order of the given shape and its cost.

    Exact (dynamic programming over subsets, Selinger style) up to
    ``exact_limit`` streams; beyond, greedy: left-deep starts from the
    cheapest pair and appends the stream that adds least; bushy repeatedly
    merges the two subtrees whose join costs least.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown join-order shape {shape!r}; valid: {', '.join(SHAPES)}")
    k = constants or CostConstants()
    names = stats.names
    if len(names) < 2:
        raise ValueError("a join order needs at least two streams")
    leaves = {n: _leaf(n, stats) for n in names}
    if len(names) <= exact_limit:
        best = _dp(names, leaves, stats, k, shape == "bushy")
    elif shape == "left-deep":
        best = _greedy_left_deep(names, leaves, stats, k)
    else:
        best = _greedy_bushy(names, leaves, stats, k)
    return best.order, best.cost


def _dp(names: Sequence[str], leaves: dict[str, _Sub], stats: JoinStats, k: CostConstants, bushy: bool) -> _Sub:
    n = len(names)
    sets = [frozenset(names[i] for i in range(n) if m >> i & 1) for m in range(1 << n)]
    table: dict[int, _Sub] = {1 << i: leaves[names[i]] for i in range(n)}
    for mask in sorted(range(1, 1 << n), key=lambda m: bin(m).count("1")):
        if mask in table:
            continue
        best: _Sub | None = None
        if bushy:
            sub = (mask - 1) & mask
            while sub:
                rest = mask ^ sub
                if sub < rest:
                    cand = _join(table[sub], table[rest], sets[sub], sets[rest], stats, k)
                    if best is None or cand.cost < best.cost:
                        best = cand
                sub = (sub - 1) & mask
        else:
            for i in range(n):
                bit = 1 << i
                if mask & bit and mask != bit:
                    rest = mask ^ bit
                    cand = _join(table[rest], leaves[names[i]], sets[rest], sets[bit], stats, k)
                    if best is None or cand.cost < best.cost:
                        best = cand
        table[mask] = best  # type: ignore[assignment]
    return table[(1 << n) - 1]


def _greedy_left_deep(names: Sequence[str], leaves: dict[str, _Sub], stats: JoinStats, k: CostConstants) -> _Sub:
    pairs = [
        _join(leaves[a], leaves[b], frozenset((a,)), frozenset((b,)), stats, k)
        for i, a in enumerate(names) for b in names[i + 1:]
    ]
    cur = min(pairs, key=lambda s: s.cost)
    used = _streams(cur.order)
    while len(used) < len(names):
        cur = min(
            (_join(cur, leaves[x], used, frozenset((x,)), stats, k) for x in names if x not in used),
            key=lambda s: s.cost,
        )
        used = _streams(cur.order)
    return cur


def _greedy_bushy(names: Sequence[str], leaves: dict[str, _Sub], stats: JoinStats, k: CostConstants) -> _Sub:
    forest = [(leaves[n], frozenset((n,))) for n in names]
    while len(forest) > 1:
        i, j, joined = min(
            ((i, j, _join(forest[i][0], forest[j][0], forest[i][1], forest[j][1], stats, k))
             for i in range(len(forest)) for j in range(i + 1, len(forest))),
            key=lambda t: t[2].cost - forest[t[0]][0].cost - forest[t[1]][0].cost,
        )
        merged = (joined, forest[i][1] | forest[j][1])
        forest = [f for x, f in enumerate(forest) if x not in (i, j)] + [merged]
    return forest[0][0]


@dataclass(frozen=True)
class JoinOrderState:
    """What the policy remembers between decisions."""

    last_migration: float | None = None
    """Time of the last proposed migration (application time units)."""


@dataclass(frozen=True)
class JoinOrderDecision:
    migrate: bool
    order: Order
    """The order to run: the new one when migrating, else the current one."""
    current_cost: float
    best_cost: float
    best_order: Order
    reason: str
    state: JoinOrderState


def decide(
    current: Order,
    stats: JoinStats,
    now: float,
    state: JoinOrderState | None = None,
    *,
    margin: float = 0.2,
    cooldown: float = 60.0,
    shape: str = "left-deep",
    constants: CostConstants | None = None,
    payback: float | None = None,
) -> JoinOrderDecision:
    """Keep ``current`` unless the best order is cheaper by more than ``margin`` and the cool-down has passed.

    With ``payback`` (time units), also keep it unless the saving pays the
    migration back within that time: the migration is priced with paper
    003's Parallel Track model (``migration_cost.parallel_track``: the old
    tree keeps processing for one window per level of joins, at most two,
    while the new one builds up — the closest of 003's models to JISC,
    which keeps old state until it is purged).
    """
    if not 0 <= margin < 1:
        raise ValueError(f"join-order margin must be in [0, 1), got {margin!r}")
    if cooldown < 0:
        raise ValueError(f"join-order cool-down must be ≥ 0, got {cooldown!r}")
    state = state or JoinOrderState()
    current_cost = plan_cost(current, stats, constants)
    best, best_cost = best_order(stats, shape, constants)

    def keep(reason: str) -> JoinOrderDecision:
        return JoinOrderDecision(False, current, current_cost, best_cost, best, reason, state)  # type: ignore[arg-type]

    if shape_of(best) == shape_of(current) or best_cost >= current_cost * (1.0 - margin):
        saving = 1.0 - best_cost / current_cost if current_cost > 0 else 0.0
        return keep(f"best order saves {saving:.1%}, not more than the margin {margin:.0%}")
    if state.last_migration is not None and now - state.last_migration < cooldown:
        left = cooldown - (now - state.last_migration)
        return keep(f"cool-down: {left:.4g} time units until the next migration may start")
    if payback is not None:
        cost = parallel_track(max(stats.windows.values()), _depth(current), 0.0, current_cost)
        if (current_cost - best_cost) * payback < cost.extra_processing:
            return keep(f"the migration (Parallel Track: {cost.extra_processing:.4g} cost units over "
                        f"{cost.duration_seconds:.4g} time units) is not paid back within {payback:.4g} time units")
    saving = 1.0 - best_cost / current_cost
    return JoinOrderDecision(
        True, best, current_cost, best_cost, best,
        f"best order saves {saving:.1%} (> margin {margin:.0%})", JoinOrderState(last_migration=now),
    )


# --- the cost model's view of a reordered join ---------------------------------------------------


def join_tree(plan: PlanSet, query: str) -> tuple[list[str], dict[str, str]]:
    """The query as a multi-way join: its join nodes (topological order, root last) and stream → input node.

    A JISC join's query must be a tree of binary joins whose other inputs
    each read exactly one stream, each stream once (e.g. a window over a
    source); a ValueError says what is wrong otherwise.
    """
    root = plan.queries[query]
    if plan.nodes[root].op != "join":
        raise ValueError(f"query {query!r} must be a tree of joins to be reordered, its root {root!r} is {plan.nodes[root].op!r}")
    joins, inputs, stack = [], {}, [root]
    while stack:
        node_id = stack.pop()
        node = plan.nodes[node_id]
        if node.op == "join":
            joins.append(node_id)
            stack.extend(node.inputs)
            continue
        streams = _streams_below(plan, node_id)
        if len(streams) != 1:
            raise ValueError(f"input {node_id!r} of the joins of query {query!r} reads {sorted(streams)}: "
                             "each input of a reordered join must read exactly one stream")
        (stream,) = streams
        if stream in inputs:
            raise ValueError(f"stream {stream!r} is read by two inputs of the joins of query {query!r}: {inputs[stream]!r} and {node_id!r}")
        inputs[stream] = node_id
    others = [q for q in plan.queries if q != query and set(joins) & set(plan.query_nodes(q))]
    if others:
        raise ValueError(f"the joins of query {query!r} are shared with {others}: a reordered join must be the query's own")
    position = {node_id: i for i, node_id in enumerate(plan.nodes)}
    return sorted(joins, key=position.__getitem__), inputs


def _streams_below(plan: PlanSet, node_id: str) -> set[str]:
    node = plan.nodes[node_id]
    if node.op == "source":
        return {node.stream}  # type: ignore[arg-type]
    return set().union(*(_streams_below(plan, i) for i in node.inputs))


def plan_in_order(
    plan: PlanSet, query: str, order: Order, selectivity: Mapping[frozenset[str], float], default_selectivity: float
) -> PlanSet:
    """``plan`` with ``query``'s joins rebuilt in ``order``, so that the cost model estimates what runs.

    The join nodes keep their ids, bottom-up (the root stays the root), and
    their kind and buckets; each gets the selectivity of the cut it now
    makes (``cut_selectivity`` over the pairwise ``selectivity``, missing
    pairs ``default_selectivity``). The inputs of the joins are untouched.
    """
    joins, inputs = join_tree(plan, query)
    if _streams(order) != set(inputs) or _size(order) != len(inputs):
        raise ValueError(f"order {order!r} must name each stream of query {query!r} once: {sorted(inputs)}")

    def pair(a: str, b: str) -> float:
        return selectivity.get(frozenset((a, b)), default_selectivity)

    rebuilt: list[Any] = []  # new join nodes, bottom-up

    def build(o: Order) -> tuple[str, frozenset[str]]:
        if isinstance(o, str):
            return inputs[o], frozenset((o,))
        (left, sl), (right, sr) = build(o[0]), build(o[1])
        node = replace(plan.nodes[joins[len(rebuilt)]], inputs=(left, right), sel=cut_selectivity(sl, sr, pair))
        rebuilt.append(node)
        return node.id, sl | sr

    build(order)
    old = set(joins)
    kept = {node_id: node for node_id, node in plan.nodes.items() if node_id not in old}
    nodes = {**kept, **{node.id: node for node in rebuilt}}
    return PlanSet(plan.streams, plan.constants, nodes, plan.queries, plan.granularities)


def _depth(order: Order) -> int:
    """Levels of joins in an order's tree (a single stream: 0)."""
    return 0 if isinstance(order, str) else 1 + max(_depth(o) for o in order)


def _size(order: Order) -> int:
    return 1 if isinstance(order, str) else _size(order[0]) + _size(order[1])
