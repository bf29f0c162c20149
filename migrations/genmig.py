"""GenMig: exact migration between two snapshot-equivalent plans (paper 000).

GenMig treats the running (old) and the replacement (new) plan as black
boxes and splits application time at one instant, T_split: the old plan
answers for every instant before it, the new plan for every instant from it
on. Because both plans are snapshot-equivalent, the union is exactly the
result of either plan alone — nothing lost, nothing twice — whatever the
plans' operators are (aggregation and duplicate elimination included, where
Parallel Track fails).

This module is the pure part, in the reference-point form (the paper's
Optimization 1): every result describes one instant, its *reference point*
(a window aggregate its window's end, a join result its start), and belongs
to the plan on whose side of T_split that instant lies. No interval is cut
and no coalescing is needed; ``ordered_merge`` restores time order for
consumers that need it.

Times are plain numbers in one event-time unit (the Spark adapter uses
seconds since the epoch); nothing here reads a clock.

Choosing T_split. The new plan starts reading where the old plan stands,
so it sees every element later than the latest start timestamp the old plan
has seen on any input, t_max. A result at reference point r draws on elements
from (r − w, r] at most (w: the largest window of the old plan), so every
result with r > t_max + w is complete in the new plan. Hence T_split =
t_max + w + 1 + ε (ε one chronon, so T_split is never itself a timestamp).
When the old plan's largest end timestamp t_end is known (the last instant
any element or window in it covers), T_split = t_end + 1 + ε is enough and
shortens the migration (Optimization 2).

Spark's watermark. Spark emits a window's result only when the watermark
(largest event time seen minus the allowed delay) has passed the window's
end, and drops elements older than the watermark. So the old plan must keep
running until its watermark has passed T_split — its last results are
those just before T_split — and only then stops: the migration lasts about
(T_split − t_max) + delay + one trigger, plus the trigger that observes it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

T = TypeVar("T")

CHRONON = 1e-3
"""ε: the smallest step of event time the split is placed off (one millisecond in seconds)."""


class MigrationError(ValueError):
    """An impossible migration request or state transition; the message says what is allowed."""


def split_time(latest_start: Mapping[str, float], window: float, epsilon: float = CHRONON, unit: float = 1.0) -> float:
    """T_split of Algorithm 1: the largest start timestamp seen on any input, plus the window, plus 1 + ε.

    ``latest_start`` holds, per input, the latest start (event) timestamp the old
    plan has seen; ``window`` is the largest window of the old plan (the global
    window constraint). The "+ 1" is one time unit of the plan's interval
    semantics (validity [t, t + w)), ``unit`` in the times' own unit (e.g. the
    model's time unit in seconds when the times are seconds).
    """
    if not latest_start:
        raise MigrationError("split time needs the latest start timestamp of at least one input")
    if not window >= 0:
        raise MigrationError(f"window must be ≥ 0, got {window!r}")
    if not epsilon > 0:
        raise MigrationError(f"ε must be > 0, got {epsilon!r}")
    if not unit > 0:
        raise MigrationError(f"unit must be > 0, got {unit!r}")
    return max(latest_start.values()) + window + unit + epsilon


def chained_split_time(t_split: float, answers_from: float | None, unit: float = 1.0) -> float:
    """T_split for an old run that answers only from an earlier migration's T_split (``answers_from``).

    That run may not have caught up with it yet (it replays its window, or
    its own old run was done first): the results before that point are not
    its to hand over, so T_split lies at least one ``unit`` past it. Never at
    it: the old run's side would be the empty range [answers_from, T_split),
    a filter Spark proves false, and then it skips the whole batch, state
    store commits included (``STATE_STORE_COMMIT_VALIDATION_FAILED``).
    """
    if answers_from is None:
        return t_split
    return max(t_split, answers_from + unit)


def shortened_split_time(latest_end: float, epsilon: float = CHRONON) -> float:
    """T_split of Optimization 2: the largest end timestamp in the old plan, plus 1 + ε."""
    if not epsilon > 0:
        raise MigrationError(f"ε must be > 0, got {epsilon!r}")
    return latest_end + 1 + epsilon


def from_old(reference_point: float, t_split: float) -> bool:
    """True when a result at ``reference_point`` is the old plan's to give."""
    return reference_point < t_split


def from_new(reference_point: float, t_split: float) -> bool:
    """True when a result at ``reference_point`` is the new plan's to give."""
    return reference_point >= t_split


def keep(results: Iterable[T], reference_point: Callable[[T], float], t_split: float, plan: str) -> list[T]:
    """The results a plan (``"old"`` or ``"new"``) contributes; the other side's are dropped."""
    if plan not in ("old", "new"):
        raise MigrationError(f"plan must be 'old' or 'new', got {plan!r}")
    side = from_old if plan == "old" else from_new
    return [r for r in results if side(reference_point(r), t_split)]


def ordered_merge(
    old: Iterable[T], new: Iterable[T], reference_point: Callable[[T], float], t_split: float
) -> Iterator[T]:
    """Both plans' contributions as one stream ordered by reference point.

    Each input must already be in reference-point order. Every old result lies
    before T_split and every new one from it on, so this is the old results,
    then the new ones; the merge also checks that each side kept to its side.
    """
    def checked(results: Iterable[T], plan: str) -> Iterator[T]:
        side = from_old if plan == "old" else from_new
        for result in results:
            if not side(reference_point(result), t_split):
                raise MigrationError(
                    f"{plan} plan gave a result at {reference_point(result)!r}, "
                    f"on the wrong side of the split time {t_split!r}"
                )
            yield result

    return heapq.merge(checked(old, "old"), checked(new, "new"), key=reference_point)


def old_plan_done(watermark: float | None, t_split: float) -> bool:
    """True once the old plan can stop: its watermark has passed T_split, so every result before it is out."""
    return watermark is not None and watermark >= t_split


# --- cost and duration ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TransientCost:
    duration: float
    """Expected migration duration: from its start until the old plan stops (event-time units)."""
    extra_memory: float
    """Peak memory above the old plan's: the new plan's state built up while the old plan still runs."""
    peak_memory: float
    """Old and new plan together at the peak."""


def transient_cost(
    t_split: float,
    start: float,
    watermark_delay: float,
    trigger: float,
    old_memory: float,
    new_memory: float,
    fill_time: float,
    *,
    on_arrival: bool = False,
) -> TransientCost:
    """Expected duration and memory of a migration from the cost model's steady-state estimates.

    The old plan runs until it has emitted its last result before T_split: its
    results are out once its watermark has passed T_split — (T_split − start)
    + delay — or, when they are out as soon as their last input arrives
    (``on_arrival``: inner stream-stream joins), once it has read past T_split;
    the batch that gets there ends half a trigger past that point on average.
    The new plan's state fills from empty over ``fill_time`` (how long an
    element stays in its state, e.g. window + delay + trigger for Spark), so
    while both run it holds new_memory × min(1, duration / fill_time) on top of
    the old plan's state.
    """
    if t_split < start:
        raise MigrationError(f"split time {t_split!r} lies before the migration start {start!r}")
    duration = (t_split - start) + (0.0 if on_arrival else watermark_delay) + trigger / 2
    filled = 1.0 if fill_time <= 0 else min(1.0, duration / fill_time)
    extra = new_memory * filled
    return TransientCost(duration, extra, old_memory + extra)


# --- the state machine ----------------------------------------------------------------------------

PLANNED, RUNNING, DRAINING, DONE, FAILED, ROLLED_BACK = "planned", "running", "draining", "done", "failed", "rolled_back"
STATES = (PLANNED, RUNNING, DRAINING, DONE, FAILED, ROLLED_BACK)
FINAL = frozenset({DONE, FAILED, ROLLED_BACK})

TRANSITIONS: Mapping[str, frozenset[str]] = {
    PLANNED: frozenset({RUNNING, FAILED, ROLLED_BACK}),
    RUNNING: frozenset({DRAINING, FAILED, ROLLED_BACK}),
    DRAINING: frozenset({DONE, FAILED}),
    DONE: frozenset(),
    FAILED: frozenset(),
    ROLLED_BACK: frozenset(),
}
"""planned → running (both plans run, each restricted to its side) → draining (every input has passed
T_split; waiting for the old plan's watermark) → done (old plan stopped). A migration can be rolled back
(new plan dropped, the old one unrestricted again) only while the new plan has written nothing, i.e.
before draining; it can fail from any state that is not final."""


@dataclass(frozen=True)
class Migration:
    """One migration's persistent state; every transition returns a new value for the store."""

    query: str
    strategy: str
    old_plan: Mapping[str, Any]
    new_plan: Mapping[str, Any]
    state: str = PLANNED
    t_split: float | None = None
    started: float | None = None
    """Event time at which the new plan started (set when running)."""
    history: tuple[tuple[str, float, str], ...] = ()
    """(state, at, note) for every transition, oldest first."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    """Strategy-specific facts a resumed migration needs (offsets, query ids, …)."""

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise MigrationError(f"unknown migration state {self.state!r}; states: {', '.join(STATES)}")

    @property
    def final(self) -> bool:
        return self.state in FINAL

    def to(self, state: str, at: float, note: str = "", **changes: Any) -> Migration:
        """The migration moved to ``state`` at (event) time ``at``."""
        if state not in TRANSITIONS.get(self.state, ()):
            allowed = ", ".join(sorted(TRANSITIONS[self.state])) or "none (final)"
            raise MigrationError(f"migration of {self.query!r} cannot go from {self.state} to {state}; allowed: {allowed}")
        if state == RUNNING and changes.get("t_split", self.t_split) is None:
            raise MigrationError(f"migration of {self.query!r} cannot run without a split time")
        return replace(self, state=state, history=(*self.history, (state, at, note)), **changes)

    def as_record(self) -> dict[str, Any]:
        """JSON-able form for the store's ``details`` column; ``from_record`` reads it back."""
        return {
            "query": self.query,
            "strategy": self.strategy,
            "state": self.state,
            "old_plan": dict(self.old_plan),
            "new_plan": dict(self.new_plan),
            "t_split": self.t_split,
            "started": self.started,
            "history": [list(h) for h in self.history],
            "facts": dict(self.facts),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Migration:
        try:
            return cls(
                query=record["query"],
                strategy=record["strategy"],
                old_plan=record["old_plan"],
                new_plan=record["new_plan"],
                state=record["state"],
                t_split=record.get("t_split"),
                started=record.get("started"),
                history=tuple((str(s), float(a), str(n)) for s, a, n in record.get("history", ())),
                facts=record.get("facts", {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MigrationError(f"stored migration record is incomplete or malformed: {exc!r}") from None


def emits_nothing_from(t_split: float, watermark: float | None, event_max: float | None, delay: float) -> bool:
    """Whether a run whose results come out as its watermark passes them has emitted nothing at or after ``t_split``,
    nor will in its next batch, judged from its newest batch: that batch's ``watermark`` and largest event time.

    The next batch's watermark is the larger of the two less ``delay`` (the watermark delay; 0 when unknown, which
    only makes the answer more cautious). A migration may be rolled back while this holds of both its runs: the new
    run has written nothing and the old one has dropped nothing (``GenMigApplier.supersede``).
    """
    marks = [m for m in (watermark, None if event_max is None else event_max - delay) if m is not None]
    return not marks or max(marks) < t_split


def next_state(migration: Migration, *, new_passed_split: bool, old_done: bool) -> str | None:
    """The transition a live migration is due, from two facts its runs show now; None while nothing changed.

    ``new_passed_split``: every input of the new plan has read past T_split
    (running → draining). ``old_done``: the old plan has emitted every result
    before T_split — its watermark passed T_split, or, for results out on
    arrival, it read past T_split on every input, or it stopped — so it can
    stop. The old plan may be done first: a new plan that replays its window
    starts behind the old one, and one that runs slower falls behind it. It
    then drains at once, and the caller stops the old plan (its state is what
    a cut is meant to free), since the new plan owns every result from T_split
    on whenever it gets there. The migration is done once both hold: the old
    plan has stopped and the new one answers for the present, so its state is
    the new plan's steady state — until then a controller neither reads it as
    such nor changes the query again. A resumed migration goes through the
    same function with fresh facts, so it continues wherever the stored state
    stood. The Spark adapter computes the facts; this decides.
    """
    if migration.state == RUNNING and (new_passed_split or old_done):
        return DRAINING
    if migration.state == DRAINING and old_done and new_passed_split:
        return DONE
    return None


def resume_step(migration: Migration, inputs_passed_split: bool, old_watermark: float | None) -> str | None:
    """``next_state`` for a plan whose results are out when its watermark passes them (window aggregates)."""
    return next_state(migration, new_passed_split=inputs_passed_split,
                      old_done=migration.t_split is not None and old_plan_done(old_watermark, migration.t_split))


def passed_split(latest_start: Mapping[str, float], t_split: float, inputs: Sequence[str]) -> bool:
    """Every input has delivered an element at or after T_split (the loop condition of Algorithm 1)."""
    return all(latest_start.get(name, float("-inf")) >= t_split for name in inputs)
