"""GenMig over Spark Connect: a server started from the package's jar, armd's QueryManager as its client.

The run is ``tests/support/connect_genmig.py`` in a process of its own (a
Connect client session does not share a Python process with the classic
local session of the other Spark tests). Before ``SharedBatchWriter`` the
old run's filter set in the client never reached the ``foreachBatch``
function running in the server's Python (docs/cluster.md, Spark Connect),
so its results past T_split came out beside the new run's.
"""

from __future__ import annotations

import json
import subprocess
import sys

from support import REPO


def test_genmig_over_spark_connect_loses_repeats_and_changes_no_result() -> None:
    done = subprocess.run([sys.executable, str(REPO / "tests" / "support" / "connect_genmig.py")],
                          capture_output=True, text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    found = json.loads(lines[-1])
    assert "error" not in found, found
    assert found["states"] == ["running", "draining", "done"]
    assert (found["lost"], found["duplicated"], found["wrong"]) == (0, 0, 0) and found["same_keys"]
    assert found["before_split"] > 0 and found["from_split"] > 0  # both plans answered, each on its side
