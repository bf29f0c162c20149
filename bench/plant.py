"""The simulated plant bench/control.py drives armd's real control path against.

armd's daemon code (controller, reconciler, coordinator, SQLite store) runs
unchanged; only the world it controls is simulated, stepping simulated
seconds. The plant extends the synthetic source (``adapters/synthetic.py``:
Poisson arrivals per stream, seeded per second, so the same seed gives the
same arrivals with and without any mechanism) in three honest ways:

* **State per query, as the engine would hold it.** Each stateful operator
  of a query (a ``Tap``) holds, while a window of ``w`` seconds is in force,
  either the elements of its window (a windowed aggregate or join input:
  rows = arrivals in (now − w, now]) or, for a count per key with a
  granularity, one group per (key, granule) among those arrivals. Bytes are
  rows × the *plant's* bytes per row, which a scenario may set apart from the
  plan's (the "2× bytes" workload: the model's element size is half the truth).
* **Keys that drift.** Every arrival carries a key: one of ``hot`` stable keys,
  or with probability ``drift`` a brand-new id that never comes back (new ids
  keep arriving). With drift, the groups alive in a window grow with its
  arrivals, which the cost model's group-by (a fixed number of groups)
  does not foresee: through a burst its estimate stays flat while state grows.
* **Migrations take time and hold extra state** (``SimulatedGenMig``, a
  ``LiveApplier``). A window change of a running query follows GenMig
  (``migrations.genmig``): the new plan starts empty beside the old one at
  ``start``; T_split = start + new window (its results are complete from
  there on); the old plan keeps its whole window of state until its
  watermark passes T_split, i.e. a further watermark delay + one trigger. Until
  then the query's measured state is the old plan's plus the new plan's
  (filling); results before T_split are answered with the old window, from
  T_split on with the new one. States move with ``genmig.next_state``.

**A query starts empty.** A query that starts (admitted at the start, or
arriving later) holds only what arrived since it started, as a Spark query
reading from the latest offsets does: its state fills over its window.

**Results kept (the oracle).** Every query emits one result per simulated
second over its window (a sliding window evaluated each second). A result's
*contributions* are the elements of its window (each element counted into
its window's aggregate, or its key's group). The oracle runs every query
admitted at its maximum QoS window with no memory bound; the plant counts the
contributions under the windows armd put in force (0 while a query is not
running: not admitted yet, rejected, or removed). ``kept / oracle`` over the
scenario is the results kept.

Not simulated (yet): CPU (the plant measures none; the scenarios set the CPU
bound out of reach) and load shedding — once settings carry a drop rate
(issue 21's second knob), ``state`` and ``contributions`` must thin the
window's arrivals of a shedding query by it, or shedding would look free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Mapping, Sequence

import numpy as np

from armd.adapters.synthetic import Schedule, SyntheticSource
from armd.control.ports import QueryMetrics, QuerySettings
from armd.migrations.genmig import Migration, next_state, transient_cost

_FRESH_BASE = 1 << 30
"""Fresh (drifting) ids start here, so they never meet the hot keys."""


@dataclass(frozen=True)
class Tap:
    """One stateful operator of a query as the plant runs it."""

    stream: str
    window_node: str
    max_size: float
    """The window's QoS maximum in model time units: the oracle's window."""
    row_bytes: float
    """The plant's bytes per state row (the truth; the plan may say otherwise)."""
    granule_seconds: float | None = None
    """None: the operator holds the window's elements; else one group per (key, granule)."""


@dataclass(frozen=True)
class Keys:
    hot: int = 20
    drift: float = 0.0
    """Probability that an arrival carries a never-seen id."""


@dataclass
class Move:
    """A live window change of one query in the plant (both plans hold state until ``end``)."""

    old: Mapping[str, float]
    start: float
    split: float
    end: float


class Plant(SyntheticSource):
    """The synthetic source with per-operator state, drifting keys, migrations and the results oracle."""

    def __init__(self, schedules: Mapping[str, Schedule], seed: int, time_unit_seconds: float, start: datetime,
                 taps: Mapping[str, Sequence[Tap]], keys: Mapping[str, Keys] | None = None) -> None:
        super().__init__(schedules, seed, time_unit_seconds, start, {}, taps)  # type: ignore[arg-type]
        self.keys = dict(keys or {})
        self.moves: dict[str, Move] = {}
        self.started: dict[str, float] = {}
        """Plant seconds at which each running query started (its state holds only arrivals since)."""
        self._key_draws: dict[tuple[str, int], np.ndarray] = {}

    def set_taps(self, taps: Mapping[str, Sequence[Tap]]) -> None:
        """Queries added or removed (a reloaded configuration); a removed query's state is gone."""
        self.taps = {q: tuple(t) for q, t in taps.items()}  # type: ignore[misc]
        for key in [k for k in self.window_sizes if k[0] not in self.taps]:
            del self.window_sizes[key]
        self.started = {q: t for q, t in self.started.items() if q in self.taps}

    def running(self, query: str) -> bool:
        """A query runs once armd applied settings to it (admitted) and while it is configured."""
        return query in self.taps and any(q == query for q, _ in self.window_sizes)

    # --- keys ------------------------------------------------------------------------------------

    def _keys_of(self, stream: str, k: int) -> np.ndarray:
        got = self._key_draws.get((stream, k))
        if got is None:
            n = self._second(stream, k).shape[1]
            spec = self.keys.get(stream, Keys())
            rng = np.random.default_rng([self.seed, self._index[stream], k, 7])
            hot = rng.integers(0, spec.hot, n)
            fresh = rng.random(n) < spec.drift
            got = np.where(fresh, _FRESH_BASE + k * 100_000 + np.arange(n), hot).astype(np.int64)
            self._key_draws[(stream, k)] = got
        return got

    def _keyed(self, stream: str, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
        if end <= start:
            return np.empty(0), np.empty(0, dtype=np.int64)
        seconds = range(max(0, math.floor(start)), math.ceil(end))
        times = np.concatenate([self._second(stream, k)[0] for k in seconds] or [np.empty(0)])
        keys = np.concatenate([self._keys_of(stream, k) for k in seconds] or [np.empty(0, dtype=np.int64)])
        inside = (times >= start) & (times < end)
        return times[inside], keys[inside]

    # --- state -----------------------------------------------------------------------------------

    def _rows(self, tap: Tap, start: float, end: float) -> int:
        start = max(0.0, start)
        if tap.granule_seconds is None:
            return len(self.arrivals(tap.stream, start, end))
        times, keys = self._keyed(tap.stream, start, end)
        granules = np.floor(times / tap.granule_seconds).astype(np.int64)
        return len(np.unique(keys * 1_000_000 + granules))

    def _window(self, query: str, tap: Tap, sizes: Mapping[str, float] | None = None) -> float:
        if sizes is not None and tap.window_node in sizes:
            return float(sizes[tap.window_node]) * self.time_unit_seconds
        return self.window_sizes.get((query, tap.window_node), tap.max_size) * self.time_unit_seconds

    def state(self, query: str, now: float) -> tuple[int, float]:
        """(rows, bytes) the query holds at ``now``: its plan's, plus a migrating query's new plan filling."""
        if not self.running(query):
            return 0, 0.0
        move = self.moves.get(query)
        if move is not None and now >= move.end:
            del self.moves[query]
            move = None
        rows, size = 0, 0.0
        began = self.started.get(query, 0.0)
        for tap in self.taps[query]:
            held = self._rows(tap, max(began, now - self._window(query, tap)), now)
            if move is not None:  # the old plan keeps its window; the new one has filled since the start
                held = self._rows(tap, max(began, now - self._window(query, tap, move.old)), now) + \
                    self._rows(tap, max(move.start, now - self._window(query, tap)), now)
            rows += held
            size += held * tap.row_bytes
        return rows, size

    def _state(self, query: str, taps: Sequence, now: float) -> QueryMetrics:  # what observe() reports
        rows, size = self.state(query, now)
        return QueryMetrics(query, state_rows=rows, state_bytes=int(size))

    def total_state(self, now: float) -> float:
        return sum(self.state(q, now)[1] for q in self.taps)

    # --- results ---------------------------------------------------------------------------------

    def contributions(self, now: float) -> tuple[int, int]:
        """(kept, oracle): elements in the windows of the results emitted at ``now``, as run and at maximum QoS."""
        kept = oracle = 0
        for query, taps in self.taps.items():
            if not self.running(query):
                continue
            move = self.moves.get(query)
            answering = move.old if move is not None and now < move.split else None
            began = max(0.0, self.started.get(query, 0.0))  # the oracle's query starts with armd's
            for tap in taps:
                kept += len(self.arrivals(tap.stream, max(began, now - self._window(query, tap, answering)), now))
                oracle += len(self.arrivals(tap.stream, max(began, now - tap.max_size * self.time_unit_seconds), now))
        return kept, oracle


class SimulatedGenMig:
    """A ``LiveApplier`` on the plant: window changes of running queries migrate like GenMig (see the module docstring)."""

    name = "genmig-simulated"

    def __init__(self, plant: Plant, clock: Callable[[], datetime], delay_seconds: float, trigger_seconds: float) -> None:
        self.plant, self.clock = plant, clock
        self.delay, self.trigger = float(delay_seconds), float(trigger_seconds)
        self.live: dict[str, Migration] = {}
        self.on_transition: Callable[[Migration], None] = lambda m: None
        self.changes = 0
        """Window changes applied to running queries (each one a migration)."""
        self.change_times: list[float] = []
        self.log: list[dict] = []
        """What each apply and migration step did, in order (``bench/control.py --timeline`` prints it)."""

    def _now(self) -> float:
        return self.plant.seconds(self.clock())

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        running = self.plant.running(query)
        if not running:
            self.plant.started[query] = self._now()
        before = {node: self.plant.window_sizes.get((query, node)) for node in new.windows}
        for node, size in new.windows.items():
            self.plant.set_window(query, node, size)
        if old is None or not running or all(before[n] == s for n, s in new.windows.items()):
            self.log.append({"t": self._now(), "kind": "applied", "query": query, "windows": dict(new.windows), "how": "direct"})
            return "direct"  # a first start, or nothing to move
        now = self._now()
        span = max(new.windows.values(), default=0.0) * self.plant.time_unit_seconds
        split = now + span
        self.plant.moves[query] = Move({n: s for n, s in before.items() if s is not None}, now, split,
                                       split + self.delay + self.trigger)
        self.changes += 1
        self.change_times.append(now)
        self.log.append({"t": now, "kind": "applied", "query": query, "from": dict(before), "windows": dict(new.windows),
                         "how": "genmig", "t_split": split, "old_plan_done": split + self.delay + self.trigger})
        migration = Migration(query, "genmig", old.as_json(), new.as_json()).to("running", now, "started", t_split=split,
                                                                                started=now)
        self.live[query] = migration
        self.on_transition(migration)
        return "genmig"

    def advance(self) -> Sequence[Migration]:
        now = self._now()
        for query, migration in list(self.live.items()):
            while True:
                assert migration.t_split is not None
                step = next_state(migration, new_passed_split=now >= migration.t_split,
                                  old_done=now >= migration.t_split + self.delay + self.trigger)
                if step is None:
                    break
                migration = migration.to(step, now, "simulated")
                self.log.append({"t": now, "kind": "migration", "query": query, "state": migration.state})
                self.on_transition(migration)
            if migration.final:
                del self.live[query]
            else:
                self.live[query] = migration
        return tuple(self.live.values())

    def running_migrations(self) -> Sequence[Migration]:
        return tuple(self.live.values())

    def transient_memory(self, query: str, old: QuerySettings, new: QuerySettings, new_memory: float) -> float:
        span = max(new.windows.values(), default=0.0) * self.plant.time_unit_seconds
        fill = span + self.delay + self.trigger
        return transient_cost(span, 0.0, self.delay, self.trigger, 0.0, new_memory, fill).extra_memory
