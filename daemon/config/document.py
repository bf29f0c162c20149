"""``Config``: the whole file as one frozen value, and the view of it that may be shown.

Each field that is a section of the file names its table (``part``), so the
sections the file allows and the layout of ``Config.public()`` come from this
one class. ``public()`` is what ``armd check-config --json`` prints: the
file's layout with every default filled in and every secret replaced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from armd.adapters.alerts.hooks import AlertHook
from armd.costmodel.plan import PlanSet
from armd.policies.guardrails import Guardrails
from armd.policies.forecast import ForecastRules
from armd.policies.migration_cost import Exchange
from armd.policies.problem import Bounds
from armd.policies.qos import QueryQoS

from .keys import public_view
from .masking import redact_text
from .sections import (AlertingConfig, AppConfig, ApplyConfig, BoundsKeys, FeedbackConfig, ForecastKeys, GuardrailsKeys, HookKeys,
                       ManagedQueryConfig, MetricsConfig, MigrationCostKeys, ModelConfig, PolicyConfig, QueryKeys, ScheduleConfig,
                       SourceConfig, SparkConfig,
                       StoreConfig, TriggerConfig)

PART = "armd.section"
"""Where a field of ``Config`` keeps the table it is read from and the class declaring that table's keys."""


def part(table: str, spec: type | None = None, **kwargs: Any) -> Any:
    """A field of ``Config`` read from the file's table ``table``, whose keys ``spec`` declares (default: its type)."""
    return field(metadata={PART: (table, spec)}, **kwargs)


@dataclass(frozen=True, kw_only=True)
class Config:
    path: Path
    """The file this configuration was read from (as given)."""
    store: StoreConfig = part("store")
    """The metadata store."""
    model: ModelConfig = part("model")
    """The cost model's time unit and engine profile."""
    spark: SparkConfig = part("spark")
    """Spark session settings (for the Spark adapter)."""
    bounds: Bounds = part("bounds", BoundsKeys)
    """Memory and CPU bounds and the reserve kept free."""
    policy: PolicyConfig = part("policy")
    """Which policy decides, with its parameters."""
    guardrails: Guardrails = part("guardrails", GuardrailsKeys)
    """Hysteresis, cool-down (``cooldown`` in seconds), maximum step, dry run."""
    triggers: TriggerConfig = part("triggers")
    """Rate smoothing and the re-decision threshold."""
    schedule: ScheduleConfig = part("schedule")
    """Intervals of the daemon's jobs."""
    source: SourceConfig = part("source")
    """Where statistics come from."""
    alerts: tuple[AlertHook, ...] = part("alerts", HookKeys)
    """Where alerts go, in order."""
    alerting: AlertingConfig = part("alerting", default_factory=AlertingConfig)
    """Deduplication and queueing of alerts, and the thresholds of the events that watch measurements."""
    metrics: MetricsConfig = part("metrics", default_factory=MetricsConfig)
    """The Prometheus endpoint."""
    plan_doc: Mapping[str, Any] = part("plan")
    """The plan document as parsed (``streams``, ``queries``, optionally ``constants``)."""
    plan: PlanSet
    """The validated plan."""
    qos: Mapping[str, QueryQoS] = part("queries", QueryKeys)
    """QoS of the queries that have a ``[queries.NAME]`` entry."""
    managed: Mapping[str, ManagedQueryConfig] = part("managed", default_factory=dict)
    """How each plan query runs on Spark (with ``source.kind = "spark"``; empty otherwise)."""
    apply: ApplyConfig = part("apply", default_factory=ApplyConfig)
    """Retries of apply errors."""
    feedback: FeedbackConfig = part("feedback", default_factory=FeedbackConfig)
    """How measurements correct the cost model (the closed loop)."""
    migration_cost: Exchange = part("migration_cost", MigrationCostKeys, default_factory=lambda: Exchange(0.002, 0.001))
    """What a migration's extra state and output gap are worth in QoS units."""
    forecast: ForecastRules = part("forecast", ForecastKeys, default_factory=ForecastRules)
    """Whether decisions use the rates forecast at the adaptation horizon."""
    apps: tuple[AppConfig, ...] = part("apps", default=())
    """The ``armd.agent`` applications ``armd run`` starts beside itself (``[[apps]]``; daemon/apps.py)."""
    derivations: Mapping[str, Any] = field(default_factory=dict)
    """Query → its ``Derivation`` when the plan was derived from the builders (no ``[plan]``; daemon/config/derived.py)."""
    agent_timings: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    """``armd.agent`` query → (watermark delay, trigger interval) in seconds, from its registered plan; the agents
    apply every change by GenMig, so these price their migrations (daemon/fleet.py merges them in)."""
    unmanaged: Mapping[str, str] = field(default_factory=dict)
    """``[managed.NAME]`` queries whose plan could not be derived → why; they run with fixed settings, outside the plan."""
    secrets: frozenset[str] = frozenset()
    """Values that must never be shown: the store password, hook secrets, what the environment put into them."""

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``, found by structure (``masking``), never as a mere substring."""
        return redact_text(text, self.secrets)

    def public(self) -> dict[str, Any]:
        """The whole configuration as a JSON-able dict in the file's layout, secrets replaced by ``***``."""
        doc = {"path": str(self.path)}
        for name, value, spec in sections(self):
            doc[name] = public_view(value, spec)
        return _scrub(json.loads(json.dumps(doc)), self.redact)


SECTIONS = tuple(f.metadata[PART][0] for f in fields(Config) if PART in f.metadata)
"""The tables a configuration file may have, in the order the documentation gives them."""


def sections(config: Config) -> list[tuple[str, Any, type | None]]:
    """Each section of ``config``: its table's name, its value and the class declaring its keys."""
    return [(f.metadata[PART][0], getattr(config, f.name), f.metadata[PART][1])
            for f in fields(config) if PART in f.metadata]


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, redact) for v in value]
    return value
