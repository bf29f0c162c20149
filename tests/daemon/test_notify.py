"""The systemd notify protocol against a real datagram socket (the daemon's side is in test_ops_daemon.py)."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from armd.daemon.notify import Notifier


def receive(sock: socket.socket) -> str:
    sock.settimeout(5)
    return sock.recv(4096).decode()


def test_messages_arrive_on_a_path_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        notifier = Notifier({"NOTIFY_SOCKET": path})
        assert notifier.ready("running 3 queries") and notifier.watchdog() and notifier.stopping()
        assert [receive(sock) for _ in range(3)] == ["READY=1\nSTATUS=running 3 queries", "WATCHDOG=1", "STOPPING=1"]


def test_an_abstract_socket_is_named_with_an_at_sign() -> None:
    name = f"armd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert receive(sock) == "READY=1"


def test_without_notify_socket_nothing_is_sent() -> None:
    notifier = Notifier({})
    assert not notifier.enabled and not notifier.ready() and not notifier.watchdog()


def test_a_vanished_socket_does_not_raise(tmp_path: Path) -> None:
    assert not Notifier({"NOTIFY_SOCKET": str(tmp_path / "gone")}).stopping()


def test_the_watchdog_is_fed_at_half_its_timeout_for_this_process_only() -> None:
    assert Notifier({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "10000000"}).watchdog_seconds == 5.0
    assert Notifier({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": str(os.getpid())}).watchdog_seconds == 0.2
    assert Notifier({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": str(os.getpid() + 1)}).watchdog_seconds is None
    assert Notifier({}).watchdog_seconds is None


def test_extending_pushes_the_start_timeout_while_the_block_runs_and_stops_after(tmp_path: Path) -> None:
    import time

    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        notifier = Notifier({"NOTIFY_SOCKET": path})
        with notifier.extending("starting Spark (local[2])", seconds=30, every=0.1):
            time.sleep(0.35)
        got = []
        sock.settimeout(0.3)
        try:
            while True:
                got.append(sock.recv(4096).decode())
        except socket.timeout:
            pass
    assert 3 <= len(got) <= 6 and set(got) == {"EXTEND_TIMEOUT_USEC=30000000\nSTATUS=starting Spark (local[2])"}


def test_extending_without_systemd_just_runs_the_block() -> None:
    ran = []
    with Notifier({}).extending("starting Spark"):
        ran.append(1)
    assert ran == [1]


def test_status_is_one_datagram(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        assert Notifier({"NOTIFY_SOCKET": path}).status("3 queries running, 12 observations, 1 decisions; last cycle 05:40:00 UTC")
        assert receive(sock) == "STATUS=3 queries running, 12 observations, 1 decisions; last cycle 05:40:00 UTC"


def test_no_status_follows_stopping(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        notifier = Notifier({"NOTIFY_SOCKET": path})
        assert notifier.stopping() and not notifier.status("a cycle that ended during the stop")
        assert receive(sock) == "STOPPING=1"
