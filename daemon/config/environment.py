"""``${NAME}`` in string values, replaced from the environment before anything is checked.

Secrets usually reach the file this way, so every substitution is recorded
under its key path: a value the environment put into a secret key is itself
a secret (``redaction``), even when it is only part of the string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError, Key

_REFERENCE = re.compile(r"\$\$\{|\$\{(?P<name>[^}]*)(?P<close>\}?)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(
    value: Any, key: Key, environ: Mapping[str, str], file: Path, substituted: dict[Key, list[str]]
) -> Any:
    """``value`` with ``${NAME}`` replaced from ``environ`` in every string; ``$${`` is a literal ``${``.

    Each value put in is appended to ``substituted[key]``.
    """
    if isinstance(value, dict):
        return {k: interpolate(v, (*key, k), environ, file, substituted) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, (*key, i), environ, file, substituted) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match[0] == "$${":
            return "${"
        name = match["name"]
        if not match["close"] or not _NAME.fullmatch(name):
            raise ConfigError(
                file, key, "malformed ${…} reference; write ${NAME} (letters, digits, _) or $${ for a literal ${"
            )
        if name not in environ:
            raise ConfigError(
                file, key, f"environment variable {name} is not set; set it, or write $${{ for a literal ${{"
            )
        substituted.setdefault(key, []).append(environ[name])
        return environ[name]

    return _REFERENCE.sub(replace, value)
