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
    strategy = setup.migration.strategy_of(query)
    if strategy == "genmig":
        delay, trigger = setup.migration.timings.get(query, (0.0, 0.0))
        return migration_cost.genmig(window, delay, trigger, old_state_bytes)
    if strategy == "naive-restart":
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


STEPS = 33
"""Candidate fractions of a growth tried at once (0, 1/32, …, 1): one vectorised evaluation."""


def transient_fit(problem: Problem, bounds: Bounds, guarded: Guarded, running: Running | None, stream_d: np.ndarray,
                  live: bool, hysteresis: float = 0.0) -> Guarded:
    """Growths taken only as far as their migrations' transient state fits under the usable memory bound.

    A live migration (GenMig) to a larger window holds the old plan's state
    beside the new plan's until the new window has filled and the old plan
    has drained: at its end the query holds its new steady state *plus* its
    old one. A growth that fills the bound in steady state therefore breaks
    it for the last seconds of every such migration (and each breach is a
    reason to cut again). Here the growing queries move the same fraction of
    the way to their new settings, the largest (of ``STEPS``) at which the
    estimate of the new settings plus the old state of the growing queries
    stays within the usable bound (with no room at all they keep their
    settings). A growth shortened to less than the guardrails'
    ``hysteresis`` (a window 5.0 → 5.33 s of a 5–30 s range) keeps its
    setting too: the guardrails hold such a change back when the policy asks
    for it, and a sliver left by the shortening is as much a migration. Cuts are left alone
    (the bounds need them), as are changes made in place (``live`` false: no
    migration holds two plans).
    """
    if running is None or not live:
        return guarded
    old = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).query_memory
    changed = (guarded.fw != running.fw) | (guarded.fg != running.fg)
    growing = changed & (guarded.outcome.query_memory > old)
    if not growing.any():
        return guarded
    usable, extra = bounds.usable_memory, float(old[growing].sum())
    if float(guarded.outcome.total_memory) + extra <= usable:
        return guarded
    share = np.linspace(0.0, 1.0, STEPS)
    fw = np.where(growing[:, None], running.fw[:, None] + share * (guarded.fw - running.fw)[:, None], guarded.fw[:, None])
    fg = np.where(growing[:, None], running.fg[:, None] + share * (guarded.fg - running.fg)[:, None], guarded.fg[:, None])
    fd = None if guarded.fd is None else np.repeat(guarded.fd[:, None], STEPS, axis=1)
    totals = problem.evaluate(fw, fg, stream_d, with_qos=False, fd=fd).total_memory
    # Share 0 is no growth, hence no transient: the growing queries stay as they are.
    k = int(np.flatnonzero(np.concatenate([[True], totals[1:] + extra <= usable]))[-1])
    kept_fw, kept_fg = fw[:, k], fg[:, k]
    sliver = growing & (np.abs(kept_fw - running.fw) < hysteresis) & (np.abs(kept_fg - running.fg) < hysteresis)
    kept_fw, kept_fg = np.where(sliver, running.fw, kept_fw), np.where(sliver, running.fg, kept_fg)
    shortened = set(np.array(problem.queries)[growing].tolist())
    # A growth cut short here is no longer one the maximum step limited: pricing must not take it to the proposal.
    return replace(guarded, fw=kept_fw, fg=kept_fg, outcome=problem.evaluate(kept_fw, kept_fg, stream_d, fd=guarded.fd),
                   limited=tuple(q for q in guarded.limited if q not in shortened),
                   fitted=tuple(sorted(shortened)))


def hold_small_cuts(problem: Problem, bounds: Bounds, guarded: Guarded, running: Running | None, stream_d: np.ndarray,
                    live: bool, over: bool) -> Guarded:
    """Cuts that free less than their own migration holds are kept back while the reserve can take the difference.

    Under GenMig a cut's new plan fills beside the old one, which keeps all its state until it drains: a window
    cut 6.1 → 5.5 s frees a tenth of the query's state at the drain and holds nine tenths more until then, so near
    the usable bound it puts the measured state over it for the cut's whole duration (8 s, for a corrected estimate
    1 % over the usable bound). Such a cut (freeing less than its new plan's state) is taken back, the one that
    frees least first, as long as the settings then still fit the memory bound itself (not the usable one: the
    reserve is there for this) and the measured state is not over the usable bound (``over``: then every cut
    counts). Growths and changes made in place are left alone.
    """
    if running is None or not live or over:
        return guarded
    old = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).query_memory
    new = guarded.outcome.query_memory
    changed = (guarded.fw != running.fw) | (guarded.fg != running.fg)
    small = np.flatnonzero(changed & (new < old) & (old - new < new))
    fw, fg, outcome = guarded.fw, guarded.fg, guarded.outcome
    for i in sorted(small, key=lambda i: old[i] - new[i]):
        tw, tg = fw.copy(), fg.copy()
        tw[i], tg[i] = running.fw[i], running.fg[i]
        trial = problem.evaluate(tw, tg, stream_d, fd=guarded.fd)
        if not bool(trial.fits_budget(bounds.memory, bounds.cpu)):
            break
        fw, fg, outcome = tw, tg, trial
    if outcome is guarded.outcome:
        return guarded
    return replace(guarded, fw=fw, fg=fg, outcome=outcome)


def keep_pending_cuts(problem: Problem, guarded: Guarded, running: Running | None, pending: tuple[np.ndarray, np.ndarray] | None,
                      stream_d: np.ndarray, over: bool) -> Guarded:
    """While the measured state is over the bound, a cut decided before and not in force yet is not taken back.

    A cut waits while its query still migrates; decisions go on meanwhile, and the policy's optimum may move
    the burst's cut from one query to another as the estimates change by a few per cent (the s38 fleet run:
    `views_per_page` 14.9 → 5.7 → 5.4 → 13.2 → 4.1 s in 9 s while `views_per_ad` went 13.4 → 4.2 → 13.4 → 4.0 s),
    so the deep cut each query needs is asked for, withdrawn and asked for again, and comes late. Here each query
    with a pending cut (``pending``: the fractions last asked for, where the model puts less state than in force —
    a window cut may come with a finer slide) keeps that cut when this decision would hold more of its state. It
    only lowers the state, so the decision still fits what it fitted; the QoS given up comes back by growth once
    the state is under the bound.
    """
    if not over or running is None or pending is None:
        return guarded
    fw_pending, fg_pending = pending
    waiting = (fw_pending != running.fw) | (fg_pending != running.fg)
    # at this decision's drop rates throughout: whether a query's state is cut is asked of its window and slide
    in_force = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=guarded.fd).query_memory
    asked = problem.evaluate(fw_pending, fg_pending, stream_d, with_qos=False, fd=guarded.fd).query_memory
    taken_back = waiting & (asked < in_force) & (guarded.outcome.query_memory > asked)
    if not taken_back.any():
        return guarded
    fw = np.where(taken_back, fw_pending, guarded.fw)
    fg = np.where(taken_back, fg_pending, guarded.fg)
    kept = tuple(q for q, k in zip(problem.queries, taken_back) if k)
    return replace(guarded, fw=fw, fg=fg, outcome=problem.evaluate(fw, fg, stream_d, fd=guarded.fd), kept=kept,
                   limited=tuple(q for q in guarded.limited if q not in kept), forced=tuple(q for q in guarded.forced if q not in kept))


def cut_deep_on_step(problem: Problem, guarded: Guarded, running: Running | None, stream_d: np.ndarray,
                     stepped_up: np.ndarray, over: bool, live: bool, hysteresis: float = 0.0) -> Guarded:
    """Deeper cuts for queries whose input rate stepped up: to the minimum window while the measured state is over the
    bound, and at least to half their state when the decided cut frees less than its migration holds.

    Where the sources do not replay, a GenMig cut lasts its new window + the watermark delay + the application's lag
    (T_split lies the new window past the position), and all that time the old plan holds its whole state, which the
    faster rate keeps filling, beside the new plan's. So the depth of the cut sets how soon the state is back under
    the bound: in the s38 fleet run a count whose rate quadrupled was cut 16 → 13.2 s, a migration of 25 s that put
    13 s of the new rate's state beside the old 16 s, and the deep cut the bound needed a few decisions later could
    no longer supersede it (its old run had read past T_split) and waited for it. Two cases, only for queries reading
    a stream whose rate stepped up (``stepped_up``):

    - the measured state is over the bound (``over``): the cut goes to the minimum window, which ends soonest and
      adds the least;
    - otherwise a cut that frees less state than its new plan holds (a sliver such as 16 → 15.5 s) goes as deep as
      frees what it holds (its model state at most half the old one): the decision right after a step measures the
      rate half-way up it, so the cut the bound asks for is too shallow and a deeper one follows, waiting behind this
      one's migration (the s40 fleet run: that sliver held both plans of a count for 22 s of the burst, and set when
      the state was back under the bound). Half, not the minimum: a small step asks for a small cut, and its QoS is
      given up until the rate settles.

    Only cuts (the model state falls); the others keep the decided setting, and the QoS given up comes back by growth
    once the rate has settled and the state is under the bound (``transient_fit``). The window alone moves; the
    granularity stays as decided. A cut already within the guardrails' ``hysteresis`` of the minimum keeps its
    setting (were it a cut still waiting, moving it would be one more migration for a sliver). Changes made in place
    (``live`` false) hold no two plans and are left alone.
    """
    if not live or running is None or not stepped_up.any():
        return guarded
    old = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).query_memory
    new = guarded.outcome.query_memory
    changed = (guarded.fw != running.fw) | (guarded.fg != running.fg)
    cut = stepped_up & changed & (new < old) & (guarded.fw > max(hysteresis, 0.0))
    deepened = cut if over else cut & (old - new < new)
    if not deepened.any():
        return guarded
    fw = np.where(deepened, 0.0 if over else _freeing_half(problem, guarded, old, stream_d), guarded.fw)
    names = tuple(q for q, d in zip(problem.queries, deepened) if d)
    return replace(guarded, fw=fw, outcome=problem.evaluate(fw, guarded.fg, stream_d, fd=guarded.fd), deepened=names,
                   limited=tuple(q for q in guarded.limited if q not in names))


def _freeing_half(problem: Problem, guarded: Guarded, old: np.ndarray, stream_d: np.ndarray) -> np.ndarray:
    """Per query, the largest window fraction (of ``STEPS`` shares of the decided one) whose model state is at most
    half of ``old``, 0 where none is."""
    share = np.linspace(1.0, 0.0, STEPS)
    fw = guarded.fw[:, None] * share
    fg = np.repeat(guarded.fg[:, None], STEPS, axis=1)
    fd = None if guarded.fd is None else np.repeat(guarded.fd[:, None], STEPS, axis=1)
    memory = problem.evaluate(fw, fg, stream_d, with_qos=False, fd=fd).query_memory
    halved = memory <= old[:, None] / 2
    first = np.argmax(halved, axis=1)  # shares run from the decided fraction down to 0, where the state is least
    return np.where(halved.any(axis=1), fw[np.arange(len(fw)), first], 0.0)


CONCENTRATE_MAX_CUTS = 16
"""Decisions cutting more queries are left as they are: there one migration's transient is a small share of the bound,
and every try evaluates every query (at 1,000 queries cut by a burst, trying every cut took the decision to 3 s)."""
CONCENTRATE_TRIES = 4
"""Cuts ``concentrate_cuts`` tries to take back, the highest-priced first: each try is one evaluation of every query
at ``STEPS`` settings, so the work per decision stays that of a few evaluations however many queries are cut."""


def concentrate_cuts(problem: Problem, bounds: Bounds, guarded: Guarded, running: Running | None, stream_d: np.ndarray,
                     priced: Mapping[str, Priced], live: bool) -> tuple[Guarded, dict[str, Priced]]:
    """Fewer migrations for the same cut: a cut taken back when the other cuts, deeper, make the room it made.

    Each cut is a migration; under GenMig it holds the old plan's state
    for the new window + lag, so a small cut of a query with much state
    costs far more than it frees (a count per key cut 20 → 19.2 s held two
    plans, 1.5× the bound, for 22 s). Queries already being cut pay their
    migration anyway, so cutting them deeper costs only QoS. Here each cut,
    the highest-priced first (at most ``CONCENTRATE_TRIES``), is taken back when the remaining cuts, moved
    the same share further towards their minimum (the least of ``STEPS``
    shares that fits), make the decision fit the bounds again and the QoS
    that costs is less than the cut's price. Growths are left alone, as are
    changes made in place (``live`` false: no transient to save).
    """
    if running is None or not live or not priced:
        return guarded, dict(priced)
    names = list(problem.queries)
    fd_new = guarded.fd
    cuts = [names.index(q) for q, p in priced.items() if p.verdict == "required" and q in names
            and guarded.fw[names.index(q)] <= running.fw[names.index(q)] and guarded.fg[names.index(q)] <= running.fg[names.index(q)]]
    if not 2 <= len(cuts) <= CONCENTRATE_MAX_CUTS:
        return guarded, dict(priced)
    adjustable = np.where(problem.adjustable, problem.weights, 0.0)
    share = adjustable / adjustable.sum() if adjustable.sum() > 0 else adjustable
    fw, fg, outcome, out = guarded.fw.copy(), guarded.fg.copy(), guarded.outcome, dict(priced)
    for i in sorted(cuts, key=lambda i: -priced[names[i]].price)[:CONCENTRATE_TRIES]:
        others = [j for j in cuts if j != i and (fw[j] > 0 or fg[j] > 0)]
        if not others:
            continue
        deeper = np.linspace(1.0, 0.0, STEPS)  # the share of the others' settings kept; 1 = as decided
        tw = np.repeat(fw[:, None], STEPS, axis=1)
        tg = np.repeat(fg[:, None], STEPS, axis=1)
        tw[i], tg[i] = running.fw[i], running.fg[i]
        tw[others] = fw[others, None] * deeper
        tg[others] = fg[others, None] * deeper
        fd = None if fd_new is None else np.repeat(fd_new[:, None], STEPS, axis=1)
        trial = problem.evaluate(tw, tg, stream_d, fd=fd)
        fits = np.asarray(trial.fits(bounds))
        if not fits.any():
            continue
        k = int(np.flatnonzero(fits)[0])
        qos_now = problem.score(fw, fg, fd_new)
        qos_then = problem.score(tw[:, k], tg[:, k], fd_new)
        change = float((share * (qos_then - qos_now)).sum())  # the cut taken back gains, the others lose
        if change + priced[names[i]].price <= 0:
            continue
        fw, fg = tw[:, k].copy(), tg[:, k].copy()
        outcome = problem.evaluate(fw, fg, stream_d, fd=fd_new)
        out[names[i]] = replace(priced[names[i]], verdict="vetoed")
        cuts = [j for j in cuts if j != i]
        if len(cuts) < 2:
            break
    if fw is guarded.fw or np.array_equal(fw, guarded.fw) and np.array_equal(fg, guarded.fg):
        return guarded, out
    return replace(guarded, fw=fw, fg=fg, outcome=outcome), out
