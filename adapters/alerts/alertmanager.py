"""Alerts to a Prometheus Alertmanager, through its API v2 (``POST /api/v2/alerts``).

Alertmanager groups, silences and routes alerts a team already manages, so
armd's events become Alertmanager alerts there instead of one more receiver
to wire. Alertmanager identifies an alert by its label set: each armd event
kind is an ``alertname`` (``armd_bound_exceeded``), with ``severity``,
``query`` and ``stream`` labels where the event has them; the message and
details go into annotations. Conditions that last until armd says they are
over (``bound_exceeded`` until ``bound_restored``, ``statistics_stale``
until ``statistics_fresh``) are sent without an end a few minutes away and
resolved by the event that ends them (the same labels, ``endsAt`` = now);
a one-off event (a failed migration) ends ``ONE_OFF_SECONDS`` after it
began, so the alert does not linger.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from typing import Any, Callable

from .hooks import BACKOFF_SECONDS, DeliveryError, _retrying, _shown_url

RESOLVES: dict[str, tuple[str, str]] = {
    "bound_restored": ("bound_exceeded", "warning"),
    "statistics_fresh": ("statistics_stale", "warning"),
}
"""An info event that ends a condition → (the kind it ends, that kind's severity): the labels must be the firing ones."""

LASTING_SECONDS = 7 * 86400.0
"""``endsAt`` of a lasting condition: far enough for its resolution to come first, near enough that an armd that
died does not leave it firing for ever (the ``absent(armd_build_info)`` rule covers that case)."""
ONE_OFF_SECONDS = 3600.0
"""``endsAt`` of an event that has no end of its own, after its start."""


def alert_of(event: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """The Alertmanager v2 ``postableAlert`` for one armd event body (``dispatch.event_json``)."""
    kind, severity = event["kind"], event["severity"]
    started = datetime.fromisoformat(event["at"])
    resolved = RESOLVES.get(kind)
    if resolved is not None:
        kind, severity = resolved
    labels = {"alertname": f"armd_{kind}", "source": "armd", "severity": severity}
    if event.get("query"):
        labels["query"] = str(event["query"])
    stream = (event.get("details") or {}).get("stream")
    if isinstance(stream, str):
        labels["stream"] = stream
    annotations = {"summary": event["message"], "kind": event["kind"],
                   "details": json.dumps(event.get("details") or {}, sort_keys=True, default=str)}
    if event.get("suppressed"):
        annotations["suppressed"] = str(event["suppressed"])
    alert: dict[str, Any] = {"labels": labels, "annotations": annotations}
    if resolved is not None:
        alert["endsAt"] = started.isoformat()  # resolves the firing alert with these labels
    else:
        alert["startsAt"] = started.isoformat()
        lasting = kind in {k for k, _ in RESOLVES.values()}
        alert["endsAt"] = (started + timedelta(seconds=LASTING_SECONDS if lasting else ONE_OFF_SECONDS)).isoformat()
    return alert


class AlertmanagerHook:
    """POSTs each event as one alert to ``URL/api/v2/alerts``; a non-2xx answer, a timeout or a refused connection is retried."""

    resolves = True
    """The dispatcher also hands this hook the events that end a condition (``RESOLVES``)."""

    def __init__(self, url: str, timeout: float = 5.0, retries: int = 3, backoff: float = BACKOFF_SECONDS,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.endpoint = url.rstrip("/") + "/api/v2/alerts"
        self.timeout, self.retries, self.backoff, self._sleep = timeout, retries, backoff, sleep
        self.name = f"alertmanager {_shown_url(url)}"

    def deliver(self, body: bytes) -> None:
        payload = json.dumps([alert_of(json.loads(body))]).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "armd"}

        def once() -> None:
            request = urllib.request.Request(self.endpoint, data=payload, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read()
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:200].decode(errors="replace").strip()
                raise DeliveryError(f"{self.name} answered HTTP {exc.code}{': ' + detail if detail else ''}") from None
            except (urllib.error.URLError, OSError) as exc:
                raise DeliveryError(f"{self.name} failed: {getattr(exc, 'reason', exc)}") from None

        _retrying(self.retries + 1, self.backoff, self._sleep, once)
