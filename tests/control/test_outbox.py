"""The outbox: order kept through an outage, poison records set aside, long outages alerted, a held stop."""

from __future__ import annotations

import structlog

from support.fakes import Clock

from armd.control.errors import PermanentError, TemporaryError
from armd.control.outbox import SURPRISE_ATTEMPTS, Outbox


class Down(TemporaryError):
    pass


class Rejected(PermanentError):
    pass


class Sink:
    """A store of written values that can be down or refuse given values."""

    def __init__(self) -> None:
        self.written: list[object] = []
        self.down = False
        self.poison: set[object] = set()

    def write(self, value: object):
        def run() -> None:
            if self.down:
                raise Down("database is down", 1.0)
            if value in self.poison:
                raise Rejected(f"value {value!r} out of range")
            if value == "bug":
                raise RuntimeError("a bug")
            self.written.append(value)
        return run


def outbox(clock: Clock, **kwargs) -> Outbox:
    return Outbox(clock, structlog.get_logger(), **kwargs)


def test_an_outage_keeps_every_record_in_order_and_alerts_once_when_it_lasts() -> None:
    clock, sink, outages = Clock(), Sink(), []
    box = outbox(clock, outage_alert_seconds=10, on_outage=lambda waited, n, error: outages.append((waited, n)))
    sink.down = True
    for i in range(30):
        box.put("observation", sink.write(i))
        clock.advance(1)
    assert len(box) == 30 and box.down and sink.written == []
    assert len(outages) == 1 and outages[0][0] >= 10  # once per outage
    sink.down = False
    clock.advance(1)
    assert box.flush()
    assert sink.written == list(range(30)) and not box.down
    assert box.queued["observation"] == box.written["observation"] == 30


def test_a_poison_record_is_set_aside_and_the_rest_written() -> None:
    clock, sink, rejected = Clock(), Sink(), []
    box = outbox(clock, on_rejected=rejected.append)
    sink.poison = {2}
    for i in range(5):
        box.put("observation", sink.write(i))
    assert sink.written == [0, 1, 3, 4] and len(box) == 0
    assert [r.kind for r in rejected] == ["observation"] and "out of range" in rejected[0].error
    assert box.rejected_count["observation"] == 1 and list(box.rejected) == rejected


def test_a_poison_record_behind_an_outage_is_set_aside_when_the_store_is_back() -> None:
    clock, sink, rejected = Clock(), Sink(), []
    box = outbox(clock, on_rejected=rejected.append)
    sink.down, sink.poison = True, {1}
    for i in range(3):
        box.put("event", sink.write(i))
    sink.down = False
    assert box.flush(force=True)
    assert sink.written == [0, 2] and len(rejected) == 1


def test_a_surprising_error_is_retried_a_few_times_then_set_aside() -> None:
    clock, sink, rejected = Clock(), Sink(), []
    box = outbox(clock, on_rejected=rejected.append)
    box.put("event", sink.write("bug"))
    box.put("event", sink.write(1))
    for _ in range(SURPRISE_ATTEMPTS):
        clock.advance(2)
        box.flush()
    assert sink.written == [1] and rejected[0].error_type == "RuntimeError"


def test_the_store_is_retried_after_the_last_failure_ended_not_before() -> None:
    clock, sink = Clock(), Sink()
    box = outbox(clock, retry_seconds=1.0)
    attempts = []

    def slow_failure() -> None:
        attempts.append(clock())
        clock.advance(5)  # a call that blocked for its whole timeout
        raise Down("locked", 1.0)

    box.put("observation", slow_failure)
    box.put("observation", sink.write(1))
    box.put("observation", sink.write(2))
    assert len(attempts) == 1  # the puts right after a 5 s failure do not block another 5 s each


def test_a_held_outbox_queues_only_and_a_forced_flush_still_drains() -> None:
    clock, sink = Clock(), Sink()
    box = outbox(clock)
    box.hold()
    box.put("event", sink.write(1))
    assert sink.written == [] and len(box) == 1
    assert box.flush(force=True) and sink.written == [1]


def test_callbacks_may_record_through_the_outbox() -> None:
    clock, sink = Clock(), Sink()
    box = outbox(clock)
    box.on_rejected = lambda record: box.put("event", sink.write(f"rejected {record.kind}"))
    sink.poison = {1}
    box.put("observation", sink.write(1))
    assert sink.written == ["rejected observation"]


def test_a_lost_store_is_told_at_once_and_once_while_records_wait() -> None:
    from armd.control.errors import Lost

    clock, lost, outages = Clock(), [], []
    gone = Lost("the metadata store's file was deleted")

    def write() -> None:
        raise gone

    box = outbox(clock, outage_alert_seconds=30, on_outage=lambda *a: outages.append(a),
                 on_lost=lambda waiting, error: lost.append((waiting, error)))
    for _ in range(3):
        box.put("event", write)
        clock.advance(2)
        box.flush()
    assert lost == [(1, str(gone))]  # at the first failure, not after outage_alert_seconds
    assert len(box) == 3 and outages == []
