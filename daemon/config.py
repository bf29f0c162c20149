"""The daemon's configuration: one TOML file, read into frozen dataclasses.

Everything the daemon needs — store, model, bounds, policy, guardrails,
triggers, schedule, statistics source, alert hooks, the plan and the QoS of
its queries — comes from one file, validated completely at load time, so a
mistake stops ``armd run`` (or a SIGHUP reload) before anything changes, and
never surfaces hours later inside the loop. Every ``ConfigError`` is one line
that names the file, the key path, the bad value and what is allowed.

Values are checked here for type and range; the core's own constructors
(``parse_plan``, ``Problem``, ``make_policy``, ``Guardrails``, ``RateTracker``,
``Bounds``) then check what only they know, and their errors are re-raised
under the key they concern. The format is specified in
``docs/configuration.md``.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import unquote, urlsplit

from armd.adapters.alerts.hooks import AlertHook
from armd.costmodel.calibration import Calibration, CalibrationError, calibrated_plan
from armd.costmodel.evaluate import PROFILES
from armd.costmodel.plan import PlanError, PlanSet, parse_plan
from armd.policies.guardrails import Guardrails
from armd.policies.join_order import SHAPES, join_tree
from armd.policies.problem import Bounds, Problem
from armd.policies.qos import QoSError, QueryQoS
from armd.policies.registry import make_policy
from armd.policies.triggers import RateTracker

SOURCE_KINDS = ("synthetic", "spark")
STATE_STORES = ("hdfs", "rocksdb")
MIGRATIONS = ("naive-restart", "genmig")
"""How the Spark adapter puts new settings into force (``[spark] migration``)."""
SINK_KINDS = ("parquet", "sql", "memory")
OUTPUT_MODES = ("append", "update", "complete")
HOOK_KEYS = {
    "webhook": ("url", "secret", "timeout_seconds", "retries"),
    "command": ("argv", "timeout_seconds", "retries"),
    "log": (),
}
"""Alert hook kind → the keys it takes besides ``kind``."""
ALERT_KINDS = tuple(HOOK_KEYS)
STORE_SCHEMES = ("sqlite", "postgresql+psycopg")
REDACTED = "***"

Key = tuple[str | int, ...]


class ConfigError(Exception):
    """An invalid configuration: ``"{file}: {key.path}: {what is wrong}; {what is allowed}"`` on one line."""

    def __init__(self, file: str | Path, key: Key | str | None, message: str) -> None:
        self.file = str(file)
        self.key = _key(key) if isinstance(key, tuple) else key
        self.message = message
        super().__init__(f"{self.file}: {self.key}: {message}" if self.key else f"{self.file}: {message}")


# --- the typed configuration ------------------------------------------------------------------


@dataclass(frozen=True)
class StoreConfig:
    url: str
    """SQLAlchemy URL of the metadata store (``sqlite:///…`` or ``postgresql+psycopg://…``)."""
    retention_days: float = 7.0
    """Observations older than this many days are pruned."""
    connect_retries: int = 5
    """Connection attempts after the first one fails."""
    connect_backoff_seconds: float = 0.5
    """Wait before the first retry, doubled per retry."""
    call_timeout_seconds: float = 5.0
    """Longest one store call may block (a lock held by another connection, a hung server) before it counts as unavailable."""
    lease_seconds: float = 15.0
    """The active daemon renews its lease on the store this often at least; another daemon may take over once it lapses."""


@dataclass(frozen=True)
class ApplyConfig:
    """How the reconciler retries applying desired settings that failed for a reason that may pass."""

    retry_initial_seconds: float = 1.0
    """Wait before the first retry after a temporary apply error (or the error's own hint, whichever is longer)."""
    retry_max_seconds: float = 60.0
    """The wait doubles per failed attempt up to this."""
    max_attempts: int = 20
    """Attempts for one change before its query is marked ``failed`` (a permanent error marks it at once)."""


@dataclass(frozen=True)
class ModelConfig:
    time_unit_seconds: float = 0.001
    """The plan's time unit in seconds: d, windows and granularities are in this unit."""
    profile: str = "paper"
    """Engine profile of the cost model (one of ``armd.costmodel.evaluate.PROFILES``)."""
    calibration: str | None = None
    """A file written by ``armd calibrate`` (relative to the configuration's folder): its learned CPU constants
    and bytes per state row replace the plan's."""


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[2]"
    """Spark master URL."""
    app_name: str = "armd"
    """Spark application name."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """Extra Spark configuration, key → string value."""
    checkpoint_dir: str = "armd-checkpoints"
    """Where the managed queries keep their checkpoints (one directory per query run), relative to the working directory."""
    state_store: str = "hdfs"
    """Spark's state store provider: ``hdfs`` (Spark's default) or ``rocksdb``."""
    migration: str = "naive-restart"
    """How new settings are put into force on Spark (one of ``MIGRATIONS``)."""


@dataclass(frozen=True)
class SinkConfig:
    kind: str = "parquet"
    """``parquet`` (a directory, one subdirectory per plan version), ``sql`` (a table) or ``memory`` (tests)."""
    path: str | None = None
    """Parquet: the directory (default ``armd-output/QUERY``)."""
    url: str | None = None
    """SQL: SQLAlchemy URL of the database."""
    table: str | None = None
    """SQL: the table (default the query name)."""


@dataclass(frozen=True)
class JoinOrderConfig:
    """Join reordering of one multi-way join run by JISC on Spark (``[managed.NAME.join_order]``)."""

    control: str
    """The control file: the daemon writes the join order there, the query reads it at every micro-batch."""
    order: tuple[str, ...]
    """The left-deep order the query starts with: its streams, the first two joined first."""
    margin: float = 0.2
    """A new order must cost less than (1 − margin) × the running one's estimated CPU."""
    cooldown_seconds: float = 60.0
    """Least time between two join-order migrations of the query."""
    shape: str = "left-deep"
    """Orders the policy considers: ``left-deep`` or ``bushy``."""


@dataclass(frozen=True)
class ManagedQueryConfig:
    """How the Spark adapter runs one plan query (``[managed.NAME]``)."""

    builder: str
    """``"module:function"``, called as ``function(spark, params) -> DataFrame``."""
    sink: SinkConfig = field(default_factory=SinkConfig)
    output_mode: str = "append"
    trigger_seconds: float = 1.0
    """Processing-time trigger interval."""
    watermark_delay_seconds: float = 0.0
    """The watermark delay the builder gives ``withWatermark`` (``params.extra["delay_seconds"]``)."""
    nodes: Mapping[str, str] = field(default_factory=dict)
    """The builder's node name → the plan node id it stands for (names not given are plan node ids)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the builder reads from ``params.extra``."""
    streams: tuple[str, ...] = ()
    """Plan stream of each of the query's Spark sources, in Spark's order; only for sources other than ``armd-synthetic``."""
    join_order: JoinOrderConfig | None = None
    """For a multi-way join run by JISC (builder ``multiway_join``): how the daemon chooses its join order."""


@dataclass(frozen=True)
class PolicyConfig:
    name: str = "weighted-qos"
    """Policy name, as ``make_policy`` knows it."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Policy parameters passed to ``make_policy``."""


@dataclass(frozen=True)
class TriggerConfig:
    alpha: float = 0.3
    """Weight of a new rate measurement in the exponential smoothing, in (0, 1]."""
    threshold: float = 0.2
    """Relative change of a smoothed d that makes a decision due, > 0."""


@dataclass(frozen=True)
class ScheduleConfig:
    observe_seconds: float = 1.0
    """Interval between observations."""
    decide_seconds: float = 30.0
    """Longest interval between decisions when no trigger fires (≥ observe_seconds)."""
    apply_seconds: float = 1.0
    """Interval between attempts to apply pending settings."""
    housekeeping_seconds: float = 300.0
    """Interval between housekeeping runs (pruning old observations)."""


@dataclass(frozen=True)
class RateStep:
    at_seconds: float
    """Seconds after the start from which the base rate is ``rate_per_second``."""
    rate_per_second: float
    """The new base rate, arrivals per second."""


@dataclass(frozen=True)
class Burst:
    at_seconds: float
    """Seconds after the start at which the burst begins."""
    duration_seconds: float
    """How long the burst lasts."""
    factor: float
    """The rate is multiplied by this while the burst lasts."""


@dataclass(frozen=True)
class SyntheticStream:
    rate_per_second: float
    """Base rate, arrivals per second."""
    steps: tuple[RateStep, ...] = ()
    """Changes of the base rate, by ascending ``at_seconds``."""
    bursts: tuple[Burst, ...] = ()
    """Temporary multiplications of the rate."""
    keys: int = 1
    """Number of distinct keys the stream's elements carry."""


@dataclass(frozen=True)
class SourceConfig:
    kind: str = "synthetic"
    """Where statistics come from (``synthetic`` for now)."""
    seed: int = 42
    """Seed of the synthetic arrivals: the same seed replays the same arrivals."""
    streams: Mapping[str, SyntheticStream] = field(default_factory=dict)
    """Every plan stream; one without an entry in the file runs at its plan rate."""


@dataclass(frozen=True)
class AlertingConfig:
    dedup_seconds: float = 300.0
    """An alert of the same kind and query within this many seconds of the last one sent is suppressed and counted (0: never)."""
    queue_size: int = 1000
    """Alerts waiting for the delivery thread; when full, a new alert is dropped and counted."""
    stale_intervals: int = 30
    """A stream with no rows for this many observe intervals in a row raises ``statistics_stale``."""
    estimate_factor: float = 4.0
    """A query whose measured state and estimated memory differ by more than this factor raises ``estimate_off``."""


METRICS_ADDRESS = "127.0.0.1"


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = False
    """Serve Prometheus metrics over HTTP."""
    port: int = 9464
    """TCP port on 127.0.0.1 (0: any free port, logged as ``metrics_listening``)."""
    address: str = METRICS_ADDRESS
    """Always 127.0.0.1: the endpoint has no authentication, so it is never exposed beyond the machine."""


@dataclass(frozen=True)
class Config:
    path: Path
    """The file this configuration was read from (as given)."""
    store: StoreConfig
    """The metadata store."""
    model: ModelConfig
    """The cost model's time unit and engine profile."""
    spark: SparkConfig
    """Spark session settings (for the Spark adapter)."""
    bounds: Bounds
    """Memory and CPU bounds and the reserve kept free."""
    policy: PolicyConfig
    """Which policy decides, with its parameters."""
    guardrails: Guardrails
    """Hysteresis, cool-down (``cooldown`` in seconds), maximum step, dry run."""
    triggers: TriggerConfig
    """Rate smoothing and the re-decision threshold."""
    schedule: ScheduleConfig
    """Intervals of the daemon's jobs."""
    source: SourceConfig
    """Where statistics come from."""
    alerts: tuple[AlertHook, ...]
    """Where alerts go, in order."""
    plan_doc: Mapping[str, Any]
    """The plan document as parsed (``streams``, ``queries``, optionally ``constants``)."""
    plan: PlanSet
    """The validated plan."""
    qos: Mapping[str, QueryQoS]
    """QoS of the queries that have a ``[queries.NAME]`` entry."""
    secrets: frozenset[str]
    """Values that must never be shown: the store password, hook secrets, what the environment put into them."""
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
    """Deduplication and queueing of alerts, and the thresholds of the events that watch measurements."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    """The Prometheus endpoint."""
    managed: Mapping[str, ManagedQueryConfig] = field(default_factory=dict)
    """How each plan query runs on Spark (with ``source.kind = "spark"``; empty otherwise)."""
    apply: ApplyConfig = field(default_factory=ApplyConfig)
    """Retries of apply errors."""

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def public(self) -> dict[str, Any]:
        """The whole configuration as a JSON-able dict in the file's layout, secrets replaced by ``***``."""
        g = self.guardrails
        doc = {
            "path": str(self.path),
            "store": _fields(self.store),
            "model": _fields(self.model),
            "spark": {**_fields(self.spark), "conf": dict(self.spark.conf)},
            "bounds": {"memory_bytes": self.bounds.memory, "cpu": self.bounds.cpu, "reserve": self.bounds.reserve},
            "policy": {"name": self.policy.name, "params": dict(self.policy.params)},
            "guardrails": {
                "cooldown_seconds": g.cooldown,
                "hysteresis": g.hysteresis,
                "max_step": g.max_step,
                "dry_run": g.dry_run,
            },
            "triggers": _fields(self.triggers),
            "schedule": _fields(self.schedule),
            "source": {
                "kind": self.source.kind,
                "seed": self.source.seed,
                "streams": {
                    name: {
                        "rate_per_second": s.rate_per_second,
                        "steps": [_fields(step) for step in s.steps],
                        "bursts": [_fields(burst) for burst in s.bursts],
                        "keys": s.keys,
                    }
                    for name, s in self.source.streams.items()
                },
            },
            "alerting": _fields(self.alerting),
            "apply": _fields(self.apply),
            "metrics": _fields(self.metrics),
            "managed": {
                name: {**_fields(m), "sink": {k: v for k, v in _fields(m.sink).items() if v is not None},
                       "nodes": dict(m.nodes), "params": dict(m.params),
                       "join_order": _fields(m.join_order) if m.join_order else None}
                for name, m in self.managed.items()
            },
            "alerts": [
                {
                    "kind": hook.kind,
                    **{k: getattr(hook, k) for k in HOOK_KEYS[hook.kind] if getattr(hook, k) is not None},
                }
                for hook in self.alerts
            ],
            "plan": self.plan_doc,
            "queries": {
                name: {
                    "weight": q.weight,
                    "window": list(q.window) if q.window else None,
                    "windows": {node: list(pair) for node, pair in q.windows.items()},
                    "granularity": list(q.granularity) if q.granularity else None,
                }
                for name, q in self.qos.items()
            },
        }
        return _scrub(json.loads(json.dumps(doc)), self.redact)


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redact) for v in value]
    return value


# --- loading ----------------------------------------------------------------------------------

SECTIONS = (
    "store",
    "model",
    "spark",
    "bounds",
    "policy",
    "guardrails",
    "triggers",
    "schedule",
    "source",
    "alerts",
    "alerting",
    "metrics",
    "plan",
    "queries",
    "managed",
    "apply",
)


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read, interpolate and validate a configuration file; every mistake is a ``ConfigError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            path, None, f"cannot read the configuration: {reason}; give a readable UTF-8 TOML file"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.fullmatch(r"(.*) \(at (line \d+, column \d+|end of document)\)", str(exc))
        what, where = (match[1], match[2]) if match else (str(exc), None)
        raise ConfigError(path, where, f"invalid TOML: {what}; see https://toml.io/en/v1.0.0") from None
    substituted: dict[Key, list[str]] = {}
    doc = _interpolate(raw, (), os.environ if environ is None else environ, path, substituted)
    return _Loader(path, substituted).config(_Table(path, (), doc, SECTIONS))


_REFERENCE = re.compile(r"\$\$\{|\$\{(?P<name>[^}]*)(?P<close>\}?)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _interpolate(
    value: Any, key: Key, environ: Mapping[str, str], file: Path, substituted: dict[Key, list[str]]
) -> Any:
    """``value`` with ``${NAME}`` replaced from ``environ`` in every string; ``$${`` is a literal ``${``."""
    if isinstance(value, dict):
        return {k: _interpolate(v, (*key, k), environ, file, substituted) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*key, i), environ, file, substituted) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match[0] == "$${":
            return "${"
        name = match["name"]
        if not match["close"] or not _NAME.fullmatch(name):
            raise ConfigError(
                file, key, "malformed ${…} reference; write ${NAME} (letters, digits, _) or $${ for a literal ${"
            )
        if name not in environ:
            raise ConfigError(
                file, key, f"environment variable {name} is not set; set it, or write $${{ for a literal ${{"
            )
        substituted.setdefault(key, []).append(environ[name])
        return environ[name]

    return _REFERENCE.sub(replace, value)


def _key(key: Key) -> str:
    text = ""
    for part in key:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part)
            text += f".{name}" if text else name
    return text


def _listing(names: Iterable[str], limit: int = 12) -> str:
    names = list(names)
    shown = ", ".join(map(str, names[:limit]))
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "") if names else "none"


@dataclass(frozen=True)
class _Rule:
    """An allowed range of a number, with the words that describe it."""

    text: str
    test: Callable[[float], bool]


POSITIVE = _Rule("> 0", lambda x: x > 0)
NON_NEGATIVE = _Rule("≥ 0", lambda x: x >= 0)
AT_LEAST_ONE = _Rule("≥ 1", lambda x: x >= 1)
ANY = _Rule("", lambda x: True)
UNIT_CLOSED_OPEN = _Rule("in [0, 1)", lambda x: 0 <= x < 1)
UNIT_OPEN_CLOSED = _Rule("in (0, 1]", lambda x: 0 < x <= 1)
_REQUIRED: Any = object()


class _Table:
    """One TOML table being read: knows its key path and rejects keys it does not allow."""

    def __init__(self, file: Path, key: Key, raw: Any, allowed: Iterable[str], what: str | None = None) -> None:
        self.file, self.key = file, key
        allowed = tuple(allowed)
        if not isinstance(raw, dict):
            raise self.error((), f"expected a table, got {_show(raw)}")
        self.raw = raw
        for name in raw:
            if name not in allowed:
                if not key:
                    raise self.error((name,), f"unknown section; allowed sections: {_listing(allowed, 99)}")
                raise self.error(
                    (name,), f"unknown key; allowed keys of {what or f'[{_key(key)}]'}: {_listing(allowed, 99)}"
                )

    def error(self, key: Key, message: str) -> ConfigError:
        return ConfigError(self.file, (*self.key, *key), message)

    def value(self, name: str, default: Any, expected: str) -> Any:
        """The raw value of ``name``, or ``default``; missing and required is an error."""
        if name in self.raw:
            return self.raw[name]
        if default is _REQUIRED:
            raise self.error((name,), f"missing; expected {expected}")
        return default

    def number(self, name: str, default: Any = _REQUIRED, rule: _Rule = ANY) -> float:
        expected = f"a number {rule.text}".rstrip()
        value = self.value(name, default, expected)
        if not _is_number(value) or not math.isfinite(value) or not rule.test(value):
            raise self.error((name,), f"expected {expected}, got {_show(value)}")
        return float(value)

    def integer(self, name: str, default: Any = _REQUIRED, rule: _Rule = ANY) -> int:
        expected = f"a whole number {rule.text}".rstrip()
        value = self.value(name, default, expected)
        if not isinstance(value, int) or isinstance(value, bool) or not rule.test(value):
            raise self.error((name,), f"expected {expected}, got {_show(value)}")
        return value

    def string(self, name: str, default: Any = _REQUIRED, choices: Iterable[str] | None = None) -> str:
        choices = tuple(choices) if choices is not None else None
        expected = f"one of {_listing(choices, 99)}" if choices else "a string"
        value = self.value(name, default, expected)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            raise self.error((name,), f"expected {expected}, got {_show(value)}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.value(name, default, "true or false")
        if not isinstance(value, bool):
            raise self.error((name,), f"expected true or false, got {_show(value)}")
        return value

    def pair(self, name: str) -> tuple[float, float] | None:
        value = self.raw.get(name)
        if value is None:
            return None
        if not (isinstance(value, list) and len(value) == 2 and all(_is_number(v) and math.isfinite(v) for v in value)):
            raise self.error((name,), f"expected a list of two numbers [a, b], got {_show(value)}")
        return float(value[0]), float(value[1])

    def mapping(self, name: str) -> dict[str, Any]:
        """A table whose keys are names chosen by the user (streams, queries, parameters)."""
        value = self.raw.get(name, {})
        if not isinstance(value, dict):
            raise self.error((name,), f"expected a table, got {_show(value)}")
        return value

    def table(self, name: str, allowed: Iterable[str]) -> _Table:
        return _Table(self.file, (*self.key, name), self.raw.get(name, {}), allowed)

    def tables(self, name: str) -> list[Any]:
        """An array of tables (``[[name]]`` or ``name = [{…}, …]``); the items are checked by the caller."""
        value = self.raw.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.error(
                (name,),
                f"expected an array of tables ([[{_key((*self.key, name))}]] or [{{…}}, …]), got {_show(value)}",
            )
        return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


class _Loader:
    """Builds a ``Config`` section by section; the plan comes first, since later sections refer to it."""

    def __init__(self, file: Path, substituted: dict[Key, list[str]]) -> None:
        self.file, self.substituted = file, substituted

    def config(self, top: _Table) -> Config:
        model = self.model(top.table("model", ("time_unit_seconds", "profile", "calibration")))
        plan_doc, plan = self.plan(top)
        if model.calibration is not None:
            plan = self.calibrated(top, plan, model.calibration)
        store = self.store(top.table("store", ("url", "retention_days", "connect_retries", "connect_backoff_seconds",
                                                "call_timeout_seconds", "lease_seconds")))
        alerts = tuple(self.alert(i, raw) for i, raw in enumerate(top.tables("alerts")))
        source = self.source(top.table("source", ("kind", "seed", "streams")), plan, model)
        spark = self.spark(top.table("spark", ("master", "app_name", "conf", "checkpoint_dir", "state_store", "migration")))
        managed = self.managed(top, plan, source.kind, spark)
        qos = self.queries(top, plan)
        self.fixed_join_windows(top, managed, qos)
        return Config(
            path=self.file,
            store=store,
            model=model,
            spark=spark,
            bounds=self.bounds(top.table("bounds", ("memory_bytes", "cpu", "reserve"))),
            policy=self.policy(top.table("policy", ("name", "params"))),
            guardrails=self.guardrails(
                top.table("guardrails", ("cooldown_seconds", "hysteresis", "max_step", "dry_run"))
            ),
            triggers=self.triggers(top.table("triggers", ("alpha", "threshold"))),
            schedule=self.schedule(
                top.table("schedule", ("observe_seconds", "decide_seconds", "apply_seconds", "housekeeping_seconds"))
            ),
            source=source,
            alerts=alerts,
            plan_doc=plan_doc,
            plan=plan,
            qos=qos,
            secrets=self.secrets(store, alerts, managed),
            alerting=self.alerting(top.table("alerting", ("dedup_seconds", "queue_size", "stale_intervals", "estimate_factor"))),
            metrics=self.metrics(top.table("metrics", ("enabled", "port", "address"))),
            managed=managed,
            apply=self.apply(top.table("apply", ("retry_initial_seconds", "retry_max_seconds", "max_attempts"))),
        )

    def _build(self, t: _Table, make: Callable[[], Any]) -> Any:
        """Run a core constructor on checked values; anything it still rejects is reported at the section."""
        try:
            return make()
        except ValueError as exc:
            raise t.error((), f"{exc}; see docs/configuration.md") from None

    def store(self, t: _Table) -> StoreConfig:
        url = t.string("url", "sqlite:///armd.db")
        scheme = url.partition("://")[0] if "://" in url else ""
        if scheme not in STORE_SCHEMES:
            # The URL may hold a password: name only its scheme.
            raise t.error(
                ("url",),
                f"unsupported store URL scheme {scheme!r}; allowed: sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST/DB",
            )
        return StoreConfig(
            url,
            t.number("retention_days", 7.0, POSITIVE),
            t.integer("connect_retries", 5, NON_NEGATIVE),
            t.number("connect_backoff_seconds", 0.5, POSITIVE),
            t.number("call_timeout_seconds", 5.0, POSITIVE),
            t.number("lease_seconds", 15.0, POSITIVE),
        )

    def apply(self, t: _Table) -> ApplyConfig:
        initial = t.number("retry_initial_seconds", 1.0, POSITIVE)
        longest = t.number("retry_max_seconds", 60.0, POSITIVE)
        if longest < initial:
            raise t.error(("retry_max_seconds",), f"{longest:g} is less than retry_initial_seconds ({initial:g}); allowed: ≥ retry_initial_seconds")
        return ApplyConfig(initial, longest, t.integer("max_attempts", 20, POSITIVE))

    def model(self, t: _Table) -> ModelConfig:
        calibration = t.string("calibration") if "calibration" in t.raw else None
        return ModelConfig(t.number("time_unit_seconds", 0.001, POSITIVE), t.string("profile", "paper", PROFILES), calibration)

    def calibrated(self, top: _Table, plan: PlanSet, name: str) -> PlanSet:
        path = self.file.parent / name
        where = top.table("model", ("time_unit_seconds", "profile", "calibration"))
        try:
            calibration = Calibration.from_json(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise where.error(("calibration",), f"cannot read calibration file {str(path)!r}: {reason}; "
                                               "write one with armd calibrate (relative to the configuration's folder)") from None
        except CalibrationError as exc:
            raise where.error(("calibration",), f"{name!r}: {exc}; write it again with armd calibrate") from None
        return calibrated_plan(plan, calibration)

    def spark(self, t: _Table) -> SparkConfig:
        conf: dict[str, str] = {}

        def flatten(value: Any, key: tuple[str, ...]) -> None:
            # Unquoted dotted keys (spark.sql.shuffle.partitions = 4) arrive as nested tables.
            if isinstance(value, dict):
                for k, v in value.items():
                    flatten(v, (*key, k))
                return
            name = ".".join(key)
            if name in conf:
                raise t.error(("conf", name), "given twice (quoted and as dotted keys); give it once")
            if isinstance(value, bool):
                conf[name] = "true" if value else "false"
            elif isinstance(value, (str, int, float)):
                conf[name] = str(value)
            else:
                raise t.error(("conf", name), f"expected a string, number or boolean, got {_show(value)}")

        for k, v in t.mapping("conf").items():
            flatten(v, (k,))
        return SparkConfig(
            t.string("master", "local[2]"), t.string("app_name", "armd"), conf, t.string("checkpoint_dir", "armd-checkpoints"),
            t.string("state_store", "hdfs", STATE_STORES), t.string("migration", "naive-restart", MIGRATIONS),
        )

    def managed(self, top: _Table, plan: PlanSet, kind: str, spark: SparkConfig) -> dict[str, ManagedQueryConfig]:
        raw = top.mapping("managed")
        if kind != "spark":
            if raw:
                raise top.error(("managed",), f'only used with source.kind = "spark" (it is {kind!r}); remove [managed.*] or run on Spark')
            return {}
        missing = [q for q in plan.queries if q not in raw]
        if missing:
            raise top.error(("managed", missing[0]), 'missing; with source.kind = "spark" every plan query needs [managed.NAME] '
                            f'with builder = "module:function" (queries without one: {_listing(missing)})')
        return {name: self.managed_query(name, spec, plan, spark) for name, spec in raw.items()}

    def managed_query(self, name: str, raw: Any, plan: PlanSet, spark: SparkConfig) -> ManagedQueryConfig:
        if name not in plan.queries:
            raise ConfigError(self.file, ("managed", name), f"not a query of the plan; plan queries: {_listing(plan.queries)}")
        t = _Table(self.file, ("managed", name), raw,
                   ("builder", "sink", "output_mode", "trigger_seconds", "watermark_delay_seconds", "nodes", "params", "streams",
                    "join_order"))
        builder = t.string("builder")
        from armd.adapters.spark.managed import load_builder  # imports pyspark: only for Spark configurations

        try:
            load_builder(builder)
        except LookupError as exc:
            raise t.error(("builder",), str(exc)) from None
        nodes = t.mapping("nodes")
        own = plan.query_nodes(name)
        for alias, node in nodes.items():
            if not isinstance(node, str) or node not in own:
                raise t.error(("nodes", alias), f"expected a plan node id of query {name!r}, got {_show(node)}; "
                                                f"its nodes: {_listing(own)}")
        streams = t.value("streams", [], "a list of plan stream names")
        if not (isinstance(streams, list) and all(isinstance(x, str) and x in plan.streams for x in streams)):
            raise t.error(("streams",), f"expected a list of plan stream names ({_listing(plan.streams)}), got {_show(streams)}")
        return ManagedQueryConfig(
            builder, self.sink(name, t), t.string("output_mode", "append", OUTPUT_MODES),
            t.number("trigger_seconds", 1.0, POSITIVE), t.number("watermark_delay_seconds", 0.0, NON_NEGATIVE),
            dict(nodes), dict(t.mapping("params")), tuple(streams),
            self.join_order(name, t, plan, spark) if "join_order" in t.raw else None,
        )

    def join_order(self, query: str, managed: _Table, plan: PlanSet, spark: SparkConfig) -> JoinOrderConfig:
        t = managed.table("join_order", ("control", "order", "margin", "cooldown_seconds", "shape"))
        if spark.state_store != "rocksdb":
            raise t.error((), 'a JISC join runs on transformWithStateInPandas, which needs [spark] state_store = "rocksdb" '
                              f"(it is {spark.state_store!r})")
        try:
            join_tree(plan, query)  # the cost model estimates the join in the order it runs: it rebuilds these joins
        except ValueError as exc:
            raise t.error((), str(exc)) from None
        streams = list(dict.fromkeys(plan.nodes[n].stream for n in plan.query_nodes(query) if plan.nodes[n].op == "source"))
        if not all(s.isidentifier() for s in streams):
            raise t.error((), f"the streams of query {query!r} become column names and must be identifiers, "
                              f"it reads {_listing(streams)}")
        order = t.value("order", streams, f"a list of the query's streams ({_listing(streams)}), each once")
        if not (isinstance(order, list) and sorted(order) == sorted(streams) and len(set(order)) == len(order)):
            raise t.error(("order",), f"expected a list of the query's streams ({_listing(streams)}), each once, got {_show(order)}")
        return JoinOrderConfig(
            t.string("control", f"{spark.checkpoint_dir}/{query}.join-order.json"), tuple(order),
            t.number("margin", 0.2, UNIT_CLOSED_OPEN), t.number("cooldown_seconds", 60.0, NON_NEGATIVE),
            t.string("shape", "left-deep", SHAPES),
        )

    def fixed_join_windows(self, top: _Table, managed: Mapping[str, ManagedQueryConfig], qos: Mapping[str, QueryQoS]) -> None:
        """A JISC join keeps its window: armd changes its join order, not its window size."""
        for name, m in managed.items():
            spec = qos.get(name)
            if m.join_order is None or spec is None:
                continue
            for key, pair in ((("window",), spec.window), *((("windows", n), p) for n, p in spec.windows.items())):
                if pair is not None and pair[0] != pair[1]:
                    raise top.error(("queries", name, *key), f"{name!r} is a JISC join ([managed.{name}.join_order]), whose window "
                                    f"armd does not change: give a fixed window [w, w] or none, got [{pair[0]:g}, {pair[1]:g}]")

    def sink(self, query: str, managed: _Table) -> SinkConfig:
        raw = managed.raw.get("sink", {"kind": "parquet"})
        if isinstance(raw, str):
            raw = {"kind": raw}
        t = _Table(self.file, (*managed.key, "sink"), raw, ("kind", "path", "url", "table"))
        kind = t.string("kind", "parquet", SINK_KINDS)
        if kind == "parquet":
            return SinkConfig(kind, path=t.string("path", f"armd-output/{query}"))
        if kind == "sql":
            url = t.string("url")
            if "://" not in url:
                raise t.error(("url",), "expected a SQLAlchemy URL, e.g. sqlite:///results.db or postgresql+psycopg://USER:PASSWORD@HOST/DB")
            return SinkConfig(kind, url=url, table=t.string("table", query))
        return SinkConfig(kind)

    def bounds(self, t: _Table) -> Bounds:
        memory = t.number("memory_bytes", rule=POSITIVE)
        cpu = t.number("cpu", rule=POSITIVE)
        reserve = t.number("reserve", 0.1, UNIT_CLOSED_OPEN)
        return self._build(t, lambda: Bounds(memory, cpu, reserve))

    def policy(self, t: _Table) -> PolicyConfig:
        name = t.string("name", "weighted-qos")
        params = t.mapping("params")
        try:
            make_policy(name)
        except LookupError as exc:
            raise t.error(("name",), str(exc)) from None
        try:
            make_policy(name, params)
        except (LookupError, ValueError) as exc:
            raise t.error(("params",), str(exc)) from None
        return PolicyConfig(name, dict(params))

    def guardrails(self, t: _Table) -> Guardrails:
        cooldown = t.number("cooldown_seconds", 30.0, NON_NEGATIVE)
        hysteresis = t.number("hysteresis", 0.02, UNIT_CLOSED_OPEN)
        max_step = t.number("max_step", 0.5, UNIT_OPEN_CLOSED)
        dry_run = t.boolean("dry_run", False)
        return self._build(t, lambda: Guardrails(cooldown, hysteresis, max_step, dry_run))

    def triggers(self, t: _Table) -> TriggerConfig:
        alpha = t.number("alpha", 0.3, UNIT_OPEN_CLOSED)
        threshold = t.number("threshold", 0.2, POSITIVE)
        self._build(t, lambda: RateTracker(alpha, threshold))
        return TriggerConfig(alpha, threshold)

    def schedule(self, t: _Table) -> ScheduleConfig:
        observe = t.number("observe_seconds", 1.0, POSITIVE)
        decide = t.number("decide_seconds", 30.0, _Rule(f"≥ observe_seconds ({observe:g})", lambda x: x >= observe))
        return ScheduleConfig(
            observe, decide, t.number("apply_seconds", 1.0, POSITIVE), t.number("housekeeping_seconds", 300.0, POSITIVE)
        )

    def source(self, t: _Table, plan: PlanSet, model: ModelConfig) -> SourceConfig:
        kind = t.string("kind", "synthetic", SOURCE_KINDS)
        seed = t.integer("seed", 42)
        configured = t.mapping("streams")
        for name in configured:
            if name not in plan.streams:
                raise t.error(("streams", name), f"not a stream of the plan; plan streams: {_listing(plan.streams)}")
        streams = {}
        for name, spec in plan.streams.items():
            s = _Table(
                self.file,
                (*t.key, "streams", name),
                configured.get(name, {}),
                ("rate_per_second", "steps", "bursts", "keys"),
            )
            steps = tuple(
                RateStep(
                    step.number("at_seconds", rule=NON_NEGATIVE), step.number("rate_per_second", rule=NON_NEGATIVE)
                )
                for step in self._items(s, "steps", ("at_seconds", "rate_per_second"))
            )
            for i in range(1, len(steps)):
                if steps[i].at_seconds <= steps[i - 1].at_seconds:
                    raise s.error(
                        ("steps", i, "at_seconds"),
                        f"expected a number > {steps[i - 1].at_seconds:g} (steps in ascending order), got {steps[i].at_seconds:g}",
                    )
            bursts = tuple(
                Burst(
                    b.number("at_seconds", rule=NON_NEGATIVE),
                    b.number("duration_seconds", rule=POSITIVE),
                    b.number("factor", rule=POSITIVE),
                )
                for b in self._items(s, "bursts", ("at_seconds", "duration_seconds", "factor"))
            )
            plan_rate = 1.0 / (spec.d * model.time_unit_seconds)
            streams[name] = SyntheticStream(
                s.number("rate_per_second", plan_rate, NON_NEGATIVE), steps, bursts, s.integer("keys", 1, AT_LEAST_ONE)
            )
        return SourceConfig(kind, seed, streams)

    def _items(self, t: _Table, name: str, allowed: tuple[str, ...]) -> list[_Table]:
        return [_Table(self.file, (*t.key, name, i), raw, allowed) for i, raw in enumerate(t.tables(name))]

    def alert(self, index: int, raw: dict[str, Any]) -> AlertHook:
        known = raw.get("kind") in HOOK_KEYS
        allowed = (
            HOOK_KEYS[raw["kind"]] if known else tuple(dict.fromkeys(k for keys in HOOK_KEYS.values() for k in keys))
        )
        t = _Table(self.file, ("alerts", index), raw, ("kind", *allowed), f"a {raw['kind']} hook" if known else None)
        kind = t.string("kind", choices=ALERT_KINDS)
        if kind == "log":
            return AlertHook(kind)
        timeout = t.number("timeout_seconds", 5.0, POSITIVE)
        retries = t.integer("retries", 3, NON_NEGATIVE)
        if kind == "command":
            argv = t.value("argv", _REQUIRED, "a non-empty list of strings")
            if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a for a in argv)):
                raise t.error(("argv",), f"expected a non-empty list of non-empty strings, got {_show(argv)}")
            return AlertHook(kind, argv=tuple(argv), timeout_seconds=timeout, retries=retries)
        if "url" not in raw:
            raise t.error(("url",), "missing; a webhook hook needs url = an http:// or https:// URL")
        url = t.string("url")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise t.error(("url",), f"expected an http:// or https:// URL, got {_show(url)}")
        secret = t.string("secret") if "secret" in raw else None
        return AlertHook(kind, url=url, secret=secret, timeout_seconds=timeout, retries=retries)

    def alerting(self, t: _Table) -> AlertingConfig:
        return AlertingConfig(
            t.number("dedup_seconds", 300.0, NON_NEGATIVE),
            t.integer("queue_size", 1000, AT_LEAST_ONE),
            t.integer("stale_intervals", 30, AT_LEAST_ONE),
            t.number("estimate_factor", 4.0, _Rule("> 1", lambda x: x > 1)),
        )

    def metrics(self, t: _Table) -> MetricsConfig:
        address = t.string("address", METRICS_ADDRESS)
        if address != METRICS_ADDRESS:
            raise t.error(
                ("address",),
                f"expected {METRICS_ADDRESS!r}, got {_show(address)}; the endpoint has no authentication and is only "
                "served on the loopback address (put a reverse proxy in front to expose it)",
            )
        port = t.integer("port", 9464, _Rule("in [0, 65535]", lambda x: 0 <= x <= 65535))
        return MetricsConfig(t.boolean("enabled", False), port, address)

    def plan(self, top: _Table) -> tuple[dict[str, Any], PlanSet]:
        if "plan" not in top.raw:
            raise top.error(
                ("plan",),
                'missing; give [plan] with file = "PLAN.json" or inline [plan.streams.*] and [plan.queries.*]',
            )
        t = top.table("plan", ("file", "streams", "queries", "constants"))
        inline = {k: v for k, v in t.raw.items() if k != "file"}
        if ("file" in t.raw) == bool(inline):
            wrong = "both file and inline plan tables given" if inline else "no plan given"
            raise t.error(
                (),
                f'{wrong}; allowed: exactly one of file = "PLAN.json" or inline [plan.streams.*] and [plan.queries.*]',
            )
        name = None
        if inline:
            doc = inline
        else:
            name = t.string("file")
            plan_path = self.file.parent / name
            try:
                text = plan_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise t.error(
                    ("file",),
                    f"cannot read plan file {str(plan_path)!r}: {reason}; allowed: a plan file (.json or .toml), relative to the configuration's folder",
                ) from None
            try:
                doc = tomllib.loads(text) if plan_path.suffix == ".toml" else json.loads(text)
            except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
                kind = "TOML" if plan_path.suffix == ".toml" else "JSON"
                raise t.error(
                    ("file",), f"plan file {name!r} is not valid {kind}: {exc}; see docs/plan-format.md"
                ) from None
        try:
            return doc, parse_plan(doc)
        except PlanError as exc:
            where = f"plan file {name!r}: " if name else ""
            raise t.error((), f"{where}{exc}") from None

    def queries(self, top: _Table, plan: PlanSet) -> dict[str, QueryQoS]:
        qos: dict[str, QueryQoS] = {}
        for name, raw in top.mapping("queries").items():
            if name not in plan.queries:
                raise top.error(("queries", name), f"not a query of the plan; plan queries: {_listing(plan.queries)}")
            t = _Table(self.file, ("queries", name), raw, ("weight", "window", "windows", "granularity"))
            per_node = t.mapping("windows")
            w = _Table(self.file, (*t.key, "windows"), per_node, per_node)
            windows = {node: w.pair(node) for node in per_node}
            qos[name] = QueryQoS(t.pair("window"), windows, t.pair("granularity"), t.number("weight", 1.0, POSITIVE))
        try:
            Problem(plan, qos)
        except QoSError as exc:
            if exc.query in qos:
                raise top.error(("queries", exc.query), exc.detail) from None
            raise top.error(("queries",), str(exc)) from None
        return qos

    def secrets(self, store: StoreConfig, alerts: tuple[AlertHook, ...], managed: Mapping[str, ManagedQueryConfig]) -> frozenset[str]:
        found: set[str] = set()
        for url in (store.url, *(m.sink.url for m in managed.values() if m.sink.url)):
            password = urlsplit(url).password
            if password:
                found |= {password, unquote(password)}
        found |= {hook.secret for hook in alerts if hook.secret}
        for key, values in self.substituted.items():
            if key == ("store", "url") or (key[0] == "alerts" and key[-1] == "secret") or (key[0] == "managed" and key[-1] == "url"):
                found.update(values)
        return frozenset(s for s in found if s)
