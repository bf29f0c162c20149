"""The derivation from one definition per key: allowed keys, reading, public view, secrets, documentation."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest
from support import REPO
from support.config_cases import COUNT, MINIMAL, SPARK

from armd.daemon.config import REDACTED, SECTIONS, Config, ConfigError, load_config
from armd.daemon.config.document import PART, sections
from armd.daemon.config.keys import AT_LEAST_ONE, definitions, key_values, keys_of, setting
from armd.daemon.config.reader import Table
from armd.daemon.config.sections import ALERT_KINDS, HookKeys
from armd.policies.problem import Problem
from armd.policies.qos import QoSError, QueryQoS

JISC_EXAMPLE = REPO / "config" / "armd-jisc.toml"


def _classes_in(hint: object) -> typing.Iterator[type]:
    """The dataclasses a type hint names (``Mapping[str, X]``, ``tuple[X, ...]``, ``X | None``)."""
    if dataclasses.is_dataclass(hint):
        yield hint  # type: ignore[misc]
    for arg in typing.get_args(hint):
        yield from _classes_in(arg)


def _declared(cls: type) -> typing.Iterator[type]:
    """Every class declaring keys below ``cls``: a ``Config`` part's own, or its keys' types."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(PART, (None, None))[1]
        for candidate in [spec] if spec else _classes_in(hints[f.name]):
            if next(definitions(candidate), None) is not None:
                yield candidate
                yield from _declared(candidate)


SPECS = list(dict.fromkeys(_declared(Config)))
"""Every class that declares keys of the file."""

PLAIN_SECTIONS = {
    name: spec or typing.get_type_hints(Config)[f.name]
    for f in dataclasses.fields(Config)
    if PART in f.metadata
    for name, spec in [f.metadata[PART]]
    if name in ("store", "model", "spark", "bounds", "policy", "guardrails", "triggers", "schedule", "source",
                "alerting", "metrics", "apply", "migration_cost", "forecast")
}


def _toml(value: object) -> str:
    """A value as TOML, tables inline (enough to write back what ``public()`` shows)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items() if v is not None) + " }"
    raise TypeError(value)


def _written_back(public: dict) -> str:
    return "\n".join(f"{name} = {_toml(body)}" for name, body in public.items() if name != "path") + "\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "armd.toml"
    path.write_text(text)
    return path


EVERY_SECTION = MINIMAL + """
[store]
url = "sqlite:///elsewhere.db"
retention_days = 2
[model]
profile = "spark"
[spark]
master = "local[1]"
state_store = "rocksdb"
migration = "genmig"
[spark.conf]
"spark.ui.enabled" = false
[policy]
name = "paper-bisection"
[guardrails]
cooldown_seconds = 5
dry_run = true
[triggers]
alpha = 0.5
[schedule]
observe_seconds = 2
decide_seconds = 10
[source]
seed = 3
[source.streams.clicks]
rate_per_second = 10
keys = 4
steps = [ { at_seconds = 1, rate_per_second = 2 } ]
bursts = [ { at_seconds = 3, duration_seconds = 4, factor = 5 } ]
[[alerts]]
kind = "webhook"
url = "https://hooks.example/armd"
timeout_seconds = 2
[[alerts]]
kind = "command"
argv = ["page", "me"]
retries = 1
[[alerts]]
kind = "log"
[alerting]
queue_size = 5
[metrics]
enabled = true
port = 0
[apply]
max_attempts = 3
[migration_cost]
qos_per_bound_second = 0.01
[forecast]
enabled = true
horizon_seconds = 12
[queries.per_second]
weight = 2
window = [1000, 20000]
granularity = [8000, 1000]
"""


def test_every_class_that_declares_keys_is_found():
    names = {spec.__name__ for spec in SPECS}
    assert {"StoreConfig", "BoundsKeys", "GuardrailsKeys", "QueryKeys", "HookKeys", "ManagedQueryConfig", "SinkConfig",
            "JoinOrderConfig", "SyntheticStream", "RateStep", "Burst", "ApplyConfig", "AppConfig"} <= names


def test_the_sections_are_the_parts_of_config():
    assert SECTIONS == ("store", "model", "spark", "bounds", "policy", "guardrails", "triggers", "schedule", "source",
                        "alerts", "alerting", "metrics", "plan", "queries", "managed", "apply", "feedback",
                        "migration_cost", "forecast", "apps")


@pytest.mark.parametrize("example", ["every section", "jisc"])
def test_public_written_back_as_a_file_reads_the_same(tmp_path, example):
    """Every key public() shows is a key the file accepts, under the same name and in the same layout."""
    source = load_config(write(tmp_path, EVERY_SECTION), environ={}) if example == "every section" else \
        load_config(JISC_EXAMPLE, environ={})
    public = source.public()
    again = load_config(_write_back(tmp_path, public), environ={})
    assert {k: v for k, v in again.public().items() if k != "path"} == {k: v for k, v in public.items() if k != "path"}


def _write_back(tmp_path: Path, public: dict) -> Path:
    folder = tmp_path / "again"
    folder.mkdir()
    return write(folder, _written_back(public))


def test_a_sql_sink_is_written_back_with_its_url_and_table(tmp_path):
    text = MINIMAL + SPARK + f"builder = '{COUNT}'\nsink = {{ kind = 'sql', url = 'sqlite:///out.db' }}\n"
    public = load_config(write(tmp_path, text), environ={}).public()
    assert public["managed"]["per_second"]["sink"] == {"kind": "sql", "url": "sqlite:///out.db", "table": "per_second"}
    assert load_config(_write_back(tmp_path, public), environ={}).public()["managed"] == public["managed"]


@pytest.mark.parametrize("name", PLAIN_SECTIONS)
def test_public_shows_every_key_of_a_section(tmp_path, name):
    public = load_config(write(tmp_path, MINIMAL), environ={}).public()
    assert list(public[name]) == list(keys_of(PLAIN_SECTIONS[name]))


@pytest.mark.parametrize("name", PLAIN_SECTIONS)
def test_an_unknown_key_is_refused_with_the_declared_keys(tmp_path, name):
    text = MINIMAL.replace("[bounds]", "[bounds]\nno_such_key = 1") if name == "bounds" else \
        MINIMAL + f"\n[{name}]\nno_such_key = 1\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    allowed = ", ".join(keys_of(PLAIN_SECTIONS[name]))
    assert str(caught.value) == f"{path}: {name}.no_such_key: unknown key; allowed keys of [{name}]: {allowed}"


@pytest.mark.parametrize("text, key, spec", [
    ("[queries.per_second]\nno_such_key = 1", "queries.per_second", "QueryKeys"),
    ("[source.streams.clicks]\nno_such_key = 1", "source.streams.clicks", "SyntheticStream"),
    ("[[source.streams.clicks.steps]]\nno_such_key = 1", "source.streams.clicks.steps[0]", "RateStep"),
    ("[[source.streams.clicks.bursts]]\nno_such_key = 1", "source.streams.clicks.bursts[0]", "Burst"),
    (SPARK + f"builder = '{COUNT}'\nno_such_key = 1", "managed.per_second", "ManagedQueryConfig"),
    (SPARK + f"builder = '{COUNT}'\nsink = {{ no_such_key = 1 }}", "managed.per_second.sink", "SinkConfig"),
], ids=["query", "stream", "step", "burst", "managed", "sink"])
def test_an_unknown_key_of_a_nested_table_is_refused_with_the_declared_keys(tmp_path, text, key, spec):
    path = write(tmp_path, MINIMAL + "\n" + text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    allowed = ", ".join(keys_of(next(s for s in SPECS if s.__name__ == spec)))
    assert str(caught.value) == f"{path}: {key}.no_such_key: unknown key; allowed keys of [{key}]: {allowed}"


@pytest.mark.parametrize("kind", ALERT_KINDS)
def test_a_hook_allows_the_keys_of_its_kind(tmp_path, kind):
    path = write(tmp_path, MINIMAL + f"\n[[alerts]]\nkind = '{kind}'\nno_such_key = 1\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    allowed = ", ".join(keys_of(HookKeys, kind))
    assert str(caught.value).endswith(f"alerts[0].no_such_key: unknown key; allowed keys of a {kind} hook: {allowed}")
    assert allowed.startswith("kind") and ("url" in allowed) == (kind in ("webhook", "alertmanager"))


def test_a_required_key_is_named_when_missing(tmp_path):
    path = write(tmp_path, MINIMAL + "\n[[source.streams.clicks.bursts]]\nat_seconds = 1\nfactor = 2\n")
    with pytest.raises(ConfigError, match=r"source.streams.clicks.bursts\[0\].duration_seconds: missing; expected a number > 0 and ≤ 3.1536e\+07 \(a year\)$"):
        load_config(path, environ={})


def test_every_key_declared_secret_is_redacted(tmp_path):
    text = (MINIMAL + SPARK + f"builder = '{COUNT}'\nsink = {{ kind = 'sql', url = 'postgresql+psycopg://u:sink-pw@db/x' }}\n"
            "[store]\nurl = 'postgresql+psycopg://armd:${DB_PASSWORD}@db/armd'\n"
            "[[alerts]]\nkind = 'webhook'\nurl = 'https://hooks.example/x'\nsecret = 'hook-key'\n")
    config = load_config(write(tmp_path, text), environ={"DB_PASSWORD": "store-pw"})
    assert config.secrets == {"sink-pw", "store-pw", "hook-key"}
    public = config.public()
    declared = []
    for name, value, spec in sections(config):
        for key, setting, item in key_values(value, spec, (name,)):
            if setting.secret and item is not None:
                shown = public
                for part in key:
                    shown = shown[part]
                assert REDACTED in shown and not any(s in shown for s in config.secrets), key
                declared.append(key)
    assert declared == [("store", "url"), ("alerts", 0, "secret"), ("managed", "per_second", "sink", "url")]
    assert not any(s in json.dumps(public) for s in config.secrets)


def test_every_key_is_in_the_documentation():
    docs = (REPO / "docs" / "configuration.md").read_text()
    undocumented = [f"{spec.__name__}.{key}" for spec in SPECS for key in keys_of(spec)
                    if not re.search(rf"(^|[\s{{,\[]){key} *=|\.{key}\]", docs, re.M)]
    assert undocumented == []


def test_every_key_has_a_doc():
    assert [f"{spec.__name__}.{f.name}" for spec in SPECS for f, s in definitions(spec) if not s.doc.strip()] == []


# --- QoSError names its query -----------------------------------------------------------------


def test_a_qos_error_carries_its_query(tmp_path):
    plan = load_config(write(tmp_path, MINIMAL), environ={}).plan
    with pytest.raises(QoSError) as caught:
        Problem(plan, {"per_second": QueryQoS(window=(20000.0, 1000.0))})
    assert caught.value.query == "per_second"
    assert caught.value.detail.startswith("window range of 'window' must satisfy 1 ≤ min ≤ max")
    assert str(caught.value) == f"query 'per_second': {caught.value.detail}"


def test_a_qos_error_of_no_single_query_has_none():
    error = QoSError("QoS declared for unknown query ['x']")
    assert (error.query, str(error)) == (None, "QoS declared for unknown query ['x']")


def test_the_configuration_reports_a_qos_error_under_its_query(tmp_path):
    path = write(tmp_path, MINIMAL + "\n[queries.per_second]\nwindows = { nope = [1, 2] }\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert caught.value.key == "queries.per_second"
    assert caught.value.message == "'nope' is not a time-based window of the query; its windows: clicks_10s"


# --- the reader never forgets a key -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Section:
    size: int = setting(3, rule=AT_LEAST_ONE, doc="A plain key.")
    names: tuple[str, ...] = setting((), doc="A key its loader reads.")


def test_read_checks_plain_keys_and_takes_the_others_from_the_loader():
    t = Table(Path("x.toml"), ("s",), {"size": 5, "names": ["a"]}, keys_of(_Section))
    assert t.read(_Section, names=("a",)) == {"size": 5, "names": ("a",)}
    assert t.read(_Section, keys=("size",)) == {"size": 5}
    with pytest.raises(ConfigError, match=r"^x.toml: s.size: expected a whole number ≥ 1, got 0$"):
        Table(Path("x.toml"), ("s",), {"size": 0}, keys_of(_Section)).read(_Section, names=())


def test_read_refuses_to_forget_a_key_its_loader_did_not_pass():
    t = Table(Path("x.toml"), ("s",), {"names": ["a"]}, keys_of(_Section))
    with pytest.raises(TypeError, match="_Section.names is no plain value"):
        t.read(_Section)
    with pytest.raises(TypeError, match=r"_Section has no keys \['other'\]"):
        t.read(_Section, names=(), other=1)
