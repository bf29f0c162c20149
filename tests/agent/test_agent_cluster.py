"""armd.agent in an application submitted to a Spark standalone cluster: a desired change is applied by GenMig exactly.

The application is the fleet benchmark's ``ads`` (``bench/fleet_app.py``):
a team's program with its own ``foreachBatch`` sink and armd present only as
``armd.agent``, submitted with the pyspark package's ``spark-submit --master
spark://127.0.0.1:PORT`` so that its tasks run in the cluster's executors.
The store is a SQLite file both processes open. The test plays the daemon:
once the application has registered and its stream has run past the first
windows, it writes a desired change into ``desired_settings``, as the
control cycle does. The oracle is the benchmark's: every settings version
run alone over the same replayed input, split at the migration's T_split.
"""

from __future__ import annotations

import json
import math
import sys
import time
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine
from support import REPO
from support.cluster_fixtures import spark_cluster  # noqa: F401
from support.spark import spark  # noqa: F401

from armd.adapters.store import applications as apps
from armd.adapters.store.sql import SqlStore
from armd.control.ports import DesiredSettings, QuerySettings

sys.path.insert(0, str(REPO / "bench"))
import fleet_cluster  # noqa: E402
import migration  # noqa: E402

pytestmark = pytest.mark.cluster

QUERY = "views_per_ad"
END = 40.0
"""Seconds of event time the streams last."""
SPEED = 2.0
"""Seconds of the stream per wall-clock second: 20 s of waiting for the streams' 40 s. What the test checks is in
event time (T_split, windows, the oracle's replay), and an application that falls behind reads on in 4 s batches."""
CHANGE_AT = 16.0
"""Seconds of the stream after which the test writes the desired change (the first 16 s windows are due by then)."""


def wait(predicate, timeout: float, what: str, proc) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the application exited with {proc.returncode} while waiting for {what}")
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def test_a_submitted_application_applies_the_daemons_change_by_genmig_exactly(spark_cluster, spark, tmp_path):  # noqa: F811
    url = f"sqlite:///{tmp_path}/armd.db"
    store = SqlStore.open(url)
    store.upgrade()
    start = migration.ALIGN * math.ceil((time.time() + 30) / migration.ALIGN)  # the driver needs ~20 s to start
    (tmp_path / "sources.json").write_text(json.dumps(fleet_cluster.sources(start, end=END, burst=None, speed=SPEED)))
    log = tmp_path / "ads.log"
    proc = fleet_cluster.submit(spark_cluster.master_url, ["ads", "ads", url, str(tmp_path), repr(start), repr(END)], log)
    try:
        wait(lambda: QUERY in store.actual_states(), 180, "the application to register its query", proc)
        in_force = store.actual_states()[QUERY].settings
        node = apps.queries_of(store, "ads")[QUERY]["nodes"]["w"]
        assert in_force.windows == {node: 16_000.0}  # the declared maximum, in the agent's model unit (ms)
        wait(lambda: time.time() >= start + CHANGE_AT / SPEED, 120, "the stream to pass its first windows", proc)
        store.write_desired([DesiredSettings(QUERY, 1, QuerySettings(0.5, 1.0, {node: 8_000.0}, 2_000.0, 0.5),
                                             decision_id="by-the-test", at=datetime.now(timezone.utc))])
        code = proc.wait(END + 300)
    finally:
        if proc.poll() is None:
            proc.kill()
        store.close()
    assert code == 0, "\n".join(log.read_text().splitlines()[-30:])

    engine = create_engine(url)
    chain = fleet_cluster.versions(engine, QUERY)  # raises if the migration failed
    engine.dispose()
    assert len(chain) == 2 and chain[1][1]["windows"] == {node: 8.0}  # QueryParams keep seconds
    split = chain[1][0] - start
    wanted = fleet_cluster.oracle({QUERY: chain}, start, tmp_path, end=END)[QUERY]
    got = migration.results(fleet_cluster.read_results(tmp_path / "results" / f"{QUERY}.jsonl"), start)
    assert migration.compare(wanted, got) == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert got.keys() == wanted.keys() and len(wanted) > 50
    # Both plans answered, each on its side of T_split: 16 s windows before it, 8 s windows from it on.
    assert any(k[0] < split for k in got) and any(k[0] >= split for k in got)
    assert all(k[0] - k[1] == 8 for k in got if k[0] >= split) and all(k[0] - k[1] == 16 for k in got if k[0] < split)
