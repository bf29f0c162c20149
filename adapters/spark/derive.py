"""Plan derivation: the cost-model plan of a streaming DataFrame, read from Spark's own analyzed plan.

Writing a plan file by hand mirrors a query Spark already knows, and drifts
from it. Here the analyzed logical plan is read through the JVM
(``queryExecution().analyzed()``: its ``toJSON()`` for the tree and the
expressions, py4j for what the JSON leaves out — a source's format and
options, a watermark's delay) and mapped by ``derive_rules`` onto the
operators of docs/plan-format.md. No query needs to run.

Node ids are ``QUERY.LABEL``, so two managed queries never share a node
(Spark never shares state between queries, and the model must not either).
Labels come from the builder where it names them: ``observe`` names
(``observed_filter(df, params.node("f"), …)``) and the window names the
builder asks ``params`` for; ``Derivation.nodes`` maps those builder names
to the derived ids so the daemon can hand them back in ``params.extra``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .catalyst import plan_tree
from .derive_rules import DerivationError, Rules
from .managed import QueryParams, load_builder

__all__ = ["DerivationError", "Derivation", "derive", "derive_builder", "plan_document", "RecordingParams"]

DEFAULT_ROW_BYTES = 400.0
"""Bytes per element until measured (Spark's state rows are 350–570 bytes, docs/spark-mapping.md)."""
SOURCE_MS = 0.001
"""Spark's event time has millisecond granularity in practice: a stream's g (seconds)."""


@dataclass(frozen=True)
class Measured:
    """A parameter the plan carries a default for and the measured statistics replace."""

    where: str
    """A node id or ``stream:NAME``."""
    param: str
    default: float

    def as_json(self) -> dict[str, Any]:
        return {"where": self.where, "param": self.param, "default": self.default}


@dataclass
class Derivation:
    """One query's derived plan and where each of its nodes came from."""

    query: str
    root: dict[str, Any]
    """The query tree (plan-format nodes, ids ``QUERY.LABEL``)."""
    streams: dict[str, dict[str, Any]]
    """Stream declarations (plan format) of the sources the query reads."""
    operators: dict[str, list[str]]
    """Node id → the Spark operators it came from (for display)."""
    watermark_delays: dict[str, float]
    """Stream → watermark delay in seconds."""
    measured: list[Measured]
    nodes: dict[str, str]
    """Builder node name → derived node id (``params.extra["nodes"]``)."""
    trigger_seconds: float | None = None
    time_unit_seconds: float = 1.0
    sources: dict[str, str] = field(default_factory=dict)
    """Stream → a readable description of its Spark relation."""

    @property
    def document(self) -> dict[str, Any]:
        """This query alone as a plan document (docs/plan-format.md)."""
        return plan_document([self])

    def order(self) -> list[dict[str, Any]]:
        """The nodes of the tree, root first (pre-order)."""
        found: list[dict[str, Any]] = []

        def visit(node: dict[str, Any]) -> None:
            found.append(node)
            for child in node.get("inputs", []):
                visit(child)

        visit(self.root)
        return found


def plan_document(derivations: Sequence[Derivation]) -> dict[str, Any]:
    """The plan document of several derived queries: their streams, one set of constants, one tree each.

    The plan format has one watermark delay and one trigger interval (the
    ``spark`` profile's constants): with queries that differ, the largest is
    taken, which overestimates the others' state (docs/spark-mapping.md).
    """
    streams: dict[str, dict[str, Any]] = {}
    for d in derivations:
        for name, spec in d.streams.items():
            streams.setdefault(name, spec)
    unit = derivations[0].time_unit_seconds if derivations else 1.0
    delays = [v for d in derivations for v in d.watermark_delays.values()]
    triggers = [d.trigger_seconds for d in derivations if d.trigger_seconds]
    constants = {"aggregate_size": DEFAULT_ROW_BYTES, "watermark_delay": max(delays, default=0.0) / unit,
                 "trigger_interval": max(triggers, default=0.0) / unit}
    return {"streams": streams, "constants": constants, "queries": {d.query: d.root for d in derivations}}


class RecordingParams(QueryParams):
    """``QueryParams`` that remember which window names the builder asks for (in order), to name derived windows."""

    def window(self, node: str, default: float) -> float:
        asked = self.__dict__.setdefault("_asked", [])
        if node not in asked:
            asked.append(node)
        return super().window(node, default)

    def slide(self, node: str, default: float) -> float:
        asked = self.__dict__.setdefault("_asked", [])
        if node not in asked:
            asked.append(node)
        return super().slide(node, default)

    @property
    def asked(self) -> list[str]:
        return list(self.__dict__.get("_asked", []))


def derive_builder(spark: Any, builder: str, query: str, params: QueryParams | None = None, *,
                   trigger_seconds: float | None = None, time_unit_seconds: float = 1.0,
                   streams: Sequence[str] = (), instrumented: bool = True) -> Derivation:
    """Build ``builder(spark, params)`` (not started) and derive its plan; ``DerivationError`` if unsupported.

    ``instrumented``: derive the query as ``QueryManager`` runs it, with armd's
    measurements inserted (``instrument.py``), so node ids carry the labels
    the measurements arrive under (``QUERY.agg1``) and ``Derivation.nodes``
    maps each label to its id (``SparkStats.node_id``).
    """
    base = params or QueryParams()
    recording = RecordingParams(base.windows, base.slides, base.granularity, base.join_order, base.version, base.extra)
    df = load_builder(builder)(spark, recording)
    if instrumented:
        from .instrument import instrument

        df = instrument(df).frame  # a plan armd cannot instrument runs, and is derived, as built
    if trigger_seconds is None and base.extra.get("trigger_seconds") is not None:
        trigger_seconds = float(base.extra["trigger_seconds"])
    return derive(df, query, trigger_seconds=trigger_seconds, time_unit_seconds=time_unit_seconds, streams=streams,
                  window_names=recording.asked)


def derive(df: Any, query: str, *, trigger_seconds: float | None = None, time_unit_seconds: float = 1.0,
           streams: Sequence[str] = (), window_names: Sequence[str] = ()) -> Derivation:
    """The derivation of streaming DataFrame ``df`` as query ``query``.

    ``streams`` names the sources in Spark's order when their own names are
    not wanted; ``window_names`` are the builder's names of its time windows
    in the order it uses them (``RecordingParams.asked``).
    """
    if not getattr(df, "isStreaming", False):
        raise DerivationError(f"query {query!r}: not a streaming DataFrame (build it on spark.readStream)")
    analyzed = df._jdf.queryExecution().analyzed()
    tree = plan_tree(json.loads(analyzed.toJSON()))
    _annotate(tree, analyzed, df.sparkSession, list(streams))
    rules = Rules(time_unit_seconds=float(time_unit_seconds))
    root = rules.query(tree)
    return _finish(query, root, rules, list(window_names), trigger_seconds)


# ---- what py4j adds -----------------------------------------------------------------------------------------


def _annotate(tree: Any, analyzed: Any, spark: Any, names: list[str]) -> None:
    """Copy sources' names and watermarks' delays from the JVM plan onto the parsed tree (same pre-order)."""
    jvm_nodes: list[Any] = []

    def collect(node: Any) -> None:
        jvm_nodes.append(node)
        children = node.children()
        for i in range(children.size()):
            collect(children.apply(i))

    collect(analyzed)
    py_nodes = list(tree.walk())
    if len(py_nodes) != len(jvm_nodes):
        raise DerivationError(f"Spark's plan JSON has {len(py_nodes)} nodes and its tree {len(jvm_nodes)}; "
                              "this Spark version's plan cannot be read")
    relations: dict[str, str] = {}
    for py, jv in zip(py_nodes, jvm_nodes):
        if py.cls == "EventTimeWatermark":
            delay = jv.delay()
            from py4j.java_gateway import get_field

            months = get_field(delay, "months")
            if months:
                raise DerivationError("a watermark delay in months cannot be placed in event time; give it in days or less")
            micros = get_field(delay, "days") * 86_400_000_000 + get_field(delay, "microseconds")
            py.jvm["delay_seconds"] = micros / 1e6
        elif not py.children and py.cls.startswith("Streaming"):
            format_, options, table = _relation(jv)
            identity = json.dumps([format_, sorted(options.items()), table], default=str)
            if identity not in relations:
                relations[identity] = names.pop(0) if names else _stream_name(format_, options, table, set(relations.values()))
            stream = relations[identity]
            describe = f"{format_}" + (f" {table}" if table else "") + "".join(
                f" {k}={v}" for k, v in sorted(options.items()) if k in _NAMING_KEYS)
            py.jvm.update(stream=stream, format=format_, options=options, table=table, describe=describe)
        elif not py.children:
            raise DerivationError(f"unsupported operator {py.cls} (a static, non-streaming input: stream-static joins "
                                  "are not modelled); every input must come from spark.readStream")


_NAMING_KEYS = ("stream", "subscribe", "subscribePattern", "assign", "path", "rowsPerSecond", "rowsPerBatch")


def _relation(jv: Any) -> tuple[str, dict[str, str], str | None]:
    """Format, options and table name of a streaming relation (V1 ``StreamingRelation`` or V2)."""
    cls = jv.getClass().getSimpleName()
    options: dict[str, str] = {}
    table = None
    if cls == "StreamingRelation":
        source = jv.dataSource()
        format_ = str(source.className())
        it = source.options().iterator()
        while it.hasNext():
            pair = it.next()
            options[str(pair._1())] = str(pair._2())
        paths = source.paths()
        if not options.get("path") and paths.size() > 0:
            options["path"] = str(paths.apply(0))
    else:
        format_ = str(jv.sourceName())
        try:
            for k, v in dict(jv.extraOptions().asCaseSensitiveMap()).items():
                options[str(k)] = str(v)
        except Exception:  # py4j: relations without options
            pass
        try:
            if jv.catalogTable().isDefined():
                table = str(jv.catalogTable().get().identifier().unquotedString())
        except Exception:
            table = None
    return format_, options, table


def _stream_name(format_: str, options: Mapping[str, str], table: str | None, taken: set[str]) -> str:
    """A readable, stable stream name: the synthetic stream, the table, the Kafka topic, the path's last part or the format."""
    short = format_.rsplit(".", 1)[-1]
    if options.get("stream"):
        base = options["stream"]
    elif table:
        base = table
    elif options.get("subscribe") or options.get("assign") or options.get("subscribePattern"):
        base = (options.get("subscribe") or options.get("subscribePattern") or "kafka").split(",")[0]
    elif options.get("path"):
        base = options["path"].rstrip("/").rsplit("/", 1)[-1] or short
    else:
        base = short
    base = "".join(c if c.isalnum() or c in "_-" else "_" for c in base) or "stream"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def _rate_per_second(format_: str, options: Mapping[str, str]) -> float | None:
    """The source's own rate when its options say it (a default until measured)."""
    try:
        if format_ == "rate":
            return float(options.get("rowsPerSecond", 1))
        if options.get("schedule"):
            return float(json.loads(options["schedule"]).get("rate_per_second"))
    except (TypeError, ValueError, AttributeError):
        return None
    return None


# ---- ids, streams, measured placeholders --------------------------------------------------------------------


def _finish(query: str, root: dict[str, Any], rules: Rules, window_names: list[str],
            trigger_seconds: float | None) -> Derivation:
    names: dict[str, str] = {}
    for name, nodes in zip(window_names, rules.windows):
        nodes[0]["_label"] = nodes[0]["_name"] = name
        for other in nodes[1:]:
            other["_label"] = f"{name}.{'g' if other['op'] == 'granularity' else other.get('_side', 'right')}"
    taken: set[str] = set()
    operators: dict[str, list[str]] = {}
    measured: list[Measured] = []
    ids: dict[int, str] = {}

    def ident(node: dict[str, Any]) -> str:
        """A node's id: QUERY.LABEL, a join's window JOIN.left/right, a window's granularity WINDOW.g; unique."""
        if id(node) in ids:
            return ids[id(node)]
        if node.get("_label"):
            label = str(node["_label"])
            base = label if label.startswith(f"{query}.") else f"{query}.{label}"  # already an id (params.node mapped it)
        elif node.get("_join") is not None:
            base = f"{ident(node['_join'])}.{node['_side']}"
        elif node.get("_of") is not None:
            base = f"{ident(node['_of'])}.g"
        else:
            base = f"{query}.{node['op']}"
        node_id, n = base, 2
        while node_id in taken:
            node_id, n = f"{base}{n}", n + 1
        taken.add(node_id)
        ids[id(node)] = node_id
        return node_id

    def assign(node: dict[str, Any]) -> None:
        node_id = ident(node)
        for key in ("_join", "_side", "_of", "_label", "_keys"):
            node.pop(key, None)
        if node["op"] != "source":
            ordered = {"op": node.pop("op"), "id": node_id, **node}
            node.clear()
            node.update(ordered)
        operators[node_id] = node.pop("_spark", [])
        if "_name" in node:
            names[node.pop("_name")] = node_id
        if "_measured" in node:
            param = node.pop("_measured")
            measured.append(Measured(node_id, param, float(node[param])))
        for child in node.get("inputs", []):
            assign(child)

    assign(root)
    unit = rules.time_unit_seconds
    streams: dict[str, dict[str, Any]] = {}
    described: dict[str, str] = {}
    for name, info in rules.sources.items():
        rate = _rate_per_second(str(info.get("format", "")), info.get("options") or {}) or 1.0
        streams[name] = {"rate": rate * unit, "g": SOURCE_MS / unit, "size": DEFAULT_ROW_BYTES}
        measured += [Measured(f"stream:{name}", "rate", rate * unit), Measured(f"stream:{name}", "size", DEFAULT_ROW_BYTES)]
        described[name] = str(info.get("describe", name))
    return Derivation(query, root, streams, operators, dict(rules.delays), measured, names, trigger_seconds, unit,
                      described)
