"""Errors at the control layer's ports, classified by whether trying again can help.

A port (the store, an applier, a statistics source) raises one of these so
the control loop never has to guess from a message:

* ``TemporaryError`` — the same call may succeed later (a database that is
  restarting, a lock held by someone else); ``retry_after`` is the port's
  hint in seconds, the caller backs off at least that long.
* ``NotReady`` — a temporary error that is expected, not a fault: the thing
  asked for needs a precondition that time alone brings (a GenMig that waits
  for the old run's first batch to know where the new run starts). Retried
  quietly, never alerted.
* ``Lost`` — a temporary error that time alone will not cure: the
  storage a port wrote to vanished (the SQLite file was deleted or
  replaced). Records wait as for any outage, but it is reported at once.
* ``PermanentError`` — trying again will fail the same way until a person
  changes something (a source whose offsets are not event time, a query
  whose builder raises); the query is marked ``failed`` and alerted, the
  other queries go on.

Anything else an adapter raises is treated as temporary with the default
backoff: armd would rather retry a bug a bounded number of times than give up
on the first surprise.
"""

from __future__ import annotations


class TemporaryError(Exception):
    """The call may succeed later; ``retry_after`` seconds is the earliest worth trying."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = max(0.0, float(retry_after))


class NotReady(TemporaryError):
    """A precondition that time brings is not met yet (e.g. a run has not completed a batch); retry quietly."""


class Lost(TemporaryError):
    """What a port writes to is gone from under it (a store's file deleted or replaced): nothing is written, records
    wait, and it is reported at once — it will not heal by itself, a person has to restore it or restart."""


class PermanentError(Exception):
    """Retrying cannot help until a person changes something; the message says what."""
