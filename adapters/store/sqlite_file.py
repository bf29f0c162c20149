"""Where a SQLite store lives on disk, and noticing when that file goes away.

Two things go wrong with a SQLite file that never go wrong with a server:

* A relative path in ``sqlite:///armd.db`` is relative to whatever folder a
  command happens to run in, so ``armd status --config /etc/armd/armd.toml``
  from a home directory would open (and create) a different, empty store.
  ``anchored_url`` makes such a path relative to the configuration's folder,
  as ``plan.file`` already is.
* SQLite keeps writing into a file that was deleted or replaced under it (the
  open descriptor points to the old inode), so every later record would be
  lost without an error. ``FileIdentity`` remembers which file was opened and
  says when the name no longer points to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


def sqlite_path(url: str) -> Path | None:
    """The file a ``sqlite:`` URL names, or None (another database, in-memory, a ``file:`` URI, an unparsable URL)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    uri = str(parsed.query.get("uri", "")).lower() in ("true", "1")
    if not database or database == ":memory:" or database.startswith("file:") or uri:
        return None
    return Path(database)


def anchored_url(url: str, base: Path) -> str:
    """``url`` with a relative SQLite path made absolute under ``base`` (the configuration's folder); others unchanged."""
    path = sqlite_path(url)
    if path is None or path.is_absolute():
        return url
    absolute = (base / path).resolve() if base.is_absolute() else (Path.cwd() / base / path).resolve()
    return make_url(url).set(database=str(absolute)).render_as_string(hide_password=False)


@dataclass(frozen=True)
class FileIdentity:
    """The device and inode a path pointed to when the store was opened."""

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(path, st.st_dev, st.st_ino)

    def changed(self) -> str | None:
        """Why the path no longer names the opened file ("deleted", "replaced by another file"), or None."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "deleted"
        except OSError as exc:
            return f"unreadable ({exc.strerror or exc})"
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return "replaced by another file"
        return None
