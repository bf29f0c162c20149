"""The rules that turn Spark's analyzed logical plan into a cost-model query tree (docs/spark-mapping.md).

Pure: the input is the plan tree of ``catalyst.py`` with what py4j added
(source names, watermark delays); the output is one query of the plan
format (docs/plan-format.md) plus, per model node, the Spark operators it
came from. A plan node is mapped by a whitelist: anything not named here is
an unsupported operator and raises ``DerivationError`` with one line naming
it — a model that silently skipped a stateful operator would steer the
query on a wrong estimate.

Parameters Spark's plan cannot know (group counts, selectivities, rates,
bytes per element) get a default and are listed in ``measured``: the
daemon's measured statistics replace them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalyst import MICROS, Expr, PlanNode, attribute_names, common_defs, comparisons, time_offset, window_struct

SUPPORTED = ("streaming sources, withWatermark, window() (tumbling and sliding), filter/where, select/withColumn, "
             "groupBy().agg(), stream-stream joins with an event-time range, dropDuplicates, "
             "dropDuplicatesWithinWatermark, union, observe")
TRANSPARENT = ("SubqueryAlias", "Repartition", "RepartitionByExpression", "ResolvedHint", "Project")
SOURCES = ("StreamingRelationV2", "StreamingRelation", "StreamingExecutionRelation", "StreamingDataSourceV2Relation",
           "StreamingDataSourceV2ScanRelation")
JOIN_TYPES = {"Inner": "inner", "LeftOuter": "left outer", "RightOuter": "right outer", "FullOuter": "full outer",
              "LeftSemi": "left semi"}
UNSUPPORTED_HINTS = {
    "FlatMapGroupsWithState": "arbitrary stateful processing (mapGroupsWithState/flatMapGroupsWithState)",
    "FlatMapGroupsInPandasWithState": "arbitrary stateful processing (applyInPandasWithState)",
    "TransformWithState": "arbitrary stateful processing (transformWithState)",
    "TransformWithStateInPySpark": "arbitrary stateful processing (transformWithStateInPandas)",
    "TransformWithStateInPandas": "arbitrary stateful processing (transformWithStateInPandas)",
    "Generate": "explode/generators (they change the row count by a factor armd cannot model)",
}


class DerivationError(ValueError):
    """A streaming query armd cannot map onto its cost model; the message is one line naming the operator."""


@dataclass
class TimeColumn:
    streams: tuple[str, ...]
    delay_seconds: float | None


@dataclass
class Out:
    """A derived subtree: its model node and what the operators above it need to know."""

    node: dict[str, Any]
    times: dict[int, TimeColumn] = field(default_factory=dict)
    """Event-time attributes (exprId) visible at this point."""
    streams: tuple[str, ...] = ()
    groups_label: str | None = None
    """The node name of an ``observe`` group count right below (it names the aggregation above)."""
    has_join: bool = False


@dataclass
class Rules:
    """One derivation: call ``query(root)``; the findings accumulate in the fields."""

    time_unit_seconds: float = 1.0
    delays: dict[str, float] = field(default_factory=dict)
    """Watermark delay (seconds) per stream."""
    windows: list[list[dict[str, Any]]] = field(default_factory=list)
    """The model nodes of each time window in plan order: [window, granularity] or a join's [left, right]."""
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Stream name → what py4j said of its relation (format, options)."""

    def units(self, micros: int) -> float:
        return micros / MICROS / self.time_unit_seconds

    def query(self, root: PlanNode) -> dict[str, Any]:
        return self.derive(root).node

    # ---- the walk -------------------------------------------------------------------------------------------

    def derive(self, plan: PlanNode) -> Out:
        handler = getattr(self, f"_{plan.cls}", None)
        if plan.cls in SOURCES:
            return self._source(plan)
        if handler is not None:
            return handler(plan)
        if plan.cls in TRANSPARENT:
            return self._transparent(plan)
        what = UNSUPPORTED_HINTS.get(plan.cls, "")
        raise DerivationError(f"unsupported operator {plan.cls}{f' ({what})' if what else ''}; supported: {SUPPORTED}")

    def _only_child(self, plan: PlanNode) -> Out:
        if len(plan.children) != 1:
            raise DerivationError(f"operator {plan.cls} with {len(plan.children)} inputs is not supported; supported: {SUPPORTED}")
        return self.derive(plan.children[0])

    @staticmethod
    def _spark(node: dict[str, Any], text: str) -> None:
        node.setdefault("_spark", []).append(text)

    def _source(self, plan: PlanNode) -> Out:
        stream = plan.jvm.get("stream")
        if not stream:
            raise DerivationError(f"a streaming relation without a name ({plan.cls}); give the query's streams")
        self.sources.setdefault(stream, plan.jvm)
        node = {"op": "source", "stream": stream, "_label": stream}
        self._spark(node, f"{plan.cls} {plan.jvm.get('describe', stream)}")
        return Out(node, streams=(stream,))

    def _transparent(self, plan: PlanNode) -> Out:
        if plan.cls == "Project":
            found = [window_struct(e) for e in plan.expressions("projectList")]
            if "session" in found:
                raise DerivationError(f"unsupported operator session_window (a session window); supported: {SUPPORTED}")
            windows = [w for w in found if w is not None and w != "session"]
            if windows:
                return self._window(plan, windows[0])
        out = self._only_child(plan)
        if plan.cls == "Project":
            out.times = self._aliases(plan.expressions("projectList"), out.times)
            self._spark(out.node, f"Project [{', '.join(attribute_names(plan.expressions('projectList')))}]")
        return out

    @staticmethod
    def _aliases(exprs: list[Expr], times: dict[int, TimeColumn]) -> dict[int, TimeColumn]:
        """Event-time attributes after a projection: kept ones and renamed ones (an alias of one)."""
        kept: dict[int, TimeColumn] = {}
        for e in exprs:
            if e.cls == "AttributeReference" and e.expr_id in times:
                kept[e.expr_id] = times[e.expr_id]
            elif e.cls == "Alias" and e.children and e.children[0].cls == "AttributeReference" \
                    and e.children[0].expr_id in times and e.expr_id is not None:
                kept[e.expr_id] = times[e.children[0].expr_id]
        return kept

    def _EventTimeWatermark(self, plan: PlanNode) -> Out:
        out = self._only_child(plan)
        delay = float(plan.jvm.get("delay_seconds", 0.0))
        time_attr = plan.expressions("eventTime")
        for stream in out.streams:
            self.delays[stream] = max(delay, self.delays.get(stream, 0.0))
        if time_attr and time_attr[0].expr_id is not None:
            out.times = {**out.times, time_attr[0].expr_id: TimeColumn(out.streams, delay)}
        name = time_attr[0].name if time_attr else "?"
        self._spark(out.node, f"EventTimeWatermark {name}, {delay:g} s")
        return out

    def _CollectMetrics(self, plan: PlanNode) -> Out:
        out = self._only_child(plan)
        name = str(plan.fields.get("name", ""))
        parts = name.split(":")
        if len(parts) >= 4 and parts[0] == "armd":
            kind, label, role = parts[1], parts[2], parts[3]
            if kind == "groups":
                out.groups_label = label
            elif role == "out" and out.node.get("op") in ("select", "join") and "_name" not in out.node:
                out.node["_label"] = out.node["_name"] = label
        self._spark(out.node, f"CollectMetrics {name}")
        return out

    def _Filter(self, plan: PlanNode) -> Out:
        out = self._only_child(plan)
        condition = plan.expressions("condition")
        if condition and condition[0].cls == "IsNotNull" and condition[0].children \
                and condition[0].children[0].expr_id in out.times:
            self._spark(out.node, "Filter isnotnull(event time) (part of window())")
            return out  # Spark adds it in front of every time window
        node = {"op": "select", "sel": 1.0, "inputs": [out.node], "_label": "f", "_measured": "sel"}
        self._spark(node, f"Filter {condition[0].cls if condition else ''}".rstrip())
        return Out(node, out.times, out.streams, out.groups_label, out.has_join)

    def _Expand(self, plan: PlanNode) -> Out:
        projections = plan.fields.get("projections") or []
        first = projections[0] if projections else []
        found = [window_struct(e) for e in (first if isinstance(first, list) else [first]) if isinstance(e, Expr)]
        windows = [w for w in found if w is not None and w != "session"]
        if not windows:
            raise DerivationError(f"unsupported operator Expand (only the one window() creates is); supported: {SUPPORTED}")
        return self._window(plan, windows[0])

    def _window(self, plan: PlanNode, found: Any) -> Out:
        below = plan.children[0] if len(plan.children) == 1 else None
        condition = below.expressions("condition") if below is not None and below.cls == "Filter" else []
        if condition and condition[0].cls == "IsNotNull":
            out = self._only_child(below)  # Spark's own isnotnull(time) in front of window()
            self._spark(out.node, "Filter isnotnull(time) (part of window())")
        else:
            out = self._only_child(plan)
        w, g = self.units(found.size), self.units(found.slide)
        window = {"op": "window", "w": w, "inputs": [out.node], "_label": "w"}
        granular = {"op": "granularity", "g": g, "inputs": [window], "_of": window}
        kind = "tumbling" if found.size == found.slide else "sliding"
        self._spark(window, f"{plan.cls} window({found.size / MICROS:g} s, {found.slide / MICROS:g} s) ({kind})")
        self._spark(granular, f"{plan.cls} window slide {found.slide / MICROS:g} s")
        self.windows.append([window, granular])
        return Out(granular, out.times, out.streams, out.groups_label, out.has_join)

    def _Aggregate(self, plan: PlanNode) -> Out:
        out = self._only_child(plan)
        keys = [e for e in plan.expressions("groupingExpressions")]
        names = [n for n in attribute_names(keys) if n != "window"]
        node: dict[str, Any] = {"op": "aggregate", "inputs": [out.node], "_label": out.groups_label or "agg",
                                "_keys": names}
        if out.groups_label:
            node["_name"] = out.groups_label
        if names:
            node["groups"] = 1
            node["_measured"] = "groups"
        self._spark(node, f"Aggregate [{', '.join(attribute_names(keys))}]")
        # a window's results are timed by their window (window_time() of a chained aggregation)
        times = {k.expr_id: TimeColumn(out.streams, None) for k in keys if k.name == "window" and k.expr_id is not None}
        return Out(node, times, out.streams, None, out.has_join)

    def _Deduplicate(self, plan: PlanNode) -> Out:
        return self._dedup(plan)

    def _DeduplicateWithinWatermark(self, plan: PlanNode) -> Out:
        return self._dedup(plan)

    def _Distinct(self, plan: PlanNode) -> Out:
        return self._dedup(plan)

    def _dedup(self, plan: PlanNode) -> Out:
        out = self._only_child(plan)
        node = {"op": "select", "sel": 1.0, "inputs": [out.node], "_label": "dedup", "_measured": "sel"}
        keys = attribute_names(plan.expressions("keys"))
        self._spark(node, f"{plan.cls} [{', '.join(keys)}]")
        return Out(node, out.times, out.streams, out.groups_label, out.has_join)

    def _Union(self, plan: PlanNode) -> Out:
        outs = [self.derive(child) for child in plan.children]
        node = {"op": "union", "inputs": [o.node for o in outs], "_label": "u"}
        self._spark(node, f"Union of {len(outs)}")
        streams = tuple(dict.fromkeys(s for o in outs for s in o.streams))
        times: dict[int, TimeColumn] = {}
        for o in outs:
            times.update(o.times)
        # Union's output attributes are its first input's: a time column of that input stays one.
        return Out(node, times, streams, None, any(o.has_join for o in outs))

    def _Join(self, plan: PlanNode) -> Out:
        kind = plan.fields.get("joinType")
        kind_name = str(kind.get("object", "")).rsplit(".", 1)[-1].rstrip("$") if isinstance(kind, dict) else str(kind)
        if kind_name not in JOIN_TYPES:
            raise DerivationError(f"unsupported operator Join ({kind_name}); supported joins: "
                                  f"{', '.join(JOIN_TYPES.values())} between two streams with an event-time range")
        left, right = (self.derive(child) for child in plan.children)
        condition = plan.expressions("condition")
        lo, hi = self._range(condition[0] if condition else None, left, right)
        w_left, w_right = self.units(hi), self.units(-lo)
        inputs = []
        side_nodes = []
        for side, w, label in ((left, w_left, "left"), (right, w_right, "right")):
            if side.has_join:
                inputs.append(side.node)  # a join's results keep the validity the join gives them (paper 001)
                continue
            win = {"op": "window", "w": w, "inputs": [side.node], "_side": label}
            self._spark(win, f"Join range: {label} rows wait {w * self.time_unit_seconds:g} s for partners")
            inputs.append(win)
            side_nodes.append(win)
        node = {"op": "join", "sel": 1.0, "inputs": inputs, "_label": "j", "_measured": "sel"}
        for win in side_nodes:
            win["_join"] = node  # named after the join, whose name an observe() above may still give
        self._spark(node, f"Join {JOIN_TYPES[kind_name]}, t_right - t_left in [{lo / MICROS:g} s, {hi / MICROS:g} s]")
        if side_nodes:
            self.windows.append(side_nodes)
        times = {**left.times, **right.times}
        return Out(node, times, left.streams + tuple(s for s in right.streams if s not in left.streams), None, True)

    def _range(self, condition: Expr | None, left: Out, right: Out) -> tuple[int, int]:
        """Bounds (µs) of t_right − t_left from the join condition, for event-time columns of either side."""
        lo: int | None = None
        hi: int | None = None
        if condition is not None:
            defs = common_defs(condition)
            for a, op, b in comparisons(condition):
                x, y = time_offset(a, defs), time_offset(b, defs)
                if x is None or y is None:
                    continue
                # a op b with a = t_a + o_a, b = t_b + o_b
                if x[0] in right.times and y[0] in left.times:
                    delta, bound = "right-left", y[1] - x[1]  # t_r op t_l + (o_b - o_a)
                elif x[0] in left.times and y[0] in right.times:
                    delta, bound = "left-right", y[1] - x[1]  # t_l op t_r + (o_b - o_a)
                else:
                    continue
                greater = op in (">", ">=")
                if delta == "left-right":  # t_l >= t_r + c  ⇔  t_r - t_l <= -c
                    greater, bound = not greater, -bound
                if greater:
                    lo = bound if lo is None else max(lo, bound)
                else:
                    hi = bound if hi is None else min(hi, bound)
        if lo is None or hi is None:
            raise DerivationError("unsupported operator Join without an event-time range (a stream-stream join needs "
                                  "both bounds, e.g. r.t BETWEEN l.t - INTERVAL 5 SECONDS AND l.t + INTERVAL 5 SECONDS, "
                                  "on withWatermark columns of both sides)")
        if lo >= 0 or hi <= 0:
            raise DerivationError(f"unsupported join range t_right - t_left in [{lo / MICROS:g} s, {hi / MICROS:g} s]: "
                                  "the range must contain 0 (both sides wait for partners)")
        return lo, hi
