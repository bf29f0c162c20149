"""The herald meter: skip fractions of running herald operators, per observation interval, beside the source's."""

from __future__ import annotations

from datetime import datetime, timezone

from armd.adapters.herald_meter import HeraldMeter, MeteredSource
from armd.adapters.synthetic import Schedule, SyntheticSource
from armd.migrations.heralds import Herald, MultiModalSelect, Partitioner, Range, conjunction

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
POSITION = {"a": 0, "ts": 1}


def feed(select: MultiModalSelect, partitioner: Partitioner, skipped: int, evaluated: int) -> None:
    stream: list = []
    for _ in range(skipped):
        stream += [Herald.of({"a": Range(0, 9)}, count=5)] + [(1, 0.0)] * 5
    stream += [(50, 0.0)] * evaluated
    for part in partitioner.feed(stream):
        select.process(part)


def test_each_take_is_the_fraction_of_the_work_since_the_last_one() -> None:
    select, partitioner = MultiModalSelect(conjunction(("a", ">", 20)), POSITION), Partitioner(POSITION)
    feed(select, partitioner, skipped=2, evaluated=0)  # before registering: not part of any interval
    meter = HeraldMeter()
    meter.register("q", "s", select)
    feed(select, partitioner, skipped=3, evaluated=5)
    assert meter.take() == {"q": {"s": 0.75}}
    assert meter.take() == {}  # no work, nothing learnt
    feed(select, partitioner, skipped=0, evaluated=4)
    assert meter.take() == {"q": {"s": 0.0}}
    meter.unregister("q")
    feed(select, partitioner, skipped=1, evaluated=0)
    assert meter.take() == {}


def test_the_metered_source_adds_the_fractions_to_its_observations() -> None:
    source = SyntheticSource({"R": Schedule(5.0)}, 1, 1.0, START)
    meter = HeraldMeter()
    select, partitioner = MultiModalSelect(conjunction(("a", ">", 20)), POSITION), Partitioner(POSITION)
    meter.register("q", "s", select)
    metered = MeteredSource(source, meter)
    assert all(not q.herald_skips for q in metered.observe(START).queries)
    feed(select, partitioner, skipped=1, evaluated=15)
    (query,) = [q for q in metered.observe(START.replace(second=2)).queries if q.herald_skips]
    assert (query.query, dict(query.herald_skips)) == ("q", {"s": 0.25})
    assert metered.set_window is not None  # the wrapped source's own API stays reachable
