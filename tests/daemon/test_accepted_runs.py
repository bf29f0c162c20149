"""Property: a configuration ``check-config`` accepts runs — ``armd run`` on the simulated source starts and
logs no error for a few seconds.

The values are drawn near and past the bounds of their keys (``docs/configuration.md``, Limits): a value
past a bound must be refused by ``check-config``, one at the bound must work. A few examples only (each
starts a daemon for ~3 s); the schedule is compressed as in ``support.daemon`` (whose ``armd`` runs
``check-config`` and ``db upgrade`` in this process: each example starts one process, ``armd run``).
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

from armd.daemon.config import ConfigError, load_config
from support.daemon import armd, env, run_for, write_config

YEAR = 365 * 86400.0


def near(*values: object) -> st.SearchStrategy:
    return st.sampled_from(values)


KEYS = {
    ("store", "retention_days"): near(1e-9, 7.0, 3650.0, 3651.0, 1e308),
    ("store", "history_retention_days"): near(1e-9, 90.0, 3650.0, 3651.0, 1e308),
    ("store", "connect_backoff_seconds"): near(0.01, 60.0, 61.0, 1e308),
    ("store", "lease_seconds"): near(0.5, 86400.0, 86401.0),
    ("schedule", "decide_seconds"): near(0.2, 2.0, YEAR, YEAR + 1, 1e308),
    ("schedule", "housekeeping_seconds"): near(0.01, 1.0, YEAR, 1e308),
    ("schedule", "apply_seconds"): near(0.005, 0.01, 0.2, 86400.0),
    ("source", "seed"): near(-1, 0, 3, 2 ** 32 - 1, 2 ** 32),
    ("guardrails", "cooldown_seconds"): near(0.0, 30.0, YEAR, YEAR + 1),
    ("triggers", "threshold"): near(1e-9, 0.2, 1000.0, 1001.0),
    ("triggers", "window_seconds"): near(0.0, 5.0, 86400.0, 86401.0),
    ("triggers", "significance"): near(1e-300, 0.001, 1.0, 1.5),
    ("alerting", "dedup_seconds"): near(0.0, YEAR, 1e308),
    ("alerting", "queue_size"): near(1, 1_000_000, 1_000_001),
    ("alerting", "estimate_factor"): near(1.000001, 1e6, 1e308),
    ("alerting", "stale_intervals"): near(1, 1_000_000),
}
STREAM = {
    "rate_per_second": near(0.0, 50.0, 100_000.0, 100_001.0, 1e308),
    "keys": near(1, 1_000_000, 1_000_001),
    "factor": near(1e-9, 20.0, 1000.0, 1001.0, 1e308),
    "duration_seconds": near(1e-9, 60.0, YEAR, 1e308),
}
WINDOWS = near([1000, 60000], [1, 1e12], [1000, 1e12], [1000, 1e308], [1e-300, 1000])
HOOK_TIMEOUT = near(1.0, 3600.0, 3601.0, 1e308)


def toml(value: object) -> str:
    return json.dumps(value).replace("Infinity", "inf")


@st.composite
def configurations(draw) -> dict[str, object]:
    chosen = draw(st.lists(st.sampled_from(sorted(KEYS)), min_size=1, max_size=5, unique=True))
    return {
        "keys": {key: draw(KEYS[key]) for key in chosen},
        "stream": {name: draw(values) for name, values in STREAM.items()},
        "window": draw(WINDOWS),
        "hook_timeout": draw(HOOK_TIMEOUT),
    }


def render(base: str, drawn: dict[str, object]) -> str:
    """The compressed-schedule configuration with the drawn keys put in (replaced, or added to their table)."""
    # the compressed configuration's webhook points at a closed port on purpose; here a hook that works
    text = base.split("[[alerts]]")[0] + "[plan]" + base.split("[plan]", 1)[1]
    for (table, key), value in drawn["keys"].items():
        lines, header, found = text.splitlines(), f"[{table}]", False
        for i, line in enumerate(lines):
            if line.split("=")[0].strip() == key and _table_of(lines, i) == header:
                lines[i], found = f"{key} = {toml(value)}", True
        if not found and header in lines:
            lines.insert(lines.index(header) + 1, f"{key} = {toml(value)}")
        elif not found:
            lines.append(f"{header}\n{key} = {toml(value)}")
        text = "\n".join(lines) + "\n"
    stream = drawn["stream"]
    text = text.replace("rate_per_second = 50", f"rate_per_second = {toml(stream['rate_per_second'])}\n"
                                                f"keys = {toml(stream['keys'])}")
    text = text.replace("duration_seconds = 60, factor = 20",
                        f"duration_seconds = {toml(stream['duration_seconds'])}, factor = {toml(stream['factor'])}")
    text = text.replace("window = [1000, 60000]", f"window = {toml(drawn['window'])}")
    text += f'\n[[alerts]]\nkind = "command"\nargv = ["true"]\ntimeout_seconds = {toml(drawn["hook_timeout"])}\n'
    return text


def _table_of(lines: list[str], index: int) -> str | None:
    for line in reversed(lines[:index]):
        if line.startswith("["):
            return line.strip()
    return None


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.filter_too_much])
@given(drawn=configurations())
@example(drawn={  # every drawn key at its largest allowed value (the simulated rate at its limit)
    "keys": {("store", "retention_days"): 1e-9, ("store", "history_retention_days"): 1e-9, ("schedule", "housekeeping_seconds"): 0.01,
             ("schedule", "decide_seconds"): YEAR, ("source", "seed"): 2 ** 32 - 1,
             ("guardrails", "cooldown_seconds"): YEAR},
    "stream": {"rate_per_second": 100_000.0, "keys": 1_000_000, "factor": 1.0, "duration_seconds": YEAR},
    "window": [1, 3.15e10], "hook_timeout": 3600.0})  # a year in milliseconds: the longest window range allowed
def test_a_configuration_check_config_accepts_runs_without_an_error_event(tmp_path_factory, drawn):
    tmp_path: Path = tmp_path_factory.mktemp("accepted")
    path = write_config(tmp_path)
    path.write_text(render(path.read_text(), drawn))
    try:
        load_config(path, environ=env())
    except ConfigError as exc:
        assert "\n" not in str(exc) and "invalid TOML" not in str(exc), str(exc)
        assume(False)
    armd("check-config", str(path))
    armd("db", "upgrade", "--config", str(path))
    result, _ = run_for(path, 3.0)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    events = [line for line in (json.loads(l) for l in result.stderr.splitlines() if l.startswith("{"))]
    # A drawn workload the bounds cannot take (100,000 rows/s, a burst × 1000) is reported, as it must be: the daemon
    # saying so is not the configuration breaking it.
    errors = [e for e in events if (e.get("level") in ("error", "critical") or e.get("severity") == "error")
              and e.get("event") != "bounds_unreachable"]
    assert not errors, errors
