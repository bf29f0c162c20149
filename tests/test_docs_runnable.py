"""The README's and docs' shell blocks marked runnable (```` ```sh runnable ````) run as written and succeed.

Each block runs with ``bash -eu`` in a fresh folder holding copies of ``config/``
and ``examples/`` and a link to the venv (so both ``armd`` on ``PATH`` and
``.venv/bin/armd`` work), the way a reader who cloned the repository would run
it. Only fast blocks are marked (no Spark): a block that fails here is a
documentation bug.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import REPO

BLOCK = re.compile(r"^```sh runnable[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(REPO)}:{line}", match[1]))
    return found


BLOCKS = _blocks()


def test_the_docs_mark_blocks_runnable():
    assert len(BLOCKS) >= 3, "the README and docs should show some commands that this test runs"


@pytest.mark.parametrize("where, script", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_runnable_block(where, script, tmp_path):
    for folder in ("config", "examples"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    venv = Path(sys.executable).parent.parent
    (tmp_path / ".venv").symlink_to(venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARMD_", "PYTHON"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HOME=str(tmp_path))
    done = subprocess.run(["bash", "-eu", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{where} failed ({done.returncode}):\n{script}\nstdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-2000:]}"
    assert "Traceback" not in done.stderr, done.stderr
