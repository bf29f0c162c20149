"""A real Prometheus Alertmanager on 127.0.0.1 for the tests (Debian's ``prometheus-alertmanager``).

Without the binary the tests skip with the reason, or fail when
``ARMD_REQUIRE_ALERTMANAGER=1`` (CI installs it: ``.ci/run``), as the
PostgreSQL tests do with ``ARMD_REQUIRE_POSTGRES``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

REQUIRE_ENV = "ARMD_REQUIRE_ALERTMANAGER"
BINARIES = ("prometheus-alertmanager", "alertmanager")

CONFIG = """
route:
  receiver: nobody
  group_wait: 1h
receivers:
  - name: nobody
"""


def binary() -> str | None:
    return next((path for path in map(shutil.which, BINARIES) if path), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Alertmanager:
    def __init__(self, url: str) -> None:
        self.url = url

    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        query = "&".join(f"{k}={v}" for k, v in filters.items())
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts{'?' + query if query else ''}", timeout=5) as response:
            return json.loads(response.read())


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[Alertmanager]:
    path = binary()
    if path is None:
        reason = f"no Alertmanager binary ({' or '.join(BINARIES)}); apt-get install prometheus-alertmanager"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1)")
        pytest.skip(reason)
    (tmp_path / "alertmanager.yml").write_text(CONFIG)
    port = _free_port()
    process = subprocess.Popen(
        [path, f"--config.file={tmp_path / 'alertmanager.yml'}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"alertmanager did not start: {process.stderr.read().decode() if process.stderr else ''}")
                time.sleep(0.1)
        yield Alertmanager(url)
    finally:
        process.terminate()
        process.wait(10)
