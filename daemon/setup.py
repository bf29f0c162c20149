"""The configuration as the control cycle and the store see it.

Why apart from the controller: turning a ``Config`` into the cycle's
``Setup`` (time values in model units, the policy made from its name, the
JISC joins whose order armd chooses) and into the store's configuration rows
is translation, not wiring; done here once, the controller only calls it on
start and on every reload.
"""

from __future__ import annotations

from dataclasses import replace

from armd.control.feedback import FeedbackRules
from armd.control.model import JoinRule, Migrations, Setup
from armd.control.ports import NodeRow, QueryRow, StreamRow
from armd.policies.registry import make_policy
from armd.policies.triggers import TriggerRules, window_of_alpha

from .config import Config
from .config.sections import DEFAULT_WINDOW_SECONDS


def setup_of(config: Config, *, join_orders: bool) -> Setup:
    """The cycle's setup for ``config``; ``join_orders``: whether a join-order port is wired (else no join is reordered)."""
    unit = config.model.time_unit_seconds
    joins = {
        q: JoinRule(tuple(m.join_order.order), m.join_order.margin, m.join_order.cooldown_seconds / unit, m.join_order.shape,
                    None if m.join_order.payback_seconds is None else m.join_order.payback_seconds / unit)
        for q, m in config.managed.items() if m.join_order is not None
    } if join_orders else {}
    return Setup(
        plan=config.plan, qos=config.qos, profile=config.model.profile, bounds=config.bounds,
        rails=replace(config.guardrails, cooldown=config.guardrails.cooldown / unit),
        policy=make_policy(config.policy.name, config.policy.params), decide_period=config.schedule.decide_seconds / unit,
        joins=joins, estimate_factor=config.alerting.estimate_factor, stale_intervals=config.alerting.stale_intervals,
        observe_seconds=config.schedule.observe_seconds,
        feedback=FeedbackRules(config.feedback.enabled, config.feedback.window_seconds / unit, config.feedback.min_ratio,
                               config.feedback.max_ratio, config.feedback.cpu, unit,
                               config.feedback.deadband, config.feedback.rise_seconds / unit),
        time_unit_seconds=unit, migration=migrations(config), forecast=config.forecast)


def migrations(config: Config) -> Migrations:
    """How ``config`` puts settings into force: GenMig or a restart on Spark, in place on the simulated plant; the
    ``armd.agent`` queries by GenMig in their applications, whatever the daemon's own source."""
    strategy = config.spark.migration if config.source.kind == "spark" else "instant"
    timings = {q: (m.watermark_delay_seconds, m.trigger_seconds) for q, m in config.managed.items()}
    timings.update(config.agent_timings)
    return Migrations(strategy, config.migration_cost, timings, {q: "genmig" for q in config.agent_timings})


def trigger_rules(config: Config) -> TriggerRules:
    """The smoothing and trigger rules of ``[triggers]``; an old ``alpha`` becomes its window at ``observe_seconds``."""
    t = config.triggers
    if t.alpha is not None:
        window = window_of_alpha(t.alpha, config.schedule.observe_seconds)
    else:
        window = DEFAULT_WINDOW_SECONDS if t.window_seconds is None else t.window_seconds
    return TriggerRules(window, t.threshold, t.significance)


def config_rows(config: Config) -> tuple[list[StreamRow], list[QueryRow], list[NodeRow]]:
    """Streams, queries (with their QoS ranges) and plan nodes, as ``Store.sync_config`` takes them."""
    plan, doc = config.plan, config.plan_doc
    streams = [StreamRow(name, s.size, s.g, s.d) for name, s in plan.streams.items()]
    queries, nodes = [], []
    for name in plan.queries:
        spec = config.qos.get(name)
        qos = {} if spec is None else {
            "window": list(spec.window) if spec.window else None,
            "windows": {k: list(v) for k, v in spec.windows.items()},
            "granularity": list(spec.granularity) if spec.granularity else None,
        }
        queries.append(QueryRow(name, doc["queries"][name], qos, spec.weight if spec else 1.0))
        for node_id in plan.query_nodes(name):
            node = plan.nodes[node_id]
            params = {k: getattr(node, k) for k in ("stream", "w", "c", "g", "sel", "groups", "size") if getattr(node, k) is not None}
            nodes.append(NodeRow(name, node_id, node.op, list(node.inputs), params))
    return streams, queries, nodes
