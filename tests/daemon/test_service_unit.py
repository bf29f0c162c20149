"""The systemd recipe of docs/operations.md and config/armd.service: verified by systemd, and its steps consistent.

The recipe cannot run here (no systemd as PID 1), so what can be checked is:
``systemd-analyze verify`` accepts the unit (with the venv's armd in place of
/opt/armd's), the unit creates the store after its state directory exists,
and the recipe's copy and edit steps leave a configuration that loads with
its store in the state directory and its plan beside it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

from armd.daemon.config import load_config

UNIT = REPO / "config" / "armd.service"
OPERATIONS = REPO / "docs" / "operations.md"
REQUIRE_ENV = "ARMD_REQUIRE_SYSTEMD"


def recipe() -> list[str]:
    """The shell lines of the systemd section's first block."""
    section = OPERATIONS.read_text().split("## systemd", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def directives(name: str) -> list[str]:
    return re.findall(rf"^{name}=(.*)$", UNIT.read_text(), re.M)


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        reason = "systemd-analyze is not installed (apt-get install systemd)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1)")
        pytest.skip(reason)
    armd = Path(sys.executable).parent / "armd"
    unit = tmp_path / "armd.service"
    unit.write_text(UNIT.read_text().replace("/opt/armd/.venv/bin/armd", str(armd)))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_the_store_is_upgraded_after_the_state_directory_exists_as_the_service_user() -> None:
    pre = directives("ExecStartPre")
    assert [p.split()[1] for p in pre] == ["check-config", "db"] and "upgrade" in pre[1]
    assert directives("StateDirectory") == ["armd"] and directives("User") == ["armd"]
    assert not any("db upgrade" in line for line in recipe())  # not run by hand before the directory exists


def test_documentation_points_to_a_path_the_recipe_installs() -> None:
    (doc,) = directives("Documentation")
    assert doc == "file:/opt/armd/doc/operations.md"
    assert "cp -r docs/. /opt/armd/doc/" in recipe() or any("docs/. /opt/armd/doc/" in line for line in recipe())


def test_usr1_goes_to_the_main_process_only() -> None:
    text = OPERATIONS.read_text()
    kills = re.findall(r"^systemctl kill [^#\n]*", text, re.M)
    assert kills and all("--kill-whom=main" in k for k in kills)


def test_the_recipe_copies_what_the_configuration_needs_and_it_loads(tmp_path: Path) -> None:
    """Run the recipe's install/sed steps against a folder standing in for /etc/armd; the result loads."""
    etc = tmp_path / "etc" / "armd"
    (etc / "plans").mkdir(parents=True)
    for line in recipe():
        words = shlex.split(line)
        if words[:1] == ["install"] and "-d" not in words and "/etc/armd/" in words[-1] and not words[-2].startswith("/dev/"):
            source = REPO / words[-2]
            assert source.is_file(), line
            target = Path(str(etc) + words[-1].removeprefix("/etc/armd"))
            shutil.copy(source, target / source.name if target.is_dir() or words[-1].endswith("/") else target)
        elif words[:2] == ["sed", "-i"]:
            assert words[-1] == "/etc/armd/armd.toml"
            subprocess.run([*words[:-1], str(etc / "armd.toml")], check=True)  # the sed program as written
    config = load_config(etc / "armd.toml", environ={"ARMD_WEBHOOK_SECRET": "s", "ARMD_DB_PASSWORD": "p"})
    assert config.store.url == "sqlite:////var/lib/armd/armd.db"  # in the state directory, not read-only /etc/armd
