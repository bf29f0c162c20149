"""The sections of the configuration file, each key defined once (see ``keys``).

Each class is one table of the file; each ``setting()`` field one of its keys,
with its type, default, allowed values and meaning. The checks of a single
value that a type and range cannot say (a URL's scheme, an importable
builder, a known policy) are named functions next to the keys that use them.
Sections read into a class of the core are declared as ``…Keys`` classes
whose settings name the core's attributes.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from armd.costmodel.evaluate import PROFILES
from armd.costmodel.plan import MAX_VALUE
from armd.policies.join_order import SHAPES
from armd.policies.registry import make_policy

from .errors import show
from .keys import (AT_LEAST_ONE, DAY, HOUR, MINUTE, NON_NEGATIVE, POSITIVE, UNIT_CLOSED_OPEN, UNIT_OPEN_CLOSED, YEAR,
                   Rule, at_most, in_range, setting)

SOURCE_KINDS = ("synthetic", "spark")
STATE_STORES = ("hdfs", "rocksdb")
MIGRATIONS = ("naive-restart", "genmig")
"""How the Spark adapter puts new settings into force (``[spark] migration``)."""
SINK_KINDS = ("parquet", "sql", "memory")
OUTPUT_MODES = ("append", "update", "complete")
ALERT_KINDS = ("webhook", "alertmanager", "command", "log")
STORE_SCHEMES = ("sqlite", "postgresql+psycopg")
METRICS_ADDRESS = "127.0.0.1"
MAX_SYNTHETIC_RATE = 100_000.0
"""Arrivals per second of one simulated stream at most: the simulated source draws every arrival."""


def store_url_scheme(url: str) -> str | None:
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme in STORE_SCHEMES:
        return None
    # The URL may hold a password: name only its scheme.
    return (f"unsupported store URL scheme {scheme!r}; "
            "allowed: sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST/DB")


def sqlalchemy_url(url: str) -> str | None:
    if "://" in url:
        return None
    return "expected a SQLAlchemy URL, e.g. sqlite:///results.db or postgresql+psycopg://USER:PASSWORD@HOST/DB"


def http_url(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return None
    return f"expected an http:// or https:// URL, got {show(url)}"


def listen_address(address: str) -> str | None:
    """An IPv4 or IPv6 address, or a host name, to listen on."""
    try:
        ipaddress.ip_address(address.strip("[]"))
        return None
    except ValueError:
        pass
    if re.fullmatch(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*", address):
        return None
    return (f"expected an IP address to listen on (127.0.0.1, ::1, 0.0.0.0 for every IPv4 address, :: for every "
            f"address) or a host name, got {show(address)}")


def known_policy(name: str) -> str | None:
    try:
        make_policy(name)
    except LookupError as exc:
        return str(exc)
    return None


def importable_builder(ref: str) -> str | None:
    from armd.adapters.spark.managed import load_builder  # imports pyspark: only for Spark configurations

    try:
        load_builder(ref)
    except LookupError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class StoreConfig:
    url: str = setting("sqlite:///armd.db", secret="password", check=store_url_scheme,
                       doc="SQLAlchemy URL of the metadata store (``sqlite:///…`` or ``postgresql+psycopg://…``); "
                           "a relative SQLite path is relative to the configuration's folder.")
    retention_days: float = setting(7.0, rule=at_most(POSITIVE, 3650, "ten years"), doc="Observations, batches and estimates older "
                                    "than this many days are pruned.")
    connect_retries: int = setting(5, rule=at_most(NON_NEGATIVE, 10), doc="Connection attempts after the first one fails.")
    connect_backoff_seconds: float = setting(0.5, rule=at_most(POSITIVE, MINUTE, "a minute"), doc="Wait before the first retry, doubled per retry.")
    call_timeout_seconds: float = setting(5.0, rule=at_most(POSITIVE, HOUR, "an hour"), doc="Longest one store call may block (a lock held by "
                                          "another connection, a hung server) before it counts as unavailable.")
    lease_seconds: float = setting(15.0, rule=at_most(POSITIVE, DAY, "a day"), doc="The active daemon renews its lease on the store this "
                                   "often at least; another daemon may take over once it lapses.")
    history_retention_days: float = setting(90.0, rule=at_most(POSITIVE, 3650, "ten years"), doc="Decisions, events and finished "
                                            "migrations older than this many days are pruned (the latest decision is kept).")
    application_timeout_seconds: float = setting(60.0, rule=at_most(POSITIVE, DAY, "a day"), doc="An armd.agent application "
                                                 "that has not reported for this long is marked gone and its queries removed "
                                                 "(docs/agent.md).")
    agents: bool = setting(True, doc="Decide for the queries armd.agent applications register in this store, in one problem "
                           "with the configured ones (statistics read back from the store; docs/agent.md).")


@dataclass(frozen=True)
class ApplyConfig:
    """How the reconciler retries applying desired settings that failed for a reason that may pass."""

    retry_initial_seconds: float = setting(1.0, rule=at_most(POSITIVE, DAY, "a day"), doc="Wait before the first retry after a temporary "
                                           "apply error (or the error's own hint, whichever is longer).")
    retry_max_seconds: float = setting(60.0, rule=at_most(POSITIVE, DAY, "a day"), doc="The wait doubles per failed attempt up to this "
                                       "(≥ retry_initial_seconds).")
    max_attempts: int = setting(20, rule=at_most(POSITIVE, 1_000_000), doc="Attempts for one change before its query is marked "
                                "``failed`` (a permanent error marks it at once).")


@dataclass(frozen=True)
class ModelConfig:
    time_unit_seconds: float = setting(0.001, rule=in_range(1e-9, DAY, "a nanosecond to a day"), doc="The plan's time unit in seconds: d, windows and "
                                       "granularities are in this unit.")
    profile: str = setting("paper", choices=tuple(PROFILES), doc="Engine profile of the cost model (one of "
                           "``armd.costmodel.evaluate.PROFILES``).")
    calibration: str | None = setting(None, doc="A file written by ``armd calibrate`` (relative to the "
                                      "configuration's folder): its learned CPU constants and bytes per state row "
                                      "replace the plan's.")
    cpu_refit: bool = setting(False, doc="Refit the CPU constants online from the engine's batch durations and decide "
                              "on them once a fit explains the batches (event ``cpu_constants_refitted``); CPU estimates "
                              "and ``bounds.cpu`` are then seconds of processing per time unit, as after ``armd calibrate``.")


@dataclass(frozen=True)
class SparkConfig:
    master: str = setting("local[2]", doc="Spark master URL.")
    app_name: str = setting("armd", doc="Spark application name.")
    conf: Mapping[str, str] = setting(factory=dict, doc="Extra Spark configuration, key → string value.")
    checkpoint_dir: str = setting("armd-checkpoints", doc="Where the managed queries keep their checkpoints (one "
                                  "directory per query run), relative to the working directory.")
    state_store: str = setting("hdfs", choices=STATE_STORES, doc="Spark's state store provider: ``hdfs`` (Spark's "
                               "default) or ``rocksdb``.")
    migration: str = setting("genmig", choices=MIGRATIONS, doc="How new settings are put into force on Spark: "
                             "``genmig`` (exact; every query's sources must meet its contract) or ``naive-restart`` "
                             "(LOSSY, only by explicit choice; logged as a warning at start and at each use).")
    migration_timeout_seconds: float = setting(600.0, rule=at_most(POSITIVE, DAY, "a day"), doc="A GenMig migration "
                                               "still running or draining after this long fails (with the reason) "
                                               "instead of staying open for good.")


@dataclass(frozen=True)
class SinkConfig:
    kind: str = setting("parquet", choices=SINK_KINDS, doc="``parquet`` (a directory, one subdirectory per plan "
                        "version), ``sql`` (a table) or ``memory`` (tests).")
    path: str | None = setting(None, kinds=("parquet",), doc="Parquet: the directory (default ``armd-output/QUERY``).")
    url: str | None = setting(None, kinds=("sql",), secret="password", check=sqlalchemy_url,
                              doc="SQL: SQLAlchemy URL of the database.")
    table: str | None = setting(None, kinds=("sql",), doc="SQL: the table (default the query name).")


@dataclass(frozen=True)
class JoinOrderConfig:
    """Join reordering of one multi-way join run by JISC on Spark (``[managed.NAME.join_order]``)."""

    control: str = setting(doc="The control file: the daemon writes the join order there, the query reads it at every "
                           "micro-batch (default ``CHECKPOINT_DIR/QUERY.join-order.json``).")
    order: tuple[str, ...] = setting(doc="The left-deep order the query starts with: its streams, the first two "
                                     "joined first (default the plan's order).")
    margin: float = setting(0.2, rule=UNIT_CLOSED_OPEN, doc="A new order must cost less than (1 − margin) × the "
                            "running one's estimated CPU.")
    cooldown_seconds: float = setting(60.0, rule=at_most(NON_NEGATIVE, YEAR, "a year"), doc="Least time between two join-order migrations of "
                                      "the query.")
    shape: str = setting("left-deep", choices=SHAPES, doc="Orders the policy considers: ``left-deep`` or ``bushy``.")
    payback_seconds: float | None = setting(None, rule=at_most(POSITIVE, YEAR, "a year"), doc="A new order's CPU saving must "
                                            "pay back the migration (paper 003's Parallel Track: the old tree runs on for one "
                                            "window per level of joins, at most two) within this time; default: not priced.")


@dataclass(frozen=True)
class ManagedQueryConfig:
    """How the Spark adapter runs one plan query (``[managed.NAME]``)."""

    builder: str = setting(check=importable_builder, doc='``"module:function"``, called as '
                           "``function(spark, params) -> DataFrame``.")
    sink: SinkConfig = setting(factory=SinkConfig, doc="Where the results go (a table, or just its kind).")
    output_mode: str = setting("append", choices=OUTPUT_MODES, doc="Spark's output mode.")
    trigger_seconds: float = setting(1.0, rule=at_most(POSITIVE, DAY, "a day"), doc="Processing-time trigger interval.")
    watermark_delay_seconds: float = setting(0.0, rule=at_most(NON_NEGATIVE, YEAR, "a year"), doc="The watermark delay the builder gives "
                                             '``withWatermark`` (``params.extra["delay_seconds"]``).')
    nodes: Mapping[str, str] = setting(factory=dict, doc="The builder's node name → the plan node id it stands for "
                                       "(names not given are plan node ids).")
    params: Mapping[str, Any] = setting(factory=dict, doc="Anything else the builder reads from ``params.extra``.")
    sources: Mapping[str, Mapping[str, Any]] = setting(factory=dict, doc="Per plan stream, the Spark source the builder "
                                                       "reads (``format`` and reader options, see genmig.md); default "
                                                       "the ``armd-synthetic`` source driven by ``[source.streams]``.")
    streams: tuple[str, ...] = setting((), doc="Plan stream of each of the query's Spark sources, in Spark's order; "
                                       "only for sources other than ``armd-synthetic``.")
    heralds: Mapping[str, str] = setting(factory=dict, doc="Per plan stream the query reads, the column of its rows that "
                                         "carries heralds in-stream (a herald on the row it starts at, null elsewhere; "
                                         "heralds.md); the column must be an identifier. Read by the single-process "
                                         "host's HeraldedSelect; Spark queries do not read it yet.")
    herald_sources: Mapping[str, str] = setting(factory=dict, doc="Per plan stream the query reads, a side stream of its "
                                                "heralds: a directory of JSON-lines files, one herald a line (ranges, "
                                                "count or seconds, starts_at; heralds.md), relative to this file; it "
                                                "must exist. Read like the store's heralds, at the next batch, by "
                                                "the herald selects ``herald_feed.stream_heralds`` feeds; the Spark "
                                                "builders do not build one from the configuration yet (heralds.md).")
    join_order: JoinOrderConfig | None = setting(None, doc="For a multi-way join run by JISC (builder "
                                                 "``multiway_join``): how the daemon chooses its join order.")


@dataclass(frozen=True)
class BoundsKeys:
    """``[bounds]``, read into the core's ``Bounds``."""

    memory_bytes: float = setting(rule=at_most(POSITIVE, 2.0 ** 60, "1 EiB"), attr="memory", doc="Memory bound M in bytes.")
    cpu: float = setting(rule=at_most(POSITIVE, 1e15), doc="Processing bound C in cost units per model time unit.")
    reserve: float = setting(0.1, rule=UNIT_CLOSED_OPEN, doc="Fraction of both bounds kept free for bursts.")


@dataclass(frozen=True)
class PolicyConfig:
    name: str = setting("weighted-qos", check=known_policy, doc="Policy name, as ``make_policy`` knows it.")
    params: Mapping[str, Any] = setting(factory=dict, doc="Policy parameters passed to ``make_policy``.")


@dataclass(frozen=True)
class GuardrailsKeys:
    """``[guardrails]``, read into the core's ``Guardrails``."""

    cooldown_seconds: float = setting(30.0, rule=at_most(NON_NEGATIVE, YEAR, "a year"), attr="cooldown", doc="A query changed less than "
                                      "this long ago keeps its setting.")
    hysteresis: float = setting(0.02, rule=UNIT_CLOSED_OPEN, doc="Fraction changes smaller than this are ignored.")
    max_step: float = setting(0.5, rule=UNIT_OPEN_CLOSED, doc="Largest change of a query's fraction in one decision.")
    dry_run: bool = setting(False, doc="Decide and record, apply nothing.")


DEFAULT_WINDOW_SECONDS = 5.0


@dataclass(frozen=True)
class TriggerConfig:
    window_seconds: float | None = setting(None, rule=at_most(NON_NEGATIVE, DAY, "a day"), doc="Smoothing time window in seconds "
                                           f"(default {DEFAULT_WINDOW_SECONDS:g}): an observation covering Δt seconds weighs "
                                           "1 − exp(−Δt / window); 0: no smoothing.")
    threshold: float = setting(0.2, rule=at_most(POSITIVE, 1000), doc="Minimum relative change of a smoothed d (or selectivity) that "
                               "makes a decision due, > 0.")
    significance: float = setting(0.001, rule=UNIT_OPEN_CLOSED, doc="A rate change makes a decision due only when a Poisson test "
                                  "of the arrival counts gives a p-value below this, in (0, 1] (1: the threshold alone).")
    alpha: float | None = setting(None, rule=UNIT_OPEN_CLOSED, doc="Superseded by ``window_seconds``: the old per-observation "
                                  "weight, in (0, 1], read as the window −observe_seconds / ln(1 − alpha); not together with "
                                  "``window_seconds``.")


@dataclass(frozen=True)
class MigrationCostKeys:
    """``[migration_cost]``, read into the core's ``Exchange``: what a migration's costs are worth in QoS units."""

    qos_per_bound_second: float = setting(0.002, rule=at_most(NON_NEGATIVE, 1e6), doc="QoS units a migration costs per second "
                                          "it holds extra state as large as the memory bound (in proportion for less); 0: free.")
    qos_per_gap_second: float = setting(0.001, rule=at_most(NON_NEGATIVE, 1e6), doc="QoS units a migration costs per second "
                                        "of output gap (a restart's first window); 0: free.")


@dataclass(frozen=True)
class ForecastKeys:
    """``[forecast]``, read into the core's ``ForecastRules``: deciding against each stream's forecast rate."""

    enabled: bool = setting(False, doc="Decide against each stream's rate forecast (Holt's method) at the horizon, when "
                            "it is above the measured rate.")
    horizon_seconds: float | None = setting(None, rule=at_most(NON_NEGATIVE, DAY, "a day"), doc="How far ahead to forecast; "
                                            "default: the adaptation delay (longest window in force + watermark delay).")
    history: int = setting(60, rule=at_most(AT_LEAST_ONE, 10_000), doc="Observations the forecast is fitted on (the latest).")
    min_history: int = setting(10, rule=at_most(AT_LEAST_ONE, 10_000), doc="With fewer observations the forecast is the last "
                               "rate; at least 4 and at most ``history``.")


@dataclass(frozen=True)
class FeedbackConfig:
    enabled: bool = setting(True, doc="Correct the cost model with measured state (and CPU): decide on the estimates times "
                            "the smoothed ratio measured / estimated per query; cut when measured state is over the bound.")
    window_seconds: float = setting(60.0, rule=in_range(0.01, DAY, "10 ms to a day"), doc="Time constant of the "
                                    "exponential smoothing of the ratios: a ratio seen Δt after the previous one weighs "
                                    "1 − exp(−Δt / window_seconds).")
    min_ratio: float = setting(0.25, rule=in_range(1e-3, 1.0, "0.001 to 1"), doc="Smallest correction factor.")
    max_ratio: float = setting(8.0, rule=in_range(1.0, 1000.0, "1 to 1000"), doc="Largest correction factor.")
    cpu: bool = setting(False, doc="Correct CPU too, from the engine's batch durations; only meaningful when the model "
                        "is calibrated (``[model] calibration``), so that estimates are seconds per time unit.")
    deadband: float = setting(0.15, rule=in_range(0.0, 1.0, "0 to 1"), doc="A factor within this relative distance of the one "
                              "the last decision used is not a change: decisions keep the old factor, so measurement noise "
                              "does not make the policy re-decide and migrate.")
    rise_seconds: float = setting(5.0, rule=in_range(0.01, DAY, "10 ms to a day"), doc="Time constant of the smoothing "
                                  "when a ratio is above the factor: it rises within seconds (state under-estimated breaks "
                                  "the bound) and falls only over window_seconds.")


@dataclass(frozen=True)
class ScheduleConfig:
    observe_seconds: float = setting(1.0, rule=in_range(0.01, DAY, "10 ms to a day"), doc="Interval between observations.")
    decide_seconds: float = setting(30.0, rule=in_range(0.01, YEAR, "10 ms to a year"), doc="Longest interval between decisions when no trigger "
                                    "fires (≥ observe_seconds).")
    apply_seconds: float = setting(1.0, rule=in_range(0.01, DAY, "10 ms to a day"), doc="Interval between attempts to apply pending settings.")
    housekeeping_seconds: float = setting(300.0, rule=in_range(0.01, YEAR, "10 ms to a year"), doc="Interval between housekeeping runs (pruning old "
                                          "observations).")


@dataclass(frozen=True)
class RateStep:
    at_seconds: float = setting(rule=at_most(NON_NEGATIVE, 100 * YEAR, "a century"), doc="Seconds after the start from which the base rate is "
                                "``rate_per_second``.")
    rate_per_second: float = setting(rule=at_most(NON_NEGATIVE, MAX_SYNTHETIC_RATE), doc="The new base rate, arrivals per second.")


@dataclass(frozen=True)
class Burst:
    at_seconds: float = setting(rule=at_most(NON_NEGATIVE, 100 * YEAR, "a century"), doc="Seconds after the start at which the burst begins.")
    duration_seconds: float = setting(rule=at_most(POSITIVE, YEAR, "a year"), doc="How long the burst lasts.")
    factor: float = setting(rule=at_most(POSITIVE, 1000), doc="The rate is multiplied by this while the burst lasts.")


@dataclass(frozen=True)
class SyntheticStream:
    rate_per_second: float = setting(rule=at_most(NON_NEGATIVE, MAX_SYNTHETIC_RATE), doc="Base rate, arrivals per second (default the plan's rate).")
    steps: tuple[RateStep, ...] = setting((), doc="Changes of the base rate, by ascending ``at_seconds``.")
    bursts: tuple[Burst, ...] = setting((), doc="Temporary multiplications of the rate.")
    keys: int = setting(1, rule=at_most(AT_LEAST_ONE, 1_000_000), doc="Number of distinct keys the stream's elements carry.")


@dataclass(frozen=True)
class SourceConfig:
    kind: str = setting("synthetic", choices=SOURCE_KINDS, doc="Where statistics come from.")
    seed: int = setting(42, rule=at_most(NON_NEGATIVE, 2 ** 32 - 1), doc="Seed of the synthetic arrivals: the same seed replays the same arrivals.")
    streams: Mapping[str, SyntheticStream] = setting(factory=dict, doc="Every plan stream; one without an entry in "
                                                     "the file runs at its plan rate.")


@dataclass(frozen=True)
class HookKeys:
    """One ``[[alerts]]`` entry, read into the alert adapter's ``AlertHook``; each kind takes only its own keys."""

    kind: str = setting(choices=ALERT_KINDS, doc="``webhook``, ``alertmanager``, ``command`` or ``log``.")
    url: str | None = setting(None, kinds=("webhook", "alertmanager"), expected="an http:// or https:// URL", check=http_url,
                              doc="Webhook: the http(s) URL events are POSTed to; alertmanager: the Alertmanager's base URL "
                                  "(``http://host:9093``; alerts go to its ``/api/v2/alerts``). Required for both.")
    secret: str | None = setting(None, kinds=("webhook",), secret="value", doc="Webhook: HMAC key for signing the body.")
    argv: tuple[str, ...] = setting((), kinds=("command",), doc="Command: program and arguments (required); the event "
                                    "is passed on standard input.")
    timeout_seconds: float = setting(5.0, kinds=("webhook", "alertmanager", "command"), rule=in_range(1.0, HOUR, "a second to an hour"),
                                     doc="How long one delivery may take: at least a second, since a delivery opens a "
                                         "connection or starts a process, which a busy machine may not do sooner.")
    retries: int = setting(3, kinds=("webhook", "alertmanager", "command"), rule=at_most(NON_NEGATIVE, 100), doc="Further attempts after a failed "
                           "delivery.")


APP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def app_name(name: str) -> str | None:
    if APP_NAME.fullmatch(name):
        return None
    return f"expected a name of letters, digits, '_', '.' or '-' (at most 64, starting with a letter or digit), got {show(name)}"


@dataclass(frozen=True)
class AppConfig:
    """One ``[[apps]]`` entry: an ``armd.agent`` application ``armd run`` starts beside itself and stops with itself."""

    name: str = setting(check=app_name, doc="The application's name: its log file's default name and the ``ARMD_APP`` "
                        "it is given (the demo passes it to ``Agent(app=...)``).")
    command: tuple[str, ...] = setting(doc="Program and arguments (required), run in ``cwd``; ``python`` and "
                                       "``spark-submit`` resolve to armd's own environment first (its ``bin`` folder "
                                       "leads ``PATH``). It gets ``ARMD_STORE`` (the store's URL), ``ARMD_APP``, "
                                       "``ARMD_CONFIG`` and ``ARMD_TIME_UNIT_SECONDS`` in its environment.")
    cwd: str = setting(".", doc="The folder it runs in, relative to the configuration's folder.")
    log: str | None = setting(None, doc="File its standard output and error are appended to, relative to ``cwd`` "
                              "(default ``NAME.log``).")
    env: Mapping[str, str] = setting(factory=dict, doc="More environment variables, name → string value.")
    stop_seconds: float = setting(20.0, rule=at_most(POSITIVE, HOUR, "an hour"), doc="At the daemon's stop the "
                                  "application gets SIGTERM and this long to stop its queries; then it is killed.")


PLAN_SIZE = at_most(POSITIVE, MAX_VALUE, "the plan's largest size")
"""A window or granularity in model time units, bounded as the plan's own sizes are."""


@dataclass(frozen=True)
class QueryKeys:
    """``[queries.NAME]``, read into the core's ``QueryQoS``."""

    weight: float = setting(1.0, rule=at_most(POSITIVE, 1e6), doc="Priority of the query in the weighted QoS objective.")
    window: tuple[float, float] | None = setting(None, rule=PLAN_SIZE, doc="Default [min, max] window size for every time-based "
                                                 "window node of the query.")
    windows: Mapping[str, tuple[float, float]] = setting(factory=dict, rule=PLAN_SIZE, doc="Per window node id: [min, max], "
                                                         "overriding ``window``.")
    granularity: tuple[float, float] | None = setting(None, rule=PLAN_SIZE, doc="[coarsest, finest] granularity for every "
                                                      "granularity node of the query.")
    drop_rate: tuple[float, float] | None = setting(None, rule=UNIT_CLOSED_OPEN, doc="[low, high] probability of dropping "
                                                    "each input element before the windows (load shedding, paper 001 "
                                                    "§5.3); the policy picks a rate inside it. Absent or [0, 0]: never "
                                                    "sheds. A query that sheds must own all its plan nodes.")


@dataclass(frozen=True)
class AlertingConfig:
    dedup_seconds: float = setting(300.0, rule=at_most(NON_NEGATIVE, YEAR, "a year"), doc="An alert of the same kind and query within this "
                                   "many seconds of the last one sent is suppressed and counted (0: never).")
    queue_size: int = setting(1000, rule=at_most(AT_LEAST_ONE, 1_000_000), doc="Alerts waiting for the delivery thread; when full, a new "
                              "alert is dropped and counted.")
    stale_intervals: int = setting(30, rule=at_most(AT_LEAST_ONE, 1_000_000), doc="A stream with no rows for this many observe intervals "
                                   "in a row raises ``statistics_stale``.")
    estimate_factor: float = setting(4.0, rule=at_most(Rule("> 1", lambda x: x > 1), 1e6), doc="A query whose measured state and "
                                     "estimated memory differ by more than this factor raises ``estimate_off``.")


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = setting(False, doc="Serve Prometheus metrics over HTTP.")
    port: int = setting(9464, rule=Rule("in [0, 65535]", lambda x: 0 <= x <= 65535), doc="TCP port on ``metrics.address`` "
                        "(0: any free port, logged as ``metrics_listening``).")
    address: str = setting(METRICS_ADDRESS, check=listen_address, doc="Address the endpoint listens on (default the "
                           "loopback 127.0.0.1). It has no authentication: another address exposes the metrics and "
                           "/healthz to whoever reaches it.")
