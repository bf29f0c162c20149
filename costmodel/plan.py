"""Query plans as a validated DAG of operator nodes.

A plan file names the source streams, optional cost constants, and one
operator tree per query; a node may be named (``id``) and reused elsewhere
with ``{"ref": id}``, which is how subquery sharing (paper 001 §3.3.1) turns
the trees into a DAG. ``parse_plan`` turns the decoded JSON document into a
``PlanSet`` or raises ``PlanError`` naming the node and what is allowed; the
evaluators never see an invalid plan. The format is specified in
``docs/plan-format.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from .characteristics import Stream
from .constants import CostConstants
from .formulas import GRANULARITY_TOLERANCE
from .heralds import DEFAULT_OVERHEAD, DEFAULT_PARTITION, HeraldEffect

OPERATORS: dict[str, frozenset[str]] = {
    "source": frozenset({"stream"}),
    "window": frozenset({"w", "c"}),
    "granularity": frozenset({"g"}),
    "select": frozenset({"sel", "heralds"}),
    "project": frozenset({"size"}),
    "union": frozenset(),
    "join": frozenset({"sel", "kind", "buckets", "heralds"}),
    "aggregate": frozenset({"groups", "size"}),
}
"""Operator name → the parameters it accepts."""

JOIN_KINDS = ("hash", "nested")
STREAM_KEYS = frozenset({"d", "rate", "g", "size"})
NODE_KEYS = frozenset({"op", "id", "inputs"})


class PlanError(ValueError):
    """A plan that cannot be evaluated; the message names the place and what is allowed."""


@dataclass(frozen=True)
class StreamSpec:
    """A source stream as declared in the plan."""

    name: str
    d: float
    """Average distance between arrivals (time units)."""
    g: float
    """Granularity of the stream's timestamps (time units)."""
    size: float
    """Bytes per element."""

    @property
    def characteristics(self) -> Stream:
        return Stream.source(self.d, self.g)


@dataclass(frozen=True)
class Node:
    """One operator of a plan with its validated parameters."""

    id: str
    op: str
    inputs: tuple[str, ...] = ()
    stream: str | None = None
    w: float | None = None
    c: float | None = None
    g: float | None = None
    sel: float | None = None
    kind: str = "hash"
    buckets: tuple[float, float] | None = None
    groups: float = 1
    """A constant group count (whole ≥ 1), or the base of the per-window model when ``group_growth`` is set."""
    group_growth: float | None = None
    """New groups per time unit of window: groups(w) = groups + group_growth·w (``costmodel/inputs.py``)."""
    size: float | None = None
    heralds: HeraldEffect | None = None
    """What heralds save a select or a join (paper 002 §VII); None: no heralds."""


@dataclass(frozen=True)
class PlanSet:
    """Streams, constants and queries; ``nodes`` is in topological order (inputs first)."""

    streams: Mapping[str, StreamSpec]
    constants: CostConstants
    nodes: Mapping[str, Node]
    queries: Mapping[str, str]
    """Query name → id of its root node."""
    granularities: Mapping[str, float] = field(default_factory=dict)
    """Node id → granularity of the node's output, as declared."""
    _members: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    _position: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def query_nodes(self, query: str) -> tuple[str, ...]:
        """Ids of the nodes a query uses, each once, in topological order."""
        if query not in self._members:
            if not self._position:
                self._position.update((node_id, i) for i, node_id in enumerate(self.nodes))
            reached: set[str] = set()
            stack = [self.queries[query]]
            while stack:
                node_id = stack.pop()
                if node_id not in reached:
                    reached.add(node_id)
                    stack.extend(self.nodes[node_id].inputs)
            self._members[query] = tuple(sorted(reached, key=self._position.__getitem__))
        return self._members[query]


def parse_plan(doc: Any, *, constants: CostConstants | None = None) -> PlanSet:
    """Validate a decoded plan document and build its DAG."""
    if not isinstance(doc, Mapping):
        raise PlanError("a plan must be an object with keys 'streams', 'queries' and optionally 'constants'")
    unknown = set(doc) - {"streams", "queries", "constants"}
    if unknown:
        raise PlanError(f"unknown top-level key(s) {sorted(unknown)}; allowed: streams, queries, constants")
    base = constants or CostConstants()
    overrides = doc.get("constants", {})
    if not isinstance(overrides, Mapping):
        raise PlanError("'constants' must be an object of name → number")
    try:
        merged = base.with_overrides(overrides)
    except ValueError as exc:
        raise PlanError(f"constants: {exc}") from None
    streams = _parse_streams(doc.get("streams"))
    return _Builder(streams, merged).build(doc.get("queries"))


def _parse_streams(raw: Any) -> dict[str, StreamSpec]:
    if not isinstance(raw, Mapping) or not raw:
        raise PlanError("'streams' must be a non-empty object of stream name → {d or rate, g, size}")
    streams = {}
    for name, spec in raw.items():
        where = f"stream {_name(name, 'stream')!r}"
        if not isinstance(spec, Mapping):
            raise PlanError(f"{where}: must be an object with d (or rate), g and size")
        unknown = set(spec) - STREAM_KEYS
        if unknown:
            raise PlanError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: d, rate, g, size")
        if ("d" in spec) == ("rate" in spec):
            raise PlanError(f"{where}: give exactly one of d (time between arrivals) or rate (arrivals per time unit)")
        if "d" in spec:
            d = _positive(spec["d"], f"{where}: d")
        else:
            d = _positive(1.0 / _positive(spec["rate"], f"{where}: rate"), f"{where}: 1 / rate")
        g = _positive(spec.get("g", 1.0), f"{where}: g")
        if "size" not in spec:
            raise PlanError(f"{where}: missing size (bytes per element, a number > 0)")
        size = _positive(spec["size"], f"{where}: size")
        streams[name] = StreamSpec(name, d, g, size)
    return streams


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: a key given twice in one object is a mistake, never "last wins"."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise PlanError(f"key {key!r} given twice in one object; allowed: each key once")
        seen[key] = value
    return seen


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise PlanError(f"{where} must be a finite number, got {value!r}")
    return float(value)


MAX_VALUE = 1e12
"""Largest accepted time, size or count: keeps every formula finite (1e12 ms is over 30 years)."""
MIN_VALUE = 1e-6
"""Smallest accepted time, size or count: its reciprocal (a rate, arrivals per unit) stays finite and usable."""
MAX_NAME = 200
"""Longest stream, query or node id: names are stored, and the store's name columns hold this many characters."""


def _positive(value: Any, where: str) -> float:
    number = _number(value, where)
    if not 0 < number <= MAX_VALUE:
        raise PlanError(f"{where} must be > 0 and at most {MAX_VALUE:g}, got {value!r}")
    if number < MIN_VALUE:
        raise PlanError(f"{where} must be > 0 and at least {MIN_VALUE:g}, got {value!r}")
    return number


def _name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        shown = repr(name) if len(repr(name)) <= 60 else f"{repr(name)[:50]}… ({len(str(name))} characters)"
        raise PlanError(f"{what} {shown}: a name must be a non-empty string of at most {MAX_NAME} characters")
    return name


def _positive_int(value: Any, where: str) -> int:
    number = _positive(value, where)
    if number != int(number):
        raise PlanError(f"{where} must be a whole number ≥ 1, got {value!r}")
    return int(number)


def _selectivity(value: Any, where: str) -> float:
    number = _number(value, where)
    if not 0 < number <= 1:
        raise PlanError(f"{where} must be in (0, 1], got {value!r}")
    return number


def _heralds(value: Any, where: str) -> HeraldEffect:
    if not isinstance(value, dict):
        raise PlanError(f"{where} must be an object with skip (in [0, 1]) and optionally partition and overhead, got {value!r}")
    unknown = set(value) - {"skip", "partition", "overhead"}
    if unknown:
        raise PlanError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: skip, partition, overhead")
    if "skip" not in value:
        raise PlanError(f"{where}: missing skip (the fraction of evaluation work heralds skip, in [0, 1])")
    skip = _number(value["skip"], f"{where}: skip")
    if not 0 <= skip <= 1:
        raise PlanError(f"{where}: skip must be in [0, 1], got {value['skip']!r}")
    partition = _positive(value["partition"], f"{where}: partition") if "partition" in value else DEFAULT_PARTITION
    if partition < 1:
        raise PlanError(f"{where}: partition is tuples per herald, at least 1, got {value['partition']!r}")
    overhead = DEFAULT_OVERHEAD
    if "overhead" in value:
        overhead = _number(value["overhead"], f"{where}: overhead")
        if not 0 <= overhead <= MAX_VALUE:
            raise PlanError(f"{where}: overhead must be in [0, {MAX_VALUE:g}] predicate evaluations, got {value['overhead']!r}")
    return HeraldEffect(skip, partition, overhead)


def _groups(value: Any, where: str) -> dict[str, Any]:
    """A constant group count, or the per-window model {"base": n₀, "growth": new groups per time unit}."""
    if not isinstance(value, Mapping):
        return {"groups": _positive_int(value, where)}
    if set(value) != {"base", "growth"}:
        raise PlanError(f"{where}: a whole number ≥ 1, or {{\"base\": n, \"growth\": g}} (groups in a window "
                        f"of size w: base + growth·w), got keys {sorted(value)}")
    base, growth = (_number(value[key], f"{where}.{key}") for key in ("base", "growth"))
    if not (0 <= base <= MAX_VALUE and 0 <= growth <= MAX_VALUE) or base + growth <= 0:
        raise PlanError(f"{where}: base and growth must be numbers in [0, {MAX_VALUE:g}], not both 0; "
                        f"got {base!r} and {growth!r}")
    return {"groups": base, "group_growth": growth}


class _Builder:
    """Walks the query trees, assigns ids, resolves refs and orders the DAG."""

    def __init__(self, streams: dict[str, StreamSpec], constants: CostConstants) -> None:
        self.streams = streams
        self.constants = constants
        self.raw: dict[str, tuple[Mapping[str, Any], list[Any]]] = {}
        self.nodes: dict[str, Node] = {}

    def build(self, queries: Any) -> PlanSet:
        if not isinstance(queries, Mapping) or not queries:
            raise PlanError("'queries' must be a non-empty object of query name → operator node")
        roots = {}
        for name, tree in queries.items():
            _name(name, "query")
            roots[name] = self._collect(tree, str(name), f"query {name!r}")
        order: list[str] = []
        state: dict[str, str] = {}
        for name, root in roots.items():
            self._visit(root, state, order, [], f"query {name!r}")
        nodes: dict[str, Node] = {}
        granularity: dict[str, float] = {}
        for node_id in order:
            node = nodes[node_id] = self._node(node_id)
            granularity[node_id] = self._granularity(node, granularity)
        return PlanSet(self.streams, self.constants, nodes, roots, granularity)

    def _granularity(self, node: Node, known: dict[str, float]) -> float:
        """The granularity of a node's output; enforces §3.3.2's equal-granularity rule."""
        where = f"node {node.id!r} ({node.op})"
        if node.op == "source":
            return self.streams[node.stream].g
        first = known[node.inputs[0]]
        others = sorted({known[i] for i in node.inputs} - {first})
        if others:
            listed = ", ".join(f"{known[i]:g} ({i})" for i in node.inputs)
            raise PlanError(
                f"{where}: inputs have different granularities {listed}; all inputs of a {node.op} need the "
                "same g: put a granularity operator on the finer inputs"
            )
        if node.op == "granularity":
            multiple = node.g / first
            if abs(multiple - round(multiple)) > GRANULARITY_TOLERANCE * multiple or round(multiple) < 1:
                raise PlanError(
                    f"{where}: g={node.g:g} is not a coarser granularity of its input (g={first:g}); "
                    f"allowed: a whole multiple of {first:g}"
                )
            return node.g
        return first

    def _collect(self, raw: Any, auto_id: str, where: str) -> str:
        """Record a node (and its inputs) under its id; return the id it is known by."""
        if not isinstance(raw, Mapping):
            raise PlanError(f"{where}: a node must be an object with 'op' (or 'ref'), got {raw!r}")
        if "ref" in raw:
            if set(raw) != {"ref"}:
                raise PlanError(f"{where}: a reference is {{\"ref\": id}} and nothing else")
            if not isinstance(raw["ref"], str):
                raise PlanError(f"{where}: ref must be the id of a named node, got {raw['ref']!r}")
            return raw["ref"]
        node_id = raw.get("id", auto_id)
        if not isinstance(node_id, str) or not node_id:
            raise PlanError(f"{where}: id must be a non-empty string, got {node_id!r}")
        _name(node_id, f"{where}: node id")
        where = f"node {node_id!r}"
        if node_id in self.raw:
            raise PlanError(
                f"{where}: id used twice (explicitly, or as the automatic id of an unnamed node); "
                f"ids must be unique — to share a node, write {{\"ref\": \"{node_id}\"}}"
            )
        inputs = raw.get("inputs", [])
        if not isinstance(inputs, list):
            raise PlanError(f"{where}: inputs must be a list of nodes")
        self.raw[node_id] = (raw, [])
        for position, child in enumerate(inputs):
            self.raw[node_id][1].append(self._collect(child, f"{node_id}.{position}", f"{where} input {position}"))
        return node_id

    def _visit(self, node_id: str, state: dict[str, str], order: list[str], path: list[str], query: str) -> None:
        if node_id not in self.raw:
            where = f"reference from node {path[-1]!r}" if path else f"{query} (its root)"
            raise PlanError(f"{where}: no node has id {node_id!r}")
        if state.get(node_id) == "done":
            return
        if state.get(node_id) == "active":
            cycle = " → ".join(path[path.index(node_id):] + [node_id])
            raise PlanError(f"node {node_id!r}: the plan has a cycle ({cycle}); a plan must be acyclic")
        state[node_id] = "active"
        for child in self.raw[node_id][1]:
            self._visit(child, state, order, path + [node_id], query)
        state[node_id] = "done"
        order.append(node_id)

    def _node(self, node_id: str) -> Node:
        raw, inputs = self.raw[node_id]
        where = f"node {node_id!r}"
        op = raw.get("op")
        if op not in OPERATORS:
            raise PlanError(f"{where}: unknown operator {op!r}; allowed: {', '.join(OPERATORS)}")
        where = f"node {node_id!r} ({op})"
        allowed = OPERATORS[op]
        unknown = set(raw) - NODE_KEYS - allowed
        if unknown:
            names = ", ".join(sorted(allowed)) or "none"
            raise PlanError(f"{where}: unknown parameter(s) {sorted(unknown)}; allowed parameters: {names}")
        arity = {"source": (0, 0), "union": (2, None), "join": (2, 2)}.get(op, (1, 1))
        low, high = arity
        if len(inputs) < low or (high is not None and len(inputs) > high):
            wanted = {(0, 0): "no inputs", (2, None): "two or more inputs", (2, 2): "exactly two inputs"}.get(
                arity, "exactly one input"
            )
            raise PlanError(f"{where}: takes {wanted}, got {len(inputs)}")
        fields: dict[str, Any] = {}
        if op == "source":
            if "stream" not in raw:
                raise PlanError(f"{where}: missing stream; declared streams: {', '.join(map(str, self.streams))}")
            stream = raw.get("stream")
            if stream not in self.streams:
                raise PlanError(
                    f"{where}: unknown stream {stream!r}; declared streams: {', '.join(map(str, self.streams))}"
                )
            fields["stream"] = stream
        elif op == "window":
            if ("w" in raw) == ("c" in raw):
                raise PlanError(f"{where}: give exactly one of w (time-based size > 0) or c (tuple count ≥ 1)")
            if "w" in raw:
                fields["w"] = _positive(raw["w"], f"{where}: w")
            else:
                fields["c"] = float(_positive_int(raw["c"], f"{where}: c"))
        elif op == "granularity":
            if "g" not in raw:
                raise PlanError(f"{where}: missing g (the new granularity, a number > 0)")
            fields["g"] = _positive(raw["g"], f"{where}: g")
        elif op in ("select", "join"):
            if "sel" not in raw:
                raise PlanError(f"{where}: missing sel (selectivity in (0, 1])")
            fields["sel"] = _selectivity(raw["sel"], f"{where}: sel")
        if op in ("select", "join") and "heralds" in raw:
            fields["heralds"] = _heralds(raw["heralds"], f"{where}: heralds")
        if op == "join":
            kind = raw.get("kind", "hash")
            if kind not in JOIN_KINDS:
                raise PlanError(f"{where}: kind must be one of {', '.join(JOIN_KINDS)}, got {kind!r}")
            fields["kind"] = kind
            if "buckets" in raw:
                fields["buckets"] = self._buckets(raw["buckets"], where)
        if op == "aggregate" and "groups" in raw:
            fields.update(_groups(raw["groups"], f"{where}: groups"))
        if "size" in raw:
            fields["size"] = _positive(raw["size"], f"{where}: size")
        return Node(node_id, op, tuple(inputs), **fields)

    @staticmethod
    def _buckets(value: Any, where: str) -> tuple[float, float]:
        if isinstance(value, list):
            if len(value) != 2:
                raise PlanError(f"{where}: buckets is one count or a list of two (left, right), got {value!r}")
            left, right = value
        else:
            left = right = value
        return (
            float(_positive_int(left, f"{where}: buckets")),
            float(_positive_int(right, f"{where}: buckets")),
        )
