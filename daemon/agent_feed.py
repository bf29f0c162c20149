"""The agent feed: reads what ``armd.agent`` applications report on a thread of its own, for the cycle to take.

Why: the scheduler runs the daemon's steps one at a time on one worker
thread, so a report read inside the control cycle waited for whatever step
was in progress — a decision over a thousand queries writing its records,
the reconciler — before the daemon had it. The feed reads the store every
``READ_SECONDS`` (``AgentStats.read``) whatever the cycle does; each cycle
takes what was read since its last look (``AgentStats.observe``), so the
cycle's pace and its pure code are unchanged. The lag of each row (from the
application's report to the feed having read it) goes to the
``armd_agent_observation_lag_seconds`` histogram.

A failed read is logged (once per outage, ``agent_feed_failed``) and tried
again at the next interval; the rows stay in the store and are read then.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable

from armd.adapters.store.agent_stats import AgentStats

READ_SECONDS = 0.25
"""How often the feed reads: a report waits at most this long for the read (a read costs little when nothing is new)."""


class AgentFeed:
    def __init__(self, stats: AgentStats, metrics: Any, log: Any, clock: Callable[[], datetime], *,
                 every: float = READ_SECONDS, active: Callable[[], bool] = lambda: True,
                 redact: Callable[[str], str] = str) -> None:
        self.stats, self.metrics, self.log, self.clock, self.every, self.active = stats, metrics, log, clock, every, active
        self.redact = redact
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False
        self.reads = 0

    def start(self) -> "AgentFeed":
        self.stats.fed = True
        self._thread = threading.Thread(target=self._run, name="armd-agent-feed", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        next_read = time.monotonic()
        while not self._stop.wait(max(0.0, next_read - time.monotonic())):
            next_read = max(next_read + self.every, time.monotonic())  # a slow read is not caught up with a burst of reads
            if self.active():
                self.read()

    def read(self) -> None:
        try:
            lags = self.stats.read(self.clock())
        except Exception as exc:  # noqa: BLE001 - the store is away: the rows stay there and are read next time
            if not self._failing:
                self.log.warning("agent_feed_failed", error=self.redact(f"{type(exc).__name__}: {exc}"))
            self._failing = True
            return
        if self._failing:
            self.log.info("agent_feed_recovered")
        self._failing = False
        self.reads += 1
        self.metrics.agent_lags(lags)
