"""``AlertDispatcher``: deduplicates alerts and delivers them on a background thread.

The controller calls ``alert()`` from inside a step; it must return at once
whatever the receivers do. So ``alert()`` only decides whether the event is
new enough to send (the same kind and query within ``dedup_seconds`` of the
last one sent is suppressed and counted; the next one sent carries the count)
and puts it on a bounded queue — a full queue drops the event and counts it.
One worker thread takes events off the queue and hands each to every hook in
turn; a hook that fails is logged and counted and the others still get it.
An info event that ends a condition (``bound_restored`` ends
``bound_exceeded``; ``alertmanager.RESOLVES``) goes only to hooks that can
resolve an alert (Alertmanager), and lets the next beginning of that
condition through the deduplication at once.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from typing import Any, Callable, Sequence

from armd.control.ports import EventRecord

from .alertmanager import RESOLVES
from .hooks import DeliveryError, Hook

_STOP = object()


def event_json(event: EventRecord, suppressed: int = 0) -> bytes:
    """The body every hook receives: the event as one JSON object."""
    return json.dumps(
        {
            "source": "armd",
            "at": event.at.isoformat(),
            "kind": event.kind,
            "severity": event.severity,
            "query": event.query,
            "message": event.message,
            "details": dict(event.details),
            "suppressed": suppressed,
        },
        default=str,
    ).encode()


class AlertDispatcher:
    """The daemon's ``AlertSink``: dedup, bounded queue, one delivery thread."""

    def __init__(
        self,
        hooks: Sequence[Hook],
        log: Any,
        *,
        dedup_seconds: float = 300.0,
        queue_size: int = 1000,
        metrics: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hooks, self.log, self.dedup_seconds, self.metrics, self.clock = list(hooks), log, dedup_seconds, metrics, clock
        self.counters: Counter[str] = Counter()
        self._last_sent: dict[tuple[str, str | None], float] = {}
        self._suppressed: Counter[tuple[str, str | None]] = Counter()
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue(queue_size)
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        self._worker = threading.Thread(target=self._work, name="armd-alerts", daemon=True)
        self._worker.start()

    def configure(self, hooks: Sequence[Hook], dedup_seconds: float) -> None:
        """New hooks and window after a reload; events already queued go to the new hooks."""
        with self._lock:
            self.hooks, self.dedup_seconds = list(hooks), dedup_seconds

    def alert(self, event: EventRecord) -> None:
        key = (event.kind, event.query)
        now = self.clock()
        with self._lock:
            if event.kind in RESOLVES:  # a condition ended: its next beginning is news again, and this is never held back
                self._last_sent.pop((RESOLVES[event.kind][0], event.query), None)
                self._suppressed.pop((RESOLVES[event.kind][0], event.query), None)
                if not any(getattr(hook, "resolves", False) for hook in self.hooks):
                    return
            last = None if event.kind in RESOLVES else self._last_sent.get(key)
            if last is not None and now - last < self.dedup_seconds:
                self._suppressed[key] += 1
                self._count("suppressed", event.kind)
                return
            self._last_sent[key] = now
            suppressed = self._suppressed.pop(key, 0)
        try:
            self._queue.put_nowait(event_json(event, suppressed))
        except queue.Full:
            self._count("dropped", event.kind)
            self.log.error("alert_dropped", kind=event.kind, query=event.query, reason="alert queue full",
                           queue_size=self._queue.maxsize)
            return
        with self._lock:
            self._busy += 1
        self._count("queued", event.kind)

    def _count(self, outcome: str, kind: str) -> None:
        self.counters[outcome] += 1
        if self.metrics is not None:
            self.metrics.alert(kind, outcome)

    def _work(self) -> None:
        while True:
            body = self._queue.get()
            if body is _STOP:
                return
            kind = json.loads(body)["kind"]
            with self._lock:
                hooks = [h for h in self.hooks if kind not in RESOLVES or getattr(h, "resolves", False)]
            for hook in hooks:
                try:
                    hook.deliver(body)
                except Exception as exc:  # noqa: BLE001 - a broken hook must not end the delivery thread
                    error = str(exc) if isinstance(exc, DeliveryError) else f"{type(exc).__name__}: {exc}"
                    self._count("failed", kind)
                    self.log.error("alert_hook_failed", hook=hook.name, kind=kind, error=error)
                else:
                    self._count("sent", kind)
            with self._lock:
                self._busy -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued alert was handed to the hooks; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued for up to ``timeout`` seconds, then stop the thread (it is a daemon thread: a hook still hanging does not keep the process alive)."""
        if not self.wait_idle(timeout):
            self.log.warning("alerts_undelivered", pending=self._busy, reason=f"hooks still busy after {timeout:g} s at stop")
        try:
            self._queue.put_nowait(_STOP)
        except queue.Full:
            return
        self._worker.join(0.5)
