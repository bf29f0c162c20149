"""armd inside a user's own Spark application: ``from armd.agent import Agent`` (docs/agent.md).

Imports neither the daemon nor its scheduler, plots or metrics server
(an import-linter contract), so an application needs only ``pip install armd``.
"""

from .agent import Agent, AgentQuery
from .settings import AgentError, Settings

__all__ = ["Agent", "AgentError", "AgentQuery", "Settings"]
