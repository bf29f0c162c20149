"""JISC driven by the join-order policy on the single-process host: the embedded demo's loop.

It lives in the control layer because it joins a policy to a migration
strategy, which the core keeps apart (``armd.migrations`` imports no policy).
On Spark the daemon measures rates and pairwise selectivities from
progress events and publishes orders to a control file; without Spark the
same decision can run right next to the pipeline. ``run_adaptive`` processes
an event log with JISC and, every ``decide_every`` time units of event time,
measures each stream's rate and each pair's key-match selectivity over the
interval (``count_pairs``, ``pair_selectivity``: the counts and formula the
Spark host uses), smooths them like the daemon (``RateTracker``) and asks
``policies.join_order.decide``; a proposed order is switched to at once, by
JISC. Pure: event time only, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from armd.costmodel.constants import CostConstants
from armd.policies.join_order import JoinOrderState, JoinStats, decide, pair_selectivity
from armd.policies.triggers import RateTracker

from armd.migrations.join.pipeline import EventLog, Order, advance, count_pairs
from armd.migrations.join.strategies import JISC


@dataclass(frozen=True)
class Switch:
    """One order change the policy made."""

    at: float
    """Event time of the decision."""
    event: int
    """Id of the first event processed under the new order."""
    old: Order
    new: Order
    reason: str
    rates: dict[str, float]
    selectivities: dict[str, float]
    """Smoothed measured key-match selectivity per pair "a,b" (names sorted, as the daemon records them)."""


@dataclass
class AdaptiveRun:
    strategy: JISC
    switches: list[Switch] = field(default_factory=list)


def run_adaptive(
    log: EventLog,
    window: float,
    order: Order,
    *,
    decide_every: float,
    margin: float = 0.2,
    cooldown: float = 60.0,
    shape: str = "left-deep",
    alpha: float = 0.5,
    default_selectivity: float = 0.1,
    constants: CostConstants | None = None,
    collect: bool = False,
) -> AdaptiveRun:
    """Run ``log`` through JISC starting in ``order``, letting the join-order policy change the order as it goes.

    Pairs are measured from one window of event time on (before, the
    windows are still filling) and decisions start after two; a pair not
    measured yet has ``default_selectivity``.
    """
    if not decide_every > 0:
        raise ValueError(f"decide_every must be > 0, got {decide_every!r}")
    names = log.streams
    strategy = JISC(log, window, order, collect=collect)
    run = AdaptiveRun(strategy)
    rates = RateTracker(alpha, 1.0)
    sels = RateTracker(alpha, 1.0)
    state: JoinOrderState | None = None
    arrived = [0] * len(names)
    pairs: dict[tuple[int, int], int] = {}
    start = log.ts[0] if len(log) else 0.0
    since = start
    for event in range(len(log)):
        now = log.ts[event]
        if now - since >= decide_every:
            span = now - since
            rates = rates.observe({names[i]: span / n for i, n in enumerate(arrived) if n > 0})  # d: time per tuple
            if now - start >= window:
                sels = sels.observe({
                    ",".join(sorted((names[i], names[j]))): pair_selectivity(p, arrived[i], arrived[j], span, 2 * window)
                    for (i, j), p in pairs.items() if arrived[i] and arrived[j]
                })
            if now - start >= 2 * window and len(rates.smoothed) == len(names):
                stats = JoinStats(
                    rates={s: 1.0 / d for s, d in rates.smoothed.items()}, windows={s: window for s in names},
                    selectivity={frozenset(k.split(",")): v for k, v in sels.smoothed.items()},
                    default_selectivity=default_selectivity)
                decision = decide(strategy.plan.order, stats, now, state, margin=margin, cooldown=cooldown, shape=shape,
                                  constants=constants)
                state = decision.state
                if decision.migrate:
                    old = strategy.plan.order
                    strategy.transition(decision.order)
                    run.switches.append(Switch(now, event, old, strategy.plan.order, decision.reason,
                                               dict(stats.rates), dict(sels.smoothed)))
            arrived, pairs, since = [0] * len(names), {}, now
        stream, key = log.stream[event], log.key[event]
        advance(strategy.plan, strategy.cursor, log, now, window)  # expire first, so the partners counted are live
        arrived[stream] += 1
        count_pairs(strategy.plan, stream, key, pairs)
        strategy.receive(event)
        strategy.step()
    strategy.finish()
    return run



