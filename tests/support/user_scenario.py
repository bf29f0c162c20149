"""bench/migration.py's scenarios with the query built by a user's own function (``armd.agent``) instead of armd's builder.

The agent tests' oracle runs the user's function alone at the old and at the new settings over the same input, through
``migration.alone``, which builds each run from ``scenario.builder``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from support import REPO

sys.path.insert(0, str(REPO / "bench"))
import migration  # noqa: E402


@dataclass(frozen=True)
class UserScenario(migration.Scenario):
    build: Any = None
    """The user's query function, as ``AgentQuery.builder()`` turns it into a builder."""

    @property
    def builder(self) -> Any:
        return self.build
