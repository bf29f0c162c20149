"""The systemd notify protocol, with the standard library only.

Under ``Type=notify`` systemd waits for ``READY=1`` before it counts armd as
started, restarts it when ``WATCHDOG=1`` stops arriving within
``WatchdogSec``, and shows ``STOPPING=1`` while it shuts down. ``STATUS=``
is the line ``systemctl status`` shows (armd sends one after every cycle);
``EXTEND_TIMEOUT_USEC=`` pushes the start timeout out while something slow
but alive runs (a JVM and a SparkContext starting). Messages are
datagrams to the socket named by ``$NOTIFY_SOCKET`` (a path, or ``@name``
for the abstract namespace). Without that variable — run by hand, in a
container — every call does nothing. A lost datagram must not hurt the
daemon, so send errors are swallowed and reported to the caller as False.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Mapping


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        address = environ.get("NOTIFY_SOCKET", "")
        self.address: str | None = "\0" + address[1:] if address.startswith("@") else (address or None)
        self.watchdog_seconds: float | None = None
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_seconds = int(usec) / 1e6 / 2  # ping at half the timeout, as sd_watchdog_enabled(3) advises

        self._lock = threading.Lock()
        self._stopping = False
        """After ``STOPPING=1`` no ``STATUS=`` follows (a cycle that ends during the stop would overwrite it)."""

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        """Send ``KEY=VALUE`` fields as one datagram; False when there is no socket or sending failed."""
        if self.address is None:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto("\n".join(fields).encode(), self.address)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def stopping(self) -> bool:
        with self._lock:
            self._stopping = True
            return self.send("STOPPING=1")

    def status(self, text: str) -> bool:
        with self._lock:
            return False if self._stopping else self.send(f"STATUS={text}")

    @contextmanager
    def extending(self, what: str, seconds: float = 60.0, every: float = 20.0, up_to: float = 600.0) -> Iterator[None]:
        """While the block runs, keep systemd's start timeout ``seconds`` ahead (every ``every`` s, for ``up_to`` s at
        most, so a start that hangs still times out) and show ``STATUS=what``."""
        if not self.enabled:
            yield
            return
        done = threading.Event()

        def extend() -> None:
            deadline = time.monotonic() + up_to
            while time.monotonic() < deadline:
                self.send(f"EXTEND_TIMEOUT_USEC={int(seconds * 1e6)}", f"STATUS={what}")
                if done.wait(every):
                    return

        thread = threading.Thread(target=extend, name="armd-notify-extend", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
