"""``armd report`` in the units of the rest of armd (IEC bytes) and with the CPU Spark measured beside the estimate."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from armd.daemon.report import BYTES, measured_busy, plot_cpu, plot_memory_total
from armd.policies.problem import Bounds

T0 = datetime(2026, 11, 24, 5, 0, tzinfo=timezone.utc)


def test_byte_axes_are_iec():
    assert BYTES(3 * 2**20, 0) == "3.00 MiB" and BYTES(1536, 0) == "1.50 KiB"


def test_measured_busy_is_each_batch_over_the_time_since_the_one_before():
    batches = [{"query": "q", "at": T0 + timedelta(seconds=s), "batch_ms": ms} for s, ms in ((0, 100), (2, 500), (3, 250))]
    times, values = measured_busy(batches)["q"]
    assert times == [T0 + timedelta(seconds=2), T0 + timedelta(seconds=3)] and values == pytest.approx([0.25, 0.25])


def test_the_cpu_plot_draws_estimate_and_measurement(tmp_path):
    estimates = [{"at": T0 + timedelta(seconds=s), "query": q, "memory_bytes": 1.0, "cpu": 5.0} for s in range(3) for q in (None, "q")]
    batches = [{"query": "q", "at": T0 + timedelta(seconds=s), "batch_ms": 300} for s in range(4)]
    series = {"observations": [], "estimates": estimates, "decisions": [], "migrations": [], "batches": batches}
    drawn = plot_cpu(series, Bounds(memory=1e6, cpu=10.0), tmp_path / "cpu.png")
    assert drawn["q (measured busy)"][1] == pytest.approx([0.3, 0.3, 0.3]) and drawn["estimated total"][1] == [5.0] * 3
    assert (tmp_path / "cpu.png").stat().st_size > 10_000


def test_the_measured_total_counts_each_querys_newest_report_when_applications_report_apart(tmp_path):
    observations = [{"at": T0, "query": "shop", "state_bytes": 4_000}, {"at": T0, "query": None, "state_bytes": None},
                    {"at": T0 + timedelta(seconds=1), "query": "ads", "state_bytes": 1_000},
                    {"at": T0 + timedelta(seconds=2), "query": "shop", "state_bytes": 3_000},
                    {"at": T0 + timedelta(seconds=40), "query": "ads", "state_bytes": 500}]
    series = {"observations": observations, "estimates": [], "decisions": [], "migrations": [], "batches": []}
    drawn = plot_memory_total(series, Bounds(memory=1e6, cpu=10.0), tmp_path / "memory_total.png")
    times, values = drawn["measured"]
    assert times == [T0 + timedelta(seconds=s) for s in (0, 1, 2, 40)] and values == [4_000, 5_000, 4_000, 500]
