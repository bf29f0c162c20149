"""Errors of the metadata store, split by what the caller should do.

``StoreUnavailable`` is temporary (a ``control.errors.TemporaryError``): the
database cannot be reached right now, so the daemon buffers what it wanted
to record and tries again later.
``SchemaOutdated`` is permanent until a person runs the upgrade the message
names. Both are ``StoreError``s, so a caller that only wants "the store
failed" catches one class.
"""

from __future__ import annotations

from armd.control.errors import TemporaryError


class StoreError(Exception):
    """Something about the metadata store is wrong; the message says what to do."""


class StoreUnavailable(StoreError, TemporaryError):
    """The database cannot be reached (connection refused, dropped, timed out); retry later."""


class SchemaOutdated(StoreError):
    """The database's schema revision is not the one this armd needs."""
