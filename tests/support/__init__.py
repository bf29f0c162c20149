"""What several test modules share: fakes of the ports, the daemon as a subprocess, Spark fixtures.

Tests import from here (``from support.fakes import MemoryStore``), never from
one another; ``pyproject.toml`` puts ``tests/`` on the import path.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository's root (configuration examples, plans, docs, bench scripts)."""
