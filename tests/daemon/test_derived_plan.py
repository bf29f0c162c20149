"""The daemon without a plan file: the plan derived from the builders on Spark, and ``armd plan``/``explain --plan``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.spark import spark  # noqa: F401

from armd.daemon.cli import main
from armd.daemon.config import ConfigError, load_config

CONFIG = """
[bounds]
memory_bytes = 1e6
cpu = 0.1

[source]
kind = "spark"

[source.streams.clicks]
rate_per_second = 20
keys = 5

[source.streams.orders]
rate_per_second = 5
keys = 5

[managed.per_key]
builder = "support.derive_builders:tumbling_count"
params = { stream = "clicks" }
watermark_delay_seconds = 2
trigger_seconds = 5

[managed.matches]
builder = "armd.adapters.spark.builders:range_join"
params = { left = "clicks", right = "orders" }
watermark_delay_seconds = 1

[managed.running]
builder = "support.derive_builders:stateful"

[queries.per_key]
windows = { "per_key.w" = ["5s", "60s"] }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "armd.toml"
    path.write_text(text)
    return path


def test_without_a_plan_file_the_plan_is_derived_and_an_underivable_query_runs_unmanaged(spark, tmp_path) -> None:  # noqa: F811
    config = load_config(write(tmp_path, CONFIG), environ={})
    assert set(config.plan.queries) == {"per_key", "matches"}
    assert set(config.unmanaged) == {"running"} and "FlatMapGroupsInPandasWithState" in config.unmanaged["running"]
    assert config.plan.nodes["per_key.w"].w == 20_000 and config.plan.nodes["per_key.w.g"].g == 20_000  # ms
    assert config.plan.nodes["matches.j"].op == "join" and config.plan.nodes["matches.w"].w == 5000
    # the builder's names and armd's measurement labels (instrument.py) → derived ids: SparkStats.node_id maps by it
    assert config.managed["per_key"].nodes == {"w": "per_key.w", "agg1": "per_key.agg1"}
    assert config.plan.nodes["per_key.agg1"].op == "aggregate"
    assert config.managed["matches"].nodes == {"j": "matches.j", "w": "matches.w"}
    assert config.qos["per_key"].windows == {"per_key.w": (5000.0, 60000.0)}
    assert config.plan_doc["constants"]["watermark_delay"] == 2000 and config.plan_doc["constants"]["trigger_interval"] == 5000
    assert config.plan.streams["clicks"].d == pytest.approx(1000 / 20)
    assert not set(config.plan.query_nodes("per_key")) & set(config.plan.query_nodes("matches"))


def test_a_derived_plan_needs_a_time_unit_of_a_millisecond_or_finer(tmp_path) -> None:
    """Formula 7 gives a window w + 1 units of validity: in seconds every derived window would be a second too long."""
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, "[model]\ntime_unit_seconds = 1\n" + CONFIG), environ={})
    message = str(caught.value)
    assert "model.time_unit_seconds" in message and "too coarse for a plan derived from Spark" in message
    assert "0.001 s (the default) or finer" in message and "\n" not in message


def test_a_builder_that_fails_to_build_is_one_line(spark, tmp_path) -> None:  # noqa: F811
    text = CONFIG.replace('params = { stream = "clicks" }', 'params = { stream = "views" }')
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), environ={})
    message = str(caught.value)
    assert "managed.per_key.builder" in message and "building the query to derive its plan failed" in message
    assert "\n" not in message


def test_check_config_says_the_plan_is_derived(spark, tmp_path, capsys) -> None:  # noqa: F811
    assert main(["check-config", str(write(tmp_path, CONFIG))]) == 0
    out = capsys.readouterr().out
    assert "2 queries" in out and "plan derived from the builders" in out
    assert "running: runs unmanaged (fixed settings): unsupported operator FlatMapGroupsInPandasWithState" in out


def test_armd_plan_prints_the_plan_beside_the_spark_operators(spark, tmp_path, capsys) -> None:  # noqa: F811
    path = write(tmp_path, CONFIG)
    assert main(["plan", "armd.adapters.spark.builders:range_join", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("query matches (time unit 0.001 s")  # named after the [managed] entry using the builder
    assert any(line.split()[:3] == ["matches.j", "join", "sel=1*"] and "Join inner" in line for line in lines), out
    assert any(line.split()[:2] == ["matches.w", "window"] and "w=5000" in line for line in lines), out
    assert "clicks: rate=0.02* size=400*" in out and "watermark delay 1 s" in out
    assert main(["plan", "armd.adapters.spark.builders:range_join", "--config", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document) == {"streams", "constants", "queries"} and document["queries"]["matches"]["id"] == "matches.j"


def test_armd_plan_errors_are_one_line(spark, tmp_path, capsys) -> None:  # noqa: F811
    path = write(tmp_path, CONFIG)
    assert main(["plan", "support.derive_builders:stateful", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("armd: query 'running' (support.derive_builders:stateful): unsupported operator") and "\n" not in err
    assert main(["plan", "support.derive_builders:nope"]) == 2
    assert "has no attribute 'nope'" in capsys.readouterr().err


def test_explain_plan_of_a_configured_query(spark, tmp_path, capsys) -> None:  # noqa: F811
    path = write(tmp_path, CONFIG)
    assert main(["explain", "per_key", "--plan", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "per_key.agg" in out and "Aggregate [window, key]" in out and "Project window(20 s, 20 s) (tumbling)" in out
    assert main(["explain", "running", "--plan", "--config", str(path)]) == 2
    assert "runs unmanaged" in capsys.readouterr().err


def test_the_daemon_starts_an_unmanaged_query_and_says_so(spark, tmp_path) -> None:  # noqa: F811
    from datetime import datetime, timezone

    from armd.daemon.wiring import spark_runtime, start_unmanaged

    text = CONFIG.replace('[managed.running]\nbuilder = "support.derive_builders:stateful"',
                          '[managed.running]\nbuilder = "support.derive_builders:stateful"\nsink = "memory"')
    text = text.replace("[source]\nkind = \"spark\"", f"[source]\nkind = \"spark\"\n[spark]\ncheckpoint_dir = \"{tmp_path / 'cp'}\"")
    config = load_config(write(tmp_path, text), environ={})
    events = []
    runtime = spark_runtime(config, datetime.now(timezone.utc), None, lambda e: None, lambda q, e: None, lambda m: None)
    try:
        start_unmanaged(config, runtime, lambda kind, severity, message, query, details: events.append((kind, severity, query, message)))
        assert runtime.manager.get("running").running  # it runs, with no plan and no decisions
        assert not runtime.manager.get("per_key").running  # managed ones wait for the first decision
        (kind, severity, query, message), = events
        assert (kind, severity, query) == ("plan_derivation_failed", "warning", "running")
        assert "runs unmanaged with its initial settings: unsupported operator FlatMapGroupsInPandasWithState" in message
    finally:
        runtime.manager.stop_all()
        runtime.close()


def test_the_derived_example_configuration_loads(spark) -> None:  # noqa: F811
    from support import REPO

    config = load_config(REPO / "config" / "armd-derived.toml", environ={})
    assert set(config.plan.queries) == {"clicks_per_key", "big_click_average", "clicks_with_orders"} and not config.unmanaged
    assert config.managed["big_click_average"].nodes.items() >= {"f": "big_click_average.f", "w": "big_click_average.w"}.items()
    assert config.plan.nodes["clicks_with_orders.j"].op == "join"
