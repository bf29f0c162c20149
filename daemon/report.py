"""``armd report``: PNG plots of what the daemon did, drawn from the metadata store.

People see at a glance what tables make them work out: whether memory stayed
under the bound, how far estimates were from measurements, what the policy
gave up in QoS and when it acted. Every plot puts time on the x axis (UTC)
and marks decisions and migrations as vertical lines on it. Each plotting
function returns the series it drew, so tests check the data and not only
that a file exists. Matplotlib is used through ``Figure`` objects with the
Agg canvas: no display, no pyplot global state.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402 - the backend is chosen first
from matplotlib.dates import DateFormatter  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from armd.control.held_state import HeldState  # noqa: E402
from armd.policies.problem import Bounds  # noqa: E402

from .cpu import batch_seconds  # noqa: E402
from .units import format_size  # noqa: E402

Series = dict[str, tuple[list[datetime], list[float]]]
"""What a plot drew: label → (times, values); markers have times only (values empty)."""

CPU_UNIT = "cost units / model time unit"
_QUERY_COLORS = ("tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray", "tab:orange", "tab:green")
"""Per-query lines, none of them the blue of totals and estimates or the red of the bounds."""
FILES = ("memory_total.png", "memory_per_query.png", "cpu.png", "qos.png")
BYTES = FuncFormatter(lambda value, _position: format_size(value))
"""Byte axes in IEC units (KiB, MiB), as everywhere else armd shows sizes."""


def write_report(series: Mapping[str, Sequence[Mapping[str, Any]]], bounds: Bounds, out: Path) -> dict[str, Series]:
    """All plots of ``series`` (``SqlStore.series``) into ``out``; returns, per file name, what it drew."""
    out.mkdir(parents=True, exist_ok=True)
    return {
        "memory_total.png": plot_memory_total(series, bounds, out / "memory_total.png"),
        "memory_per_query.png": plot_memory_per_query(series, out / "memory_per_query.png"),
        "cpu.png": plot_cpu(series, bounds, out / "cpu.png"),
        "qos.png": plot_qos(series, out / "qos.png"),
    }


def _by_query(rows: Sequence[Mapping[str, Any]], value: str) -> dict[str | None, tuple[list[datetime], list[float]]]:
    grouped: dict[str | None, tuple[list[datetime], list[float]]] = defaultdict(lambda: ([], []))
    for row in rows:
        if row[value] is not None:
            grouped[row["query"]][0].append(row["at"])
            grouped[row["query"]][1].append(float(row[value]))
    return dict(grouped)


STALE_SECONDS = 30.0
"""A query's report counts in the measured total this long at most (the default of ``alerting.stale_intervals`` at
one observation a second)."""


def _measured_total(rows: Sequence[Mapping[str, Any]]) -> tuple[list[datetime], list[float]]:
    """At each report's time, every query's newest report summed: applications report at times of their own, so the
    rows of one time are often one application's queries only (``control/held_state.py``)."""
    reports = sorted((r for r in rows if r["state_bytes"] is not None and r["query"] is not None), key=lambda r: r["at"])
    queries = {r["query"] for r in reports}
    held, times, totals = HeldState(), [], []
    for at, group in groupby(reports, key=lambda r: r["at"]):
        held = held.observe(at, {r["query"]: (float(r["state_bytes"]), None) for r in group}, queries, STALE_SECONDS)
        times.append(at)
        totals.append(held.total() or 0.0)
    return times, totals


def _span(series: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[datetime, datetime] | None:
    times = [r["at"] for key in ("observations", "estimates", "decisions") for r in series[key]]
    times += [r["started_at"] for r in series["migrations"]]
    return (min(times), max(times)) if times else None


def _figure(rows: int = 1, height: float = 4.5) -> tuple[Figure, list[Axes]]:
    figure = Figure(figsize=(11, height * rows), layout="constrained")
    axes = figure.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    return figure, list(axes)



def _bounds_and_markers(ax, series, drawn, bound: tuple[str, float], usable: float) -> None:
    """The bound and the usable bound as lines over the time span, decisions and migrations marked."""
    span = _span(series)
    if not span:
        _no_data(ax)
        return
    for label, value, style in ((*bound, "-"), ("usable bound (bound − reserve)", usable, "--")):
        ax.plot(list(span), [value, value], color="tab:red", linestyle=style, linewidth=1.4, label=label)
        drawn[label] = (list(span), [value, value])
    _markers(ax, series, drawn)

def _markers(ax: Axes, series: Mapping[str, Sequence[Mapping[str, Any]]], drawn: Series, legend: bool = True) -> None:
    """Decisions (grey: applied, light: not applied) and migrations (green: done, red: failed) as vertical lines."""
    decisions = series["decisions"]
    applied = [d["at"] for d in decisions if d["applied"] and not d["dry_run"]]
    other = [d["at"] for d in decisions if not (d["applied"] and not d["dry_run"])]
    done = [m["started_at"] for m in series["migrations"] if m["state"] != "failed"]
    failed = [m["started_at"] for m in series["migrations"] if m["state"] == "failed"]
    for times, label, style in (
        (applied, "decision (applied)", dict(color="0.35", linestyle="--", linewidth=0.9)),
        (other, "decision (nothing applied)", dict(color="0.7", linestyle=":", linewidth=0.8)),
        (done, "migration", dict(color="tab:green", linestyle="-", linewidth=0.6, alpha=0.6)),
        (failed, "migration failed", dict(color="tab:red", linestyle="-", linewidth=1.2)),
    ):
        for i, t in enumerate(times):
            ax.axvline(t, label=label if legend and i == 0 else None, **style)
    drawn["decisions"] = (sorted(d["at"] for d in decisions), [])
    drawn["migrations"] = (sorted(done + failed), [])


def _finish(figure: Figure, axes: list[Axes], title: str, out: Path) -> None:
    figure.suptitle(title, fontsize=13)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.xaxis.set_major_formatter(DateFormatter("%H:%M:%S"))
    axes[-1].set_xlabel("time (UTC)")
    figure.savefig(out, dpi=100)


def _legend(ax: Axes) -> None:
    """Outside, right of the plot, so it never hides a line."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data in this period", ha="center", va="center", transform=ax.transAxes, color="0.4")


def plot_memory_total(series: Mapping[str, Sequence[Mapping[str, Any]]], bounds: Bounds, out: Path) -> Series:
    figure, (ax,) = _figure()
    drawn: Series = {}
    estimated = _by_query(series["estimates"], "memory_bytes").get(None)
    if estimated:
        ax.plot(*estimated, color="tab:blue", linewidth=1.8, label="estimated (settings in force)")
        drawn["estimated"] = estimated
    measured = _measured_total(series["observations"])
    if measured[0]:
        ax.plot(*measured, color="tab:orange", linewidth=1.8, label="measured state")
        drawn["measured"] = measured
    _bounds_and_markers(ax, series, drawn, ("memory bound", bounds.memory), bounds.usable_memory)
    ax.set_ylabel("memory (bytes)")
    ax.yaxis.set_major_formatter(BYTES)
    ax.set_ylim(bottom=0)
    _legend(ax)
    _finish(figure, [ax], "Total memory: estimated vs measured against the bound", out)
    return drawn


def plot_memory_per_query(series: Mapping[str, Sequence[Mapping[str, Any]]], out: Path) -> Series:
    estimated = {q: v for q, v in _by_query(series["estimates"], "memory_bytes").items() if q is not None}
    measured = _by_query(series["observations"], "state_bytes")
    queries = sorted(set(estimated) | set(measured))
    figure, axes = _figure(max(len(queries), 1), height=2.8)
    drawn: Series = {}
    for ax, query in zip(axes, queries):
        if query in estimated:
            ax.plot(*estimated[query], color="tab:blue", linewidth=1.6, label="estimated")
            drawn[f"{query} estimated"] = estimated[query]
        if query in measured:
            ax.plot(*measured[query], color="tab:orange", linewidth=1.6, label="measured state")
            drawn[f"{query} measured"] = measured[query]
        _markers(ax, series, drawn, legend=ax is axes[0])
        ax.set_title(query, fontsize=10, loc="left")
        ax.set_ylabel("memory (bytes)")
        ax.yaxis.set_major_formatter(BYTES)
        ax.set_ylim(bottom=0)
        _legend(ax)
    if not queries:
        _no_data(axes[0])
    _finish(figure, axes, "Memory per query: estimated vs measured", out)
    return drawn


def plot_cpu(series: Mapping[str, Sequence[Mapping[str, Any]]], bounds: Bounds, out: Path) -> Series:
    figure, (ax,) = _figure()
    drawn: Series = {}
    per_query = _by_query(series["estimates"], "cpu")
    if None in per_query:
        ax.plot(*per_query[None], linewidth=2.2, color="tab:blue", label="estimated total")
        drawn["estimated total"] = per_query[None]
    for i, query in enumerate(sorted(q for q in per_query if q is not None)):
        label = f"{query} (estimated)"
        ax.plot(*per_query[query], linewidth=1.1, color=_QUERY_COLORS[i % len(_QUERY_COLORS)], label=label)
        drawn[label] = per_query[query]
    _bounds_and_markers(ax, series, drawn, ("CPU bound", bounds.cpu), bounds.usable_cpu)
    ax.set_ylabel(f"CPU estimated ({CPU_UNIT})")
    ax.set_ylim(bottom=0)
    busy = measured_busy(series.get("batches") or [])
    if busy:
        right = ax.twinx()
        for i, (query, points) in enumerate(sorted(busy.items())):
            label = f"{query} (measured busy)"
            right.plot(*points, linewidth=0.9, linestyle=":", marker=".", markersize=3,
                       color=_QUERY_COLORS[i % len(_QUERY_COLORS)], label=label)
            drawn[label] = points
        right.set_ylabel("measured: share of wall time in Spark micro-batches")
        right.set_ylim(bottom=0)
        right.legend(loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=8, frameon=False)
    _legend(ax)
    _finish(figure, [ax], "CPU: estimated against the bound, and measured on Spark", out)
    return drawn


def measured_busy(batches: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[datetime], list[float]]]:
    """Per query, at each batch after the first: its duration over the wall time since the batch before."""
    result = {}
    for query, rows in batch_seconds(batches).items():
        points = [(t, seconds / (t - before).total_seconds()) for (before, _), (t, seconds) in zip(rows, rows[1:])
                  if t > before]
        if points:
            result[query] = ([t for t, _ in points], [v for _, v in points])
    return result


def plot_qos(series: Mapping[str, Sequence[Mapping[str, Any]]], out: Path) -> Series:
    """The QoS fraction each query's settings had, from the migrations that put them in force (a step line)."""
    figure, (ax,) = _figure()
    drawn: Series = {}
    span = _span(series)
    steps: dict[str, tuple[list[datetime], list[float]]] = defaultdict(lambda: ([], []))
    for m in series["migrations"]:
        if m["state"] == "done" and m["qos"] is not None and m["finished_at"] is not None:
            steps[m["query"]][0].append(m["finished_at"])
            steps[m["query"]][1].append(float(m["qos"]))
    for i, (query, (times, values)) in enumerate(sorted(steps.items())):
        if span and span[1] > times[-1]:
            times, values = [*times, span[1]], [*values, values[-1]]  # the last setting holds until the end of the data
        ax.plot(times, values, drawstyle="steps-post", linewidth=2.4 - 0.4 * (i % 3), label=query,
                color=_QUERY_COLORS[i % len(_QUERY_COLORS)], linestyle=("-", "--", "-.", ":")[i // len(_QUERY_COLORS) % 4])
        drawn[query] = (times, values)
    if span:
        _markers(ax, series, drawn)
    if not steps:
        _no_data(ax)
    ax.set_ylabel("QoS fraction (1 = best)")
    ax.set_ylim(-0.03, 1.03)
    _legend(ax)
    _finish(figure, [ax], "QoS fraction per query (settings in force)", out)
    return drawn
