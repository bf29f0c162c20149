"""The fleet's measured state: each query's newest report, whichever application sent it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from armd.control.held_state import HeldState

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_a_query_missing_from_an_observation_counts_with_its_newest_report():
    held = HeldState().observe(AT, {"shop": (4_000.0, 40), "ads": (1_000.0, 10)}, {"shop", "ads"}, 30.0)
    held = held.observe(AT + timedelta(seconds=1), {"ads": (2_000.0, 20)}, {"shop", "ads"}, 30.0)
    assert held.per_query() == {"shop": 4_000.0, "ads": 2_000.0}
    assert held.total() == 6_000.0 and held.rows() == 60


def test_a_report_older_than_the_limit_or_of_a_query_no_longer_admitted_stops_counting():
    held = HeldState().observe(AT, {"shop": (4_000.0, None), "ads": (1_000.0, None), "gone": (9.0, None)},
                               {"shop", "ads", "gone"}, 30.0)
    later = held.observe(AT + timedelta(seconds=31), {"ads": (2_000.0, None)}, {"shop", "ads"}, 30.0)
    assert later.per_query() == {"ads": 2_000.0}
    assert held.observe(AT + timedelta(seconds=30), {}, {"shop", "ads"}, 30.0).per_query() == {"shop": 4_000.0, "ads": 1_000.0}


def test_without_reports_there_is_no_total_and_rows_need_every_report_to_count_them():
    assert HeldState().total() is None and HeldState().rows() is None
    held = HeldState().observe(AT, {"shop": (4_000.0, 40), "ads": (1_000.0, None)}, {"shop", "ads"}, 30.0)
    assert held.total() == 5_000.0 and held.rows() is None
