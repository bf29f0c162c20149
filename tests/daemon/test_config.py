"""The configuration file: defaults, validation messages, interpolation and secrets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from support import REPO
import pytest

from armd.daemon.config import (
    AlertHook,
    AlertingConfig,
    MetricsConfig,
    Burst,
    Config,
    ConfigError,
    ModelConfig,
    RateStep,
    ScheduleConfig,
    SourceConfig,
    SinkConfig,
    SparkConfig,
    StoreConfig,
    TriggerConfig,
    load_config,
)
from armd.policies.guardrails import Guardrails
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QueryQoS

ROOT = REPO
EXAMPLE = ROOT / "config" / "armd-simulated.toml"
SPARK_EXAMPLE = ROOT / "config" / "armd-spark.toml"

from support.config_cases import COUNT, MINIMAL, MISTAKES, SPARK


def write(tmp_path: Path, text: str, name: str = "armd.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_example_configuration_loads():
    config = load_config(EXAMPLE, environ={})
    assert config.path == EXAMPLE
    assert config.store.url == f"sqlite:///{EXAMPLE.parent / 'armd.db'}"  # relative to the configuration's folder
    assert set(config.plan.queries) == {"clicks_per_view", "clicks_per_second", "big_orders"}
    assert config.plan_doc == json.loads((ROOT / "config" / "plans" / "example.json").read_text())
    assert set(config.qos) == {"clicks_per_view", "clicks_per_second"}
    assert config.qos["clicks_per_view"].windows == {"clicks_10s": (1000.0, 20000.0)}
    assert set(config.source.streams) == {"clicks", "views", "orders"}
    assert config.source.streams["clicks"].bursts == (Burst(20.0, 15.0, 4.0),)
    assert config.source.streams["views"].rate_per_second == pytest.approx(25.0)  # plan d = 40 ms
    assert config.alerts == (AlertHook("log"),)
    assert config.secrets == frozenset()


def test_the_spark_example_runs_three_managed_queries():
    config = load_config(SPARK_EXAMPLE, environ={})
    assert (config.source.kind, config.spark.master, config.model.time_unit_seconds) == ("spark", "local[2]", 1.0)
    assert set(config.managed) == set(config.plan.queries) == {"clicks_per_key", "big_click_average", "clicks_with_orders"}
    join = config.managed["clicks_with_orders"]
    assert join.builder == "armd.adapters.spark.builders:range_join" and join.nodes == {"w": "cwo_w", "j": "cwo_j"}
    assert join.sink == SinkConfig("parquet", path="armd-output/clicks_with_orders") and join.watermark_delay_seconds == 2
    assert config.public()["managed"]["big_click_average"]["params"] == {"threshold": 0.5}


def test_a_sql_sink_password_is_a_secret(tmp_path):
    text = MINIMAL + SPARK + f"builder = '{COUNT}'\nsink = {{ kind = 'sql', url = 'postgresql+psycopg://u:s3cret@db/x' }}\n"
    config = load_config(write(tmp_path, text), environ={})
    assert config.managed["per_second"].sink == SinkConfig("sql", url="postgresql+psycopg://u:s3cret@db/x", table="per_second")
    assert "s3cret" in config.secrets and "s3cret" not in json.dumps(config.public())


@pytest.mark.parametrize("example, burst_fits", [(EXAMPLE, (False, False)), (SPARK_EXAMPLE, (False, True))], ids=["simulated", "spark"])
def test_the_example_burst_forces_the_policy_to_cut_settings(example, burst_fits):
    config = load_config(example, environ={})
    problem = Problem(config.plan, config.qos, profile=config.model.profile)
    names = problem.batch.stream_names
    plan_d = np.array([config.plan.streams[s].d for s in names])
    clicks = config.source.streams["clicks"]
    burst_d = np.where(np.array(names) == "clicks", plan_d / clicks.bursts[0].factor, plan_d)
    n = len(problem.queries)

    def fits(fraction: float, stream_d: np.ndarray) -> tuple[bool, bool]:
        outcome = problem.evaluate(np.full(n, fraction), np.full(n, fraction), stream_d)
        b = config.bounds
        return bool(outcome.total_memory <= b.usable_memory), bool(outcome.total_cpu <= b.usable_cpu)

    assert fits(1.0, plan_d) == (True, True)
    assert fits(1.0, burst_d) == burst_fits  # the Spark demo is bound by memory only
    assert fits(0.0, burst_d) == (True, True)


def test_a_minimal_configuration_takes_every_default(tmp_path):
    config = load_config(write(tmp_path, MINIMAL), environ={})
    assert config.store == StoreConfig(f"sqlite:///{tmp_path / 'armd.db'}", 7.0, 5, 0.5)  # the default file, beside the configuration
    assert config.model == ModelConfig(0.001, "paper")
    assert config.spark == SparkConfig("local[2]", "armd", {})
    assert config.bounds == Bounds(1e6, 100.0, 0.1)
    assert (config.policy.name, dict(config.policy.params)) == ("weighted-qos", {})
    assert config.guardrails == Guardrails(cooldown=30.0, hysteresis=0.02, max_step=0.5, dry_run=False)
    assert config.triggers == TriggerConfig(None, 0.2, 0.001, None)
    assert config.schedule == ScheduleConfig(1.0, 30.0, 1.0, 300.0)
    assert (config.source.kind, config.source.seed) == ("synthetic", 42)
    stream = config.source.streams["clicks"]
    assert (stream.rate_per_second, stream.steps, stream.bursts, stream.keys) == (pytest.approx(50.0), (), (), 1)
    assert config.alerts == ()
    assert config.alerting == AlertingConfig(300.0, 1000, 30, 4.0)
    assert config.metrics == MetricsConfig(False, 9464, "127.0.0.1")
    assert config.qos == {}
    assert list(config.plan.queries) == ["per_second"]


def test_every_section_is_read(tmp_path):
    text = (
        MINIMAL
        + """
[store]
url = "postgresql+psycopg://armd:pw@db.example/armd"
retention_days = 2.5
connect_retries = 0
connect_backoff_seconds = 1

[model]
time_unit_seconds = 1

[spark]
master = "spark://head:7077"
[spark.conf]
spark.sql.shuffle.partitions = 4
"spark.ui.enabled" = false

[policy]
name = "paper-bisection"
params = { steps = 20 }

[guardrails]
cooldown_seconds = 0
dry_run = true

[source]
seed = 7
[source.streams.clicks]
rate_per_second = 10
steps = [ { at_seconds = 0, rate_per_second = 5 }, { at_seconds = 60, rate_per_second = 20 } ]
keys = 100

[[alerts]]
kind = "webhook"
url = "https://hooks.example/armd"
retries = 0
[[alerts]]
kind = "command"
argv = ["page", "--team", "streams"]
timeout_seconds = 10

[queries.per_second]
weight = 3
granularity = [8000, 1000]
"""
    )
    config = load_config(write(tmp_path, text), environ={})
    assert config.store == StoreConfig("postgresql+psycopg://armd:pw@db.example/armd", 2.5, 0, 1.0)
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
    assert (config.policy.name, dict(config.policy.params)) == ("paper-bisection", {"steps": 20})
    assert config.guardrails.dry_run and config.guardrails.cooldown == 0
    assert config.source == SourceConfig("synthetic", 7, {"clicks": config.source.streams["clicks"]})
    assert config.source.streams["clicks"].steps == (RateStep(0.0, 5.0), RateStep(60.0, 20.0))
    assert config.source.streams["clicks"].keys == 100
    assert config.alerts == (
        AlertHook("webhook", url="https://hooks.example/armd", retries=0),
        AlertHook("command", argv=("page", "--team", "streams"), timeout_seconds=10.0),
    )
    assert config.qos == {"per_second": QueryQoS(granularity=(8000.0, 1000.0), weight=3.0)}
    assert config.secrets == {"pw"}




@pytest.mark.parametrize("change, key, allowed", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_names_file_key_and_what_is_allowed(tmp_path, change, key, allowed):
    text = MINIMAL.replace(*change) if isinstance(change, tuple) else MINIMAL + "\n" + change + "\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    message = str(caught.value)
    assert message.startswith(f"{path}: {key}: "), message
    assert allowed in message, message
    assert "\n" not in message
    assert caught.value.key == key


def test_a_drop_rate_range_is_read_into_the_query_qos(tmp_path):
    config = load_config(write(tmp_path, MINIMAL + "\n[queries.per_second]\ndrop_rate = [0, 0.5]\n"), environ={})
    assert config.qos["per_second"].drop_rate == (0.0, 0.5) and config.qos["per_second"].sheds
    plain = load_config(write(tmp_path, MINIMAL + "\n[queries.per_second]\nweight = 2\n"), environ={})
    assert plain.qos["per_second"].drop_rate == (0.0, 0.0) and not plain.qos["per_second"].sheds


def test_alerting_and_metrics_are_read(tmp_path):
    text = MINIMAL + "\n[alerting]\ndedup_seconds = 0\nqueue_size = 5\nstale_intervals = 3\nestimate_factor = 2.5\n"
    text += "[metrics]\nenabled = true\nport = 9100\naddress = '127.0.0.1'\n"
    config = load_config(write(tmp_path, text), environ={})
    assert config.alerting == AlertingConfig(0.0, 5, 3, 2.5)
    assert config.metrics == MetricsConfig(True, 9100, "127.0.0.1")
    assert config.public()["metrics"] == {"enabled": True, "port": 9100, "address": "127.0.0.1"}


def test_a_missing_plan_file_is_named(tmp_path):
    text = MINIMAL.split("[plan.streams.clicks]")[0] + "[plan]\nfile = 'plans/missing.json'\n"
    path = write(tmp_path, text)
    with pytest.raises(
        ConfigError,
        match=r"armd.toml: plan.file: cannot read plan file .*missing.json'.*relative to the configuration's folder",
    ):
        load_config(path, environ={})


def test_the_plan_file_is_relative_to_the_configuration(tmp_path):
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "bad.json").write_text(
        '{"streams": {"A": {"d": 1, "size": 8}}, "queries": {"q": {"op": "nope"}}}'
    )
    (tmp_path / "plans" / "ok.json").write_text((ROOT / "config" / "plans" / "example.json").read_text())
    head = MINIMAL.split("[plan.streams.clicks]")[0]
    config = load_config(write(tmp_path, head + "[plan]\nfile = 'plans/ok.json'\n"), environ={})
    assert set(config.plan.streams) == {"clicks", "views", "orders"}
    with pytest.raises(
        ConfigError,
        match=r"armd.toml: plan: plan file 'plans/bad.json': node 'q': unknown operator 'nope'; allowed: source",
    ):
        load_config(write(tmp_path, head + "[plan]\nfile = 'plans/bad.json'\n"), environ={})


def test_toml_syntax_errors_name_the_line(tmp_path):
    path = write(tmp_path, MINIMAL + "\n[store\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    line = MINIMAL.count("\n") + 2
    assert str(caught.value).startswith(f"{path}: line {line}, column ")
    assert "invalid TOML" in str(caught.value)


def test_an_unreadable_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"nope.toml: cannot read the configuration: No such file"):
        load_config(tmp_path / "nope.toml", environ={})


def test_variables_are_taken_from_the_environment_and_dollar_escapes(tmp_path):
    text = (
        MINIMAL
        + """
[store]
url = "postgresql+psycopg://${DB_USER}:${DB_PASSWORD}@db.example/armd"
[spark]
app_name = "armd-${TEAM}-$${literal}"
"""
    )
    environ = {"DB_USER": "armd", "DB_PASSWORD": "s3cret", "TEAM": "streams"}
    config = load_config(write(tmp_path, text), environ=environ)
    assert config.store.url == "postgresql+psycopg://armd:s3cret@db.example/armd"
    assert config.spark.app_name == "armd-streams-${literal}"


def test_secrets_are_redacted_and_absent_from_public(tmp_path):
    text = (
        MINIMAL
        + """
[store]
url = "postgresql+psycopg://armd:${DB_PASSWORD}@db.example/armd"
[[alerts]]
kind = "webhook"
url = "https://hooks.example/armd"
secret = "${HOOK_SECRET}"
[[alerts]]
kind = "webhook"
url = "https://other.example/armd"
secret = "inline-hmac-key"
"""
    )
    environ = {"DB_PASSWORD": "db-pw-0451", "HOOK_SECRET": "hook-0451"}
    config = load_config(write(tmp_path, text), environ=environ)
    assert config.secrets == {"db-pw-0451", "hook-0451", "inline-hmac-key"}
    assert (
        config.redact(f"connect to {config.store.url} failed")
        == "connect to postgresql+psycopg://armd:***@db.example/armd failed"
    )
    public = config.public()
    dumped = json.dumps(public)
    assert not any(secret in dumped for secret in config.secrets)
    assert public["store"]["url"] == "postgresql+psycopg://armd:***@db.example/armd"
    assert [hook["secret"] for hook in public["alerts"]] == ["***", "***"]
    assert public["bounds"] == {"memory_bytes": 1e6, "cpu": 100.0, "reserve": 0.1}
    assert public["plan"] == config.plan_doc


def test_a_percent_encoded_password_is_a_secret_in_both_forms(tmp_path):
    text = MINIMAL + '[store]\nurl = "postgresql+psycopg://armd:p%40ss@db/armd"\n'
    config = load_config(write(tmp_path, text), environ={})
    assert config.secrets == {"p%40ss", "p@ss"}
    assert config.redact("at postgresql+psycopg://armd:p@ss@db/armd") == "at postgresql+psycopg://armd:***@db/armd"
    assert config.redact("dsn password=p@ss host=db") == "dsn password=*** host=db"
    assert config.redact("p@ss") == "***" and config.redact("p%40ss") == "***"


def test_config_is_frozen(tmp_path):
    config = load_config(write(tmp_path, MINIMAL), environ={})
    assert isinstance(config, Config)
    with pytest.raises(AttributeError):
        config.bounds = Bounds(1.0, 1.0)  # type: ignore[misc]


def test_the_documented_file_loads(tmp_path):
    text = (ROOT / "docs" / "configuration.md").read_text().split("```toml\n")[1].split("```")[0]
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "example.json").write_text((ROOT / "config" / "plans" / "example.json").read_text())
    config = load_config(write(tmp_path, text), environ={"ARMD_WEBHOOK_SECRET": "hmac-key"})
    assert [hook.kind for hook in config.alerts] == ["webhook", "alertmanager", "command", "log"]
    assert config.secrets == {"hmac-key"}


def test_the_tutorial_shows_the_demo_application_as_it_is_and_its_appendix_configuration_loads(monkeypatch):
    tutorial = (ROOT / "docs" / "tutorial.md").read_text()
    app = (ROOT / "examples" / "demo_app.py").read_text()
    body = tutorial.split("def clicks_per_key(spark, s):\n")[1].split("\n\n")[0]
    assert body and body in app  # the query as the tutorial shows it is the one make run runs
    for declared in ('"windows": {"w": ("5 seconds", "60 seconds")}', '"slides": {"w": ("1 second", "4 seconds")}',
                     '"windows": {"j": ("2 seconds", "30 seconds")}'):
        assert declared in app
    example = ROOT / "examples" / "pageviews"
    monkeypatch.syspath_prepend(str(example))
    config = load_config(example / "armd.toml", environ={})
    assert (config.source.kind, config.managed["page_views"].builder) == ("spark", "pageviews:build")


JISC_EXAMPLE = ROOT / "config" / "armd-jisc.toml"


def test_the_jisc_example_lets_armd_choose_a_join_order():
    config = load_config(JISC_EXAMPLE, environ={})
    join = config.managed["journeys"]
    assert join.builder == "armd.adapters.spark.builders:multiway_join" and config.spark.state_store == "rocksdb"
    assert join.join_order.order == ("views", "carts", "clicks")
    assert (join.join_order.margin, join.join_order.cooldown_seconds, join.join_order.shape) == (0.2, 30.0, "left-deep")
    assert join.join_order.control == "armd-checkpoints-jisc/journeys.join-order.json"
    assert config.public()["managed"]["journeys"]["join_order"]["order"] == ["views", "carts", "clicks"]


@pytest.mark.parametrize("old, new, key, words", [
    ('state_store = "rocksdb"', 'state_store = "hdfs"', "managed.journeys.join_order", 'needs [spark] state_store = "rocksdb"'),
    ('order = ["views", "carts", "clicks"]', 'order = ["views", "clicks"]', "managed.journeys.join_order.order",
     "the query's streams (views, carts, clicks), each once"),
    ("cooldown_seconds = 30", "margin = 1", "managed.journeys.join_order.margin", "in [0, 1)"),
    ("cooldown_seconds = 30", "shape = 'zigzag'", "managed.journeys.join_order.shape", "one of left-deep, bushy"),
    ("cooldown_seconds = 30", "every = 3", "managed.journeys.join_order.every", "allowed keys of"),
    ("[[alerts]]", "[queries.journeys]\nwindow = [5, 10]\n[[alerts]]", "queries.journeys.window", "a fixed window [w, w] or none"),
], ids=["hdfs", "order", "margin", "shape", "unknown key", "window range"])
def test_jisc_join_order_mistakes_name_the_key_and_what_is_allowed(tmp_path, old, new, key, words):
    text = JISC_EXAMPLE.read_text()
    assert old in text
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "jisc-demo.json").write_text((ROOT / "config" / "plans" / "jisc-demo.json").read_text())
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text.replace(old, new, 1)), environ={})
    message = str(info.value)
    assert f"armd.toml: {key}: " in message and words in message, message


def test_a_jisc_join_must_be_joins_over_one_input_per_stream(tmp_path):
    """armd estimates a JISC join in the order it runs by rebuilding its joins: each other input reads one stream."""
    plan = json.loads((ROOT / "config" / "plans" / "jisc-demo.json").read_text())
    plan["queries"]["journeys"]["inputs"][1] = {"op": "window", "id": "jr_w_clicks", "w": 10, "inputs": [
        {"op": "union", "inputs": [{"op": "source", "stream": "clicks"}, {"op": "source", "stream": "views"}]}]}
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "jisc-demo.json").write_text(json.dumps(plan))
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, JISC_EXAMPLE.read_text()), environ={})
    message = str(info.value)
    assert "managed.journeys.join_order: " in message and "'jr_w_clicks'" in message and "exactly one stream" in message, message


def test_a_node_shared_by_two_spark_queries_is_refused(tmp_path):
    """Spark runs every managed query on its own state: a shared plan node would be counted once for two (issue 20)."""
    shared = MINIMAL + """
[plan.queries.per_key]
op = "aggregate"
groups = 5
inputs = [ { ref = "clicks_10s" } ]
""" + SPARK + f"builder = '{COUNT}'\n[managed.per_key]\nbuilder = '{COUNT}'\n"
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, shared), environ={})
    message = str(caught.value)
    assert "node 'clicks_10s' is shared by the Spark queries 'per_second' and 'per_key'" in message, message
    assert "own copy" in message and "\n" not in message
    simulated = MINIMAL + '\n[plan.queries.per_key]\nop = "aggregate"\ninputs = [ { ref = "clicks_10s" } ]\n'
    assert load_config(write(tmp_path, simulated), environ={}).plan.query_nodes("per_key")  # without Spark, sharing stays


def test_a_source_genmig_cannot_migrate_is_accepted_only_with_the_naive_restart_chosen(tmp_path):
    text = MINIMAL + "[spark]\nmigration = 'naive-restart'\n" + SPARK + f"builder = '{COUNT}'\n" + \
        "[managed.per_second.sources.clicks]\nformat = 'socket'\nhost = 'localhost'\nport = 9999\n"
    path = tmp_path / "armd.toml"
    path.write_text(text)
    config = load_config(path, environ={})
    assert config.spark.migration == "naive-restart"
    assert config.managed["per_second"].sources == {"clicks": {"format": "socket", "host": "localhost", "port": "9999"}}


def test_genmig_is_the_default_migration():
    assert load_config(SPARK_EXAMPLE, environ={}).spark.migration == "genmig"
    from armd.daemon.config.sections import SparkConfig

    assert SparkConfig().migration == "genmig"


def test_a_herald_column_is_declared_per_stream_of_a_managed_query(tmp_path):
    text = MINIMAL + SPARK + f"builder = '{COUNT}'\nheralds = {{ clicks = 'herald' }}\n"
    config = load_config(write(tmp_path, text), environ={})
    assert config.managed["per_second"].heralds == {"clicks": "herald"}


def test_a_herald_side_stream_is_a_directory_relative_to_the_configuration(tmp_path):
    (tmp_path / "heralds" / "clicks").mkdir(parents=True)
    text = MINIMAL + SPARK + f"builder = '{COUNT}'\nherald_sources = {{ clicks = 'heralds/clicks' }}\n"
    config = load_config(write(tmp_path, text), environ={})
    assert config.managed["per_second"].herald_sources == {"clicks": str((tmp_path / "heralds" / "clicks").resolve())}
