"""The daemon's configuration: one TOML file, read into frozen dataclasses.

Everything the daemon needs — store, model, bounds, policy, guardrails,
triggers, schedule, statistics source, alert hooks, the plan and the QoS of
its queries — comes from one file, validated completely at load time, so a
mistake stops ``armd run`` (or a SIGHUP reload) before anything changes, and
never surfaces hours later inside the loop. Every ``ConfigError`` is one line
that names the file, the key path, the bad value and what is allowed. The
format is specified in ``docs/configuration.md``.

Each key is defined once, as a field of its section's dataclass (``keys``,
``sections``); the keys a table allows, the reading and checking of values,
``Config.public()`` and the search for secrets are derived from it. The
modules:

* ``errors`` — ``ConfigError`` and the words messages are made of;
* ``keys`` — how a key is defined (``setting``) and what is derived from the definitions;
* ``reader`` — reading one TOML table against its definition;
* ``sections`` — the sections and their keys;
* ``document`` — ``Config``, the whole file, and its public view;
* ``environment`` — ``${NAME}`` from the environment;
* ``redaction`` — which values are secrets;
* ``plan``, ``managed`` — the plan, QoS and Spark sections, checked against each other;
* ``loader`` — ``load_config``, reading the sections in the order they depend on.
"""

from armd.adapters.alerts.hooks import AlertHook

from .document import SECTIONS, Config
from .masking import REDACTED
from .errors import ConfigError, Key
from .loader import load_config
from .sections import (ALERT_KINDS, METRICS_ADDRESS, MIGRATIONS, OUTPUT_MODES, SINK_KINDS, SOURCE_KINDS,
                       STATE_STORES, STORE_SCHEMES, AlertingConfig, ApplyConfig, Burst, JoinOrderConfig,
                       ManagedQueryConfig, MetricsConfig, ModelConfig, PolicyConfig, RateStep, ScheduleConfig,
                       SinkConfig, SourceConfig, SparkConfig, StoreConfig, SyntheticStream, TriggerConfig)

__all__ = [
    "ALERT_KINDS", "METRICS_ADDRESS", "MIGRATIONS", "OUTPUT_MODES", "REDACTED", "SECTIONS", "SINK_KINDS",
    "SOURCE_KINDS", "STATE_STORES", "STORE_SCHEMES", "AlertHook", "AlertingConfig", "ApplyConfig", "Burst", "Config",
    "ConfigError", "JoinOrderConfig", "Key", "ManagedQueryConfig", "MetricsConfig", "ModelConfig", "PolicyConfig",
    "RateStep", "ScheduleConfig", "SinkConfig", "SourceConfig", "SparkConfig", "StoreConfig", "SyntheticStream",
    "TriggerConfig", "load_config",
]
