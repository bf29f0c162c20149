"""Which ``StoreError`` a database failure is: wait for the store, or set the record aside.

Why a module of its own: the daemon's outbox decides from the error's class
alone whether a record waits (``StoreUnavailable``: nothing is lost, it is
written in order once the store answers) or is set aside
(``RecordRejected``: the database will never take it, so keeping it at the
head of the backlog would block every later record). Getting that split
wrong either loses records or wedges the loop, so the rules sit in one place,
for both databases, with the reason for each:

* connection lost, refused or reset; a lock or busy timeout; a statement
  timeout; the server shutting down; a disk that is full → unavailable;
* a table or column that is missing (renamed for a while, restored from a
  backup, a schema never upgraded) → ``TableMissing``, which is unavailable
  for the daemon and an upgrade hint for a read command;
* a value out of the column's range, a broken constraint, a value the
  driver cannot encode → rejected.

Anything else (a bug in armd) is returned as ``None`` and raised unchanged.
"""

from __future__ import annotations

from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    StatementError,
)

from armd.adapters.store.errors import RecordRejected, StoreError, StoreUnavailable, TableMissing

UPGRADE_HINT = "run `armd db upgrade --config FILE`"

_MISSING_SQLSTATES = ("42P01", "42703")  # undefined table, undefined column
_MISSING_SQLITE = ("no such table", "no such column", "has no column named")
_CONNECTION_SQLSTATE_CLASSES = ("08",)  # connection exception
_WAIT_SQLSTATES = ("57014", "55P03", "55006", "57P01", "57P02", "57P03", "40001", "40P01")
"""Statement timeout (query canceled), lock not available, object in use, server shutting down, serialization
failure, deadlock: the server is fine, this call only lost a race or ran out of its time."""
_WAIT_SQLSTATE_CLASSES = ("53",)  # insufficient resources (disk full, out of memory, too many connections)
_REJECT_SQLSTATE_CLASSES = ("22", "23")  # data exception, integrity constraint violation


def one_line(exc: BaseException) -> str:
    """The driver's reason without SQLAlchemy's SQL echo and background link, on one line."""
    orig = getattr(exc, "orig", None)
    reason = str(orig if orig is not None else exc).strip()
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith(("[SQL:", "[parameters:", "(Background on this error"))]
    return "; ".join(kept) or type(exc).__name__


def classify(exc: BaseException, where: str) -> tuple[StoreError | None, bool]:
    """The error to raise for ``exc`` (``None``: not a database failure, re-raise it) and whether a brief retry may help.

    ``where`` names the store in messages (``metadata store at URL``, the password hidden).
    Only a lost connection is worth retrying at once: a timeout has already used the call's time.
    """
    reason = one_line(exc)
    if isinstance(exc, DBAPIError):
        orig = getattr(exc, "orig", None)
        sqlstate = getattr(orig, "sqlstate", None) or ""
        text = str(orig).lower()
        if sqlstate in _MISSING_SQLSTATES or any(hint in text for hint in _MISSING_SQLITE):
            return TableMissing(f"{where} is missing a table or column ({reason}); records wait until it is back — "
                                f"if the schema was never upgraded, {UPGRADE_HINT}"), False
        if exc.connection_invalidated or isinstance(exc, InterfaceError) or sqlstate[:2] in _CONNECTION_SQLSTATE_CLASSES:
            return StoreUnavailable(f"{where} is unavailable: {reason}"), True
        if sqlstate in _WAIT_SQLSTATES or sqlstate[:2] in _WAIT_SQLSTATE_CLASSES:
            return StoreUnavailable(f"{where} is unavailable: {reason}"), False
        if isinstance(exc, (IntegrityError, DataError)) or sqlstate[:2] in _REJECT_SQLSTATE_CLASSES:
            return RecordRejected(f"{where} rejected the record: {reason}"), False
        if isinstance(exc, (OperationalError, InternalError)):
            # SQLite says "database is locked", "disk I/O error", "unable to open database file" this way: all may pass.
            return StoreUnavailable(f"{where} is unavailable: {reason}"), not sqlstate and "locked" not in text and "busy" not in text
        if isinstance(exc, (ProgrammingError, NotSupportedError)):
            return RecordRejected(f"{where} rejected the record: {reason}"), False
        return StoreUnavailable(f"{where} is unavailable: {reason}"), False
    if isinstance(exc, (StatementError, OverflowError, UnicodeError, ValueError, TypeError)):
        # Raised while the driver encodes a parameter (an int over 2^63 for SQLite, a value it has no type for).
        return RecordRejected(f"{where} rejected the record: {type(exc).__name__}: {reason}"), False
    return None, False
