"""The Alertmanager hook against a real Alertmanager (API v2): labels, annotations, startsAt/endsAt, resolution."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from support.alertmanager import Alertmanager, alertmanager  # noqa: F401 - the fixture

from armd.adapters.alerts import AlertDispatcher
from armd.adapters.alerts.alertmanager import AlertmanagerHook, alert_of
from armd.adapters.alerts.dispatch import event_json
from armd.adapters.alerts.hooks import DeliveryError
from armd.control.ports import EventRecord


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __getattr__(self, level: str):
        return lambda event, **fields: self.lines.append((event, fields))


def firing(am: Alertmanager) -> dict[str, dict]:
    return {a["labels"]["alertname"]: a for a in am.alerts(active="true") if a["status"]["state"] == "active"}


def test_events_become_alerts_with_labels_annotations_and_times(alertmanager: Alertmanager) -> None:  # noqa: F811
    at = now()
    hook = AlertmanagerHook(alertmanager.url, retries=0)
    hook.deliver(event_json(EventRecord(at, "migration_failed", "error", "GenMig of q1 failed: boom", "q1",
                                        {"migration": 7}), suppressed=2))
    alert = firing(alertmanager)["armd_migration_failed"]
    assert alert["labels"] == {"alertname": "armd_migration_failed", "source": "armd", "severity": "error", "query": "q1"}
    assert alert["annotations"]["summary"] == "GenMig of q1 failed: boom" and alert["annotations"]["suppressed"] == "2"
    assert json.loads(alert["annotations"]["details"]) == {"migration": 7}
    starts, ends = (datetime.fromisoformat(alert[k].replace("Z", "+00:00")) for k in ("startsAt", "endsAt"))
    assert starts == at and ends == at + timedelta(hours=1)  # a one-off event ends by itself


def test_the_end_of_a_condition_resolves_its_alert_through_the_dispatcher(alertmanager: Alertmanager) -> None:  # noqa: F811
    log = Log()
    dispatcher = AlertDispatcher([AlertmanagerHook(alertmanager.url, retries=0)], log, dedup_seconds=300)
    try:
        dispatcher.alert(EventRecord(now(), "bound_exceeded", "warning", "measured state 12,800 B is over the bound", None,
                                     {"measured_state_bytes": 12800.0}))
        assert dispatcher.wait_idle(10)
        alert = firing(alertmanager)["armd_bound_exceeded"]
        ends = datetime.fromisoformat(alert["endsAt"].replace("Z", "+00:00"))
        assert ends > now() + timedelta(days=6)  # lasts until armd says it is over
        dispatcher.alert(EventRecord(now(), "bound_restored", "info", "measured state is within the bound", None, {}))
        assert dispatcher.wait_idle(10)
        assert "armd_bound_exceeded" not in firing(alertmanager)
        # The condition's next beginning is not held back by the deduplication window.
        dispatcher.alert(EventRecord(now(), "bound_exceeded", "warning", "over again", None, {}))
        assert dispatcher.wait_idle(10)
        assert firing(alertmanager)["armd_bound_exceeded"]["annotations"]["summary"] == "over again"
    finally:
        dispatcher.close()
    assert dispatcher.counters["sent"] == 3 and not [e for e, _ in log.lines if e == "alert_hook_failed"]


def test_a_stale_stream_is_labelled_with_its_stream_and_resolved_by_the_same_labels() -> None:
    at = now()
    stale = alert_of(json.loads(event_json(EventRecord(at, "statistics_stale", "warning", "no rows", None, {"stream": "clicks"}))))
    fresh = alert_of(json.loads(event_json(EventRecord(at, "statistics_fresh", "info", "rows again", None, {"stream": "clicks"}))))
    assert stale["labels"] == fresh["labels"] == {"alertname": "armd_statistics_stale", "source": "armd", "severity": "warning",
                                                  "stream": "clicks"}
    assert "startsAt" not in fresh and fresh["endsAt"] == at.isoformat()


def test_an_alertmanager_that_refuses_is_a_delivery_error_naming_the_answer(alertmanager: Alertmanager) -> None:  # noqa: F811
    hook = AlertmanagerHook(alertmanager.url + "/nowhere", retries=1, sleep=lambda _s: None)
    with pytest.raises(DeliveryError, match=r"alertmanager http://127\.0\.0\.1:\d+/… answered HTTP 404.*gave up after 2 attempts"):
        hook.deliver(event_json(EventRecord(now(), "query_failed", "error", "x", None, {})))
