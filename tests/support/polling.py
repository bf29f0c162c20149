"""``wait``: poll a condition until it holds, or fail naming what was waited for."""

from __future__ import annotations

import time
from typing import Callable


def wait(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
