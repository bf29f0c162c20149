"""``armd run --live``: the status as a table that redraws in place, built on ``rich``.

A hand-made table of fixed-width text was ~130 columns wide: at 80 columns the
terminal wrapped it into garbage, and clearing the screen before each redraw
flickered. ``rich.live.Live`` redraws only what it drew last, and the table is
laid out for the terminal's width: the columns that matter least go first as
it narrows (``COLUMNS`` lists them by priority), text cells wrap between
words, and number cells never wrap, so no number is ever broken across lines.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .render import Words
from .units import format_size, instant

Cell = Callable[[Mapping[str, Any], Words], str]


def _qos(q: Mapping[str, Any], _w: Words) -> str:
    return "—" if q.get("qos_fraction") is None else f"{q['qos_fraction']:.3f}"


def _cpu(q: Mapping[str, Any], _w: Words) -> str:
    return "—" if q.get("estimated_cpu") is None else f"{q['estimated_cpu']:.4g}"


def _busy(q: Mapping[str, Any], _w: Words) -> str:
    return "—" if q.get("measured_busy_fraction") is None else f"{q['measured_busy_fraction']:.0%}"


# (header, cell, is a number, the narrowest console width that still shows it)
COLUMNS: tuple[tuple[str, Cell, bool, int], ...] = (
    ("query", lambda q, w: q["name"], False, 0),
    ("memory", lambda q, w: format_size(q.get("estimated_memory_bytes")), True, 0),
    ("measured", lambda q, w: format_size(q.get("measured_state_bytes")), True, 0),
    ("settings", lambda q, w: w.settings(q.get("settings")), False, 0),
    ("qos", _qos, True, 60),
    ("cpu", _cpu, True, 80),
    ("recommended", lambda q, w: w.settings(q.get("recommended")), False, 100),
    ("busy", _busy, True, 110),
    ("status", lambda q, w: q["status"], False, 120),
)


def status_table(data: Mapping[str, Any], words: Words, width: int) -> Table:
    """The queries as a table for a console ``width`` columns wide."""
    recommending = any(q.get("recommended") for q in data["queries"])
    shown = [c for c in COLUMNS if width >= c[3] and (c[0] != "recommended" or recommending)]
    table = Table(expand=False, pad_edge=False, box=None, header_style="bold")
    for header, _cell, number, _width in shown:
        table.add_column(header, justify="right" if number else "left", no_wrap=number,
                         overflow="fold" if not number else "ellipsis")
    for query in data["queries"]:
        table.add_row(*(cell(query, words) for _h, cell, _n, _w in shown))
    total = data.get("total") or {}
    totals = {"query": "total", "memory": format_size(total.get("estimated_memory_bytes")),
              "measured": format_size(total.get("measured_state_bytes")),
              "cpu": "—" if total.get("estimated_cpu") is None else f"{total['estimated_cpu']:.4g}"}
    table.add_row(*(Text(totals.get(h, ""), style="bold") for h, *_ in shown))
    return table


def status_view(data: Mapping[str, Any], store: str, words: Words, width: int, footer: str) -> RenderableType:
    decision = data.get("last_decision")
    last = "none yet" if not decision else (
        f"{instant(decision['at'])}, {decision['policy']}, weighted QoS {decision['weighted_qos']:.3f}"
        + (", dry run: recommended only" if decision["dry_run"] else ""))
    migrations = data.get("migrations") or []
    return Group(
        Text(f"armd — store {store}", style="bold", overflow="fold"),
        status_table(data, words, width) if data["queries"] else Text("no queries"),
        Text(f"last decision: {last}", overflow="fold"),
        Text(f"running migrations: {len(migrations) or 'none'}"),
        Text(footer, style="dim", overflow="fold"),
    )


class LiveStatus:
    """The live view around the daemon: ``with LiveStatus() as live: ... live.show(data, …)`` once per cycle."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.live = Live(console=self.console, auto_refresh=False, redirect_stdout=False, redirect_stderr=False)

    def __enter__(self) -> LiveStatus:
        self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.stop()

    def show(self, view: Callable[[int], RenderableType]) -> None:
        """Redraw with ``view(width)``, laid out for the console's width now (the terminal may have been resized)."""
        self.live.update(view(self.console.width), refresh=True)
