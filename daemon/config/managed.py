"""Spark: the session settings and how each plan query runs on it (``[spark]``, ``[managed.NAME]``).

These sections are checked against the plan and against each other — every
plan query needs a builder, a JISC join needs the RocksDB state store and
keeps a fixed window — so that a configuration ``check-config`` accepts also
starts on Spark.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from armd.costmodel.plan import PlanSet
from armd.policies.join_order import join_tree
from armd.policies.qos import QueryQoS

from .errors import ConfigError, listing, show
from .keys import keys_of
from .reader import REQUIRED, Table
from .sections import JoinOrderConfig, ManagedQueryConfig, SinkConfig, SparkConfig


def read_spark(top: Table) -> SparkConfig:
    t = top.section("spark", SparkConfig)
    conf: dict[str, str] = {}

    def flatten(value: Any, key: tuple[str, ...]) -> None:
        # Unquoted dotted keys (spark.sql.shuffle.partitions = 4) arrive as nested tables.
        if isinstance(value, dict):
            for k, v in value.items():
                flatten(v, (*key, k))
            return
        name = ".".join(key)
        if name in conf:
            raise t.error(("conf", name), "given twice (quoted and as dotted keys); give it once")
        if isinstance(value, bool):
            conf[name] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            conf[name] = str(value)
        else:
            raise t.error(("conf", name), f"expected a string, number or boolean, got {show(value)}")

    for k, v in t.mapping("conf").items():
        flatten(v, (k,))
    return SparkConfig(**t.read(SparkConfig, conf=conf))


def read_managed(top: Table, plan: PlanSet, kind: str, spark: SparkConfig, derived: Any = None) -> dict[str, ManagedQueryConfig]:
    """``[managed.NAME]`` for every plan query with ``source.kind = "spark"``, none otherwise.

    With a derived plan (``derived``, daemon/config/derived.py) the builder's
    node names map to the derived ids, and a query that could not be derived
    is read too (it runs unmanaged)."""
    raw = top.mapping("managed")
    if kind != "spark":
        if raw:
            raise top.error(("managed",), f'only used with source.kind = "spark" (it is {kind!r}); '
                                          "remove [managed.*] or run on Spark")
        return {}
    missing = [q for q in plan.queries if q not in raw]
    if missing:
        raise top.error(("managed", missing[0]), 'missing; with source.kind = "spark" every plan query needs '
                        f'[managed.NAME] with builder = "module:function" (queries without one: {listing(missing)})')
    check_unshared(top, plan)
    unmanaged = set(derived.unmanaged) if derived is not None else set()
    found = {name: _managed_query(top, name, spec, plan, spark, unmanaged) for name, spec in raw.items()}
    if derived is not None:
        found = {name: replace(m, nodes={**derived.derivations[name].nodes, **m.nodes}) if name in derived.derivations else m
                 for name, m in found.items()}
    return found


def check_unshared(top: Table, plan: PlanSet) -> None:
    """Refuse a plan node shared (``{"ref": id}``) by two queries that Spark runs.

    Spark runs every managed query on its own plan and state: a sub-plan two
    of them share in the plan file is computed and held twice, so a model that
    counted it once would under-estimate both. Copying it silently would
    leave ``[managed.NAME] nodes`` and ``[queries.NAME.windows]`` naming only
    one of the copies, so the plan must say it (docs/spark-mapping.md).
    """
    owner: dict[str, str] = {}
    for query in plan.queries:
        for node in plan.query_nodes(query):
            if node in owner and plan.nodes[node].op != "source":
                raise top.error(("plan",), f"node {node!r} is shared by the Spark queries {owner[node]!r} and {query!r}, "
                                "but Spark keeps a separate copy of its state per query; give each query its own copy "
                                "of the node (with its own id) instead of a {\"ref\"}")
            owner.setdefault(node, query)


def _managed_query(top: Table, name: str, raw: Any, plan: PlanSet, spark: SparkConfig,
                   unmanaged: set[str] = frozenset()) -> ManagedQueryConfig:  # type: ignore[assignment]
    if name not in plan.queries and name not in unmanaged:
        raise ConfigError(top.file, ("managed", name), f"not a query of the plan; plan queries: {listing(plan.queries)}")
    t = Table(top.file, ("managed", name), raw, keys_of(ManagedQueryConfig))
    nodes = t.mapping("nodes")
    if name in unmanaged:
        if "join_order" in t.raw:
            raise t.error(("join_order",), "a query whose plan cannot be derived runs unmanaged: armd changes no join order")
        return ManagedQueryConfig(**t.read(ManagedQueryConfig, sink=_sink(name, t), nodes={}, params=dict(t.mapping("params")),
                                           streams=(), sources={}, join_order=None, heralds={},
                                           herald_sources={}))
    own = plan.query_nodes(name)
    for alias, node in nodes.items():
        if not isinstance(node, str) or node not in own:
            raise t.error(("nodes", alias), f"expected a plan node id of query {name!r}, got {show(node)}; "
                                            f"its nodes: {listing(own)}")
    streams = t.value("streams", [], "a list of plan stream names")
    if not (isinstance(streams, list) and all(isinstance(x, str) and x in plan.streams for x in streams)):
        raise t.error(("streams",), f"expected a list of plan stream names ({listing(plan.streams)}), got {show(streams)}")
    return ManagedQueryConfig(**t.read(
        ManagedQueryConfig, sink=_sink(name, t), nodes=dict(nodes), params=dict(t.mapping("params")),
        streams=tuple(streams), sources=_sources(name, t, plan, spark), heralds=_heralds(name, t, plan),
        herald_sources=_herald_sources(name, t, plan), join_order=_join_order(name, t, plan, spark) if "join_order" in t.raw else None,
    ))


def _streams_read(query: str, plan: PlanSet) -> list[str]:
    """The plan streams ``query`` reads, in plan order."""
    return list(dict.fromkeys(plan.nodes[n].stream for n in plan.query_nodes(query) if plan.nodes[n].op == "source"))


def _per_stream(query: str, managed: Table, plan: PlanSet, key: str) -> Mapping[str, Any]:
    """The table ``key`` of ``[managed.NAME]``, keyed by plan streams ``query`` reads (any other is refused)."""
    raw = managed.mapping(key)
    own = _streams_read(query, plan)
    for stream in raw:
        if stream not in own:
            raise managed.error((key, stream), f"not a stream query {query!r} reads; its streams: {listing(own)}")
    return raw


def _sources(query: str, managed: Table, plan: PlanSet, spark: SparkConfig) -> dict[str, dict[str, Any]]:
    """``[managed.NAME.sources.STREAM]``: each a source of the query's plan streams, which GenMig must be able to migrate."""
    raw = _per_stream(query, managed, plan, "sources")
    if not raw:
        return {}
    from armd.adapters.spark.sources import SourceContractError, adapter_for  # imports pyspark: Spark configurations only

    out: dict[str, dict[str, Any]] = {}
    for stream, options in raw.items():
        if not isinstance(options, dict) or not all(isinstance(v, (str, int, float, bool)) for v in options.values()):
            raise managed.error(("sources", stream), "expected a table of source options (strings, numbers, booleans), "
                                                     f"got {show(options)}")
        out[stream] = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}
        if spark.migration == "genmig":
            try:
                adapter_for(stream, out[stream])
            except SourceContractError as exc:
                raise managed.error(("sources", stream), f"{exc}; choose a source GenMig can migrate or set [spark] "
                                                         'migration = "naive-restart" (lossy)') from None
    return out


def _heralds(query: str, managed: Table, plan: PlanSet) -> dict[str, str]:
    """``[managed.NAME] heralds = { STREAM = "COLUMN" }``: the column of each stream's rows that carries heralds."""
    raw = _per_stream(query, managed, plan, "heralds")
    for stream, column in raw.items():
        if not (isinstance(column, str) and column.isidentifier()):
            raise managed.error(("heralds", stream), "expected the name of the column carrying the stream's heralds "
                                                     f"(an identifier, e.g. \"herald\"), got {show(column)}")
    return dict(raw)


def _herald_sources(query: str, managed: Table, plan: PlanSet) -> dict[str, str]:
    """``[managed.NAME] herald_sources = { STREAM = "DIRECTORY" }``: each stream's side stream of heralds, a
    directory of JSON-lines files (``adapters/herald_files.py``), made absolute against the configuration's file."""
    raw = _per_stream(query, managed, plan, "herald_sources")
    out: dict[str, str] = {}
    for stream, directory in raw.items():
        if not (isinstance(directory, str) and directory.strip()):
            raise managed.error(("herald_sources", stream), "expected the path of a directory of herald files "
                                                            f"(JSON lines, heralds.md), got {show(directory)}")
        path = Path(managed.file).parent / directory
        if not path.is_dir():
            raise managed.error(("herald_sources", stream), f"{str(path)!r} is not an existing directory; create it "
                                                            "(the side stream's heralds are files written into it)")
        out[stream] = str(path.resolve())
    return out


def _sink(query: str, managed: Table) -> SinkConfig:
    raw = managed.raw.get("sink", {"kind": "parquet"})
    if isinstance(raw, str):
        raw = {"kind": raw}
    t = Table(managed.file, (*managed.key, "sink"), raw, keys_of(SinkConfig))
    kind = t.read(SinkConfig, keys=("kind",))["kind"]
    defaults = {"path": f"armd-output/{query}", "url": REQUIRED, "table": query}
    return SinkConfig(**t.read(SinkConfig, keys=keys_of(SinkConfig, kind), defaults=defaults))


def _join_order(query: str, managed: Table, plan: PlanSet, spark: SparkConfig) -> JoinOrderConfig:
    t = managed.section("join_order", JoinOrderConfig)
    if spark.state_store != "rocksdb":
        raise t.error((), 'a JISC join runs on transformWithStateInPandas, which needs [spark] state_store = "rocksdb" '
                          f"(it is {spark.state_store!r})")
    try:
        join_tree(plan, query)  # the cost model estimates the join in the order it runs: it rebuilds these joins
    except ValueError as exc:
        raise t.error((), str(exc)) from None
    streams = _streams_read(query, plan)
    if not all(s.isidentifier() for s in streams):
        raise t.error((), f"the streams of query {query!r} become column names and must be identifiers, "
                          f"it reads {listing(streams)}")
    order = t.value("order", streams, f"a list of the query's streams ({listing(streams)}), each once")
    if not (isinstance(order, list) and sorted(order) == sorted(streams) and len(set(order)) == len(order)):
        raise t.error(("order",), f"expected a list of the query's streams ({listing(streams)}), each once, "
                                  f"got {show(order)}")
    control = f"{spark.checkpoint_dir}/{query}.join-order.json"
    return JoinOrderConfig(**t.read(JoinOrderConfig, defaults={"control": control}, order=tuple(order)))


def check_fixed_join_windows(top: Table, managed: Mapping[str, ManagedQueryConfig], qos: Mapping[str, QueryQoS]) -> None:
    """A JISC join keeps its window: armd changes its join order, not its window size."""
    for name, m in managed.items():
        spec = qos.get(name)
        if m.join_order is None or spec is None:
            continue
        for key, pair in ((("window",), spec.window), *((("windows", n), p) for n, p in spec.windows.items())):
            if pair is not None and pair[0] != pair[1]:
                raise top.error(("queries", name, *key), f"{name!r} is a JISC join ([managed.{name}.join_order]), "
                                "whose window armd does not change: give a fixed window [w, w] or none, "
                                f"got [{pair[0]:g}, {pair[1]:g}]")
