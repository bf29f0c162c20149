"""``pip install armd`` is the agent: the daemon's packages are an extra, and an application runs without them.

The application side is checked in a fresh interpreter where the daemon's
packages cannot be imported (``sys.modules[name] = None`` makes ``import``
fail as if they were not installed): it imports ``armd.agent``, registers an
application and reports through the agent's own code on a real SQLite store.
The ``armd`` command, in the same situation, says in one line what to install.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib

from support import REPO

from armd.daemon.entry import DAEMON_PACKAGES

BLOCK = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in DAEMON_PACKAGES)


def python(code: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_the_daemons_packages_are_an_extra_not_a_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower().replace("_", "-")
             for d in project["dependencies"]}
    daemon = {d.split(">")[0].strip().lower().replace("_", "-") for d in project["optional-dependencies"]["daemon"]}
    assert daemon == {"apscheduler", "prometheus-client", "matplotlib", "humanfriendly", "rich"}
    assert names & daemon == set()
    assert project["scripts"]["armd"] == "armd.daemon.entry:main"


def test_an_application_registers_and_reports_without_the_daemons_packages(tmp_path):
    done = python(f"""
        from armd.adapters.store.sql import SqlStore
        from armd.adapters.store import applications
        from armd.agent import Agent
        from armd.agent.report import Reporter
        from datetime import datetime, timezone
        store = SqlStore.open("sqlite:///{tmp_path}/armd.db")
        store.upgrade()
        Reporter(store, "shop", "apply").register(datetime.now(timezone.utc))
        print([a.app for a in applications.applications(store)])
        assert all(sys.modules.get(n) is None for n in {list(DAEMON_PACKAGES)!r})
        """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['shop']"


def test_the_command_without_the_daemons_packages_says_what_to_install(tmp_path):
    done = python("from armd.daemon.entry import main\nsys.exit(main(['status']))", tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "pip install 'armd[daemon]'" in line and "is not installed" in line
