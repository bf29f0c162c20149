"""The systemd notify protocol, with the standard library only.

Under ``Type=notify`` systemd waits for ``READY=1`` before it counts armd as
started, restarts it when ``WATCHDOG=1`` stops arriving within
``WatchdogSec``, and shows ``STOPPING=1`` while it shuts down. Messages are
datagrams to the socket named by ``$NOTIFY_SOCKET`` (a path, or ``@name``
for the abstract namespace). Without that variable — run by hand, in a
container — every call does nothing. A lost datagram must not hurt the
daemon, so send errors are swallowed and reported to the caller as False.
"""

from __future__ import annotations

import os
import socket
from typing import Mapping


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
        return self.send("STOPPING=1")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")
