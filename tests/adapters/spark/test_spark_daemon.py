"""``armd run`` on local Spark end to end: managed queries, batches in the store, a burst that makes armd cut windows.

One daemon run of at most 150 s (Spark starts in the subprocess; the run
stops once the restarted join has written): two managed queries on the
``armd-synthetic`` source, a windowed count per key and a
range join, their results in Parquet sinks. The first decision uses the
plan's rates and gives both queries their QoS maxima; but the clicks stream
runs at five times its plan rate from 5 s after the start (before Spark is
up), so the first observations make the estimate exceed the memory bound,
and armd decides smaller windows and restarts the queries with them. The test checks that in Spark's own output:
the windows the restarted query emits have the size armd decided.
"""

from __future__ import annotations

import json
import signal
import sys
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
from support import REPO
import pytest
from support.daemon import armd, log_events, run_until

ROOT = REPO

PLAN = {
    "streams": {"clicks": {"rate": 20, "g": 1, "size": 400}, "orders": {"rate": 5, "g": 1, "size": 400}},
    "constants": {"aggregate_size": 400},
    "queries": {
        "per_key": {"op": "aggregate", "id": "pk_agg", "groups": 10, "inputs": [
            {"op": "granularity", "id": "pk_g", "g": 1, "inputs": [
                {"op": "window", "id": "pk_w", "w": 10, "inputs": [{"op": "source", "stream": "clicks"}]}]}]},
        "matches": {"op": "join", "id": "m_j", "sel": 0.1, "inputs": [
            {"op": "window", "id": "m_w", "w": 5, "inputs": [{"op": "source", "stream": "clicks"}]},
            {"op": "window", "id": "m_w2", "w": 5, "inputs": [{"op": "source", "stream": "orders"}]}]},
    },
}

# At the QoS maxima the estimate is 318,850 B at the base rates (under the usable 360,000 B)
# and 1,010,010 B during the burst; at the minima 134,010 B during the burst.
CONFIG = """
[store]
url = "sqlite:///{tmp}/armd.db"
[model]
time_unit_seconds = 1
[bounds]
memory_bytes = 400000
cpu = 1e6
[guardrails]
cooldown_seconds = 0
[triggers]
alpha = 1
threshold = 0.5
[schedule]
observe_seconds = 2
decide_seconds = 600
apply_seconds = 1
[source]
kind = "spark"
seed = 5
[source.streams.clicks]
rate_per_second = 20
keys = 10
bursts = [ {{ at_seconds = 5, duration_seconds = 600, factor = 5 }} ]
[source.streams.orders]
rate_per_second = 5
keys = 10
[spark]
migration = "naive-restart"
checkpoint_dir = "{tmp}/checkpoints"
conf = {{ "spark.ui.enabled" = "false", "spark.sql.shuffle.partitions" = 2 }}
[managed.per_key]
builder = "armd.adapters.spark.builders:windowed_count"
nodes = {{ w = "pk_w", agg = "pk_agg" }}
trigger_seconds = 2
sink = {{ kind = "parquet", path = "{tmp}/out/per_key" }}
[managed.matches]
builder = "armd.adapters.spark.builders:range_join"
nodes = {{ w = "m_w", j = "m_j" }}
params = {{ left = "clicks", right = "orders" }}
trigger_seconds = 2
sink = {{ kind = "parquet", path = "{tmp}/out/matches" }}
[plan]
file = "plan.json"
[queries.per_key]
window = [4, 30]
granularity = [4, 1]
[queries.matches]
window = [2, 20]
"""


@pytest.fixture(scope="module")
def spark_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-daemon")
    (tmp / "plan.json").write_text(json.dumps(PLAN))
    config = tmp / "armd.toml"
    config.write_text(CONFIG.format(tmp=tmp))
    armd("db", "upgrade", "--config", str(config))
    # Ctrl-C, as make run documents (PySpark takes SIGINT over), once what the tests check has happened.
    result, stop_seconds = run_until(config, lambda: restarted_join_emitted(tmp), at_most=150.0, at_least=20.0,
                                     stop=signal.SIGINT)
    return tmp, result, stop_seconds


def restarted_join_emitted(tmp: Path) -> bool:
    """What the tests check has happened: every migration done, both queries have recorded state batches, the join
    has been restarted with a range shorter than gaps its first run emitted, and a restarted join has written."""
    try:
        states = rows(tmp, "SELECT state FROM migrations")
        batches = dict(rows(tmp, "SELECT query, count(*) FROM batches WHERE state_rows > 0 AND state_bytes > 0 "
                                     "GROUP BY query"))
        ranges = join_ranges(tmp)
        emitted = {v: gaps(tmp, v) for v in range(len(ranges))}
    except (sqlite3.Error, OSError, ValueError):  # tables being created; a Parquet file Spark is still writing
        return False
    return (len(ranges) >= 2 and all(state == "done" for (state,) in states) and min(batches.get("per_key", 0),
            batches.get("matches", 0)) >= 3 and max(emitted[0], default=0) > min(ranges[1:])
            and any(emitted[v] for v in range(1, len(ranges))))


def join_ranges(tmp: Path) -> list[float]:
    """The join's range per plan version: version v is what its v-th migration put in force (0: the first start)."""
    return [json.loads(details)["new"]["windows"]["m_w"]
            for (details,) in rows(tmp, "SELECT details FROM migrations WHERE query = 'matches' ORDER BY id")]


def gaps(tmp: Path, version: int) -> list[float]:
    """The time between the two sides of every result the join wrote under plan version ``version``."""
    path = tmp / "out" / "matches" / f"plan_version={version}"
    if not path.exists():
        return []
    return [abs((r["lt"] - r["rt"]).total_seconds()) for r in pq.read_table(path).to_pylist()]


def rows(tmp: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp / "armd.db") as db:
        return db.execute(sql).fetchall()


def test_the_daemon_runs_the_managed_queries_and_stops_cleanly(spark_run):
    tmp, result, stop_seconds = spark_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert stop_seconds < 30
    events = [line["event"] for line in log_events(result.stderr)]
    assert events.count("query_started") == 2 and events[-1] == "daemon_stopped"
    # No traceback of armd's. (A PySpark streaming-source worker may print one when its query stops and its
    # socket closes under it; that is Spark's own noise on the shared stderr.)
    frames = [line for line in result.stderr.splitlines() if line.lstrip().startswith('File "')]
    ours = [frame for frame in frames if str(ROOT) in frame and str(Path(sys.prefix).resolve()) not in frame]
    assert not ours, frames


def test_every_batch_is_recorded_with_its_state(spark_run):
    tmp, _, _ = spark_run
    per_query = dict(rows(tmp, "SELECT query, count(*) FROM batches WHERE state_rows > 0 AND state_bytes > 0 GROUP BY query"))
    assert per_query.keys() == {"per_key", "matches"} and min(per_query.values()) >= 3, per_query
    # Batch ids run without gaps within every run of a query.
    for query, run, n, low, high in rows(tmp, "SELECT query, run_id, count(*), min(batch_id), max(batch_id) FROM batches GROUP BY query, run_id"):
        assert (low, high) == (0, n - 1), (query, run)
    measured = rows(tmp, "SELECT count(*) FROM observations WHERE query IS NOT NULL AND state_bytes > 0")[0][0]
    rated = rows(tmp, "SELECT count(*) FROM observations WHERE stream = 'clicks' AND d > 0")[0][0]
    assert measured > 0 and rated > 0


def test_the_burst_makes_armd_cut_windows_and_spark_runs_them(spark_run):
    tmp, _, _ = spark_run
    decisions = rows(tmp, "SELECT trigger, feasible, estimated_memory_bytes, inputs FROM decisions ORDER BY id")
    assert "queries added" in decisions[0][0]
    burst = [d for d in decisions if "rate of" in d[0] and "clicks" in d[0]]
    assert burst, [d[0] for d in decisions]
    assert all(d[1] for d in burst) and burst[-1][2] <= 360_000
    migrations = rows(tmp, "SELECT query, strategy, state, details FROM migrations ORDER BY id")
    assert {m[0] for m in migrations} == {"per_key", "matches"} and all(m[2] == "done" for m in migrations)
    assert all(m[1] == "naive-restart" for m in migrations)
    # The join dominates the estimate during the burst: any feasible setting cuts its range (per_key at its
    # maximum and the join at its minimum is 254,010 B). What armd decided is what the restarted Spark query joins.
    ranges = join_ranges(tmp)
    assert ranges[0] == 20 and min(ranges[1:]) < 20, ranges
    emitted = {v: gaps(tmp, v) for v in range(len(ranges))}
    assert max(emitted[0]) > min(ranges[1:])  # the first run joined beyond the range cut later
    restarted = [v for v in range(1, len(ranges)) if emitted[v]]
    assert restarted, "no restarted join emitted anything"
    assert all(max(emitted[v]) <= ranges[v] for v in restarted), {v: (max(emitted[v]), ranges[v]) for v in restarted}
