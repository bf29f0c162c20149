"""Errors of the metadata store, split by what the caller should do.

The daemon's outbox decides from the class alone whether a record waits or
is set aside, so the adapter classifies every driver failure here:

* ``StoreUnavailable`` is temporary (a ``control.errors.TemporaryError``):
  the database cannot be reached, a lock is held past the call timeout, a
  table is missing for a while (renamed, restored from a backup). Records
  wait, in order, and are written when the store answers again.
* ``RecordRejected`` is permanent (a ``control.errors.PermanentError``): the
  database answered and will never accept this record (a number out of the
  column's range, a constraint it breaks, a value the driver cannot encode).
  Retrying cannot help, so the record is set aside and the others go on.
* ``StoreLost`` is a ``StoreUnavailable`` that will not pass by itself:
  the SQLite file was deleted or replaced under the running daemon. The
  store stops writing (SQLite would go on writing into the deleted inode,
  and every record would be lost silently); records wait in the outbox.
* ``SchemaOutdated`` is permanent until a person runs the upgrade the
  message names. ``TableMissing`` is both: the daemon waits for the table to
  come back, a read command tells the person to upgrade.

All are ``StoreError``s, so a caller that only wants "the store failed"
catches one class.
"""

from __future__ import annotations

from armd.control.errors import Lost, PermanentError, TemporaryError


class StoreError(Exception):
    """Something about the metadata store is wrong; the message says what to do."""


class StoreUnavailable(StoreError, TemporaryError):
    """The database cannot be used right now (connection refused or dropped, a lock or statement timeout); retry later."""


class StoreLost(StoreUnavailable, Lost):
    """The SQLite file the store was opened on was deleted or replaced: nothing more is written into it (or into
    whatever now has its name); records wait until armd is restarted on a restored file."""


class RecordRejected(StoreError, PermanentError):
    """The database will never accept this record (out of range, breaks a constraint, cannot be encoded)."""


class SchemaOutdated(StoreError):
    """The database's schema revision is not the one this armd needs."""


class TableMissing(SchemaOutdated, StoreUnavailable):
    """A table armd writes is missing: it may come back (renamed for a while), or the schema was never upgraded."""
