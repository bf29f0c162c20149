"""``load_config``: read the file, put in the environment, and read every section in the order they depend on.

The plan comes first, since later sections refer to it. Values are checked
here for type and range (from their definitions in ``sections``); the core's
own constructors (``parse_plan``, ``Problem``, ``make_policy``,
``Guardrails``, ``RateTracker``, ``Bounds``) then check what only they know,
and their errors are re-raised under the key they concern. Checks that relate
keys to each other are written out below, one function per section.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Callable, Mapping

from armd.adapters.alerts.hooks import AlertHook
from armd.adapters.store.sqlite_file import anchored_url
from armd.costmodel.plan import PlanSet
from armd.policies.guardrails import Guardrails
from armd.policies.forecast import ForecastRules
from armd.policies.migration_cost import Exchange
from armd.policies.problem import Bounds
from armd.policies.registry import make_policy
from armd.policies.triggers import TriggerRules

from .document import SECTIONS, Config
from .environment import interpolate
from .errors import ConfigError, Key, listing, reason, show
from .keys import into, keys_of
from .derived import derive_plan, wants_derivation
from .managed import check_fixed_join_windows, read_managed, read_spark
from .plan import calibrate, read_plan, read_queries
from .reader import REQUIRED, Table
from .redaction import find_secrets
from .sections import (ALERT_KINDS, MAX_SYNTHETIC_RATE, AlertingConfig, AppConfig, ApplyConfig, BoundsKeys, Burst, FeedbackConfig,
                       ForecastKeys, GuardrailsKeys, HookKeys, MetricsConfig, MigrationCostKeys, ModelConfig, PolicyConfig,
                       RateStep, ScheduleConfig, SourceConfig,
                       StoreConfig, SyntheticStream, TriggerConfig)


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read, interpolate and validate a configuration file; every mistake is a ``ConfigError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            path, None, f"cannot read the configuration: {reason(exc)}; give a readable UTF-8 TOML file"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.fullmatch(r"(.*) \(at (line \d+, column \d+|end of document)\)", str(exc))
        what, where = (match[1], match[2]) if match else (str(exc), None)
        raise ConfigError(path, where, f"invalid TOML: {what}; see https://toml.io/en/v1.0.0") from None
    substituted: dict[Key, list[str]] = {}
    doc = interpolate(raw, (), os.environ if environ is None else environ, path, substituted)
    config = _read(Table(path, (), doc, SECTIONS))
    return dataclasses.replace(config, secrets=find_secrets(config, substituted))


def _read(top: Table) -> Config:
    model = ModelConfig(**top.section("model", ModelConfig).read(ModelConfig))
    spark = read_spark(top)
    derived = derive_plan(top, model, spark) if wants_derivation(top) else None
    plan_doc, plan = (derived.doc, derived.plan) if derived else read_plan(top)
    plan = calibrate(top, plan, model)
    store = StoreConfig(**top.section("store", StoreConfig).read(StoreConfig))
    # A relative SQLite path means the configuration's folder, like plan.file — never the folder a command runs in.
    store = dataclasses.replace(store, url=anchored_url(store.url, top.file.parent))
    alerts = tuple(_alert(top, i, raw) for i, raw in enumerate(top.tables("alerts")))
    source = _source(top.section("source", SourceConfig), plan, model)
    managed = read_managed(top, plan, source.kind, spark, derived)
    qos = read_queries(top, plan, model.time_unit_seconds)
    check_fixed_join_windows(top, managed, qos)
    return Config(
        path=top.file,
        store=store,
        model=model,
        spark=spark,
        bounds=_bounds(top.section("bounds", BoundsKeys)),
        policy=_policy(top.section("policy", PolicyConfig)),
        guardrails=_guardrails(top.section("guardrails", GuardrailsKeys)),
        triggers=_triggers(top.section("triggers", TriggerConfig)),
        schedule=_schedule(top.section("schedule", ScheduleConfig)),
        source=source,
        alerts=alerts,
        plan_doc=plan_doc,
        plan=plan,
        qos=qos,
        alerting=AlertingConfig(**top.section("alerting", AlertingConfig).read(AlertingConfig)),
        metrics=MetricsConfig(**top.section("metrics", MetricsConfig).read(MetricsConfig)),
        managed=managed,
        apply=_apply(top.section("apply", ApplyConfig)),
        feedback=FeedbackConfig(**top.section("feedback", FeedbackConfig).read(FeedbackConfig)),
        migration_cost=_migration_cost(top.section("migration_cost", MigrationCostKeys)),
        forecast=_forecast(top.section("forecast", ForecastKeys)),
        apps=_apps(top),
        derivations=dict(derived.derivations) if derived else {},
        unmanaged=dict(derived.unmanaged) if derived else {},
    )


def _core(t: Table, make: Callable[[], Any]) -> Any:
    """Run a core constructor on checked values; anything it still rejects is reported at the section."""
    try:
        return make()
    except ValueError as exc:
        raise t.error((), f"{exc}; see docs/configuration.md") from None


def _bounds(t: Table) -> Bounds:
    values = t.read(BoundsKeys)
    return _core(t, lambda: into(Bounds, BoundsKeys, values))


def _migration_cost(t: Table) -> Exchange:
    values = t.read(MigrationCostKeys)
    return _core(t, lambda: into(Exchange, MigrationCostKeys, values))


def _forecast(t: Table) -> ForecastRules:
    values = t.read(ForecastKeys)
    return _core(t, lambda: into(ForecastRules, ForecastKeys, values))


def _guardrails(t: Table) -> Guardrails:
    values = t.read(GuardrailsKeys)
    return _core(t, lambda: into(Guardrails, GuardrailsKeys, values))


def _triggers(t: Table) -> TriggerConfig:
    triggers = TriggerConfig(**t.read(TriggerConfig))
    if triggers.alpha is not None and triggers.window_seconds is not None:
        raise t.error(("alpha",), "superseded by window_seconds, and both are set; remove alpha (window_seconds is the "
                      "smoothing as a time window in seconds)")
    _core(t, lambda: TriggerRules(triggers.window_seconds or 0.0, triggers.threshold, triggers.significance))
    return triggers


def _policy(t: Table) -> PolicyConfig:
    policy = PolicyConfig(**t.read(PolicyConfig, params=dict(t.mapping("params"))))
    try:
        make_policy(policy.name, policy.params)
    except (LookupError, ValueError) as exc:
        raise t.error(("params",), str(exc)) from None
    return policy


def _schedule(t: Table) -> ScheduleConfig:
    schedule = ScheduleConfig(**t.read(ScheduleConfig))
    if schedule.decide_seconds < schedule.observe_seconds:
        given = t.raw.get("decide_seconds", schedule.decide_seconds)
        raise t.error(("decide_seconds",), f"expected a number ≥ observe_seconds ({schedule.observe_seconds:g}), "
                                           f"got {show(given)}")
    return schedule


def _apply(t: Table) -> ApplyConfig:
    apply = ApplyConfig(**t.read(ApplyConfig))
    if apply.retry_max_seconds < apply.retry_initial_seconds:
        raise t.error(("retry_max_seconds",), f"{apply.retry_max_seconds:g} is less than retry_initial_seconds "
                                              f"({apply.retry_initial_seconds:g}); allowed: ≥ retry_initial_seconds")
    return apply


def _source(t: Table, plan: PlanSet, model: ModelConfig) -> SourceConfig:
    configured = t.mapping("streams")
    for name in configured:
        if name not in plan.streams:
            raise t.error(("streams", name), f"not a stream of the plan; plan streams: {listing(plan.streams)}")
    simulated = t.read(SourceConfig, keys=("kind",))["kind"] == "synthetic"
    streams = {}
    for name, spec in plan.streams.items():
        s = Table(t.file, (*t.key, "streams", name), configured.get(name, {}), keys_of(SyntheticStream))
        steps = tuple(RateStep(**step.read(RateStep)) for step in s.items("steps", RateStep))
        for i in range(1, len(steps)):
            if steps[i].at_seconds <= steps[i - 1].at_seconds:
                raise s.error(
                    ("steps", i, "at_seconds"),
                    f"expected a number > {steps[i - 1].at_seconds:g} (steps in ascending order), got {steps[i].at_seconds:g}",
                )
        bursts = tuple(Burst(**burst.read(Burst)) for burst in s.items("bursts", Burst))
        plan_rate = 1.0 / (spec.d * model.time_unit_seconds)
        if not simulated:  # the simulated streams are not run: the plan's rate needs no bound of theirs
            plan_rate = min(plan_rate, MAX_SYNTHETIC_RATE)
        elif plan_rate > MAX_SYNTHETIC_RATE and "rate_per_second" not in s.raw:
            raise s.error(("rate_per_second",), f"missing, and the plan's rate {plan_rate:g} arrivals per second is "
                                                f"too fast to simulate; allowed: at most {MAX_SYNTHETIC_RATE:g}")
        stream = SyntheticStream(**s.read(
            SyntheticStream, defaults={"rate_per_second": plan_rate}, steps=steps, bursts=bursts))
        base = max([stream.rate_per_second, *(step.rate_per_second for step in steps)])
        for i, burst in enumerate(bursts):
            if base * burst.factor > MAX_SYNTHETIC_RATE:
                raise s.error(("bursts", i, "factor"), f"{burst.factor:g} × the base rate {base:g} is "
                              f"{base * burst.factor:g} arrivals per second; allowed: at most "
                              f"{MAX_SYNTHETIC_RATE:g} (the simulated source draws every arrival)")
        streams[name] = stream
    return SourceConfig(**t.read(SourceConfig, streams=streams))


def _apps(top: Table) -> tuple[AppConfig, ...]:
    """``[[apps]]``: each a name (unique), a command (a non-empty list of strings) and string environment values."""
    apps, names = [], set()
    for t in top.items("apps", AppConfig):
        command = t.value("command", REQUIRED, "a non-empty list of strings")
        if not (isinstance(command, list) and command and all(isinstance(a, str) and a for a in command)):
            raise t.error(("command",), f"expected a non-empty list of non-empty strings, e.g. [\"python\", \"app.py\"], "
                                        f"got {show(command)}")
        env = t.mapping("env")
        for name, value in env.items():
            if not isinstance(value, str):
                raise t.error(("env", name), f"expected a string, got {show(value)}")
        app = AppConfig(**t.read(AppConfig, command=tuple(command), env=dict(env)))
        from ..apps import resolve  # here, not at the top: daemon/apps.py reads the sections of this package

        try:
            resolve(app, top.file.parent, os.environ)
        except ValueError as exc:
            key, _, why = str(exc).partition(": ")
            raise t.error((key,), why) from None
        if app.name in names:
            raise t.error(("name",), f"{show(app.name)} names two applications; allowed: a name unique among [[apps]]")
        names.add(app.name)
        apps.append(app)
    return tuple(apps)


def _alert(top: Table, index: int, raw: dict[str, Any]) -> AlertHook:
    """One ``[[alerts]]`` entry; a hook of a known kind allows only the keys of its kind."""
    kind = raw.get("kind")
    known = kind in ALERT_KINDS
    allowed = keys_of(HookKeys, kind) if known else keys_of(HookKeys)
    t = Table(top.file, ("alerts", index), raw, allowed, f"a {kind} hook" if known else None)
    kind = t.read(HookKeys, keys=("kind",))["kind"]
    if kind in ("webhook", "alertmanager") and "url" not in raw:
        raise t.error(("url",), f"missing; a{'n' if kind[0] == 'a' else ''} {kind} hook needs url = an http:// or https:// URL")
    given = {}
    if kind == "command":
        argv = t.value("argv", REQUIRED, "a non-empty list of strings")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a for a in argv)):
            raise t.error(("argv",), f"expected a non-empty list of non-empty strings, got {show(argv)}")
        given["argv"] = tuple(argv)
    return into(AlertHook, HookKeys, t.read(HookKeys, keys=keys_of(HookKeys, kind), **given))
