"""Load shedding on Spark: a source read through ``builders.synthetic`` drops ≈ p of its rows, and nothing at p = 0."""

from __future__ import annotations

import json
import math
import sys
import time

import pytest
from support import REPO
from support.spark import progress_listener, spark  # noqa: F401

from armd.adapters.spark.builders import synthetic
from armd.adapters.spark.managed import QueryParams
from armd.adapters.spark.source import schedule_json
from armd.adapters.synthetic import Schedule
from armd.control.ports import QuerySettings


def _rows(spark, drop_rate: float, start: float) -> list[tuple]:  # noqa: F811
    options = {"start": repr(float(start)), "schedule": json.dumps(schedule_json(Schedule(600.0))), "keys": "8",
               "seed": "11", "end_seconds": "10", "max_seconds_per_batch": "10"}
    params = QueryParams(extra={"sources": {"clicks": options}}).with_settings(
        QuerySettings(1.0, 1.0, {}, None, 1.0, drop_rate=drop_rate), 1.0)
    assert params.drop_rate == drop_rate
    rows: list = []
    query = synthetic(spark, params, "clicks").writeStream.foreachBatch(
        lambda d, _b: rows.extend(d.select("event_time", "key", "value").collect())).start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return [(r.event_time.timestamp(), r.key, r.value) for r in rows]


def test_the_inserted_drop_keeps_about_one_minus_p_of_the_rows(spark) -> None:  # noqa: F811
    start = math.floor(time.time()) - 3600  # one origin: both runs read the same rows
    everything = _rows(spark, 0.0, start)
    kept = _rows(spark, 0.3, start)
    n = len(everything)
    assert n > 5000  # 600 rows/s for 10 s
    share = len(kept) / n
    sigma = math.sqrt(0.3 * 0.7 / n)
    assert abs(share - 0.7) <= 4 * sigma, (share, sigma)
    assert set(kept) <= set(everything)  # a filter: no row is changed or made up


# --- bench/shedding.py's pure parts (the experiment itself runs on Spark: .venv/bin/python bench/shedding.py) ---

sys.path.insert(0, str(REPO / "bench"))
import shedding  # noqa: E402


def test_the_experiments_settings_hit_each_target_saving_in_the_model() -> None:
    join = shedding.SHAPES[0]
    full, _ = join.model(join.window, 0.0)
    runs = shedding.settings(join)
    assert [r["method"] for r in runs] == ["oracle"] + ["window reduction", "load shedding"] * 3
    for run in runs[1:]:
        memory, _ = join.model(run["window"], run["drop_rate"])
        assert 1 - memory / full == pytest.approx(run["target_saving"], abs=0.03), run
        assert (run["window"] < join.window) != (run["drop_rate"] > 0)  # one knob at a time


def test_results_kept_counts_only_the_oracles_results() -> None:
    join = shedding.SHAPES[0]
    row = {"lt": 1.0, "lk": 1, "lv": 0.5, "rt": 1.5, "rk": 1, "rv": 0.25}
    oracle = [row, {**row, "rt": 2.0}, {**row, "rt": 3.0}, {**row, "rt": 4.0}]
    assert shedding.results_kept(join, oracle, [row, {**row, "rt": 9.0}]) == 0.25
    count = shedding.SHAPES[1]
    full = [{"window": {"start": 0, "end": 4}, "key": 1, "n": 8}, {"window": {"start": 1, "end": 5}, "key": 1, "n": 8}]
    reduced = [{"window": {"start": 0, "end": 2}, "key": 1, "n": 4}]  # window start 1 not emitted: not counted
    assert shedding.results_kept(count, full, reduced) == 0.5


def test_results_kept_is_interpolated_between_measured_points_only() -> None:
    points = [(0.2, 0.8), (0.6, 0.3)]
    assert shedding._at(points, 0.1) == pytest.approx(0.9)  # between the oracle (0, 1) and the first point
    assert shedding._at(points, 0.4) == pytest.approx(0.55)
    assert shedding._at(points, 0.75) is None  # beyond the most saved: not reached
