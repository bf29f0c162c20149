"""armd's admission verdict, heard inside the application: a query rejected for lack of room does not start.

Why: the daemon admits a new query only when the bounds hold with every
admitted query at its QoS minimum, and writes the verdict to the query's
row (``queries.status``: ``pending`` until then, ``active`` or
``rejected`` with the reason). The application reads it each round and
acts as the user chose per query (``agent.start(..., on_reject=...)``):

* ``"start"`` (the default): the query starts at once, as if there were no
  admission control; a rejection is only logged (once);
* ``"wait"``: the query starts when it is admitted; a rejected one waits,
  with one log line, and starts when the daemon re-admits it (room freed);
* ``"minimum"``: the query waits for the verdict; admitted it starts with
  its settings, rejected it starts at its QoS minimum (smallest windows,
  coarsest slides), with one log line.

A query that waits is asked about every round (it starts as soon as it
may); one already running (``"start"``) only every ``WATCH_EVERY`` rounds
(the first at once): its verdict changes nothing but a log line, and an
application nobody answers (no daemon yet) must not pay a read a round for
it forever.

The gate knows nothing of Spark: ``launch(name, minimum)`` starts the
query, so simulated applications use it as the agent does.
"""

from __future__ import annotations

from typing import Any, Callable

from armd.adapters.store import applications as apps

ON_REJECT = ("start", "wait", "minimum")
WATCH_EVERY = 10
"""Rounds between two reads of the verdicts while only running (``on_reject="start"``) queries wait for theirs."""


def check_on_reject(value: str, what: str) -> str:
    if value not in ON_REJECT:
        from .settings import AgentError

        raise AgentError(f"{what}: on_reject={value!r}; allowed: {', '.join(repr(v) for v in ON_REJECT)}")
    return value


class AdmissionGate:
    def __init__(self, store: Any, app: str, log: Any, launch: Callable[[str, bool], None]) -> None:
        self.store, self.app, self.log, self.launch = store, app, log, launch
        self.held: dict[str, str] = {}
        """Query → its ``on_reject``, for queries registered and not started yet."""
        self.watched: set[str] = set()
        """Started with ``on_reject="start"``: a rejection is only said."""
        self._said: dict[str, str] = {}
        self._skip = 0
        """Rounds still to pass before the next read while only watched queries wait."""

    def hold(self, query: str, on_reject: str) -> None:
        """``query`` is registered (``pending``): start it now or when the verdict allows (see the module)."""
        if on_reject == "start":
            self.watched.add(query)
            self._skip = 0  # its verdict is read at the next round
            self.launch(query, False)
            return
        self.held[query] = on_reject
        self.log.info("query_waiting_for_admission", app=self.app, query=query, on_reject=on_reject)

    def round(self) -> None:
        """Read the verdicts of this application's queries; start those it allows."""
        if not self.held and not self.watched:
            return
        if not self.held and self._skip > 0:
            self._skip -= 1
            return
        self._skip = WATCH_EVERY - 1
        rows = apps.queries_of(self.store, self.app)
        for query, on_reject in list(self.held.items()):
            status, reason = (rows.get(query) or {}).get("status"), (rows.get(query) or {}).get("status_reason")
            if status == "active":
                del self.held[query]
                if self._said.get(query) == "rejected":
                    self.log.info("query_readmitted", app=self.app, query=query,
                                  message=f"armd re-admitted query {query!r}; it starts now")
                self._said[query] = "active"
                self.launch(query, False)
            elif status == "rejected" and self._said.get(query) != "rejected":
                self._said[query] = "rejected"
                if on_reject == "minimum":
                    del self.held[query]
                    self._reject(query, reason, "it starts at its QoS minimum (on_reject='minimum')")
                    self.launch(query, True)
                else:
                    self._reject(query, reason, "it does not start until armd re-admits it (on_reject='wait')")
        for query in list(self.watched):
            status = (rows.get(query) or {}).get("status")
            if status == "rejected":
                self._reject(query, (rows.get(query) or {}).get("status_reason"),
                             "it runs anyway (on_reject='start'); armd decides nothing for it")
            if status in ("active", "rejected"):  # the verdict is in: nothing more to hear
                self.watched.discard(query)
                self._said[query] = status

    def _reject(self, query: str, reason: str | None, then: str) -> None:
        self.log.warning("query_rejected", app=self.app, query=query,
                         message=f"armd's admission control rejected query {query!r} ({reason or 'no reason given'}); {then}")
