"""Estimates of the settings in force get a row when they move or have grown old, not at every observation."""

from __future__ import annotations

from armd.control.estimates import EstimateLog
from armd.control.ports import EstimateRow


def rows(memory: float, total: float, cpu: float = 1.0) -> list[EstimateRow]:
    return [EstimateRow("q", memory, cpu), EstimateRow(None, total, cpu)]


def test_a_row_is_written_first_then_only_when_it_moves_more_than_the_threshold_or_is_old():
    log = EstimateLog(relative=0.01, every_seconds=10.0)
    assert log.due(rows(1000.0, 5000.0), 0.0) == rows(1000.0, 5000.0)  # the first of each
    assert log.due(rows(1005.0, 5040.0), 1.0) == []  # within 1 % of the rows written
    assert log.due(rows(1011.0, 5040.0), 2.0) == [EstimateRow("q", 1011.0, 1.0)]  # q moved by 1.1 %
    assert log.due(rows(1011.0, 5040.0, cpu=2.0), 3.0) == rows(1011.0, 5040.0, cpu=2.0)  # the CPU doubled
    assert log.due(rows(1011.0, 5040.0, cpu=2.0), 12.9) == []
    assert log.due(rows(1011.0, 5040.0, cpu=2.0), 13.0) == rows(1011.0, 5040.0, cpu=2.0)  # 10 s since the last


def test_a_query_that_comes_back_or_starts_from_zero_is_written():
    log = EstimateLog()
    log.due([EstimateRow("q", 0.0, 0.0)], 0.0)
    assert log.due([EstimateRow("q", 1.0, 0.0)], 1.0) == [EstimateRow("q", 1.0, 0.0)]
    assert log.due([EstimateRow("other", 1.0, 0.0)], 1.0) == [EstimateRow("other", 1.0, 0.0)]
