"""bench/fleet_cluster.py's measured state over the bound: which runs count each second, and the two figures."""

from __future__ import annotations

import sys

from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import fleet_cluster  # noqa: E402


def test_a_replaced_run_stops_counting_when_its_migration_finished_and_recovery_is_timed_from_the_first_second_over():
    reports = [("old", "q", 0, 0.0, 5.0), ("old", "q", 0, 3.0, 12.0), ("new", "q", 1, 3.5, 4.0),
               ("old", "q", 0, 6.0, 12.0), ("new", "q", 1, 8.0, 4.0), ("new", "q", 1, 12.0, 4.0)]
    figures = fleet_cluster.state_figures(reports, {("q", 0): 7.0}, bound=10.0, burst_at=0.0)
    # 3 s: old alone (12); 4–6 s: both (16); from 7 s the old run has stopped though its last report is 1 s old.
    assert figures == {"peak_state_over_bound": 1.6, "seconds_over_bound": 4.0, "back_under_bound_s": 4.0}
    without_end = fleet_cluster.state_figures(reports, {}, bound=10.0, burst_at=0.0)
    assert without_end["seconds_over_bound"] == 9.0  # without the migration's end it counts until silent 5 s: 3 … 11


def test_recovery_spans_a_dip_under_the_bound_until_the_state_stays_under_it():
    reports = [("a", "q", 0, 0.0, 20.0), ("a", "q", 0, 2.0, 5.0), ("a", "q", 0, 4.0, 20.0), ("a", "q", 0, 5.0, 1.0)]
    figures = fleet_cluster.state_figures(reports, {}, bound=10.0, burst_at=0.0)
    # Over at 0, 1 and 4 s, under at 2, 3 and from 5 s: three seconds over, back under for good 5 s after the first.
    assert figures == {"peak_state_over_bound": 2.0, "seconds_over_bound": 3.0, "back_under_bound_s": 5.0}


def test_an_old_run_stopped_before_its_migration_finished_counts_until_it_stopped():
    from datetime import datetime, timezone

    finished = datetime.fromtimestamp(20.0, timezone.utc)
    caught_up_later = {"live": {"facts": {"old_stopped_at": 7.0}}}
    assert fleet_cluster._old_stopped(caught_up_later, finished) == 7.0  # the new run caught up at 20 s
    assert fleet_cluster._old_stopped({"live": {"facts": {}}}, finished) == 20.0  # stopped as the migration finished
