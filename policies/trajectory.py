"""The predicted resource trajectory of a decision (paper 001 §4.2).

Reductions take effect only as elements admitted under the old setting
expire, so a decision that fits the bounds in steady state may still run over
them for a while. For each changed query the estimate moves linearly from its
old to its new value between the moment the first changed window starts to
show and the moment the last one is complete (a granularity change shows at
once and completes after the query's longest window). The sum over queries is
sampled at every such moment, which is exact for piecewise-linear curves.

That is the §4.2 trajectory of a change made in place. A change put into
force by a live migration (GenMig, ``lag`` given) follows another path: the
new plan starts empty beside the old one and fills over its window plus the
lag (watermark delay + trigger: how long an element stays in its state),
while the old plan keeps all its state until it has drained, at the same
time; only then does the query hold the new estimate alone. Its memory is
therefore old + new × filled fraction, dropping to new at the drain time —
the transient the staging and the pricing of migrations already count, and
what Spark measures (paper 001 Fig 7, ``bench/trajectory.py``).

Where the old plan drains is the applier's choice, not the model's: the
plant splits at the change + the new window, Spark's GenMig at the change +
the *larger* of the two windows (results of the old window must complete
before the new plan answers). ``split`` gives, per query, the time from the
change to T_split as the applier placed it (the ``t_split`` its migration
records); the old plan then drains at T_split + lag, while the new plan
still fills over its own window + lag. ``drain`` gives the drain time itself
where the applier knows it better: Spark's old run stops at the end of a
batch, the one after the batch whose newest event passed T_split + the
watermark delay (a batch's watermark is taken from the batches before it),
up to one batch after T_split + lag
(``adapters/spark/drain.expected_drain``, recorded as the migration's
``drain_at``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import Bounds, Outcome, Problem

MAX_POINTS = 256


@dataclass(frozen=True)
class Trajectory:
    times: np.ndarray
    memory: np.ndarray
    cpu: np.ndarray
    bounds_hold_at: float | None
    """First time from which the estimate stays within the usable bounds; None if it never does."""

    def as_rows(self) -> list[dict[str, float]]:
        return [{"t": float(t), "memory_bytes": float(m), "cpu": float(c)} for t, m, c in zip(self.times, self.memory, self.cpu)]


def predict(
    problem: Problem,
    bounds: Bounds,
    now: float,
    old: tuple[np.ndarray, np.ndarray, Outcome],
    new: tuple[np.ndarray, np.ndarray, Outcome],
    lag: np.ndarray | None = None,
    split: np.ndarray | None = None,
    drain: np.ndarray | None = None,
) -> Trajectory:
    """Trajectory from the running setting ``old`` = (w, g, outcome) to ``new``.

    ``lag``: per query, the watermark delay + trigger of a live migration (model
    time units; None: changes take effect in place, §4.2's linear path).
    ``split``: per query, model time from ``now`` to the migration's T_split as the applier placed it (only with
    ``lag``; None: the new window, as the plant splits).
    ``drain``: per query, model time from ``now`` to the old plan's drain as the applier expects it (only with
    ``lag``; it replaces T_split + lag, e.g. Spark's GenMig, whose old run stops at a batch boundary one batch after
    its newest event passes T_split + the watermark delay). NaN entries fall back to T_split + lag.
    """
    (w_old, g_old, before), (w_new, g_new, after) = old, new
    if lag is not None:
        return _migrating(problem, bounds, now, old, new, np.asarray(lag, dtype=float),
                          None if split is None else np.asarray(split, dtype=float),
                          None if drain is None else np.asarray(drain, dtype=float))
    n = len(problem.queries)
    start = np.full(n, np.inf)
    end = np.full(n, -np.inf)
    if len(problem.win_idx):
        a, b = w_old[problem.win_idx], w_new[problem.win_idx]
        moved = a != b
        q = problem.win_query[moved]
        np.minimum.at(start, q, now + np.minimum(a, b)[moved])
        np.maximum.at(end, q, now + np.maximum(a, b)[moved])
    if len(problem.gran_idx):
        moved = g_old[problem.gran_idx] != g_new[problem.gran_idx]
        q = problem.gran_query[moved]
        longest = np.zeros(n)
        if len(problem.win_idx):
            np.maximum.at(longest, problem.win_query, np.maximum(w_old, w_new)[problem.win_idx])
        np.minimum.at(start, q, np.full(len(q), now))
        np.maximum.at(end, q, now + longest[q])
    changed = np.isfinite(start)
    start, end = start[changed], np.maximum(end[changed], start[changed])
    delta_memory = (after.query_memory - before.query_memory)[changed]
    delta_cpu = (after.query_cpu - before.query_cpu)[changed]

    times = np.unique(np.concatenate([[now], start, end]))
    if len(times) > MAX_POINTS:
        times = np.unique(np.concatenate([np.linspace(now, times[-1], MAX_POINTS - 1), [times[-1]]]))
    span = np.where(end > start, end - start, 1.0)
    progress = np.clip((times[None, :] - start[:, None]) / span[:, None], 0.0, 1.0)
    progress = np.where(times[None, :] >= end[:, None], 1.0, progress)
    # Shared nodes are counted once in the totals, so scale the per-query deltas onto the total change.
    memory = float(before.total_memory) + _scaled(delta_memory, float(after.total_memory - before.total_memory)) @ progress
    cpu = float(before.total_cpu) + _scaled(delta_cpu, float(after.total_cpu - before.total_cpu)) @ progress
    return _trajectory(bounds, times, memory, cpu)


def _trajectory(bounds: Bounds, times: np.ndarray, memory: np.ndarray, cpu: np.ndarray) -> Trajectory:
    within = (memory <= bounds.usable_memory * (1 + 1e-12)) & (cpu <= bounds.usable_cpu * (1 + 1e-12))
    hold_at = None
    if within[-1]:
        outside = np.flatnonzero(~within)
        hold_at = float(times[0] if len(outside) == 0 else times[outside[-1] + 1])
    return Trajectory(times, memory, cpu, hold_at)


def _scaled(deltas: np.ndarray, total: float) -> np.ndarray:
    summed = deltas.sum()
    if summed == 0:
        return deltas
    return deltas * (total / summed)


def _migrating(problem: Problem, bounds: Bounds, now: float, old: tuple[np.ndarray, np.ndarray, Outcome],
               new: tuple[np.ndarray, np.ndarray, Outcome], lag: np.ndarray, split: np.ndarray | None = None,
               drain: np.ndarray | None = None) -> Trajectory:
    """The path of live migrations: per changed query, old state held until drained, new state filling meanwhile."""
    (w_old, g_old, before), (w_new, g_new, after) = old, new
    n = len(problem.queries)
    changed = np.zeros(n, dtype=bool)
    span = np.zeros(n)
    if len(problem.win_idx):
        moved = w_old[problem.win_idx] != w_new[problem.win_idx]
        changed[problem.win_query[moved]] = True
        np.maximum.at(span, problem.win_query, w_new[problem.win_idx])
    if len(problem.gran_idx):
        changed[problem.gran_query[g_old[problem.gran_idx] != g_new[problem.gran_idx]]] = True
    fill = (span + lag)[changed]
    end = now + (fill if split is None else split[changed] + lag[changed])
    if drain is not None:
        end = np.where(np.isnan(drain[changed]), end, now + drain[changed])
    # The drop at each drain time is a step: sample just before it too.
    times = np.unique(np.concatenate([[now], now + fill, end, np.nextafter(end, -np.inf)]))
    if len(times) > MAX_POINTS:
        times = np.unique(np.concatenate([np.linspace(now, times[-1], MAX_POINTS - 2), end[:MAX_POINTS // 2]]))
    filled = np.clip((times[None, :] - now) / np.where(fill > 0, fill, 1.0)[:, None], 0.0, 1.0)
    drained = times[None, :] >= end[:, None]
    old_m, new_m = before.query_memory[changed], after.query_memory[changed]
    memory = float(before.total_memory) + (new_m[:, None] * filled - old_m[:, None] * drained).sum(axis=0)
    old_c, new_c = before.query_cpu[changed], after.query_cpu[changed]
    cpu = float(before.total_cpu) + (new_c[:, None] - old_c[:, None] * drained).sum(axis=0)  # both plans process meanwhile
    return _trajectory(bounds, times, memory, cpu)
