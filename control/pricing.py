"""A change's migration priced against its QoS gain (issue 21, item 2).

Why apart from the cycle: which migration a change means (GenMig, a
restart, settings changed in place) follows from the configuration, and its
cost from the cost models of ``policies.migration_cost``; the cycle only
asks, after the guardrails and before staging, which changes are worth it.
Pure: the settings, the estimates and the exchange rate come in.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np

from armd.policies import migration_cost
from armd.policies.guardrails import Guarded, Running
from armd.policies.migration_cost import MigrationCost, Priced, price_changes
from armd.policies.problem import Bounds, Problem

from .model import Setup, longest_window, settings_of
from .ports import QuerySettings


def price(setup: Setup, problem: Problem, guarded: Guarded, running: Running | None, in_force: Mapping[str, QuerySettings],
          stream_d: np.ndarray, proposal: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Guarded, dict[str, Priced]]:
    """Each running query's change only when its QoS gain covers its migration's price (``policies.migration_cost``).

    With migrations priced, a change the maximum step cut short goes the whole way to the ``proposal`` (fractions
    w, g) when that fits the bounds: the price is per migration, so a change made in two steps pays it twice (and
    under GenMig the second step holds the first one's larger state beside the new one).
    """
    if running is None or setup.migration.exchange.free:
        return guarded, {}
    guarded = whole_steps(problem, setup.bounds, guarded, proposal, stream_d)
    held = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).query_memory
    new = settings_of(problem, guarded.fw, guarded.fg, guarded.fd)
    costs = {q: _migration_cost(setup, q, new[q], float(held[i])) for i, q in enumerate(problem.queries) if q in in_force}
    return price_changes(problem, setup.bounds, guarded, running, stream_d, costs, setup.migration.exchange)


def _migration_cost(setup: Setup, query: str, new: QuerySettings, old_state_bytes: float) -> MigrationCost:
    window = longest_window(setup.plan, query, new) * setup.time_unit_seconds
    if setup.migration.strategy == "genmig":
        delay, trigger = setup.migration.timings.get(query, (0.0, 0.0))
        return migration_cost.genmig(window, delay, trigger, old_state_bytes)
    if setup.migration.strategy == "naive-restart":
        return migration_cost.restart(window)
    return migration_cost.instant()


def whole_steps(problem: Problem, bounds: Bounds, guarded: Guarded, proposal: tuple[np.ndarray, np.ndarray] | None,
                stream_d: np.ndarray) -> Guarded:
    """``guarded`` with the changes the maximum step limited taken to the proposal, when the result fits the bounds."""
    if proposal is None or not guarded.limited:
        return guarded
    limited = np.isin(np.array(problem.queries), guarded.limited)
    fw, fg = np.where(limited, proposal[0], guarded.fw), np.where(limited, proposal[1], guarded.fg)
    outcome = problem.evaluate(fw, fg, stream_d, fd=guarded.fd)
    if not bool(outcome.fits(bounds)):
        return guarded
    return replace(guarded, fw=fw, fg=fg, outcome=outcome, limited=())
