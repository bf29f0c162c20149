"""The kinds of alert hooks: an HTTP webhook, a local command, the daemon's log (Alertmanager: ``alertmanager.py``).

Each hook delivers one event body (JSON bytes) or raises ``DeliveryError``
once its retries are spent; the dispatcher's thread calls them, so a hook may
block up to its timeout per attempt but never the control loop. Secrets (the
webhook's HMAC key) only go into the signature, never into a message.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence
from urllib.parse import urlsplit, urlunsplit

@dataclass(frozen=True)
class AlertHook:
    """One ``[[alerts]]`` entry of the configuration: where and how events are delivered."""

    kind: str
    """``webhook``, ``alertmanager``, ``command`` or ``log``."""
    url: str | None = None
    """Webhook: the http(s) URL events are POSTed to; Alertmanager: its base URL (``http://host:9093``)."""
    secret: str | None = None
    """Webhook: HMAC key for signing the body (optional)."""
    argv: tuple[str, ...] = ()
    """Command: program and arguments; the event is passed on standard input."""
    timeout_seconds: float = 5.0
    """Webhook and command: how long one delivery may take."""
    retries: int = 3
    """Webhook and command: further attempts after a failed delivery."""


SIGNATURE_HEADER = "X-Armd-Signature"
BACKOFF_SECONDS = 0.5
"""Wait before the first retry of a delivery; doubled for each further retry."""


class DeliveryError(Exception):
    """A hook gave up on an event after its retries."""


class Hook(Protocol):
    name: str
    """How the hook is named in logs: its kind and where it delivers (no secrets)."""

    def deliver(self, body: bytes) -> None: ...


def signature(secret: str, body: bytes) -> str:
    """The ``X-Armd-Signature`` value: ``sha256=`` and the hex HMAC-SHA256 of ``body`` keyed with ``secret``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _retrying(attempts: int, backoff: float, sleep: Callable[[float], None], once: Callable[[], None]) -> None:
    """Run ``once`` until it succeeds, at most ``attempts`` times, pausing ``backoff`` doubled each time."""
    for attempt in range(attempts):
        try:
            once()
            return
        except DeliveryError as exc:
            if attempt == attempts - 1:
                raise DeliveryError(f"{exc} (gave up after {attempts} attempt{'s' if attempts > 1 else ''})") from None
            sleep(backoff * 2**attempt)


def _shown_url(url: str) -> str:
    """Scheme, host and port only: user information, path and query of webhook URLs often carry tokens."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, "/…" if parts.path not in ("", "/") or parts.query else "", "", ""))


class WebhookHook:
    """POSTs the event as JSON; a non-2xx answer, a timeout or a refused connection is retried."""

    def __init__(self, url: str, secret: str | None = None, timeout: float = 5.0, retries: int = 3,
                 backoff: float = BACKOFF_SECONDS, sleep: Callable[[float], None] = time.sleep) -> None:
        self.url, self._secret, self.timeout, self.retries, self.backoff, self._sleep = url, secret, timeout, retries, backoff, sleep
        self.name = f"webhook {_shown_url(url)}"

    def deliver(self, body: bytes) -> None:
        headers = {"Content-Type": "application/json", "User-Agent": "armd"}
        if self._secret:
            headers[SIGNATURE_HEADER] = signature(self._secret, body)

        def once() -> None:
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    response.read()
            except urllib.error.HTTPError as exc:
                raise DeliveryError(f"{self.name} answered HTTP {exc.code}") from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise DeliveryError(f"{self.name} failed: {reason}") from None

        _retrying(self.retries + 1, self.backoff, self._sleep, once)


class CommandHook:
    """Runs ``argv`` without a shell, the event JSON on its standard input; non-zero exit or a timeout is retried.

    The command runs in its own process group, so a command that hangs is killed
    together with anything it started.
    """

    def __init__(self, argv: Sequence[str], timeout: float = 5.0, retries: int = 3,
                 backoff: float = BACKOFF_SECONDS, sleep: Callable[[float], None] = time.sleep) -> None:
        self.argv, self.timeout, self.retries, self.backoff, self._sleep = tuple(argv), timeout, retries, backoff, sleep
        self.name = f"command {self.argv[0]}"

    def deliver(self, body: bytes) -> None:
        _retrying(self.retries + 1, self.backoff, self._sleep, lambda: self._run(body))

    def _run(self, body: bytes) -> None:
        try:
            process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise DeliveryError(f"{self.name} could not start: {exc.strerror or exc}") from None
        try:
            _, stderr = process.communicate(body, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise DeliveryError(f"{self.name} timed out after {self.timeout:g} s and was killed") from None
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise DeliveryError(f"{self.name} exited with status {process.returncode}: {tail[0][:200]}")


class LogHook:
    """Writes the alert to the daemon's log as an ``alert`` event."""

    name = "log"

    def __init__(self, log: Any) -> None:
        self.log = log

    def deliver(self, body: bytes) -> None:
        event = json.loads(body)
        self.log.warning("alert", kind=event["kind"], severity=event["severity"], query=event["query"],
                         message=event["message"], suppressed=event["suppressed"])


def build_hooks(hooks: Sequence[AlertHook], log: Any) -> list[Hook]:
    """The hooks of ``[[alerts]]``; without any, alerts go to the log."""
    built: list[Hook] = []
    for hook in hooks:
        if hook.kind == "webhook":
            assert hook.url is not None
            built.append(WebhookHook(hook.url, hook.secret, hook.timeout_seconds, hook.retries))
        elif hook.kind == "alertmanager":
            from .alertmanager import AlertmanagerHook  # here: alertmanager.py builds on this module's helpers

            assert hook.url is not None
            built.append(AlertmanagerHook(hook.url, hook.timeout_seconds, hook.retries))
        elif hook.kind == "command":
            built.append(CommandHook(hook.argv, hook.timeout_seconds, hook.retries))
        else:
            built.append(LogHook(log))
    return built or [LogHook(log)]
