"""GenMig and a whole agent application over Spark Connect: a server started from the package's jar.

Each run is a script in a process of its own (a Connect client session does
not share a Python process with the classic local session of the other
Spark tests): ``tests/support/connect_genmig.py`` drives armd's
QueryManager, ``tests/support/connect_agent.py`` an ``armd.agent``
application. Before ``SharedBatchWriter`` the
old run's filter set in the client never reached the ``foreachBatch``
function running in the server's Python (docs/cluster.md, Spark Connect),
so its results past T_split came out beside the new run's.
"""

from __future__ import annotations

import json
import subprocess
import sys

from support import REPO


def run_script(name: str) -> dict:
    done = subprocess.run([sys.executable, str(REPO / "tests" / "support" / name)], capture_output=True, text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    found = json.loads(lines[-1])
    assert "error" not in found, found
    return found


def test_genmig_over_spark_connect_loses_repeats_and_changes_no_result() -> None:
    found = run_script("connect_genmig.py")
    assert found["states"] == ["running", "draining", "done"]
    assert (found["lost"], found["duplicated"], found["wrong"]) == (0, 0, 0) and found["same_keys"]
    assert found["before_split"] > 0 and found["from_split"] > 0  # both plans answered, each on its side


def test_an_agent_application_over_spark_connect_registers_reports_and_migrates_exactly() -> None:
    """The user's ``foreachBatch`` function runs in the server's Python; the plan comes from a file (no JVM to derive it
    from over Connect); the window change is written to ``desired_settings`` as the daemon does."""
    found = run_script("connect_agent.py")
    assert found["registered"] == {"app": "shop", "status": "running", "plan_source": found["registered"]["plan_source"]}
    assert found["registered"]["plan_source"].startswith("file:")
    assert found["agent_errors"] == 0 and found["app_status_after_stop"] == "stopped"
    assert set(found["reported_batches"]) == {"0", "1"} and found["observed_states"] > 0  # both runs reported
    assert (found["lost"], found["duplicated"], found["wrong"]) == (0, 0, 0) and found["same_keys"]
    assert found["before_split"] > 0 and found["from_split"] > 0
    assert "query_not_instrumented" in found["warnings"]  # said in the application's log, not silently unmeasured
