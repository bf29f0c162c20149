"""Durations and sizes as people write them: parsed once (``daemon/units.py``), accepted in the configuration,
and printed one way (IEC bytes, compact durations, UTC instants)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from armd.daemon.config import ConfigError, load_config
from armd.daemon.units import format_duration, format_size, instant, parse_duration, parse_size
from support.config_cases import MINIMAL


@pytest.mark.parametrize("text, seconds", [
    ("30s", 30), ("10 minutes", 600), ("1h30m", 5400), ("1 hour 30 minutes", 5400), ("1.5h", 5400),
    ("interval 10 minutes", 600), ("INTERVAL 2 hours", 7200), ("250ms", 0.25), ("2d", 172800), ("45", 45),
])
def test_durations_parse(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "", "10 parsecs", "-5s", "1e400s"])
def test_no_duration_is_none(text):
    assert parse_duration(text) is None


@pytest.mark.parametrize("text, size", [("512 MiB", 512 * 2**20), ("850 kB", 850_000), ("2 GiB", 2 * 2**30), ("1024", 1024)])
def test_sizes_parse(text, size):
    assert parse_size(text) == size


def test_no_size_is_none():
    assert parse_size("lots") is None


@pytest.mark.parametrize("value, text", [
    (512 * 2**20, "512 MiB"), (1536, "1.50 KiB"), (812, "812 B"), (12.5 * 2**30, "12.5 GiB"), (None, "—"),
])
def test_sizes_print_in_iec_units(value, text):
    assert format_size(value) == text


@pytest.mark.parametrize("seconds, text", [
    (600, "10m"), (5400, "1h30m"), (30, "30s"), (0.25, "250ms"), (90061, "1d1h"), (3605, "1h"), (0, "0s"), (2.5, "2.5s"),
])
def test_durations_print_compactly(seconds, text):
    assert format_duration(seconds) == text


def test_instants_are_utc_wall_clock():
    assert instant(datetime(2026, 11, 24, 5, 31, 7, 400000)) == "2026-11-24 05:31:07 UTC"
    assert instant("2026-11-24T06:31:07+01:00") == "2026-11-24 05:31:07 UTC"


def _load(tmp_path: Path, text: str):
    path = tmp_path / "armd.toml"
    path.write_text(text)
    return load_config(path)


def test_windows_and_bounds_take_units(tmp_path):
    # model unit 1 ms: "10 minutes" is 600 000 units
    config = _load(tmp_path, MINIMAL.replace("memory_bytes = 1e6", 'memory_bytes = "512 MiB"') + """
[schedule]
observe_seconds = "2s"
decide_seconds = "1 minute"
[queries.per_second]
window = ["1s", "10 minutes"]
granularity = ["10s", 1000]
""")
    assert config.bounds.memory == 512 * 2**20
    assert config.qos["per_second"].window == (1000.0, 600_000.0)
    assert config.qos["per_second"].granularity == (10_000.0, 1000.0)
    assert (config.schedule.observe_seconds, config.schedule.decide_seconds) == (2.0, 60.0)


def test_durations_follow_the_model_time_unit(tmp_path):
    config = _load(tmp_path, MINIMAL + '[model]\ntime_unit_seconds = 1\n[queries.per_second.windows]\nclicks_10s = ["5s", "1h"]\n')
    assert config.qos["per_second"].windows["clicks_10s"] == (5.0, 3600.0)


@pytest.mark.parametrize("text, key, words", [
    ('[queries.per_second]\nwindow = ["1s", "ages"]', "queries.per_second.window", "durations such as"),
    ("[queries.per_second]\nwindow = [1000, 1e12]", "queries.per_second.window", "allowed: at most a year"),
    ('[queries.per_second]\nwindow = ["1s", "2 years"]', "queries.per_second.window", "allowed: at most a year"),
    ('[schedule]\nobserve_seconds = "often"', "schedule.observe_seconds", 'a duration such as "30s"'),
    ('[store]\nretention_days = "7d"', "store.retention_days", "expected a number"),
])
def test_bad_units_are_one_line(tmp_path, text, key, words):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, MINIMAL + text)
    message = str(caught.value)
    assert key in message and words in message and "\n" not in message, message


def test_bad_size_names_the_forms(tmp_path):
    with pytest.raises(ConfigError, match='size such as "512 MiB"'):
        _load(tmp_path, MINIMAL.replace("memory_bytes = 1e6", 'memory_bytes = "much"'))


def test_an_unnamed_window_may_be_given_by_the_name_armd_shows(tmp_path):
    plan = Path(__file__).resolve().parents[2] / "config/plans/example.json"
    config = _load(tmp_path, f'[bounds]\nmemory_bytes = "1 MiB"\ncpu = 100\n[plan]\nfile = "{plan}"\n'
                             '[queries.clicks_per_view.windows]\nviews = ["1s", "30s"]\n')
    assert config.qos["clicks_per_view"].windows == {"clicks_per_view.1": (1000.0, 30_000.0)}
