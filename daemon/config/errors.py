"""The one-line ``ConfigError`` and the few words every message is made of.

Every mistake in a configuration file is reported the same way: the file, the
key path (``managed.q.sink.url``, ``alerts[1].argv``), what is wrong and what
is allowed, on one line. The helpers here spell key paths, values and lists
of names so that every message, wherever it is raised, reads alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

Key = tuple[str | int, ...]
"""A key path: table names and keys, and the index of an item in an array of tables."""


class ConfigError(Exception):
    """An invalid configuration: ``"{file}: {key.path}: {what is wrong}; {what is allowed}"`` on one line."""

    def __init__(self, file: str | Path, key: Key | str | None, message: str) -> None:
        self.file = str(file)
        self.key = key_path(key) if isinstance(key, tuple) else key
        self.message = message
        super().__init__(f"{self.file}: {self.key}: {message}" if self.key else f"{self.file}: {message}")


def key_path(key: Key) -> str:
    """``("spark", "conf", "spark.jars")`` → ``spark.conf."spark.jars"``; indexes as ``[i]``."""
    text = ""
    for part in key:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part)
            text += f".{name}" if text else name
    return text


def listing(names: Iterable[str], limit: int = 12) -> str:
    """Names separated by commas, the first ``limit`` of them; ``none`` for no names."""
    names = list(names)
    shown = ", ".join(map(str, names[:limit]))
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "") if names else "none"


def show(value: Any) -> str:
    """A value as the user wrote it, cut to 60 characters; a table is ``a table``."""
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def is_number(value: Any) -> bool:
    """An int or float, and not a bool (TOML's ``true`` is no number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def reason(exc: Exception) -> str:
    """Why a file could not be read, in the operating system's words when it has some."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
