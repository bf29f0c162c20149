"""A stop signal that reaches ``armd run`` while it is still loading is kept, not fatal.

Loading the daemon's command line (SQLAlchemy, SciPy, APScheduler, …) takes
seconds of CPU, more on a busy machine. Until the service installs its own
handlers, Python's defaults apply: SIGTERM kills the process (status 143,
which ``systemctl stop`` or a script waiting on the daemon reads as a
failure) and SIGINT raises ``KeyboardInterrupt`` in the middle of an import.
``catch`` is the entry point's first act for ``run``: it records the signal
instead, and ``Service`` asks ``pending`` when it installs its handlers, so
a daemon stopped before it started exits cleanly without starting anything.
Standard library only: this module is imported before anything else.
"""

from __future__ import annotations

import signal
from typing import Any

_received: list[int] = []


def _record(signum: int, _frame: Any) -> None:
    _received.append(signum)


def catch() -> None:
    """From now until the service's own handlers: SIGTERM and SIGINT are recorded, not acted on."""
    signal.signal(signal.SIGINT, _record)
    signal.signal(signal.SIGTERM, _record)


def pending() -> signal.Signals | None:
    """The first stop signal recorded since ``catch``, if any."""
    return signal.Signals(_received[0]) if _received else None
