"""GenMig on Spark: a plan change without a lost, duplicated or wrong result (paper 000, docs/genmig.md).

Spark cannot restart a stateful query with another plan on its checkpoint,
and a restart on a fresh checkpoint loses every window open across it
(``NaiveRestartApplier``). ``GenMigApplier`` instead runs the new plan
beside the old one and splits the results at T_split:

1. planned → running: every source of both plans must meet GenMig's
   contract (``sources``: one adapter per source kind; anything else is
   refused before the migration starts). The old run's position p per source
   is an event time in the data's own clock at or after everything it has
   read, and the new run's reader starts there (the adapter gives its
   options). T_split = max p + the new plan's reach (its window, times
   the windows a result spans) + 1 unit + ε (``migrations.genmig.split_time``):
   every result of the new plan with its reference point at or after T_split
   is complete — the larger reach of the two plans when the sources cannot
   replay (a failed start's continuation needs the old plan's, below). So a
   cut's old run drains the *new*, shorter window after the position. The old
   run's sink filter (``BatchWriter.keep``) is set to keep only results
   before T_split — live, the old run is never restarted — and the new run
   starts with the filter that keeps only results from T_split on. Both
   write to the query's one sink (each under its plan version). With
   ``replay`` and sources that can replay (``sources.replays``: the
   synthetic source, files), the new run starts one reach (the larger span
   of windows of the two plans) before p instead, so every result from p + 1 unit
   on is complete in it: T_split = max p + 1 unit + ε, and the old run —
   holding the old window, the state a cut is meant to drop — stops once its
   watermark passes that, a watermark delay and a batch or two after the
   decision instead of a whole window later. An old run
   that was itself a migration's new run keeps that migration's lower
   bound too: results it has not emitted yet from before that T_split
   belong to the run before it.
2. running → draining: every source of the new run has read past T_split.
3. draining → done: the old run has emitted everything before T_split — its
   watermark has passed T_split (window aggregates), or, for queries whose
   results are out as soon as their last input is read (inner stream-stream
   joins), it has read past T_split on every source; it is stopped between
   two batches then, and the migration is done once the new run has read
   past T_split too. A replaying new run may still be behind when the old
   one is done: the old run stops at once (the done record's
   ``facts["old_stopped_at"]`` says when; its checkpoint is kept for a
   resume until the end), and the migration stays
   open until the new run has caught up, so that no one reads the query's
   state as the new plan's, or changes it again, before then. When it
   starts, a migration records when the old run will be done in event time
   (``facts["drain_at"]``, ``drain.expected_drain``: the old run's batches
   go on from the position, ``batch_span_seconds`` each, and a batch's
   watermark comes from the batches before it), which is when the query's
   state drops to the new plan's (paper 001 Fig 7).

A result's *reference point* is the instant it describes, a Spark SQL
expression over the result's columns: a window aggregate's is its window's
end, a join result's the latest of its inputs' event times (its start). A
builder declares it with ``builders.genmig_hints``, as well as how many
windows a result's inputs can spread over (two for a three-way join whose
streams are each bound to one of them); ``params.extra["reference_point"]``
and ``["span_windows"]`` override both, and the defaults are ``window.end``
and one. T_split then lies that many windows past the position. The
builder's ``emits`` (``watermark`` or ``arrival``) says when the old run is
done. Event times are seconds since the epoch.

Any plan change goes this way (``migrate``): new settings, another join
order, a filter or a duplicate elimination added or removed. Each transition
is passed to ``on_transition`` (the daemon persists it, with both runs'
checkpoints and parameters), and ``resume`` continues a stored migration
after the daemon was killed: both runs start again from their checkpoints
with their filters, and the steps go on from the stored state. ``close``
stops a migration's runs but keeps their checkpoints for that. ``supersede``
rolls a running migration back, while no result from T_split on is out,
so that a deeper cut decided meanwhile starts at once. A migration
still running or draining after ``timeout_seconds`` fails (``_give_up``)
rather than staying open for good.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

from pyspark.sql import functions as F

from armd.control.errors import NotReady, PermanentError
from armd.control.ports import QuerySettings
from armd.migrations.genmig import (
    CHRONON,
    DONE,
    DRAINING,
    FAILED,
    ROLLED_BACK,
    RUNNING,
    Migration,
    chained_split_time,
    emits_nothing_from,
    next_state,
    old_plan_done,
    passed_split,
    split_time,
    transient_cost,
)

from .drain import batch_span_seconds, expected_drain
from .listener import ProgressListener, ProgressRecord
from .managed import QueryManager, QueryParams, Run, load_builder
from .sinks import Keep
from .source import FORMAT as SYNTHETIC
from .source import offset_stream
from .sources import OldRun, SourceContractError, adapter_for, check_sources, replays, source_format

DEFAULT_REFERENCE_POINT = "window.end"
SPLIT_ATTEMPTS = 5
SPLIT_RETRY_SECONDS = 0.2
"""How often GenMig places T_split again when a batch outran it, and the pause between tries."""
DEFAULT_TIMEOUT_SECONDS = 600.0
"""How long a migration may stay running or draining before it fails (``[spark] migration_timeout_seconds``)."""


def reference_filter(expression: str, t_split: float | None, side: str, since: float | None = None) -> Keep | None:
    """The ``keep`` hook of one side: results before T_split (``old``) or from it on (``new``).

    ``since``: the old run was itself the new run of an earlier migration, so it answers only from that one's T_split
    on; its old-side filter keeps that lower bound (results it had not emitted yet must not pass now). ``None`` when
    there is nothing to cut (a run that answers alone from the stream's start).
    """
    if side == "new" and t_split is None:
        return None
    # The columns are built per batch, inside the hook: it then pickles as plain numbers and text, which a writer
    # whose filter crosses to another process (Spark Connect, ``SharedBatchWriter``) needs.
    if side == "new":
        return lambda df: df.filter(F.expr(expression) >= F.timestamp_seconds(F.lit(t_split)))
    if since is None:
        return lambda df: df.filter(F.expr(expression) < F.timestamp_seconds(F.lit(t_split)))
    return lambda df: df.filter((F.expr(expression) >= F.timestamp_seconds(F.lit(since)))
                                & (F.expr(expression) < F.timestamp_seconds(F.lit(t_split))))


def _window_seconds(params: QueryParams) -> float:
    return max([float(v) for v in params.windows.values()] or [0.0])


def _reach(managed: Any, params: QueryParams) -> float:
    """Seconds of input before a result that a run of ``params`` needs: its window times the windows a result spans."""
    return float(_hint(managed, params, "span_windows", 1)) * _window_seconds(params)


def _hint(managed: Any, params: QueryParams, name: str, default: Any) -> Any:
    """A GenMig hint: ``params.extra[name]``, else the builder's declaration (``builders.genmig_hints``), else ``default``."""
    if name in params.extra:
        return params.extra[name]
    return getattr(load_builder(managed.spec.builder), name, default)


class GenMigApplier:
    """Applies new settings by GenMig: old and new run side by side, results split at T_split."""

    name = "genmig"
    strategy = "genmig"

    def __init__(
        self,
        manager: QueryManager,
        listener: ProgressListener,
        time_unit_seconds: float,
        *,
        on_transition: Callable[[Migration], None] | None = None,
        log: Any = None,
        epsilon: float = CHRONON,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        replay: bool = False,
    ) -> None:
        if not time_unit_seconds > 0:
            raise ValueError(f"time_unit_seconds must be > 0, got {time_unit_seconds!r}")
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds must be > 0, got {timeout_seconds!r}")
        self.timeout_seconds, self.clock = float(timeout_seconds), clock
        self.replay = bool(replay)
        """New runs replay the new plan's reach where every source can (T_split just past the position)."""
        self._since: dict[str, float] = {}
        self.manager, self.listener = manager, listener
        self.time_unit_seconds = float(time_unit_seconds)
        self.on_transition = on_transition
        self.epsilon = epsilon
        if log is None:
            import structlog

            log = structlog.get_logger("armd.spark")
        self.log = log
        self.migrations: dict[str, Migration] = {}
        self._old: dict[str, Run] = {}
        self._stopped_at: dict[str, float] = {}
        """Query → when (epoch seconds) its old run was stopped, done while the new run was still behind."""
        self._answers_from: dict[str, float] = {}
        """Query → the T_split its current run answers from (it was the new run of that migration)."""
        self._restarts: set[str] = set()
        """Queries whose migration's new run did not start again from its checkpoint (after a refused supersession,
        or in ``resume``): each step tries again, until the timeout (``_restart_new_run`` keeps this set)."""
        self._overdue: set[str] = set()
        """Queries whose running migration is past its timeout but cannot be given up without loss (``_give_up``)."""
        self._versions_used: dict[str, int] = {}
        """Query → the newest plan version a run was started with, kept when that run was dropped (``supersede``): a
        later run never reuses its version, under which the sink may hold its (empty) batches."""
        self._lock = threading.RLock()

    # --- the Applier port ---

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        """Start a migration of ``query`` to ``new`` (or start the query when it does not run yet); returns at once."""
        with self._lock:
            managed = self.manager.get(query)
            params = managed.params.with_settings(new, self.time_unit_seconds)
            if query in self.migrations:
                raise NotReady(f"query {query!r} is still migrating (state {self.migrations[query].state}); "
                               "a new change waits until it is done")
            if not managed.running:
                self._answers_from.pop(query, None)  # a fresh run answers for the whole stream it reads
                self.manager.start(query, replace(params, version=params.version + (1 if managed.runs else 0)))
                self.log.info("query_started", query=query, plan_version=managed.params.version)
            elif params != managed.params:
                self._begin(query, replace(params, version=self._next_version(query, managed.params)))
            return self.strategy

    def migrate(self, query: str, params: QueryParams) -> None:
        """Change the running ``query`` to the plan ``params`` describes (any change its builder can express)."""
        with self._lock:
            managed = self.manager.get(query)
            if query in self.migrations:
                raise RuntimeError(f"query {query!r} is still migrating (state {self.migrations[query].state})")
            if not managed.running:
                raise RuntimeError(f"query {query!r} does not run; GenMig migrates a running query")
            self._begin(query, replace(params, version=self._next_version(query, managed.params)))

    def _next_version(self, query: str, params: QueryParams) -> int:
        return max(params.version, self._versions_used.get(query, 0)) + 1

    def advance(self) -> tuple[Migration, ...]:
        """Move every migration on by what the queries' progress shows now; returns those still in progress.

        The coordinator calls this on its own cadence; each transition goes to ``on_transition``.
        """
        self.step()
        return self.running_migrations()

    def running_migrations(self) -> tuple[Migration, ...]:
        """The migrations in progress, without advancing them."""
        with self._lock:
            return tuple(self.migrations.values())

    def transient_memory(self, query: str, old: QuerySettings, new: QuerySettings, new_memory: float) -> float:
        """Extra state while both plans run: the new plan's, filling over the migration (``transient_cost``)."""
        managed = self.manager.get(query)
        params = managed.params
        delay = float(params.extra.get("delay_seconds", 0.0))
        trigger = float(params.extra.get("trigger_seconds", 0.0))
        on_arrival = _hint(managed, params, "emits", "watermark") == "arrival"
        if self._replays(params):  # the new run holds its whole reach at once; T_split lies at the start
            return transient_cost(0.0, 0.0, delay, trigger, 0.0, new_memory, 0.0, on_arrival=on_arrival).extra_memory
        new_params = replace(params, windows={k: v * self.time_unit_seconds for k, v in new.windows.items()})
        span = self._split_span(managed, params, new_params)
        # From the start to T_split is the span, then the old plan drains; an element stays span + delay + trigger.
        return transient_cost(span, 0.0, delay, trigger, 0.0, new_memory, span + delay + trigger,
                              on_arrival=on_arrival).extra_memory

    def _split_span(self, managed: Any, old: QueryParams, new: QueryParams) -> float:
        """How far past the position T_split lies when the new run starts there: the new plan's reach (its windows
        times the windows a result spans) is all it needs to answer completely. A cut's old run then drains a new
        window after the position, not its own larger one. Only when the query's sources can replay: should the
        new run not start, a run of the old plan answers from T_split (``_carry_on``), and it replays its own reach;
        without replay it would lack it, so T_split lies the larger reach of the two plans past the position."""
        return _reach(managed, new) if self._can_replay(old) else max(_reach(managed, old), _reach(managed, new))

    def _can_replay(self, params: QueryParams) -> bool:
        """Whether every source of ``params`` can start a run before a position (``sources.replays``)."""
        sources = dict(params.extra.get("sources") or {})
        try:
            return bool(sources) and all(replays(adapter_for(s, o)) for s, o in sources.items())
        except SourceContractError:
            return False

    def _replays(self, params: QueryParams) -> bool:
        """Whether a migration of a query reading ``params``' sources starts its new run by replaying (``replay``)."""
        return self.replay and self._can_replay(params)

    # --- the procedure ---

    def _begin(self, query: str, params: QueryParams) -> None:
        managed = self.manager.get(query)
        old_sources, new_sources = dict(managed.params.extra.get("sources") or {}), dict(params.extra.get("sources") or {})
        try:  # a source GenMig cannot migrate is refused before anything starts
            check_sources(old_sources)
            check_sources(new_sources)
            if set(new_sources) != set(old_sources):
                raise SourceContractError(f"the new plan reads streams {sorted(new_sources)}, the old one {sorted(old_sources)}; "
                                          "GenMig splits one input between two plans, so both must read the same streams")
        except SourceContractError as exc:
            raise PermanentError(f"query {query!r}: {exc}") from None
        reference = str(_hint(managed, managed.params, "reference_point", DEFAULT_REFERENCE_POINT))
        emits = str(_hint(managed, managed.params, "emits", "watermark"))
        # T_split is placed from the run's newest progress, asked of the run itself: Spark's listener bus can run
        # batches behind. A batch finishing in between may still have written results past it, so the old run's
        # filter is set only if no batch after the placing one has reached the sink (one more is harmless when
        # results wait for the watermark: its results are bounded by the data before it); else it is placed again.
        allowance = 0 if emits == "arrival" else 1
        for _ in range(SPLIT_ATTEMPTS):
            latest, positions, starts, t_split, span, reach = self._place_split(query, managed, params, old_sources,
                                                                                new_sources)
            since = self._answers_from.get(query)
            if managed.writer.keep_from(reference_filter(reference, t_split, "old", since),  # type: ignore[arg-type]
                                        latest.last_executed_batch + allowance):
                break
            time.sleep(SPLIT_RETRY_SECONDS)
        else:
            raise NotReady(f"query {query!r}: its batches outran armd {SPLIT_ATTEMPTS} times running (the run has written "
                           f"batch {managed.writer.last_batch_id}, its newest progress is of batch "
                           f"{latest.last_executed_batch}); GenMig places T_split again next time")
        records = [r for r in self._records(latest.run_id) if r.batch_id != latest.batch_id] + [latest]
        batch = batch_span_seconds(records, float(managed.params.extra.get("trigger_seconds", 0.0)))
        drain_at = expected_drain(t_split, float(managed.params.extra.get("delay_seconds", 0.0)), max(positions.values()),
                                  batch, emits)
        migration = Migration(query, self.strategy, managed.params.as_json(), params.as_json(),
                              facts={"positions": positions, "reference_point": reference, "span_seconds": span,
                                     "replayed_seconds": reach, "emits": emits,
                                     "batch_span_seconds": batch, "drain_at": drain_at,
                                     "starts": {s: start.note for s, start in starts.items()},
                                     "old_run": str(managed.query.runId) if managed.query else None,
                                     "old_checkpoint": str(managed.checkpoint), "old_answers_from": since,
                                     "placed_from_batch": latest.last_executed_batch})
        old_run = self.manager.hand_over(query)
        from_split = {s: dict(start.options) for s, start in starts.items()}
        new_params = replace(params, extra={**params.extra, "sources": from_split})
        try:
            new_query = self.manager.start(query, new_params, keep=reference_filter(reference, t_split, "new"))
        except Exception as failure:  # noqa: BLE001 - whatever stopped the new run, the results from T_split need a run
            self._carry_on(query, old_run, migration, from_split, reference, t_split, since, failure)
            raise
        self._answers_from[query] = t_split
        self._old[query] = old_run
        self._since[query] = self.clock()
        started = max(positions.values())
        migration = migration.to(RUNNING, started, "new plan started beside the old one", t_split=t_split, started=started,
                                 new_plan=new_params.as_json(),
                                 facts={**migration.facts, "new_run": str(new_query.runId),
                                        "new_checkpoint": str(self.manager.get(query).checkpoint)})
        self._record(migration)

    def _carry_on(self, query: str, old_run: Run, migration: Migration, from_split: dict, reference: str, t_split: float,
                  since: float | None, failure: Exception) -> None:
        """The new run did not start: a run of the old plan, from the split positions, answers from T_split on.

        The old run's filter already holds back its results from T_split on,
        and while the new run was being started (a cluster may take minutes
        over its attempts) it may have emitted and dropped some. Giving it its
        old filter back would lose those; a run of the old plan started where
        the new one would have started produces them again. That is a GenMig
        migration to the same plan, followed to its end like any other; the
        change itself failed (the caller re-raises ``failure``) and is tried
        again once the old run has drained. Only if this run cannot start either
        does the old run answer alone again, and what it dropped is lost.
        Where the sources can replay, the run replays the old plan's reach
        before the position (T_split may lie only the new plan's reach past it,
        ``_split_span``): every result from T_split on is complete in it.
        """
        if self._can_replay(old_run.params):
            positions = migration.facts["positions"]
            reach = _reach(self.manager.get(query), old_run.params)
            from_split = {s: dict(adapter_for(s, o).replay(s, o, max(positions.values()) - reach,  # type: ignore[attr-defined]
                                                          positions[s]).options)
                          for s, o in dict(old_run.params.extra.get("sources") or {}).items()}
        same = replace(old_run.params, version=old_run.params.version + 1, extra={**old_run.params.extra, "sources": from_split})
        try:
            continued = self.manager.start(query, same, keep=reference_filter(reference, t_split, "new"))
        except Exception as second:  # noqa: BLE001 - reported below, with the first failure
            old_run.writer.keep = reference_filter(reference, since, "new")
            self.manager.take_back(query, old_run)
            self.log.error("genmig_rolled_back", query=query, t_split=t_split,
                           error=f"{type(failure).__name__}: {failure}", continuation_error=f"{type(second).__name__}: {second}",
                           message=f"neither the new plan nor the old one started from T_split; the old run of {query!r} "
                                   "answers alone again and the results from T_split it wrote while they were tried are lost")
            return
        self._answers_from[query] = t_split
        self._old[query] = old_run
        self._since[query] = self.clock()
        note = (f"the new plan did not start ({type(failure).__name__}: {str(failure).splitlines()[0] if str(failure) else ''}); "
                "the old plan goes on from T_split in a run of its own")
        started = max(migration.facts["positions"].values())
        self._record(migration.to(
            RUNNING, started, note, t_split=t_split, started=started, new_plan=same.as_json(),
            facts={**migration.facts, "new_run": str(continued.runId), "continuation": True,
                   "new_checkpoint": str(self.manager.get(query).checkpoint)}))
        self.log.warning("genmig_continued_old_plan", query=query, t_split=t_split, error=f"{type(failure).__name__}: {failure}")

    def _place_split(self, query: str, managed: Any, params: QueryParams, old_sources: dict, new_sources: dict) -> tuple:
        """From the old run's newest progress: that record, each stream's position, the new run's starts, T_split, the
        span T_split lies past the position, and the reach the new run replays (None: it starts at the position)."""
        latest = self._newest(managed.query)
        if latest is None:  # expected right after a start: the next batch brings it
            raise NotReady(f"query {query!r} has not completed a batch yet; GenMig needs its position")
        replay = self._replays(params)
        # Replaying, the new run reads from the larger reach of the two plans before the position: every result from
        # the position + 1 unit on then has all its inputs, so T_split needs no span. (The old plan's reach too:
        # should the new run not start, a run of the old plan takes its place from the same starts, ``_carry_on``.)
        reach = max(_reach(managed, managed.params), _reach(managed, params))
        span = 0.0 if replay else self._split_span(managed, managed.params, params)
        try:
            olds = self._old_runs(query, managed.spec.streams, old_sources, latest)
            positions = {s: adapter_for(s, o).position(s, o, olds[s]) for s, o in old_sources.items()}
            if replay:
                replay_from = max(positions.values()) - reach
                starts = {s: adapter_for(s, o).replay(s, o, replay_from, positions[s])  # type: ignore[attr-defined]
                          for s, o in new_sources.items()}
            else:
                starts = {s: adapter_for(s, o).start(s, o, olds[s], positions[s]) for s, o in new_sources.items()}
        except SourceContractError as exc:
            if not any(r.input_rows for r in self._records(latest.run_id)):  # nothing read yet: a later batch may tell
                raise NotReady(f"query {query!r}: {exc}") from None
            raise PermanentError(f"query {query!r}: {exc}") from None
        t_split = split_time(positions, span, self.epsilon, unit=self.time_unit_seconds)
        t_split = chained_split_time(t_split, self._answers_from.get(query), self.time_unit_seconds)
        return latest, positions, starts, t_split, span, (reach if replay else None)

    def supersede(self, query: str) -> bool:
        """Roll back ``query``'s running migration so that a newer change starts from its old run; whether it did.

        A change decided while a migration runs otherwise waits for it: the new plan's whole reach past the position
        and the watermark delay, longer when the application lags (a burst's deeper cut waited 24 s in the fleet
        benchmark, holding the old plan's window all along). Dropping the migration loses nothing only while no
        result from T_split on is out: the new run has written none and the old run has dropped none. For results
        out as the watermark passes them, both runs' newest batches must show that their next watermark still lies
        before T_split (``emits_nothing_from``); results out on arrival (joins) are not rolled back.

        The new run is stopped between batches, and checked again stopped (its last batch, and one the stop may have
        interrupted, stay before T_split). The old run, checked afresh (its batches went on meanwhile), then gets its
        filter from before the migration back — set only if no batch after the checked one has reached its sink, like
        T_split itself — and answers alone again, until the next change's migration starts from it. Where either
        check fails, the new run starts again from its checkpoint and the migration goes on as if nothing had
        happened (a start that fails is tried again at every step, until the migration's timeout).
        """
        with self._lock:
            migration = self.migrations.get(query)
            if (migration is None or migration.state != RUNNING or migration.facts.get("emits") != "watermark"
                    or migration.facts.get("continuation") or migration.t_split is None):
                return False
            old = self._old[query]
            refused = self._roll_back(query, migration)
            if refused is not None:
                self.log.info("genmig_supersede_refused", query=query, t_split=migration.t_split, reason=refused)
                return False
            latest = self._newest(old.query)
            at = max(latest.watermark.timestamp() if latest is not None and latest.watermark is not None else 0.0,
                     migration.started or 0.0)
            self._record(migration.to(ROLLED_BACK, at, "superseded by a newer change before the new "
                                      "plan wrote a result: the new run was stopped, the old plan answers alone again"))
            return True

    def _roll_back(self, query: str, migration: Migration) -> str | None:
        """Drop a running migration's new run and let its old run answer alone again, if neither run has emitted a
        result from T_split on; None when done, else why not (both runs then go on as before).

        The new run is stopped between batches and checked again stopped (its last batch, and one the stop may have
        interrupted, stay before T_split); the old run, checked afresh, gets its filter from before the migration
        back from its next batch on (``_restore_old_filter``). Where a check fails after the stop, the new run starts
        again from its checkpoint (a start that fails is tried again at every step, until the migration's timeout).
        """
        old, managed = self._old[query], self.manager.get(query)
        t_split, delay = float(migration.t_split), float(managed.params.extra.get("delay_seconds", 0.0))  # type: ignore[arg-type]
        emits = str(migration.facts.get("emits", "watermark"))
        new_runs = query not in self._restarts  # else its start failed: nothing of it runs
        if not old.query.isActive:
            return "the old run has stopped"
        old_latest = self._newest(old.query)
        if old_latest is None or not self._emits_nothing_from(old_latest, old.writer, t_split, delay, emits):
            return "the old run reached T_split"
        if new_runs and not self._emits_nothing_from(self._newest(managed.query), managed.writer, t_split, delay, emits):
            return "the new run reached T_split"
        reference = str(migration.facts.get("reference_point", DEFAULT_REFERENCE_POINT))
        since = migration.facts.get("old_answers_from")
        refused: str | None = None
        if new_runs:
            new_run = self.manager.hand_over(query)
            self.manager.end_run(new_run, keep_checkpoint=True)
            if not self._emits_nothing_from(self._newest(new_run.query), new_run.writer, t_split, delay, emits):
                refused = "the new run reached T_split while it was being stopped"
        if refused is None:
            refused = self._restore_old_filter(old, reference, since, t_split, delay, emits)
        if refused is not None:
            if new_runs:
                self._restart_new_run(migration)
            return refused
        shutil.rmtree(migration.facts["new_checkpoint"], ignore_errors=True)
        self._versions_used[query] = max(self._versions_used.get(query, 0), QueryParams.from_json(migration.new_plan).version)
        self._answer_alone(query, old, since)
        return None

    def _restart_new_run(self, migration: Migration) -> bool:
        """Start the migration's new run again from its checkpoint (after a refused supersession, or in ``resume``);
        whether it runs.

        The old run may already have dropped results from T_split on, so the new run must go on: a failed start
        (a cluster out of executors, say) is logged and the query entered in ``_restarts``, so that the next step
        tries again; the checkpoint keeps everything the run had read and written until then."""
        query, checkpoint = migration.query, Path(migration.facts["new_checkpoint"])
        keep = reference_filter(str(migration.facts.get("reference_point", DEFAULT_REFERENCE_POINT)), migration.t_split, "new")
        try:
            self.manager.start(query, QueryParams.from_json(migration.new_plan), keep=keep, checkpoint=checkpoint)
        except Exception as exc:  # noqa: BLE001 - tried again next step; the migration's timeout bounds the attempts
            self.log.error("genmig_new_run_restart_failed", query=query, error=f"{type(exc).__name__}: {exc}",
                           message=f"the new run of {query!r} did not start again from its checkpoint {checkpoint}; "
                                   "armd tries again at the next step")
            self._restarts.add(query)
            return False
        self._restarts.discard(query)
        return True

    def _answer_alone(self, query: str, old: Run, since: float | None) -> None:
        """A migration of ``query`` was dropped while running: its old run is the query's one run again, answering
        from ``since`` (the T_split of a migration before it, if any) on; its filter is the caller's to set."""
        self._old.pop(query, None)
        self._since.pop(query, None)
        self._stopped_at.pop(query, None)
        self._overdue.discard(query)
        if since is None:
            self._answers_from.pop(query, None)
        else:
            self._answers_from[query] = float(since)
        self.manager.take_back(query, old)

    def _restore_old_filter(self, old: Run, reference: str, since: float | None, t_split: float, delay: float,
                            emits: str = "watermark") -> str | None:
        """Give the old run its filter from before the migration back, if it has dropped nothing from T_split on;
        None when done, else why not. Its batches go on meanwhile, so the check and the guarded change are tried a
        few times, like T_split's own placing. Results out on arrival (``emits``) are dropped as soon as the run has
        read an element from T_split on, on any input."""
        for _ in range(SPLIT_ATTEMPTS):
            latest = self._newest(old.query)
            if latest is None or not self._emits_nothing_from(latest, old.writer, t_split, delay, emits):
                return "the old run reached T_split"
            if old.writer.keep_from(reference_filter(reference, since, "new"),  # type: ignore[arg-type]
                                    latest.last_executed_batch + 1):
                return None
            time.sleep(SPLIT_RETRY_SECONDS)
        return f"the old run's batches outran armd {SPLIT_ATTEMPTS} times"

    def _read_up_to(self, latest: ProgressRecord) -> float | None:
        """The largest event time the run of ``latest`` has read in any batch so far (None: none yet)."""
        maxima = [r.event_max.timestamp() for r in (*self._records(latest.run_id), latest) if r.event_max is not None]
        return max(maxima) if maxima else None

    def _emits_nothing_from(self, latest: ProgressRecord | None, writer: Any, t_split: float, delay: float,
                            emits: str = "watermark") -> bool:
        """Whether the run whose newest progress is ``latest`` has emitted nothing from ``t_split`` on, nor will in its
        next batch; a batch at its sink ``writer`` beyond that next one is not vouched for. A run without progress
        yet is in its first batch at most, whose watermark is the initial one: nothing passes it. Results out on
        arrival (``emits``) are out as soon as the run has read an element from ``t_split`` on, on any input."""
        last = writer.last_batch_id
        if latest is None:
            return last is None or last <= 0
        if last is not None and last > latest.last_executed_batch + 1:
            return False
        if emits == "arrival":
            read = self._read_up_to(latest)
            return read is None or read < t_split
        return emits_nothing_from(t_split, latest.watermark.timestamp() if latest.watermark is not None else None,
                                  latest.event_max.timestamp() if latest.event_max is not None else None, delay)

    def resume(self, migration: Migration) -> None:
        """Continue a stored migration (running or draining) after a restart: both runs go on from their checkpoints.

        The old run starts first; a new run that does not start is tried again at every step until the migration's
        timeout, as after a refused supersession (``_restart_new_run``): failing the migration instead would leave no
        run to answer from T_split on, which a draining migration's old run no longer does."""
        with self._lock:
            if migration.state not in (RUNNING, DRAINING) or migration.t_split is None:
                raise ValueError(f"migration of {migration.query!r} is {migration.state}: only a running or draining "
                                 "migration with a split time can be resumed")
            facts = migration.facts
            missing = [k for k in ("old_checkpoint", "new_checkpoint", "reference_point") if not facts.get(k)]
            if missing:
                raise ValueError(f"stored migration of {migration.query!r} lacks {', '.join(missing)}; it cannot be resumed")
            old_params = QueryParams.from_json(migration.old_plan)
            query, reference, t_split = migration.query, str(facts["reference_point"]), float(migration.t_split)
            if self.manager.get(query).running:
                raise RuntimeError(f"query {query!r} already runs; resume a migration before starting its query")
            since = facts.get("old_answers_from")
            self.manager.start(query, old_params, keep=reference_filter(reference, t_split, "old", since),
                               checkpoint=Path(facts["old_checkpoint"]))
            self._old[query] = self.manager.hand_over(query)
            self._since[query] = self.clock()
            self._answers_from[query] = t_split
            self.migrations[query] = migration
            self.log.info("genmig_resumed", query=query, state=migration.state, t_split=t_split)
            self._restart_new_run(migration)

    def close(self) -> None:
        """Stop the runs of every open migration between batches, keeping their checkpoints for ``resume``."""
        with self._lock:
            for query in list(self.migrations):
                self.manager.end_run(self._old.pop(query), keep_checkpoint=True)
                self.manager.stop(query, keep_checkpoint=True)
            self.migrations.clear()
            self._restarts.clear()
            self._overdue.clear()
            self._answers_from.clear()
            self._stopped_at.clear()

    def step(self) -> None:
        """Advance every running migration by what the queries' progress shows now."""
        with self._lock:
            for query in list(self.migrations):
                migration = self.migrations[query]
                try:
                    self._advance(query, migration)
                except Exception as exc:  # noqa: BLE001 - one migration's failure must not stop the others
                    self._record(migration.to(FAILED, migration.started or 0.0, f"{type(exc).__name__}: {exc}"))

    def _advance(self, query: str, migration: Migration) -> None:
        """Read the two facts of ``migrations.genmig.next_state`` off the runs' progress and take the transitions it says.

        The old run is stopped as soon as it is done (draining), even while a replaying new run is still behind, or
        one whose start failed is tried again: its state is what the change is meant to free. Its checkpoint stays
        until the migration is done, once the new run has caught up too, so that a restart in between resumes the
        migration as stored. The timeout is judged after the transitions: an old run done by now has dropped its
        results from T_split on, and the migration must be given up as the draining one it is.
        """
        old, managed = self._old[query], self.manager.get(query)
        timed_out = self.clock() - self._since.get(query, self.clock()) > self.timeout_seconds
        new_runs = query not in self._restarts or self._restart_new_run(migration)
        old_done, watermark, note = self._old_done(query, managed.spec.streams, migration, old)
        old_done = old_done or (migration.state == DRAINING and not old.query.isActive)
        latest = self._latest(managed.query) if new_runs else None
        new_read = self._read(query, managed.spec.streams, managed.params, latest) if latest is not None else {}
        new_passed = bool(new_read) and passed_split(new_read, migration.t_split,
                                                     list(managed.params.extra.get("sources") or {}))
        if next_state(migration, new_passed_split=new_passed, old_done=old_done) == DRAINING:
            if new_passed:
                migration = migration.to(DRAINING, max(new_read.values()), "the new plan has read past T_split")
            else:  # the new run is behind (replaying, or not started again): the old plan has nothing left to give
                migration = migration.to(DRAINING, watermark or migration.t_split,
                                         f"the old plan is done ({note}) before the new plan read past T_split")
            self._record(migration)
        if migration.state == DRAINING and old_done and old.query.isActive:
            self.manager.end_run(old, keep_checkpoint=True)
            self._stopped_at[query] = time.time()
        if next_state(migration, new_passed_split=new_passed, old_done=old_done) == DONE:
            self.manager.end_run(old)
            del self._old[query]
            self._since.pop(query, None)
            self._overdue.discard(query)
            stopped = self._stopped_at.pop(query, None)
            self._record(migration.to(DONE, max(new_read.values()) if new_read else migration.t_split,
                                      f"old plan stopped after {note}; the new plan has read past T_split",
                                      facts={**migration.facts, "old_stopped_at": stopped}))
        elif timed_out:
            self._give_up(query, migration)

    def _old_done(self, query: str, streams: tuple[str, ...], migration: Migration,
                  old: Run) -> tuple[bool, float | None, str]:
        """Whether the old run has emitted every result before T_split, its watermark, and how that shows."""
        latest = self._latest(old.query)
        watermark = latest.watermark.timestamp() if latest is not None and latest.watermark is not None else None
        if migration.facts.get("emits") == "arrival":
            read = self._read(query, streams, old.params, latest) if latest is not None else {}
            return bool(read) and passed_split(read, migration.t_split, list(old.params.extra.get("sources") or {})), \
                watermark, "it had read past T_split"
        return old_plan_done(watermark, migration.t_split), watermark, "its watermark passed T_split"

    def _give_up(self, query: str, migration: Migration) -> None:
        """A migration past its timeout fails rather than stay open for good; the query keeps one run.

        While running, the new run has not passed T_split, so it is dropped and the old run answers alone again —
        if it has dropped no result from T_split on (its filter is restored between two batches, as in ``supersede``).
        One that has (a join's old run that read past T_split on one input, the other idle) keeps the migration open
        past its timeout, both runs going on, with one error line: dropping either run would lose results. An old run
        that has stopped is given up as in a drain: the new run goes on from T_split.
        While draining, the new run owns everything from T_split on; the old run is stopped, and the results before
        T_split it had not emitted yet are lost — the note says so. A draining migration whose new run never started
        again (``resume``) keeps both checkpoints: no run answers from T_split on, and the note says so.
        """
        unstarted = query in self._restarts  # the new run never started again
        limit = f"within {self.timeout_seconds:g} s"
        if migration.state == RUNNING and self._old[query].query.isActive:
            refused = self._roll_back(query, migration)
            if refused is not None:
                if query not in self._overdue:
                    self._overdue.add(query)
                    self.log.error("genmig_overdue", query=query, t_split=migration.t_split, reason=refused,
                                   message=f"the migration of {query!r} is past its timeout, but {refused}: giving it up "
                                           "would lose or repeat results from T_split on, so both runs go on until it ends")
                return
            why = ("its run did not start again from its checkpoint" if unstarted else
                   "its source did not advance in event time")
            note = f"timed out: the new plan did not read past T_split {limit} ({why}); it was stopped and the old plan answers alone again"
        else:
            old = self._old.pop(query)
            self._since.pop(query, None)
            if unstarted:
                done = query in self._stopped_at or (old.query.isActive and
                                                     self._old_done(query, self.manager.get(query).spec.streams, migration, old)[0])
                self.manager.end_run(old, keep_checkpoint=True)
                self._stopped_at.pop(query, None)
                note = (f"timed out: the new plan's run did not start again from its checkpoint {migration.facts['new_checkpoint']} "
                        f"{limit}; no run answers from T_split on until the query runs from that checkpoint again (kept, "
                        "with the old run's); the old plan " + ("had emitted everything before T_split" if done else
                                                                 "is stopped, its results before T_split not emitted by then lost"))
            else:
                self.manager.end_run(old)
                if self._stopped_at.pop(query, None) is not None:  # the old plan was done and stopped; the new run is behind
                    note = (f"timed out: the new plan did not read past T_split {limit} (its source did not advance in "
                            "event time); the old plan had emitted everything before T_split and stopped, the new one goes on")
                else:
                    note = (f"timed out: the old plan's watermark did not pass T_split {limit}; it was stopped, its results "
                            "before T_split not emitted by then are lost, the new plan answers from T_split on")
        self._overdue.discard(query)
        self._restarts.discard(query)
        self.log.error("genmig_timeout", query=query, state=migration.state, t_split=migration.t_split)
        self._record(migration.to(FAILED, migration.t_split or 0.0, note))

    def _record(self, migration: Migration) -> None:
        if migration.final:
            self.migrations.pop(migration.query, None)
        else:
            self.migrations[migration.query] = migration
        self.log.info("genmig_" + migration.state, query=migration.query, t_split=migration.t_split, migration=self.strategy)
        if self.on_transition is not None:
            self.on_transition(migration)

    # --- positions ---

    def _latest(self, query: Any) -> ProgressRecord | None:
        if query is None:
            return None
        return self.listener.latest_of_run(str(query.runId))

    def _newest(self, query: Any) -> ProgressRecord | None:
        """The run's newest progress: asked of the run itself, else as the listener heard it (the bus may lag)."""
        heard = self._latest(query)
        try:
            progress = query.lastProgress
            asked = None if progress is None else ProgressRecord.from_json(0, json.loads(progress.json))
        except Exception:  # noqa: BLE001 - a run that just stopped, or a client that cannot ask: the listener's then
            asked = None
        if asked is None or asked.run_id != str(query.runId) or asked.batch_id < 0:
            return heard
        return asked if heard is None or asked.batch_id >= heard.batch_id else heard

    def _records(self, run_id: str) -> list[ProgressRecord]:
        return [r for r in self.listener.records() if r.run_id == run_id]

    def _old_runs(self, query: str, streams: tuple[str, ...], sources: Mapping[str, Any],
                  record: ProgressRecord) -> dict[str, OldRun]:
        """Each stream's progress in ``record`` and its run's largest event time read.

        ``armd-synthetic`` offsets name their stream; the other sources are taken in Spark's order, which is
        ``[managed.NAME] streams`` when given, else the order of ``params.extra["sources"]``.
        """
        max_event = self._read_up_to(record)
        named = {offset_stream(s.end_offset): s for s in record.sources if offset_stream(s.end_offset) is not None}
        others = [s for s in record.sources if offset_stream(s.end_offset) is None]
        order = [s for s in (streams or tuple(sources)) if s in sources and s not in named]
        if len(others) != len(order) or not set(named) <= set(sources):
            described = "; ".join(s.description for s in record.sources)
            raise SourceContractError(
                f"the query reads {len(record.sources)} source(s) ({described}) but params.extra['sources'] declares "
                f"{sorted(sources)}; GenMig migrates only sources a builder reads with read_source from there")
        pairs = {**named, **dict(zip(order, others))}
        for stream, progress in pairs.items():
            if source_format(sources[stream]) == SYNTHETIC and offset_stream(progress.end_offset) is None:
                raise SourceContractError(
                    f"stream {stream!r} is declared as armd-synthetic in params.extra['sources'], but the query reads "
                    f"{progress.description or 'another source'}; read it with read_source and declare its format and "
                    "options there (docs/genmig.md, 'Writing a source GenMig can migrate')")
        return {stream: OldRun(s.end_offset, max_event, s.description) for stream, s in pairs.items()}

    def _read(self, query: str, streams: tuple[str, ...], params: QueryParams, record: ProgressRecord) -> dict[str, float]:
        """Event time up to which a run has read, per stream (streams whose position is unknown yet are left out)."""
        sources = dict(params.extra.get("sources") or {})
        try:
            olds = self._old_runs(query, streams, sources, record)
        except SourceContractError:
            return {}
        out = {}
        for stream, old in olds.items():
            try:
                out[stream] = adapter_for(stream, sources[stream]).position(stream, sources[stream], old)
            except SourceContractError:
                pass
        return out
