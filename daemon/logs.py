"""Structured logs: JSON lines for machines, a readable console for people.

Every log line is an event with a stable name and bound fields (``query``,
``policy``, ``migration``); tests assert on those, operators grep them. A
redaction step runs last, so a secret from the configuration never reaches a
log line, whichever field carries it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable, TextIO

import structlog


def configure(redact: Callable[[str], str], stream: TextIO | None = None, json_lines: bool | None = None) -> None:
    """Log to ``stream`` (stderr by default): JSON lines unless it is a TTY."""
    stream = stream or sys.stderr
    if json_lines is None:
        json_lines = not stream.isatty()

    def scrub(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
        return {key: _scrub(value, redact) for key, value in event.items()}

    renderer = structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            scrub,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        # One write per line (message and newline together): print() writes them apart, and a library's warning
        # written by the standard logging module in between ran two lines together.
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def _scrub(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v, redact) for v in value]
    return value


def logger(**bound: Any) -> Any:
    return structlog.get_logger("armd").bind(**bound)
