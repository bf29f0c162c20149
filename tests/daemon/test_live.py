"""The live view (``armd run --live``) laid out at 80 and 160 columns: nothing wider, no number broken."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from armd.daemon.live import LiveStatus, status_view
from armd.daemon.render import Words
from armd.daemon.units import format_size

WORDS = Words(0.001, {"clicks_per_view.1": "views"})


def _status(queries: int) -> dict:
    rows = []
    for i in range(queries):
        rows.append({
            "name": f"clicks_per_view_of_region_{i}", "status": "active", "qos_fraction": 0.8125 - i / 100,
            "settings": {"windows": {"clicks_10s": 12_345.0 + i, "clicks_per_view.1": 3_600_000.0}, "granularity": 1000.0},
            "recommended": {"windows": {"clicks_10s": 60_000.0, "clicks_per_view.1": 5_400_000.0}, "granularity": None},
            "estimated_memory_bytes": 123_456_789.0 * (i + 1), "measured_state_bytes": 98_765_432.0 + i,
            "estimated_cpu": 1234.5678, "measured_busy_fraction": 0.4321,
        })
    return {"queries": rows, "total": {"estimated_memory_bytes": 1.5e12, "measured_state_bytes": 2.5e9, "estimated_cpu": 98765.4},
            "last_decision": {"at": "2026-11-24T05:31:07+00:00", "policy": "weighted-qos", "weighted_qos": 0.7312,
                              "dry_run": True}, "migrations": []}


def _render(width: int, data: dict) -> str:
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    console.print(status_view(data, "sqlite:////var/lib/armd/armd.db", WORDS, width, "logs: armd.log   Ctrl-C stops"))
    return console.file.getvalue()


@pytest.mark.parametrize("width", [80, 160])
def test_fits_the_width_and_breaks_no_number(width):
    data = _status(4)
    text = _render(width, data)
    lines = text.splitlines()
    assert lines and max(len(line) for line in lines) <= width, text
    # every size the table shows is on one line, whole
    for q in data["queries"]:
        assert format_size(q["estimated_memory_bytes"]) in text, text
        assert format_size(q["measured_state_bytes"]) in text
    assert "1.36 TiB" in text and "0.731" in text
    assert "clicks_per_view.1" not in text and "views" in text


def test_narrows_by_dropping_the_least_needed_columns():
    narrow, wide = _render(80, _status(2)), _render(160, _status(2))
    assert "recommended" in wide and "busy" in wide and "status" in wide
    assert "status" not in narrow.splitlines()[1] and "memory" in narrow and "settings" in narrow


def test_live_redraws_in_place():
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    with LiveStatus(console) as live:
        for _ in range(3):
            live.show(lambda width: status_view(_status(1), "s", WORDS, width, "f"))
    out = console.file.getvalue()
    # rich moves the cursor up over what it drew and never clears the whole screen (which flickers)
    assert "\x1b[2J" not in out and re.search(r"\x1b\[\d*A", out)
