"""Alert hooks against real receivers (an HTTP server on 127.0.0.1, real subprocesses), and the events that alert.

The server answers by path: ``/ok`` with 200, ``/fail`` with 500, ``/hang``
never (until the test ends). What it received is checked, not what armd
says it sent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

from support import REPO
import pytest

from armd.adapters.alerts import AlertDispatcher, CommandHook, DeliveryError, LogHook, WebhookHook, build_hooks, event_json
from armd.adapters.store import SqlStore
from armd.daemon.config import AlertHook, load_config
from armd.daemon.controller import Controller
from armd.control.ports import EventRecord, Observation, QueryMetrics, QuerySettings, StreamStats

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
EVENT = EventRecord(AT, "bound_exceeded", "warning", "measured state 300,000 B is over the memory bound", "q1", {"measured_state_bytes": 3e5})


from support.fakes import apply
from support.receiver import Receiver, receiver  # noqa: F401 - receiver is a fixture


class Log:
    """Records log calls as (level, event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        return lambda event, **fields: self.lines.append((level, event, fields))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [fields for _, event, fields in self.lines if event == name]


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


# --- webhook -----------------------------------------------------------------------------------


def test_webhook_posts_the_event_as_json_with_a_signature_that_verifies(receiver: Receiver) -> None:
    WebhookHook(f"{receiver.url}/ok", secret="s3cret-key", timeout=2, retries=0).deliver(event_json(EVENT))
    [request] = receiver.requests
    assert request["headers"]["Content-Type"] == "application/json"
    sent = json.loads(request["body"])
    assert (sent["kind"], sent["severity"], sent["query"], sent["details"]) == ("bound_exceeded", "warning", "q1", {"measured_state_bytes": 3e5})
    assert sent["at"] == AT.isoformat() and sent["suppressed"] == 0
    expected = "sha256=" + hmac.new(b"s3cret-key", request["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(request["headers"]["X-Armd-Signature"], expected)
    forged = "sha256=" + hmac.new(b"other-key", request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Armd-Signature"] != forged


def test_webhook_without_secret_sends_no_signature(receiver: Receiver) -> None:
    WebhookHook(f"{receiver.url}/ok", timeout=2, retries=0).deliver(event_json(EVENT))
    assert "X-Armd-Signature" not in receiver.requests[0]["headers"]


def test_webhook_answering_500_is_retried_with_exponential_backoff(receiver: Receiver) -> None:
    hook = WebhookHook(f"{receiver.url}/fail", timeout=2, retries=3, backoff=0.1)
    with pytest.raises(DeliveryError, match=r"HTTP 500 \(gave up after 4 attempts\)"):
        hook.deliver(event_json(EVENT))
    times = [r["at"] for r in receiver.requests]
    assert len(times) == 4
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2 and gaps[2] >= 0.4  # 0.1 s doubled per retry


def test_a_hanging_webhook_times_out_on_the_worker_and_never_stalls_the_caller(receiver: Receiver) -> None:
    log = Log()
    dispatcher = AlertDispatcher([WebhookHook(f"{receiver.url}/hang", timeout=0.5, retries=0)], log, dedup_seconds=0, queue_size=2)
    started = time.monotonic()
    for i in range(20):  # more than the queue holds while the first delivery hangs
        dispatcher.alert(EventRecord(AT, f"kind_{i}", "error", "boom"))
    assert time.monotonic() - started < 0.5  # the control loop's call returned at once
    wait_for(lambda: log.events("alert_hook_failed"))
    failure = log.events("alert_hook_failed")[0]
    assert failure["hook"] == f"webhook {receiver.url}/…" and "timed out" in failure["error"]
    assert dispatcher.counters["dropped"] >= 17 and log.events("alert_dropped")
    dispatcher.close(0.1)


# --- command -----------------------------------------------------------------------------------


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_command_hook_gets_the_event_on_stdin_without_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    # A shell would expand $HOME and split on ';': the argument must arrive verbatim.
    argv = python(f"import sys; open({str(out)!r}, 'wb').write(sys.stdin.buffer.read() + b'\\n' + sys.argv[1].encode())") + ["$HOME; echo"]
    CommandHook(argv, timeout=10, retries=0).deliver(event_json(EVENT))
    body, argument = out.read_bytes().rsplit(b"\n", 1)
    assert json.loads(body)["kind"] == "bound_exceeded" and body == event_json(EVENT)
    assert argument == b"$HOME; echo"


def test_a_failing_command_is_retried_then_reported(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    argv = python(f"import sys; open({str(runs)!r}, 'a').write('x'); sys.stderr.write('no pager configured'); sys.exit(3)")
    with pytest.raises(DeliveryError, match="exited with status 3: no pager configured"):
        CommandHook(argv, timeout=10, retries=2, backoff=0.01).deliver(event_json(EVENT))
    assert runs.read_text() == "xxx"


def test_a_hanging_command_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    argv = python(f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(DeliveryError, match="timed out after 1 s and was killed"):
        CommandHook(argv, timeout=1, retries=0).deliver(event_json(EVENT))
    assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_missing_program_is_a_delivery_error(tmp_path: Path) -> None:
    with pytest.raises(DeliveryError, match="could not start"):
        CommandHook([str(tmp_path / "no-such-program")], retries=0).deliver(event_json(EVENT))


# --- the dispatcher ----------------------------------------------------------------------------


class Recording:
    name = "recording"

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def deliver(self, body: bytes) -> None:
        self.bodies.append(json.loads(body))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_repeated_alerts_are_deduplicated_within_the_window_and_counted() -> None:
    hook, clock = Recording(), Clock()
    dispatcher = AlertDispatcher([hook], Log(), dedup_seconds=60, clock=clock)
    for _ in range(5):
        dispatcher.alert(EVENT)  # same kind and query
        clock.now += 10
    dispatcher.alert(EventRecord(AT, "bound_exceeded", "warning", "other query", "q2"))
    dispatcher.alert(EventRecord(AT, "statistics_stale", "warning", "other kind", "q1"))
    clock.now += 30  # 80 s after the first: the window has passed
    dispatcher.alert(EVENT)
    assert dispatcher.wait_idle(5)
    assert [(b["kind"], b["query"], b["suppressed"]) for b in hook.bodies] == [
        ("bound_exceeded", "q1", 0), ("bound_exceeded", "q2", 0), ("statistics_stale", "q1", 0), ("bound_exceeded", "q1", 4)]
    assert dispatcher.counters["suppressed"] == 4 and dispatcher.counters["sent"] == 4
    dispatcher.close()


def test_a_failing_hook_does_not_keep_the_others_from_the_alert(receiver: Receiver) -> None:
    log, hook = Log(), Recording()
    dispatcher = AlertDispatcher([WebhookHook(f"{receiver.url}/fail", timeout=1, retries=0), hook], log)
    dispatcher.alert(EVENT)
    assert dispatcher.wait_idle(5)
    assert [b["kind"] for b in hook.bodies] == ["bound_exceeded"]
    assert log.events("alert_hook_failed")[0]["error"].endswith("answered HTTP 500 (gave up after 1 attempt)")
    dispatcher.close()


def test_without_hooks_alerts_go_to_the_log() -> None:
    log = Log()
    [hook] = build_hooks((), log)
    assert isinstance(hook, LogHook)
    hook.deliver(event_json(EVENT))
    assert log.events("alert")[0]["kind"] == "bound_exceeded"
    webhook, command = build_hooks((AlertHook("webhook", url="https://user:pw@hooks.example:8443/T0/B0/token?t=1", secret="k"),
                                    AlertHook("command", argv=("page",))), log)
    assert webhook.name == "webhook https://hooks.example:8443/…" and command.name == "command page"  # no credentials in names


# --- the events the controller raises ----------------------------------------------------------
# A real SQLite store, a scripted statistics source and an injected clock: each test drives the
# measurements that should (or should not) raise an event and looks at what reached the alert sink.

PLAN = REPO / "config" / "plans" / "example.json"
EVENTS_CONFIG = """
[store]
url = "sqlite:///{db}"
[bounds]
memory_bytes = 1000000
cpu = 1000
[alerting]
stale_intervals = 3
estimate_factor = 2
[plan]
file = "{plan}"
[queries.clicks_per_view]
window = [1000, 60000]
"""


class Script:
    """A statistics source that returns what the test put in ``next``."""

    def __init__(self) -> None:
        self.next = Observation(AT, [])

    def observe(self, at: datetime) -> Observation:
        return Observation(at, self.next.streams, self.next.queries)

    def close(self) -> None:
        pass


class Applying:
    name = "test"

    def apply(self, query: str, old: QuerySettings | None, new: QuerySettings) -> str:
        return "direct"


class Sink:
    def __init__(self) -> None:
        self.events: list[EventRecord] = []

    def alert(self, event: EventRecord) -> None:
        self.events.append(event)

    def kinds(self) -> list[tuple[str, str | None]]:
        return [(e.kind, e.query) for e in self.events]


@pytest.fixture
def controlled(tmp_path: Path) -> Iterator[tuple[Controller, Script, Sink, list[datetime], SqlStore]]:
    path = tmp_path / "armd.toml"
    path.write_text(EVENTS_CONFIG.format(db=tmp_path / "armd.db", plan=PLAN))
    config = load_config(path, environ={})
    store = SqlStore.open(config.store.url, retries=0)
    store.upgrade()
    now = [AT]
    source, sink = Script(), Sink()
    controller = Controller(config, store, source, Applying(), sink, Log(), lambda: now[0])
    yield controller, source, sink, now, store
    store.close()


def streams(*names: str, rows: int = 10) -> list[StreamStats]:
    return [StreamStats(n, rows, 1.0, rows, 100.0) for n in names]


def test_a_stream_without_rows_raises_statistics_stale_once_and_fresh_when_it_returns(controlled: Any) -> None:
    controller, source, sink, now, store = controlled
    source.next = Observation(AT, [*streams("clicks", "views"), StreamStats("orders", 0, 1.0, 0.0, float("inf"))])
    for _ in range(6):
        controller.observe()
    assert sink.kinds() == [("statistics_stale", None)] and sink.events[0].details == {"stream": "orders", "intervals": 3}
    source.next = Observation(AT, streams("clicks", "views", "orders"))
    controller.observe()
    assert [e["kind"] for e in store.events()][0] == "statistics_fresh"


def test_measured_state_over_the_bound_raises_bound_exceeded_once(controlled: Any) -> None:
    controller, source, sink, now, store = controlled
    controller.decide()  # admits the queries
    source.next = Observation(AT, streams("clicks", "views", "orders"), [QueryMetrics("clicks_per_view", 10, 600_000),
                                                                         QueryMetrics("big_orders", 10, 500_000)])
    controller.observe()
    controller.observe()
    assert sink.kinds() == [("bound_exceeded", None)]
    assert sink.events[0].details["measured_state_bytes"] == 1_100_000
    # A query missing from an observation still counts with its newest report (its application reports apart),
    # so the state is back within the bound once big_orders reports less.
    source.next = Observation(AT, streams("clicks", "views", "orders"), [QueryMetrics("clicks_per_view", 10, 600_000)])
    controller.observe()
    assert sink.kinds() == [("bound_exceeded", None)]
    source.next = Observation(AT, streams("clicks", "views", "orders"), [QueryMetrics("big_orders", 1, 50_000)])
    controller.observe()
    assert [e["kind"] for e in store.events()][0] == "bound_restored"
    # The end of the condition reaches the sink too: the dispatcher hands it only to hooks that resolve alerts.
    assert sink.kinds() == [("bound_exceeded", None), ("bound_restored", None)]


def test_an_estimate_far_from_the_measurement_is_raised_only_once_the_windows_are_full(controlled: Any) -> None:
    controller, source, sink, now, store = controlled
    controller.decide()
    apply(controller)
    kinds = [e["kind"] for e in store.events()]
    assert kinds.count("migration_started") == kinds.count("migration_finished") == 3
    in_force = store.actual_states()["clicks_per_view"].settings  # what the reconciler reports; the controller reads it too
    window = max(in_force.windows.values()) * controller.config.model.time_unit_seconds
    source.next = Observation(AT, streams("clicks", "views", "orders"), [QueryMetrics("clicks_per_view", 1, 1)])
    controller.observe()
    assert sink.kinds() == []  # the windows are still filling: 1 B is no contradiction yet
    now[0] = AT + timedelta(seconds=window + 1)
    controller.observe()
    controller.observe()
    assert sink.kinds() == [("estimate_mismatch", "clicks_per_view")]
    assert sink.events[0].details["ratio"] < 0.5


def test_no_estimate_mismatch_while_the_query_migrates_live(controlled: Any) -> None:
    controller, source, sink, now, store = controlled
    controller.decide()
    apply(controller)
    in_force = store.actual_states()["clicks_per_view"].settings  # what the reconciler reports; the controller reads it too
    window = max(in_force.windows.values()) * controller.config.model.time_unit_seconds
    now[0] = AT + timedelta(seconds=window + 1)
    steady = store.actual_states()["clicks_per_view"]
    store.write_actual(replace(steady, phase="migrating", migration_state="running"))  # as a GenMig migration that still runs
    source.next = Observation(AT, streams("clicks", "views", "orders"), [QueryMetrics("clicks_per_view", 1, 1)])
    controller.observe()
    assert sink.kinds() == []  # both plans hold state while it migrates: no steady state to compare with
    store.write_actual(steady)
    controller.observe()
    assert sink.kinds() == [("estimate_mismatch", "clicks_per_view")]


def test_a_terminated_spark_query_is_an_error_alert(controlled: Any) -> None:
    controller, _, sink, _, store = controlled
    controller.query_terminated("clicks_per_view", "org.apache.spark.SparkException: Job aborted")
    [event] = sink.events
    assert (event.kind, event.severity, event.query) == ("query_terminated", "error", "clicks_per_view")
    assert "Job aborted" in event.message and store.events()[0]["kind"] == "query_terminated"
