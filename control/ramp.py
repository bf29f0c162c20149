"""Cuts through a ramp, staged so that no migration's transient breaks the bound (issue 21, item 3).

Why: under GenMig a cut holds the old plan's whole state beside the new
plan until the old one drains (new window + watermark delay + trigger on the
plant), so the quantity to keep under the bound is the peak of the
migration trajectory (``policies.trajectory.predict`` with ``lag``), not
the settled state. During a ramp the query reading the rising stream holds
its old window of a rate that keeps rising until the drain: cutting it
first, while the others keep all their state, puts old + new of the largest
query on top of everything else (the plant's ramp ×4: 1.85× the usable
bound). Queries whose inputs do not rise hold a state that does not grow,
and cut to their minimum they drain within their minimum window + lag. So,
when a stream's rate rises significantly (``policies.ramp``) and the
decision's predicted trajectory, at the forecast rates, breaks the usable
bound:

1. the growths of the decision wait, and if the path still breaks the
   bound, the queries that read no rising stream (or whose state does not
   grow with its rate: a count per key whose keys fill every granule) are
   cut to their minimum window (a cut they would need anyway as the rate goes on rising), and the
   cuts of the queries reading a rising stream wait;
2. once those cuts have drained, the queries reading a rising stream are cut
   to the deepest setting of the decision whose trajectory peak fits, or to
   their minimum when none does (the rate at the drain is the forecast's).

Staging alone cannot hold the bound when the ramp is told late (the
trend test needs some 17 s of the plant's ramp ×4, and by then the window of
the rising query has filled with the rising rate): every cut then starts a
new plan beside an old one that is already near the bound. So, while
forecasting is on and changes migrate live, the policy decides on a usable
bound lowered by the *cut reserve* (``cut_reserve``): the state of every query
at its minimum window at the rates decided on, the room the new plans of a
cut to the minimum fill while the old plans drain. With it, the cut a ramp
needs can start whenever the ramp is told, and its transient fits. Not
against a growth while state drains after a step down (``drained_growths``):
that state makes the room by itself.

Pure: the fractions, the lags and the times come in.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from armd.policies.base import Decision
from armd.policies.guardrails import Guarded, Running
from armd.policies.problem import Bounds, Problem
from armd.policies.trajectory import predict

from .pricing import STEPS


def cut_reserve(problem: Problem, bounds: Bounds, stream_d: np.ndarray, fd: np.ndarray | None = None) -> Bounds:
    """``bounds`` with the usable memory lowered by the state of every query at its minimum (see the module docstring).

    Unchanged when that state is half the usable bound or more: the minimum is then what any cut reaches anyway.
    """
    lowest = np.zeros(len(problem.queries))
    room = float(problem.evaluate(lowest, lowest, stream_d, fd=fd).total_memory)
    if not (0 < room < bounds.usable_memory / 2):
        return bounds
    return replace(bounds, memory=bounds.memory - room / (1.0 - bounds.reserve))


def deciding_bounds(problem: Problem, bounds: Bounds, running: Running | None, stream_d: np.ndarray) -> Bounds:
    """The bounds the policy decides on: with the cut reserve while the settings in force fit ``bounds``.

    When they do not (a burst, a ramp told), the decision is the cut the bounds need, as deep as it was without a
    reserve: cutting deeper for a reserve then costs one more migration per query cut (and one more growth after).
    """
    if running is not None and not bool(problem.evaluate(running.fw, running.fg, stream_d, fd=running.fd).fits(bounds)):
        return bounds
    return cut_reserve(problem, bounds, stream_d)


def _grown_by(decision: Decision, running: Running) -> np.ndarray:
    """Per query, whether ``decision`` grows its window or its granularity over the settings in force."""
    return (decision.fw > running.fw) | (decision.fg > running.fg)


def grows(decision: Decision, running: Running) -> bool:
    """Whether ``decision`` grows some query (``drained_growths`` has nothing to do otherwise)."""
    return bool(_grown_by(decision, running).any())


def drained_growths(problem: Problem, bounds: Bounds, stream_d: np.ndarray, running: Running, reserved: Decision,
                    whole: Decision) -> Decision:
    """While the state drains after a step down: the growths decided on the reserve-lowered bound (``reserved``), each
    taken towards the decision on the whole bound (``whole``) as far as the growths' live-migration transient fits.

    The reserve is room for a rise to come; state that drains by itself (the end of a burst) makes that room. Held
    against the growth back it split that growth in two: a count per key with drifting keys still held the burst's
    groups, so the first growth stopped short and a second one followed once they had gone (one migration more).
    Which queries grow stays the reserved decision's: on the whole bound the policy spreads the room over more
    queries, whose growths the transient then shortens alike, and each of them grows once more later. For the same
    reason the growths go only as far as their old state beside the new settings fits the usable bound (what
    ``pricing.transient_fit`` would otherwise shorten them to, from the settings in force). Taking back the whole
    decision's other growths only lowers its state, so the result fits wherever ``whole`` does.
    """
    grown = _grown_by(reserved, running)
    if not grown.any():
        return reserved
    other = ~grown & _grown_by(whole, running)
    far_w, far_g = np.where(other, running.fw, whole.fw), np.where(other, running.fg, whole.fg)
    old = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).query_memory
    share = np.linspace(0.0, 1.0, STEPS)
    fw = reserved.fw[:, None] + share * (far_w - reserved.fw)[:, None]
    fg = reserved.fg[:, None] + share * (far_g - reserved.fg)[:, None]
    fd = None if whole.fd is None else np.repeat(whole.fd[:, None], STEPS, axis=1)
    totals = problem.evaluate(fw, fg, stream_d, with_qos=False, fd=fd).total_memory
    fitting = np.flatnonzero(totals + float(old[grown].sum()) <= bounds.usable_memory)
    if not fitting.size or fitting[-1] == 0:
        return reserved
    k = int(fitting[-1])
    outcome = problem.evaluate(fw[:, k], fg[:, k], stream_d, fd=whole.fd)
    return replace(whole, fw=fw[:, k], fg=fg[:, k], outcome=outcome, weighted_qos=float(problem.weighted_qos(outcome.qos)),
                   state=reserved.state)


def peak(problem: Problem, bounds: Bounds, running: Running, fw: np.ndarray, fg: np.ndarray, stream_d: np.ndarray,
         lag: np.ndarray, now: float, fd: np.ndarray | None) -> float:
    """The highest memory on the live-migration path from the settings in force to (fw, fg), at ``stream_d``."""
    old = problem.evaluate(running.fw, running.fg, stream_d, fd=running.fd)
    new = problem.evaluate(fw, fg, stream_d, fd=fd)
    path = predict(problem, bounds, now, (*problem.values(running.fw, running.fg), old), (*problem.values(fw, fg), new), lag)
    return float(path.memory.max())


def staged_cuts(problem: Problem, bounds: Bounds, guarded: Guarded, running: Running | None, stream_d: np.ndarray,
                lag: np.ndarray | None, now: float, rising: frozenset[str], draining: np.ndarray) -> tuple[Guarded, str | None]:
    """The decision staged for a ramp (see the module docstring), and which stage it is in (None: left as it was).

    ``draining``: per query, True while an earlier change of it may still hold two plans (its old plan not drained).
    """
    if running is None or lag is None or not rising:
        return guarded, None
    readers = _growing(problem, _readers(problem, rising), rising, stream_d, running)
    if not readers.any():
        return guarded, None
    usable = bounds.usable_memory
    if peak(problem, bounds, running, guarded.fw, guarded.fg, stream_d, lag, now, guarded.fd) <= usable:
        return guarded, None  # its whole path fits at the forecast rates, growths included
    fw, fg = guarded.fw.copy(), guarded.fg.copy()
    growth = (fw > running.fw) | (fg > running.fg)
    fw[growth], fg[growth] = running.fw[growth], running.fg[growth]
    if peak(problem, bounds, running, fw, fg, stream_d, lag, now, guarded.fd) <= usable:
        stage = "growths held" if growth.any() else None
        return _with(problem, guarded, fw, fg, stream_d), stage
    others = ~readers
    if (running.fw[others] > 0).any() or (running.fg[others] > 0).any():
        fw[others], fg[others] = 0.0, 0.0
        fw[readers], fg[readers] = running.fw[readers], running.fg[readers]
        return _with(problem, guarded, fw, fg, stream_d), "others to their minimum"
    if draining[others].any():
        fw[readers], fg[readers] = running.fw[readers], running.fg[readers]
        return _with(problem, guarded, fw, fg, stream_d), "waiting for the others to drain"
    target_w, target_g = fw[readers].copy(), fg[readers].copy()
    for share in np.linspace(1.0, 0.0, 17)[1:]:  # deeper than the decision, towards the minimum
        fw[readers], fg[readers] = target_w * share, target_g * share
        if peak(problem, bounds, running, fw, fg, stream_d, lag, now, guarded.fd) <= usable:
            break
    return _with(problem, guarded, fw, fg, stream_d), "rising queries cut"


def _growing(problem: Problem, readers: np.ndarray, rising: frozenset[str], stream_d: np.ndarray, running: Running) -> np.ndarray:
    """Of the ``readers`` of a rising stream, those whose state grows with its rate (at the settings in force).

    A count per key whose keys all turn up in every granule already holds every group it can: its state does not
    grow with the rate, so it drains like the queries that read no rising stream and is cut with them.
    """
    names = problem.batch.stream_names
    faster = stream_d.copy()
    for i, name in enumerate(names):
        if name in rising:
            faster[i] = stream_d[i] / 2.0
    now = problem.evaluate(running.fw, running.fg, stream_d, with_qos=False, fd=running.fd).query_memory
    later = problem.evaluate(running.fw, running.fg, faster, with_qos=False, fd=running.fd).query_memory
    return readers & (later > now * 1.01)


def _readers(problem: Problem, streams: frozenset[str]) -> np.ndarray:
    """Per query, True when it reads any of ``streams`` (from the plan: a corrected or sliced problem keeps no index)."""
    plan = problem.plan
    return np.array([any(plan.nodes[n].op == "source" and plan.nodes[n].stream in streams for n in plan.query_nodes(q))
                     for q in problem.queries], dtype=bool)


def _with(problem: Problem, guarded: Guarded, fw: np.ndarray, fg: np.ndarray, stream_d: np.ndarray) -> Guarded:
    if np.array_equal(fw, guarded.fw) and np.array_equal(fg, guarded.fg):
        return guarded
    return replace(guarded, fw=fw, fg=fg, outcome=problem.evaluate(fw, fg, stream_d, fd=guarded.fd))
