"""Counting rows around filters, joins and aggregations with ``DataFrame.observe``.

Spark's progress events say how many rows each source read and how much
state each stateful operator holds, but not how selective a filter or a
join is, nor how many groups an aggregation sees. ``observe(name, …)``
attaches named aggregate metrics to a plan that Spark computes per
micro-batch and reports in the progress event (``observedMetrics``). These
helpers wrap a plan node in such observations with names armd can parse
back (``armd:KIND:NODE:ROLE``, the node being the plan node id of the cost
model), and ``SparkStats`` turns them into selectivities and group counts.
Names must be unique within a query: use each node id once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

PREFIX = "armd"


@dataclass(frozen=True)
class ObservedName:
    kind: str
    """``filter``, ``join``, ``groups``, ``count`` or ``pairs`` (a JISC join's own counts, ``jisc.jisc_join``)."""
    node: str
    role: str
    """``in``/``out`` (filter), ``left``/``right``/``out`` (join), ``in`` (groups), any (count), ``tuples`` (pairs)."""
    param: float | None = None
    """Join, pairs: the sum of both sides' validity (l1 + l2) in seconds, when given."""


def observation_name(kind: str, node: str, role: str, param: float | None = None) -> str:
    if ":" in node:
        raise ValueError(f"plan node id {node!r} must not contain ':' to be observed")
    return f"{PREFIX}:{kind}:{node}:{role}" + (f":{param!r}" if param is not None else "")


def parse_observation_name(name: str) -> ObservedName | None:
    """The parts of an armd observation name, or None for other observations."""
    parts = name.split(":")
    if len(parts) not in (4, 5) or parts[0] != PREFIX:
        return None
    param = None
    if len(parts) == 5:
        try:
            param = float(parts[4])
        except ValueError:
            return None
    return ObservedName(parts[1], parts[2], parts[3], param)


def observed_count(df: DataFrame, node: str, role: str = "out") -> DataFrame:
    """``df`` with its row count per batch observed as ``armd:count:NODE:ROLE``."""
    return df.observe(observation_name("count", node, role), F.count(F.lit(1)).alias("rows"))


def observed_filter(df: DataFrame, node: str, condition: Column | str) -> DataFrame:
    """``df.filter(condition)`` with rows before and after counted: selectivity = out / in."""
    before = df.observe(observation_name("filter", node, "in"), F.count(F.lit(1)).alias("rows"))
    return before.filter(condition).observe(observation_name("filter", node, "out"), F.count(F.lit(1)).alias("rows"))


def observed_join(
    left: DataFrame,
    right: DataFrame,
    node: str,
    on: Any,
    how: str = "inner",
    *,
    validity_seconds: float | None = None,
) -> DataFrame:
    """``left.join(right, on, how)`` with both inputs and the output counted.

    With ``validity_seconds`` = l1 + l2 (how long an element of each side
    can find partners, e.g. the two sides' window sizes), ``SparkStats``
    reports the paper's join selectivity sel = out·T / ((l1 + l2)·left·right)
    over an interval of event-time length T (formula 4 solved for sel).
    """
    counted_left = left.observe(observation_name("join", node, "left"), F.count(F.lit(1)).alias("rows"))
    counted_right = right.observe(observation_name("join", node, "right"), F.count(F.lit(1)).alias("rows"))
    joined = counted_left.join(counted_right, on, how)
    return joined.observe(observation_name("join", node, "out", validity_seconds), F.count(F.lit(1)).alias("rows"))


def observed_groups(df: DataFrame, node: str, *keys: str | Column) -> DataFrame:
    """``df`` with its rows, (approximate) distinct grouping keys and a key sketch per batch observed, before an aggregation.

    The sketch (``hll_sketch_agg``) lets ``SparkStats`` merge batches and fit the group model n(w), as for the
    aggregations armd instruments itself (``instrument.py``).
    """
    if not keys:
        raise ValueError(f"observed_groups({node!r}): give the grouping key column(s)")
    key = F.hash(*[F.col(k) if isinstance(k, str) else k for k in keys])
    return df.observe(
        observation_name("groups", node, "in"),
        F.count(F.lit(1)).alias("rows"),
        F.approx_count_distinct(key).alias("groups"),
        F.hll_sketch_agg(key).alias("sketch"),
    )
