"""The rates a decision uses when forecasting is on (issue 21, item 3; paper 001 §4.4).

Why apart from the cycle: choosing the horizon (the adaptation delay of the
settings in force) and turning forecast rates into the d the policy decides
on is one step of its own, with its own record entry; the forecast itself is
``policies.forecast``. Pure: the history and the settings come in.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from armd.policies.forecast import RateHistory, forecast
from armd.policies.ramp import Trend, rising

from .model import Model, Setup, longest_window
from .ports import QuerySettings


def forecast_d(setup: Setup, model: Model, history: RateHistory, running: Mapping[str, QuerySettings], admitted: list[str],
               stream_d: np.ndarray, rising: Mapping[str, Trend] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """The d to decide on: each stream's measured d, or the d of its rate forecast at the horizon when that is higher.

    The horizon is the configured one, else the adaptation delay: the longest
    window of the settings in force (a cut is complete once it has passed)
    plus the watermark delay (``policies.forecast``). Returns the d and,
    for the record, the rates measured and forecast.
    """
    rules = setup.forecast
    if not rules.enabled:
        return stream_d, {}
    horizon = rules.horizon_seconds
    if horizon is None:
        windows = [longest_window(setup.plan, q, s) for q, s in running.items() if q in admitted]
        delays = [setup.migration.timings.get(q, (0.0, 0.0))[0] for q in admitted]
        horizon = max(windows, default=0.0) * setup.time_unit_seconds + max(delays, default=0.0)
    unit, used, streams = setup.time_unit_seconds, stream_d.copy(), {}
    for i, stream in enumerate(model.stream_names):
        measured = 1.0 / (stream_d[i] * unit) if stream_d[i] > 0 else 0.0
        ahead = forecast(history.points.get(stream, ()), horizon, rules.min_history)
        if ahead is None:
            continue
        rate, method = ahead.rate, ahead.method
        ramp = (rising or {}).get(stream)
        if ramp is not None and ramp.ahead(horizon) > rate:
            # A significant ramp: its fitted line, on the raw counts of the trend window, where Holt's smoothed
            # level and trend still lag it (at the plant's ramp ×4, 17 s in: 62/s forecast 32 s ahead, 111/s real).
            rate, method = ramp.ahead(horizon), "trend"
        rises = rate > measured
        if rises:
            used[i] = 1.0 / (rate * unit)
        streams[stream] = {"measured_rate": measured, "forecast_rate": rate, "method": method, "used": rises}
    return used, {"horizon_seconds": horizon, "streams": streams}


def rising_streams(setup: Setup, history: RateHistory) -> dict[str, Trend]:
    """The streams whose rate rises significantly (``policies.ramp``); none while forecasting is off."""
    rules = setup.forecast
    if not rules.enabled:
        return {}
    return rising(history.points, rules.trend_seconds, rules.trend_significance, setup.observe_seconds)
