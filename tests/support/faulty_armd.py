"""``armd`` with faults injected into its statistics source, for the fault tests (run as ``python -m support.faulty_armd``).

A subprocess cannot be handed a store wrapper, so the faults that come from
the statistics side are injected where a buggy source would put them: the
synthetic source is wrapped, and ``ARMD_TEST_INJECT`` says what to spoil:

* ``poison=N``: the N-th observation counts 2**64 rows for its first stream
  (a counter gone wrong): a record no database column can hold;
* ``bad=N-M``: observations N to M report a NaN rate and a negative ``d``
  for the first stream and a selectivity of 5 for every query.

Everything else is ``armd`` itself (``armd.daemon.cli.main``).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import replace

from armd.control.ports import Observation, StreamStats
from armd.daemon import cli, service


def _faults() -> tuple[int | None, range]:
    poison, bad = None, range(0)
    for part in filter(None, os.environ.get("ARMD_TEST_INJECT", "").split(",")):
        key, _, value = part.partition("=")
        if key == "poison":
            poison = int(value)
        elif key == "bad":
            first, _, last = value.partition("-")
            bad = range(int(first), int(last) + 1)
    return poison, bad


class FaultySource:
    def __init__(self, source: object) -> None:
        self.source, self.calls = source, 0
        self.poison, self.bad = _faults()

    def observe(self, at):
        self.calls += 1
        observation: Observation = self.source.observe(at)
        first, *rest = observation.streams
        if self.calls == self.poison:
            first = replace(first, rows=2**64)
        if self.calls in self.bad:
            first = StreamStats(first.stream, max(first.rows, 1), first.interval_seconds, math.nan, -1.0)
            queries = tuple(replace(q, selectivities={"any": 5.0}) for q in observation.queries)
            observation = replace(observation, queries=queries)
        return replace(observation, streams=(first, *rest))

    def __getattr__(self, name: str):
        return getattr(self.source, name)


_real = service.synthetic_source
service.synthetic_source = lambda config, start: FaultySource(_real(config, start))

if __name__ == "__main__":
    sys.exit(cli.main())
