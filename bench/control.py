"""Benchmark: does armd keep measured state under the bound with few, well-founded decisions? (issue 21, Verification)

    .venv/bin/python bench/control.py [--quick] [--json] [--no-spark] [--fig12-sizes 10,100,1000,10000]
    .venv/bin/python bench/control.py --scenario burst_bytes_2x [--mechanisms all] [--timeline]   # one scenario's rows

armd's real control path runs against the simulated plant (``bench/plant.py``):
the daemon's ``Controller``, the reconciler and coordinator of
``daemon/wiring.apply_side``, a real SQLite store in a temporary directory,
a simulated clock stepped one second at a time (no sleeping) and a simulated
GenMig applier whose migrations take time and hold both plans' state.

Each mechanism of issue 21 is switched by configuration overrides in
``MECHANISMS`` below (mechanism name → TOML overrides); every scenario runs
from the same seed with none, with each mechanism alone and with all of them.
Adding a mechanism is one line there. "none" is today's behaviour.

Scenarios (``SCENARIOS``): steady for 10 minutes; a burst ×4 of the main
stream; a ramp ×4 over 2 minutes; a query arriving and one leaving; and the
burst on two workloads the model gets wrong on purpose — keys that drift
(new ids keep arriving, so a count per key holds more groups than its plan
says) and a plan that gives half the elements' true bytes (the burst's own
workload, its bytes per row off by 2×; ``burst_bytes_2x_heavy``, elements
twice as heavy as the burst's with the plan unaware, is reported beside
them). Per row: decisions, applied changes
(window changes of running queries: each is a migration), peak measured
state / usable bound, seconds over the usable bound (memory × (1 − reserve)),
mean QoS (over the running queries and the seconds), results kept against
the oracle of ``bench/plant.py``.

Paper 001's experiments: Fig 12 (``fig12``: decision cost in ms and the QoS
a burst leaves vs the number of queries on the plant) and Fig 7
(``bench/trajectory.py``: a window change's measured state on local Spark
against ``policies/trajectory.predict``). Figs 9–11 (window reduction vs load
shedding) come from ``bench/shedding.py`` when that mechanism is merged;
until then ``reduction_over_shedding_results`` is null with the reason.

Prints ``{"scenarios": [...], "steady_applied_changes", "burst_applied_changes",
"burst_seconds_over_bound", "burst_limit_s", "ramp_seconds_over_bound",
"reduction_over_shedding_results", "trajectory_max_rel_err", "targets", ...}``;
headline figures are those with all mechanisms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plant import Keys, Plant, SimulatedGenMig, Tap  # noqa: E402

from armd.adapters.store import SqlStore  # noqa: E402
from armd.adapters.synthetic import Schedule  # noqa: E402
from armd.daemon.config import load_config as load_checked  # noqa: E402
from armd.daemon.config.errors import ConfigError  # noqa: E402
from armd.daemon.controller import Controller  # noqa: E402
from armd.daemon.metrics import NoMetrics  # noqa: E402
from armd.daemon.wiring import apply_side  # noqa: E402

# --- the mechanisms: name → TOML overrides (section → {key: value}); the lead fills this in after merging ---
MECHANISMS: dict[str, dict[str, dict[str, Any]]] = {
    "feedback": {"feedback": {"enabled": True}},
    "triggers": {"triggers": {"window_seconds": 5, "significance": 0.001}},
    "cost": {"migration_cost": {"qos_per_bound_second": 0.002, "qos_per_gap_second": 0.001}},
    "forecast": {"forecast": {"enabled": True}},
}
"""Issue 21's mechanisms, each with armd's defaults for it; ``OFF`` (every one switched off, the behaviour before
issue 21) is the base every row starts from. Load shedding is not among them: the plant does not thin a shedding
query's arrivals (``bench/shedding.py`` measures it on Spark instead)."""
OFF: dict[str, dict[str, Any]] = {
    "feedback": {"enabled": False},
    "triggers": {"window_seconds": 2.8, "significance": 1.0},  # alpha 0.3 at 1 s observations, no Poisson test
    "migration_cost": {"qos_per_bound_second": 0.0, "qos_per_gap_second": 0.0},
    "forecast": {"enabled": False},
}

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
SEED = 42
WARMUP_S = 60.0
DELAY_S = 2.0
"""Watermark delay of the plant's queries (the simulated GenMig drains this long past T_split)."""
TRIGGER_S = 1.0

STREAMS = {"clicks": (50.0, 64), "views": (20.0, 48)}
"""stream → (elements per second, plan bytes per element)."""
QUERIES: dict[str, dict[str, Any]] = {
    # name: stream, window QoS [min, max] ms, aggregate row bytes, granule ms (None: holds elements), groups
    "clicks_sum": {"stream": "clicks", "window": (5000, 30000), "size": 64},
    "views_sum": {"stream": "views", "window": (5000, 30000), "size": 48},
    "clicks_keys": {"stream": "clicks", "window": (5000, 20000), "size": 128, "granule": 1000, "groups": 20},
}
ARRIVING = {"views_keys": {"stream": "views", "window": (5000, 20000), "size": 128, "granule": 1000, "groups": 20}}
BASE: dict[str, dict[str, Any]] = {
    "model": {"time_unit_seconds": 0.001, "profile": "paper"},
    "bounds": {"memory_bytes": 220_000, "cpu": 1000, "reserve": 0.1},
    "policy": {"name": "weighted-qos"},
    "schedule": {"observe_seconds": 1, "decide_seconds": 30, "apply_seconds": 1},
    **OFF,
}


@dataclass(frozen=True)
class Scenario:
    name: str
    seconds: float
    bursts: Sequence[tuple[float, float, float]] = ()
    steps: Sequence[tuple[float, float]] = ()
    drift: float = 0.0
    bytes_factor: float = 1.0
    """The elements' true bytes against ``QUERIES``/``STREAMS`` (what the plant holds)."""
    plan_bytes_factor: float = 1.0
    """The bytes the plan says against ``QUERIES``/``STREAMS`` (what the model is told)."""
    arrive_at: float | None = None
    leave_at: float | None = None
    leaving: str = "views_sum"


def ramp(at: float, over: float, factor: float, base: float, pieces: int = 24) -> tuple[tuple[float, float], ...]:
    return tuple((at + over * i / pieces, base * (1 + (factor - 1) * i / pieces)) for i in range(1, pieces + 1))


SCENARIOS = (
    Scenario("steady", 600),
    Scenario("burst", 300, bursts=((120, 60, 4.0),)),
    Scenario("ramp", 360, steps=ramp(120, 120, 4.0, STREAMS["clicks"][0])),
    Scenario("arrive_leave", 360, arrive_at=120, leave_at=240),
    Scenario("burst_drifting_keys", 300, bursts=((120, 60, 4.0),), drift=0.1),
    Scenario("burst_bytes_2x", 300, bursts=((120, 60, 4.0),), plan_bytes_factor=0.5),
    Scenario("burst_bytes_2x_heavy", 300, bursts=((120, 60, 4.0),), bytes_factor=2.0),
)
BURSTS = ("burst", "burst_drifting_keys", "burst_bytes_2x")
"""The bursts the headline judges: the burst's own workload, modelled right, with keys that drift, and with a plan whose
bytes per row are half the elements' true bytes. ``burst_bytes_2x_heavy`` (elements twice as heavy as the burst's, the
plan unaware) is reported beside them: its true state at the QoS maxima is 1.8× the usable bound, so it needs a cut
before any burst and two at it (docs/policies.md)."""


# --- configuration -------------------------------------------------------------------------------

def merged(base: Mapping[str, Any], *overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in base.items()}
    for extra in overrides:
        for section, keys in extra.items():
            out.setdefault(section, {})
            out[section] = merged(out[section], keys) if isinstance(keys, Mapping) and isinstance(out[section], Mapping) else keys
    return out


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(toml_value(v) for v in value) + "]"


def toml(doc: Mapping[str, Any], prefix: str = "") -> str:
    """The few TOML forms the benchmark's configurations need: nested tables of scalars and lists."""
    lines = [f"{k} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, Mapping)]
    out = (f"[{prefix}]\n" if prefix and lines else "") + "".join(line + "\n" for line in lines)
    for key, value in doc.items():
        if isinstance(value, Mapping):
            out += "\n" + toml(value, f"{prefix}.{key}" if prefix else key)
    return out


def plan_doc(queries: Mapping[str, Mapping[str, Any]], streams: Mapping[str, tuple[float, float]],
             bytes_factor: float = 1.0) -> dict[str, Any]:
    """The plan file of ``queries``, every size (query rows and stream elements) scaled by ``bytes_factor``."""
    docs: dict[str, Any] = {}
    for name, q in queries.items():
        node: dict[str, Any] = {"op": "window", "id": f"{name}.w", "w": q["window"][1],
                                "inputs": [{"op": "source", "stream": q["stream"]}]}
        if q.get("granule"):
            node = {"op": "granularity", "g": q["granule"], "inputs": [node]}
        docs[name] = {"op": "aggregate", "size": q["size"] * bytes_factor, "groups": q.get("groups", 1), "inputs": [node]}
        if docs[name]["groups"] == 1:
            del docs[name]["groups"]
    return {"streams": {s: {"rate": rate / 1000.0, "g": 1, "size": size * bytes_factor} for s, (rate, size) in streams.items()},
            "queries": docs}


def write_config(folder: Path, name: str, queries: Mapping[str, Mapping[str, Any]], overrides: Sequence[Mapping[str, Any]],
                 streams: Mapping[str, tuple[float, float]] = STREAMS, base: Mapping[str, Any] = BASE,
                 plan_bytes_factor: float = 1.0) -> Path:
    plan = folder / f"{name}.json"
    plan.write_text(json.dumps(plan_doc(queries, streams, plan_bytes_factor)))
    doc = merged(base, {"store": {"url": f"sqlite:///{folder / 'armd.db'}"}, "plan": {"file": str(plan)},
                        "source": {"kind": "synthetic", "seed": SEED}},
                 {"queries": {q: {"window": list(spec["window"])} for q, spec in queries.items()}}, *overrides)
    path = folder / f"{name}.toml"
    path.write_text(toml(doc))
    return path


def taps_of(queries: Mapping[str, Mapping[str, Any]], bytes_factor: float) -> dict[str, list[Tap]]:
    return {name: [Tap(q["stream"], f"{name}.w", float(q["window"][1]), q["size"] * bytes_factor,
                       q["granule"] / 1000.0 if q.get("granule") else None)] for name, q in queries.items()}


def scratch(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory for the SQLite store, in memory-backed /dev/shm where there is one: the store is real, but
    its fsyncs (7 ms a commit here, thousands a scenario) would measure the disk, not armd."""
    shm = Path("/dev/shm")
    return tempfile.TemporaryDirectory(prefix=prefix, dir=shm if shm.is_dir() else None)


class MechanismError(Exception):
    """A mechanism's overrides that armd does not accept (not merged yet, or a key misspelt)."""


def load_config(path: Path, mechanisms: Sequence[str] = ()) -> Any:
    try:
        return load_checked(path)
    except ConfigError as exc:
        named = ", ".join(mechanisms) or "none"
        raise MechanismError(f"the configuration with mechanisms [{named}] is not accepted ({exc}); fix their overrides "
                             "in MECHANISMS at the top of bench/control.py") from None


# --- the run -------------------------------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class Quiet:
    """The daemon's log, kept out of the JSON: counts events by kind."""

    def __init__(self) -> None:
        self.kinds: dict[str, int] = {}
        self.last: dict[str, dict[str, Any]] = {}
        """The fields of the latest event of each kind (``decision_made`` carries the decision's weighted QoS)."""

    def _count(self, kind: str, *args: Any, **fields: Any) -> None:
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.last[kind] = fields

    info = warning = error = debug = exception = _count


class Alerts:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def alert(self, event: Any) -> None:
        self.events.append(event)


class Timings(NoMetrics):
    def __init__(self) -> None:
        self.decisions_ms: list[float] = []

    def decision(self, seconds: float) -> None:
        self.decisions_ms.append(seconds * 1e3)


@dataclass
class Trace:
    """Per simulated second: measured state, results kept and the oracle's, mean QoS of the running queries."""

    state: list[float] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    oracle: list[int] = field(default_factory=list)
    qos: list[float] = field(default_factory=list)


def seconds_over(state: Sequence[float], bound: float, step_seconds: float = 1.0) -> float:
    """Seconds the measured state spent over ``bound``: each sample stands for the ``step_seconds`` before it."""
    return step_seconds * sum(1 for s in state if s > bound)


def summarize(trace: Trace, bound: float, warmup: int = 0) -> dict[str, Any]:
    """A row's figures; time over the bound counts after the first ``warmup`` samples (the windows fill, the model's
    first estimates are the plan's), and the warm-up's own is given apart when there is one."""
    return {
        "peak_state_over_bound": round(max(trace.state, default=0.0) / bound, 4),
        "seconds_over_bound": seconds_over(trace.state[warmup:], bound),
        **({"seconds_over_bound_in_warmup": seconds_over(trace.state[:warmup], bound)} if warmup else {}),
        "mean_qos": round(statistics.fmean(trace.qos), 4) if trace.qos else None,
        "results_kept": round(sum(trace.kept) / sum(trace.oracle), 4) if sum(trace.oracle) else None,
    }


def priced_as_plant(controller: Controller) -> None:
    """Price changes as the plant migrates (GenMig, its delay and trigger), not as the daemon's simulated source
    (in place, free), which ``setup_of`` assumes for any source that is not Spark."""
    migration = controller.setup.migration
    timings = {q: (DELAY_S, TRIGGER_S) for q in controller.config.plan.queries}
    controller.setup = replace(controller.setup, migration=replace(migration, strategy="genmig", timings=timings))


def timeline_of(store: SqlStore, applier: SimulatedGenMig, measured: Mapping[int, Mapping[str, float]]) -> list[dict[str, Any]]:
    """What happened, in order: each decision as the store recorded it (trigger, the feedback factors per query,
    the measured state per query then against the decision's corrected estimate of its chosen settings, the chosen
    windows, whether it changed anything, the forecast and ramp stage), what the applier did (applies, migration steps)
    and each second's total measured state."""
    out: list[dict[str, Any]] = []
    for d in reversed(store.decisions(limit=1_000_000)):
        at = d["at"] if isinstance(d["at"], datetime) else datetime.fromisoformat(str(d["at"]))
        second = round((at.replace(tzinfo=at.tzinfo or timezone.utc) - START).total_seconds())
        feedback = (d["inputs"] or {}).get("feedback") or {}
        queries = (d["outputs"] or {}).get("queries", {})
        out.append({
            "t": second, "kind": "decision", "trigger": d["trigger"], "applied": bool(d["applied"]),
            "factors": {q: round(f["memory"], 3) for q, f in (feedback.get("factors") or {}).items()},
            "measured_bytes": {q: round(b) for q, b in measured.get(second, {}).items()},
            "estimated_bytes": {q: round(v["estimated_memory_bytes"]) for q, v in queries.items()},
            "windows_ms": {q: v["applied"].get("windows") for q, v in queries.items()},
            "guardrails": {q: v["guardrail"] for q, v in queries.items() if v.get("guardrail")},
            **({"forecast": forecast} if (forecast := (d["outputs"] or {}).get("forecast")) else {}),
        })
    out += [dict(e) for e in applier.log]
    out += [{"t": t, "kind": "state", "bytes": round(sum(b.values()))} for t, b in measured.items()]
    return sorted(out, key=lambda e: e["t"])  # stable: a second's decision before what it applied


def run(scenario: Scenario, mechanisms: Sequence[str], folder: Path, table: Mapping[str, Mapping[str, Any]] = MECHANISMS,
        queries: Mapping[str, Mapping[str, Any]] = QUERIES, warmup: float = WARMUP_S, timeline: bool = False) -> dict[str, Any]:
    """One scenario on the plant with ``mechanisms`` switched on; its row (with ``timeline``: its ``timeline_of``)."""
    overrides = [table[m] for m in mechanisms]
    config = load_config(write_config(folder, "armd", queries, overrides, plan_bytes_factor=scenario.plan_bytes_factor),
                         mechanisms)
    clicks_rate = STREAMS["clicks"][0]
    schedules = {s: Schedule(rate) for s, (rate, _) in STREAMS.items()}
    schedules["clicks"] = Schedule(clicks_rate, tuple(scenario.steps), tuple(scenario.bursts))
    clock = Clock()
    plant = Plant(schedules, SEED, config.model.time_unit_seconds, START, taps_of(queries, scenario.bytes_factor),
                  {"clicks": Keys(20, scenario.drift), "views": Keys(20, 0.0)})
    store = SqlStore.open(config.store.url)
    store.upgrade()
    applier = SimulatedGenMig(plant, clock, DELAY_S, TRIGGER_S)
    log, timings = Quiet(), Timings()
    controller = Controller(config, store, plant, applier, Alerts(), log, clock=clock, metrics=timings)
    priced_as_plant(controller)
    reconciler = apply_side(controller, applier, None)
    applier.on_transition = reconciler.coordinator.transition
    bound = config.bounds.memory * (1 - config.bounds.reserve)
    trace, current = Trace(), dict(queries)
    measured: dict[int, dict[str, float]] = {}
    events: list[dict[str, Any]] = []
    try:
        for second in range(1, int(scenario.seconds) + 1):
            clock.now = START + timedelta(seconds=second)
            if scenario.arrive_at is not None and second == scenario.arrive_at:
                current = {**current, **ARRIVING}
            if scenario.leave_at is not None and second == scenario.leave_at:
                current = {q: s for q, s in current.items() if q != scenario.leaving}
            if current.keys() != plant.taps.keys():
                controller.reload(load_config(write_config(folder, f"armd-{second}", current, overrides,
                                                           plan_bytes_factor=scenario.plan_bytes_factor), mechanisms))
                priced_as_plant(controller)
                plant.set_taps(taps_of(current, scenario.bytes_factor))
            if timeline:  # the state per query the decision of this second sees (observe reads the same instant)
                measured[second] = {q: plant.state(q, float(second))[1] for q in plant.taps}
            controller.observe()
            controller.decide()
            reconciler.coordinator.advance()
            reconciler.tick()
            now = float(second)
            trace.state.append(plant.total_state(now))
            kept, oracle = plant.contributions(now)
            trace.kept.append(kept)
            trace.oracle.append(oracle)
            running = [s.qos for q, s in controller.running.items() if plant.running(q)]
            if running:
                trace.qos.append(statistics.fmean(running))
        controller.flush(force=True)
        if timeline:
            events = timeline_of(store, applier, measured)
    finally:
        store.close()
        plant.close()
    after = sum(1 for t in applier.change_times if t > warmup)
    return {"scenario": scenario.name, "mechanisms": list(mechanisms) or ["none"], "plant": "simulated",
            "seconds": scenario.seconds, "decisions": controller.counters["decisions"], "applied_changes": applier.changes,
            "applied_changes_after_warmup": after, **summarize(trace, bound, int(warmup)), "usable_bound_bytes": bound,
            "decision_ms_median": round(statistics.median(timings.decisions_ms), 3) if timings.decisions_ms else None,
            **({"timeline": events} if timeline else {})}


def variants(table: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """None, each mechanism alone, all of them (without repeats)."""
    names = tuple(table)
    out: list[tuple[str, ...]] = [()]
    out += [(m,) for m in names]
    if len(names) > 1:
        out.append(names)
    return out


def scenario_rows(scenarios: Sequence[Scenario], table: Mapping[str, Any], quick: bool,
                  only: Sequence[tuple[str, ...]] | None = None, timeline: bool = False) -> list[dict[str, Any]]:
    """Each scenario with each of ``variants(table)`` (or only the mechanism sets ``only``)."""
    rows = []
    for scenario in scenarios:
        if quick:
            scenario = Scenario(**{**scenario.__dict__, "seconds": min(scenario.seconds, 240)})
        for mechanisms in variants(table) if only is None else only:
            with scratch("armd-cbench-") as tmp:
                rows.append(run(scenario, mechanisms, Path(tmp), table, timeline=timeline))
    return rows


def selection(names: str | None, mechanisms: str | None, table: Mapping[str, Any]) -> tuple[list[Scenario], list[tuple[str, ...]] | None]:
    """The scenarios named (comma-separated; all when None) and the mechanism sets (``all``, ``none`` or names joined
    by ``+``, comma-separated; every variant when None). A name armd does not have raises ``MechanismError``."""
    scenarios = list(SCENARIOS)
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in {s.name for s in SCENARIOS}]
        if unknown:
            raise MechanismError(f"no scenario {', '.join(unknown)}; the scenarios are {', '.join(s.name for s in SCENARIOS)}")
        scenarios = [s for s in SCENARIOS if s.name in wanted]
    if not mechanisms:
        return scenarios, None
    sets: list[tuple[str, ...]] = []
    for item in (m.strip() for m in mechanisms.split(",") if m.strip()):
        names_ = tuple(table) if item == "all" else () if item == "none" else tuple(item.split("+"))
        unknown = [n for n in names_ if n not in table]
        if unknown:
            raise MechanismError(f"no mechanism {', '.join(unknown)}; use all, none or {'+'.join(table)} (any of them, "
                                 "joined by +)")
        sets.append(names_)
    return scenarios, sets


# --- paper 001 Fig 12: decision cost and adaptation vs number of queries ----------------------------

def fig12(sizes: Sequence[int], mechanisms: Sequence[str], table: Mapping[str, Any] = MECHANISMS) -> list[dict[str, Any]]:
    """N queries on 10 streams, the bound 1.5× their steady state; every stream ×4 from t = 5 s; 8 simulated seconds.

    Per N: the decision cost (the first decision admits every query; the last one answers the burst), the weighted
    QoS the burst decision chose, and what is in force 3 s later (migrations take a window + delay, and staging starts
    only those whose extra state fits, so few have finished)."""
    rows = []
    streams = {f"s{i}": (20.0, 64) for i in range(10)}
    for n in sizes:
        queries = {f"q{i:05d}": {"stream": f"s{i % 10}", "window": (5000, 30000), "size": 64} for i in range(n)}
        per_query = 20.0 * 30 * 64  # bytes at the QoS maximum, steady
        base = merged(BASE, {"bounds": {"memory_bytes": n * per_query * 1.5 / 0.9, "cpu": 1e9}})  # memory binds, CPU never
        with scratch("armd-fig12-") as tmp:
            folder = Path(tmp)
            config = load_config(write_config(folder, "armd", queries, [table[m] for m in mechanisms], streams, base))
            clock = Clock()
            schedules = {s: Schedule(rate, (), ((5.0, 1e9, 4.0),)) for s, (rate, _) in streams.items()}
            plant = Plant(schedules, SEED, config.model.time_unit_seconds, START, taps_of(queries, 1.0))
            store = SqlStore.open(config.store.url)
            store.upgrade()
            applier = SimulatedGenMig(plant, clock, DELAY_S, TRIGGER_S)
            timings, log = Timings(), Quiet()
            controller = Controller(config, store, plant, applier, Alerts(), log, clock=clock, metrics=timings)
            priced_as_plant(controller)
            reconciler = apply_side(controller, applier, None)
            applier.on_transition = reconciler.coordinator.transition
            try:
                for second in range(1, 9):
                    clock.now = START + timedelta(seconds=second)
                    controller.tick()
                    reconciler.coordinator.advance()
                    reconciler.tick()
            finally:
                store.close()
                plant.close()
            qos = [s.qos for s in controller.running.values()]
            rows.append({"queries": n, "decisions": len(timings.decisions_ms),
                         "first_decision_ms": round(timings.decisions_ms[0], 3) if timings.decisions_ms else None,
                         "burst_decision_ms": round(timings.decisions_ms[-1], 3) if len(timings.decisions_ms) > 1 else None,
                         "decided_weighted_qos_after_burst": log.last.get("decision_made", {}).get("weighted_qos"),
                         "applied_changes": applier.changes, "mean_qos_in_force": round(statistics.fmean(qos), 4) if qos else None})
    return rows


# --- the other experiments, when their parts are there -------------------------------------------------

def shedding_ratio() -> tuple[float | None, str | None]:
    try:
        from shedding import reduction_vs_shedding  # type: ignore[import-not-found]  # bench/shedding.py (h-shed)
    except ImportError:
        return None, "bench/shedding.py (load shedding, h-shed) is not on this branch yet"
    try:
        result = reduction_vs_shedding()
    except Exception as exc:  # noqa: BLE001 - a Spark failure there must not lose the scenarios' figures
        return None, f"bench/shedding.py failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return result.get("reduction_over_shedding_results"), None


def trajectory_error(quick: bool, spark: bool) -> tuple[float | None, dict[str, Any] | None, str | None]:
    if not spark:
        return None, None, "skipped (--no-spark)"
    try:
        from trajectory import fig7  # bench/trajectory.py: local Spark
    except ImportError as exc:
        return None, None, f"bench/trajectory.py not available: {exc}"
    result = fig7(quick=quick)
    return result["trajectory_max_rel_err"], result, None


# --- the report ----------------------------------------------------------------------------------------

def headline(rows: Sequence[dict[str, Any]], table: Mapping[str, Any]) -> dict[str, Any]:
    everything = list(variants(table)[-1]) or ["none"]

    def row(name: str) -> dict[str, Any]:
        return next(r for r in rows if r["scenario"] == name and r["mechanisms"] == everything)

    window = max(q["window"][1] for q in QUERIES.values()) / 1000.0
    return {
        "headline_mechanisms": everything,
        "steady_applied_changes": row("steady")["applied_changes_after_warmup"],
        "burst_applied_changes": max(row(b)["applied_changes"] for b in BURSTS),
        "burst_seconds_over_bound": max(row(b)["seconds_over_bound"] for b in BURSTS),
        "burst_limit_s": window + DELAY_S + float(BASE["schedule"]["observe_seconds"]),
        "ramp_seconds_over_bound": row("ramp")["seconds_over_bound"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter scenarios, fewer sizes, a short Spark run")
    parser.add_argument("--json", action="store_true", help="print only the JSON")
    parser.add_argument("--no-spark", action="store_true", help="skip Fig 7 on local Spark")
    parser.add_argument("--scenario", default=None, help="only these scenarios (comma-separated, e.g. burst_bytes_2x); "
                        "prints their rows only, no headline or experiments")
    parser.add_argument("--mechanisms", default=None, help="with --scenario: only these mechanism sets (all, none, or "
                        "names joined by +; comma-separated), e.g. all or none,feedback+cost")
    parser.add_argument("--timeline", action="store_true", help="with --scenario: each row's timeline (decisions with "
                        "trigger, feedback factors, measured vs estimated state, windows; applies; migration steps)")
    parser.add_argument("--fig12-sizes", default=None, help="numbers of queries for Fig 12, e.g. 10,100,1000,10000 "
                        "(default 10,100,1000; 10,100 with --quick)")
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))  # stdout is the JSON's
    if args.scenario or args.mechanisms or args.timeline:
        if not args.scenario:
            print("bench/control.py: --mechanisms and --timeline need --scenario", file=sys.stderr)
            return 2
        try:
            scenarios, only = selection(args.scenario, args.mechanisms, MECHANISMS)
            rows = scenario_rows(scenarios, MECHANISMS, args.quick, only, args.timeline)
        except MechanismError as exc:
            print(f"bench/control.py: {exc}", file=sys.stderr)
            return 2
        print(json.dumps({"scenarios": rows}, indent=None if args.json else 2))
        return 0
    try:
        rows = scenario_rows(SCENARIOS, MECHANISMS, args.quick)
    except MechanismError as exc:
        print(f"bench/control.py: {exc}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {"scenarios": rows, **headline(rows, MECHANISMS)}
    ratio, why = shedding_ratio()
    out["reduction_over_shedding_results"] = ratio
    if why:
        out["reduction_over_shedding_reason"] = why
    error, fig7, why = trajectory_error(args.quick, not args.no_spark)
    out["trajectory_max_rel_err"] = error
    if fig7 is not None:
        out["fig7"] = fig7  # with its samples: the measured and the predicted trajectory
        rows.append({"scenario": "window_change_fig7", "mechanisms": ["none"], "plant": "spark", "applied_changes": 1,
                     "peak_state_rows": max((p["rows"] for p in fig7["samples"]), default=None),
                     "trajectory_max_rel_err": error})
    if why:
        out["trajectory_reason"] = why
    sizes = args.fig12_sizes or ("10,100" if args.quick else "10,100,1000")
    out["fig12"] = fig12([int(n) for n in sizes.split(",")], list(variants(MECHANISMS)[-1]))
    out["targets"] = {
        "steady_no_changes_after_warmup": out["steady_applied_changes"] == 0,
        "burst_at_most_2_changes": out["burst_applied_changes"] <= 2,
        "burst_recovers_within_limit": out["burst_seconds_over_bound"] <= out["burst_limit_s"],
        "ramp_never_over": out["ramp_seconds_over_bound"] == 0,
        "reduction_over_shedding_at_least_1_5": ratio is not None and ratio >= 1.5,
        "trajectory_within_15_percent": error is not None and error <= 0.15,
    }
    out["mechanisms_available"] = list(MECHANISMS)
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
