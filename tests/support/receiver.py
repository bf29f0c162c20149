"""A real HTTP server on 127.0.0.1 that records what webhooks POST to it (and can answer errors or hang)."""

from __future__ import annotations
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
import pytest


class Receiver:
    """A real HTTP server on 127.0.0.1 that records every request it gets."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body, "at": time.monotonic()})
                if self.path == "/hang":
                    receiver.release.wait(30)
                    return
                self.send_response(200 if self.path == "/ok" else 500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()
