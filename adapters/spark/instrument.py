"""armd's measurements inserted into a query's plan, so that users write no ``observe()``.

Why in the plan: the model needs, per filter and join, rows in and out, and
per aggregation the distinct keys over spans of event time (for the group
model of ``costmodel/inputs.py``). Spark computes such per-batch aggregates
for ``Dataset.observe`` as a ``CollectMetrics`` node and reports them in the
progress event. Asking users to wrap their operators (``observed.py``) is
error-prone and was never done for groups that drift; instead armd reads
the analyzed logical plan through the JVM and rebuilds it with
``CollectMetrics`` nodes around the operators it measures:

* ``Filter`` (not the null checks Spark adds for time windows) and
  ``Deduplicate``/``DeduplicateWithinWatermark``: rows in and out
  (``armd:filter:LABEL:in|out``);
* a streaming ``Join``: rows of each side and out (``armd:join:LABEL:…``);
* ``Aggregate``: below it, an HLL sketch (``hll_sketch_agg``) of its
  grouping keys without the time window (``armd:groups:LABEL:in``);
  sketches of consecutive batches merge, so one run measures the distinct
  keys over 1, 2, … batch spans. No row count beside it: nothing reads one
  (``SparkStats`` takes the sketch; the plan derivation only the probe's
  name), and each metric is one more aggregate per batch in the driver. An
  aggregation by the time window alone gets the row count only (a
  ``CollectMetrics`` needs a metric; the derivation needs the name).

The rebuilt tree keeps every attribute (same expression ids), so the parent
operators resolve unchanged; Spark re-analyses it as one plan. Nodes a
builder already observed by hand (``observed.py``) are left as they are and
keep the builder's label. Labels are the operator kind and its number in
pre-order from the root (``agg1``, ``f2``, ``j1``, ``dd1``); the plan
derivation reads observation names as its node labels, so derived node ids
and measurements meet. ``stateful`` lists the labels of the stateful
operators in pre-order, which is the order of ``stateOperators`` in Spark's
progress (the physical plan collected root first), so each state operator's
bytes per row is known by its node. Anything unexpected leaves the query
uninstrumented (``error`` says why) rather than failing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .observed import observation_name, parse_observation_name

__all__ = ["Instrumented", "instrument"]

STATEFUL = {"Aggregate": "agg", "Join": "j", "Deduplicate": "dd", "DeduplicateWithinWatermark": "dd"}
LABELS = {**STATEFUL, "Filter": "f"}


@dataclass
class Instrumented:
    """An instrumented DataFrame and what was inserted."""

    frame: DataFrame
    probes: dict[str, str] = field(default_factory=dict)
    """Label → the Spark operator it measures (e.g. ``"agg1": "Aggregate"``)."""
    stateful: list[str] = field(default_factory=list)
    """Labels of the stateful operators in pre-order (the order of ``stateOperators`` in progress)."""
    error: str | None = None
    """Why the query was left uninstrumented (None: it was instrumented)."""


def instrument(df: DataFrame) -> Instrumented:
    """``df`` with armd's ``CollectMetrics`` inserted (see the module docstring); on failure ``df`` itself."""
    try:
        return _Rewriter(df).run()
    except Exception as exc:  # noqa: BLE001 - a plan armd cannot instrument still runs, unmeasured
        return Instrumented(df, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")


class _Rewriter:
    def __init__(self, df: DataFrame) -> None:
        self.df = df
        self.spark = df.sparkSession
        self.jvm = self.spark._jvm
        self.counts: dict[str, int] = {}
        self.result = Instrumented(df)

    # --- py4j plumbing ---

    def _seq(self, items: list[Any]) -> Any:
        values = self.jvm.java.util.ArrayList()
        for item in items:
            values.add(item)
        return self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(values).toSeq()

    @staticmethod
    def _list(seq: Any) -> list[Any]:
        return [seq.apply(i) for i in range(seq.size())]

    def _frame(self, plan: Any) -> DataFrame:
        return DataFrame(self.jvm.org.apache.spark.sql.classic.Dataset.ofRows(self.spark._jsparkSession, plan), self.spark)

    def _column(self, expression: Any) -> Column:
        return Column(self.jvm.org.apache.spark.sql.classic.ExpressionUtils.column(expression))

    def _observe(self, plan: Any, kind: str, label: str, role: str, *metrics: Column) -> Any:
        """``plan`` under a ``CollectMetrics`` named ``armd:KIND:LABEL:ROLE`` (``metrics``; the rows when none given)."""
        observed = self._frame(plan).observe(observation_name(kind, label, role), *(metrics or (F.count(F.lit(1)).alias("rows"),)))
        return observed._jdf.logicalPlan()

    # --- the walk ---

    def run(self) -> Instrumented:
        plan = self.df._jdf.queryExecution().analyzed()
        new, changed = self._visit(plan, None)
        if changed:
            self.result.frame = self._frame(new)
        return self.result

    def _label(self, op: str, given: str | None) -> str:
        if given:
            return given
        prefix = LABELS[op]
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        return f"{prefix}{self.counts[prefix]}"

    def _visit(self, plan: Any, given: str | None) -> tuple[Any, bool]:
        """(the node rebuilt with its subtree instrumented, whether anything changed)."""
        op = plan.nodeName()
        streaming = bool(plan.isStreaming())
        hand = self._hand_observed(plan)
        if op == "CollectMetrics":
            return self._children(plan, hand)
        if not streaming or op not in LABELS or (op == "Filter" and self._spark_added(plan)) or (
                op == "Join" and not all(c.isStreaming() for c in self._list(plan.children()))):  # stream-static: not modelled
            return self._children(plan, None)
        label = self._label(op, given)
        if op in STATEFUL:
            self.result.stateful.append(label)
        self.result.probes[label] = op
        children = self._list(plan.children())
        if given:  # observed by hand: keep the builder's observations, only note the label
            return self._children(plan, None)
        existing = self._hand_groups(children[0]) if op == "Aggregate" else None
        if existing is not None:  # observed_groups by hand, below the window's projection
            self.result.probes[existing] = self.result.probes.pop(label)
            self.result.stateful[-1] = existing
            return self._children(plan, None)
        rebuilt = [self._visit(child, None)[0] for child in children]
        if op == "Aggregate":
            keys = [e for e in self._list(plan.groupingExpressions()) if not self._is_window(e)]
            metrics = [F.hll_sketch_agg(F.hash(*[self._column(k) for k in keys])).alias("sketch")] if keys else []
            rebuilt = [self._observe(rebuilt[0], "groups", label, "in", *metrics)]
            return plan.withNewChildren(self._seq(rebuilt)), True
        if op == "Join":
            rebuilt = [self._observe(rebuilt[0], "join", label, "left"), self._observe(rebuilt[1], "join", label, "right")]
            return self._observe(plan.withNewChildren(self._seq(rebuilt)), "join", label, "out"), True
        # filters and deduplications: rows in and out
        rebuilt = [self._observe(rebuilt[0], "filter", label, "in")]
        return self._observe(plan.withNewChildren(self._seq(rebuilt)), "filter", label, "out"), True

    def _children(self, plan: Any, given: str | None) -> tuple[Any, bool]:
        children = self._list(plan.children())
        visited = [self._visit(child, given) for child in children]
        if not any(changed for _, changed in visited):
            return plan, False
        return plan.withNewChildren(self._seq([new for new, _ in visited])), True

    @staticmethod
    def _hand_observed(plan: Any) -> str | None:
        """The label of a builder's own ``armd:join|filter:LABEL:out`` observation over a node, if ``plan`` is one."""
        if plan.nodeName() != "CollectMetrics":
            return None
        parsed = parse_observation_name(str(plan.name()))
        if parsed is None or parsed.role != "out" or parsed.kind not in ("join", "filter"):
            return None
        return parsed.node

    @staticmethod
    def _hand_groups(plan: Any) -> str | None:
        """The label of a builder's ``observed_groups`` under an aggregate (through the time window's nodes)."""
        for _ in range(4):
            if plan.nodeName() == "CollectMetrics":
                parsed = parse_observation_name(str(plan.name()))
                return parsed.node if parsed is not None and parsed.kind == "groups" else None
            if plan.nodeName() not in ("Filter", "Expand", "Project") or plan.children().size() != 1:
                return None
            plan = plan.children().apply(0)
        return None

    @staticmethod
    def _is_window(expression: Any) -> bool:
        """A time window (or session window) grouping column: a struct of start and end."""
        data_type = expression.dataType()
        if data_type.typeName() != "struct":
            return False
        return sorted(str(name) for name in data_type.fieldNames()) == ["end", "start"]

    @staticmethod
    def _spark_added(plan: Any) -> bool:
        """The null check of the event time Spark puts above a time window's projection: nothing to measure."""
        return plan.condition().nodeName() == "IsNotNull" and plan.child().nodeName() in ("Expand", "Project")
