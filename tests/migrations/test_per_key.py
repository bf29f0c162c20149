"""The per-key JISC engine (``migrations/join/per_key.py``) against the brute-force oracle, and its saved state.

``simulate`` does what the Spark processor does with the engine — one
engine per key, rebuilt from its bytes on every call, rows buffered until
Spark's watermark passes them, event-time timers — without Spark, over many
random logs, lagging inputs, random micro-batches and join-order switches.
"""

from __future__ import annotations

import io
import pickle
import random
from collections import Counter, defaultdict

import pytest
from support.jisc_logs import next_order, pair_counts, random_log, random_order

from armd.migrations.join import KEY_STATE_VERSION, EventLog, KeyEngine, KeyState, left_deep, oracle_results


def deliveries(log: EventLog, parts: int, rng: random.Random) -> list[list[int]]:
    """Micro-batches of event ids: each stream in its own time order, but streams lag each other at random."""
    out: list[list[int]] = [[] for _ in range(parts + 3)]
    for s in range(len(log.streams)):
        evs = [e for e in range(len(log)) if log.stream[e] == s]
        lag = rng.randrange(3)
        cuts = sorted(rng.randrange(len(evs) + 1) for _ in range(parts - 1)) if evs else []
        for b, (lo, hi) in enumerate(zip([0] + cuts, cuts + [len(evs)])):
            out[b + lag].extend(evs[lo:hi])
    for batch in out:
        rng.shuffle(batch)  # the order inside a micro-batch means nothing
    return out


def simulate(log: EventLog, window_ms: int, plans: list, parts: list[list[int]]) -> tuple[Counter, int, Counter]:
    """What the processor does, without Spark: key state through bytes, timers at the watermark.

    The watermark is Spark's with delay 0 and the ``min`` policy over the
    inputs: the smallest of the streams' newest event times (-1 until every
    stream has been seen). Returns the results, the rows dropped as late and
    the counts the processor reports (``pair_counts``).
    """
    names = list(log.streams)
    store: dict = {}
    timers: dict = {}
    out: Counter = Counter()
    counts: Counter = Counter()
    newest: dict[int, int] = {}
    watermark = -1

    def run(key, eng, epoch, order):
        eng.switch(epoch, order)
        for res in eng.release(watermark):
            out[tuple(sorted(r for _, r, _ in res))] += 1
        arrived, pairs = eng.take_counts()
        counts.update({names[i]: n for i, n in enumerate(arrived)})
        counts.update({f"{names[i]},{names[j]}": n for (i, j), n in pairs.items()})
        store[key] = eng.dump()
        timers[key] = eng.wake_at()

    for b, part in enumerate(parts):
        epoch, order = plans[min(b, len(plans) - 1)]
        by_key = defaultdict(list)
        for e in part:
            by_key[log.key[e]].append(e)
        for key, evs in by_key.items():
            eng = KeyEngine.load(store[key], names, window_ms) if key in store else KeyEngine(names, window_ms, order, epoch)
            for e in evs:
                eng.offer(log.stream[e], e, int(log.ts[e] * 1000), watermark)
            run(key, eng, epoch, order)
        for key, at in list(timers.items()):  # timers fire after the batch's input, at this batch's watermark
            if at is not None and at <= watermark:
                run(key, KeyEngine.load(store[key], names, window_ms), epoch, order)
        for e in part:
            newest[log.stream[e]] = max(newest.get(log.stream[e], -1), int(log.ts[e] * 1000))
        if len(newest) == len(names):
            watermark = max(watermark, min(newest.values()))
    # end of input: a watermark past everything releases and expires what is left
    watermark = 10**12
    for key in list(store):
        run(key, KeyEngine.load(store[key], names, window_ms), *plans[-1])
    dropped = sum(KeyEngine.load(blob, names, window_ms).dropped for blob in store.values())
    return out, dropped, +counts


def random_case(seed: int):
    """A random log, window (s), micro-batches and the (epoch, order) published before each batch."""
    rng = random.Random(seed)
    names = ["A", "B", "C", "D", "E"][: rng.randint(2, 5)]
    log = random_log(seed, names, keys=rng.randint(1, 4), n=rng.randint(10, 90), span=rng.randint(5, 60))
    window = rng.randint(1, 15)
    parts = deliveries(log, rng.randint(1, 6), rng)
    plans, epoch, order = [], 0, random_order(rng, names)
    for _ in parts:
        if rng.random() < 0.6:
            epoch, order = epoch + rng.randint(1, 2), next_order(rng, order, names)
        plans.append((epoch, order))
    return log, window, parts, plans


@pytest.mark.parametrize("seed", range(40))
def test_key_engine_with_batches_timers_and_switches_equals_the_oracle(seed: int) -> None:
    log, window, parts, plans = random_case(seed)
    got, dropped, counts = simulate(log, window * 1000, plans, parts)
    expected = oracle_results(log, window)
    assert dropped == 0
    assert got == expected, (expected - got, got - expected)
    assert counts == pair_counts(log, window)


def test_the_random_cases_switch_orders_and_produce_results() -> None:
    """The oracle comparison above means something: most cases switch and join."""
    cases = [random_case(seed) for seed in range(40)]
    switching = sum(len({epoch for epoch, _ in plans}) > 1 for _, _, _, plans in cases)
    joining = sum(sum(oracle_results(log, window).values()) > 0 for log, window, _, _ in cases)
    assert switching >= 30 and joining >= 20, (switching, joining)


def test_a_fresh_tuple_completes_the_missing_state_and_old_states_are_kept() -> None:
    names = ["A", "B", "C", "D"]
    eng = KeyEngine(names, 100, left_deep(names), epoch=0)
    for stream, t in ((0, 0), (1, 1), (2, 2)):  # A, B, C: AB and ABC hold one entry each
        eng.add(stream, stream, t)
    eng = KeyEngine.load(eng.dump(), names, 100)
    eng.switch(1, ((("A", "C"), "B"), "D"))
    assert eng.incomplete() == [frozenset({0, 2})] and eng.completions == 0  # AC is new; ABC = ACB kept
    eng.switch(1, left_deep(names))  # the same epoch again: no switch
    assert eng.epoch == 1 and eng.incomplete() == [frozenset({0, 2})]
    assert eng.add(3, 9, 3) == [(0, 1, 2, 3)]  # D probes ABC (kept, complete): no completion needed
    eng = KeyEngine.load(eng.dump(), names, 100)
    assert eng.completions == 0
    assert len(eng.add(1, 10, 4)) == 1  # B probes AC: fresh, completes it first
    assert eng.completions == 1 and eng.incomplete() == []


# --- late rows, timers, counts ------------------------------------------------------------------------


def test_late_rows_are_dropped_and_counted() -> None:
    eng = KeyEngine(["A", "B"], 100, ("A", "B"))
    eng.offer(0, 1, 49, watermark=50)  # behind the watermark
    eng.offer(0, 2, 50, watermark=50)
    assert eng.dropped == 1 and eng.buffer == [(50, 2, 0)]
    assert eng.release(60) == [] and eng.last_ms == 50
    assert eng.add(1, 3, 40) == [] and eng.dropped == 2  # older than the key's newest processed row
    assert eng.add(1, 4, 55) == [(0, 1)]  # sequence numbers of the key's tuples
    assert eng.describe((0, 1)) == [(0, 2, 50), (1, 4, 55)]


def test_release_processes_only_rows_older_than_the_watermark_in_event_time_order() -> None:
    eng = KeyEngine(["A", "B"], 100, ("A", "B"))
    for stream, row_id, ms in ((1, 7, 30), (0, 5, 10), (0, 6, 20)):
        eng.offer(stream, row_id, ms, watermark=0)
    assert eng.wake_at() == 11  # the oldest buffered row + 1 ms
    assert eng.release(25) == []  # A@10 and A@20 processed; B@30 still buffered
    assert eng.buffer == [(30, 7, 1)] and eng.last_ms == 20
    results = eng.release(31)
    assert sorted(sorted(r) for r in results) == [[(0, 5, 10), (1, 7, 30)], [(0, 6, 20), (1, 7, 30)]]
    assert eng.wake_at() == 10 + 100  # nothing buffered: the oldest live tuple's expiry
    eng.release(111)  # expires A@10 (τ ≤ 111 − 100)
    assert eng.oldest_ms() == 20
    eng.release(10**6)
    assert eng.oldest_ms() is None and eng.wake_at() is None and eng.events == {}


def test_counts_are_reported_once_then_start_afresh() -> None:
    eng = KeyEngine(["A", "B", "C"], 100, left_deep(["A", "B", "C"]))
    for stream, ms in ((0, 0), (1, 10), (1, 20), (2, 105)):  # C@105 comes after A@0 has expired (W = 100)
        eng.add(stream, ms, ms)
    assert eng.take_counts() == ([1, 2, 1], {(0, 1): 2, (1, 2): 2})
    assert eng.take_counts() == ([0, 0, 0], {})


# --- the saved state ---------------------------------------------------------------------------------


def busy_engine() -> KeyEngine:
    """An engine mid-way: live tuples, an incomplete state after a switch, a buffered and a dropped row, a timer."""
    names = ["A", "B", "C", "D"]
    eng = KeyEngine(names, 100, left_deep(names), epoch=0)
    for stream, t in ((0, 0), (1, 1), (2, 2), (3, 3), (0, 4)):
        eng.add(stream, 10 + t, t)
    eng.switch(2, (("A", "C"), ("B", "D")))
    eng.add(1, 20, 5)  # B is fresh: completes AC (which it probes) for the key; BD stays incomplete
    eng.offer(2, 21, 150, watermark=40)
    eng.offer(3, 22, 30, watermark=40)  # late
    eng.timer = eng.wake_at()
    return eng


def test_state_round_trips_through_bytes_and_the_engine_resumes_identically() -> None:
    names = ["A", "B", "C", "D"]
    eng = busy_engine()
    state = eng.state()
    assert state.version == KEY_STATE_VERSION and state.epoch == 2 and state.dropped == 1 and state.timer == 100
    assert state.pending == (frozenset({1, 3}),) and state.attempted == (1,) and state.completions == 1
    assert KeyState.from_bytes(state.to_bytes()) == state
    resumed = KeyEngine.load(eng.dump(), names, 100)
    assert resumed.state() == state
    assert resumed.incomplete() == eng.incomplete()
    steps = ((2, 30, 6), (0, 31, 7), (3, 32, 8))
    for stream, row_id, ms in steps:
        assert resumed.add(stream, row_id, ms) == eng.add(stream, row_id, ms)
    assert resumed.release(10**6) == eng.release(10**6)
    assert resumed.state() == eng.state() and resumed.completions == eng.completions


def test_saved_bytes_are_builtins_only() -> None:
    """A saved state unpickles without importing anything: it does not depend on where armd's classes live."""

    class NoImports(pickle.Unpickler):
        def find_class(self, module, name):
            raise AssertionError(f"the state refers to {module}.{name}")

    data = NoImports(io.BytesIO(busy_engine().dump())).load()
    assert isinstance(data, dict) and data["version"] == KEY_STATE_VERSION


LEGACY_V1 = bytes.fromhex(
    "8005958d00000000000000284b014b035d94285d94288c0141948c014394658c014294657d9428284b0091945d944b004b0086946128"
    "4b0191945d944b014b01869461284b0291945d944b024b02869461755d94284b004b029194615d947d94284b004b004b0a4b0087944b"
    "014b014b0b4b0187944b024b024b0c4b028794754b034b024ba04b014b005d944b964b144b0187946174942e"
)
"""A state as the Spark processor stored it before ``KeyState`` (version 1, a positional tuple), written by that code:
streams A, B, C, window 100 ms, A@0, B@1, C@2 processed, switched at epoch 3 to ((A ⋈ C) ⋈ B), B@150 buffered,
one row dropped as late, timer at 160."""


def test_a_version_1_state_from_an_existing_checkpoint_is_read() -> None:
    names = ["A", "B", "C"]
    state = KeyState.from_bytes(LEGACY_V1)
    assert state.version == KEY_STATE_VERSION  # read in the current layout
    assert (state.epoch, state.pending, state.attempted, state.seq, state.last_ms, state.timer, state.dropped) == (
        3, (frozenset({0, 2}),), (), 3, 2, 160, 1)
    assert state.buffer == [(150, 20, 1)] and state.events == {0: (0, 10, 0), 1: (1, 11, 1), 2: (2, 12, 2)}
    old = KeyEngine.load(LEGACY_V1, names, 100)
    assert old.plan.order == (("A", "C"), "B") and old.incomplete() == [frozenset({0, 2})]
    # the same history on today's engine: both go on alike
    new = KeyEngine(names, 100, (("A", "B"), "C"))
    for stream, t in ((0, 0), (1, 1), (2, 2)):
        new.add(stream, 10 + stream, t)
    new.switch(3, (("A", "C"), "B"))
    new.offer(1, 20, 150, 40)
    new.offer(0, 21, 30, 40)
    new.timer = 160
    assert old.state() == new.state()
    assert old.add(1, 30, 50) == new.add(1, 30, 50) == [(0, 2, 3)]  # B is fresh: completes AC, then joins it
    assert old.completions == new.completions == 1 and old.incomplete() == []
    assert old.release(10**6) == new.release(10**6) == []  # B@150 comes after everything else has expired
    assert KeyEngine.load(old.dump(), names, 100).state() == new.state()


@pytest.mark.parametrize("saved", [
    pickle.dumps({"version": 3, "epoch": 0}),
    pickle.dumps((7, 0, "A")),
    pickle.dumps({"epoch": 0}),
    pickle.dumps([1, 2, 3]),
])
def test_a_state_of_an_unknown_version_is_refused_naming_both_versions(saved: bytes) -> None:
    with pytest.raises(ValueError, match=r"version (3|7|None) cannot be read: this armd writes version 2 and reads versions 1, 2"):
        KeyState.from_bytes(saved)
    with pytest.raises(ValueError, match="version 3 cannot be read"):
        KeyEngine.load(pickle.dumps({"version": 3}), ["A", "B"], 100)


def test_a_state_made_in_memory_must_have_the_current_version() -> None:
    fields = vars(busy_engine().state()) | {"version": 1}
    with pytest.raises(ValueError, match="version 1 cannot be read: this armd writes version 2"):
        KeyState(**fields)
