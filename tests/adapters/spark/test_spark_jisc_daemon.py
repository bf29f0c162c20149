"""``armd run`` drives a JISC join on local Spark: the join-order policy rewrites the control file, Spark switches live.

One daemon run of at most 180 s (stopped once the second order has run for
a window): a three-way join of streams a, b, c
(``builders.multiway_join``: JISC inside ``transformWithStateInPandas``) that
starts in the order (a ⋈ c) ⋈ b although c is the fastest stream, so armd
publishes a cheaper order (the two slow streams first) as soon as the query
runs; 80 s after the start a and c swap rates, and once armd has measured
that it publishes another, while the join holds state. The test checks the decisions in the store and the
control file, and Spark's output against a brute-force oracle over the
source's own arrivals: every result of the covered span exactly once,
nothing that is not a result, results from every epoch.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from support.daemon import armd, log_events, run_until

from armd.adapters.spark.source import Arrivals, SourceOptions, schedule_json
from armd.daemon.config import load_config
from armd.daemon.wiring import synthetic_parts

from support.jisc_plan import PLAN, STREAMS, W_MS, first_pair

# Rates a = 2, b = 2, c = 8 per second: joining a and b first is cheapest (the plan's order joins a and c first),
# so armd changes the order as soon as the query runs. From 80 s on a = 8 and c = 2: b and c first is cheapest.
# (Spark's first micro-batches of the join take up to half a minute here, hence the late step.)
CONFIG = """
[store]
url = "sqlite:///{tmp}/armd.db"
[model]
time_unit_seconds = 1
[bounds]
memory_bytes = 1e12
cpu = 1e12
[triggers]
alpha = 0.5
threshold = 0.5
[schedule]
observe_seconds = 2
decide_seconds = 600
apply_seconds = 1
[source]
kind = "spark"
seed = 11
[source.streams.a]
rate_per_second = 2
keys = 5
steps = [ {{ at_seconds = 80, rate_per_second = 8 }} ]
[source.streams.b]
rate_per_second = 2
keys = 5
[source.streams.c]
rate_per_second = 8
keys = 5
steps = [ {{ at_seconds = 80, rate_per_second = 2 }} ]
[spark]
checkpoint_dir = "{tmp}/checkpoints"
state_store = "rocksdb"
conf = {{ "spark.ui.enabled" = "false", "spark.sql.shuffle.partitions" = 2 }}
[managed.triple]
builder = "armd.adapters.spark.builders:multiway_join"
nodes = {{ w = "t_wa" }}
trigger_seconds = 2
sink = {{ kind = "parquet", path = "{tmp}/out/triple" }}
[managed.triple.join_order]
order = ["a", "c", "b"]
control = "{tmp}/triple-order.json"
cooldown_seconds = 10
[plan]
file = "plan.json"
"""


@pytest.fixture(scope="module")
def jisc_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("jisc-daemon")
    (tmp / "plan.json").write_text(json.dumps(PLAN))
    config = tmp / "armd.toml"
    config.write_text(CONFIG.format(tmp=tmp))
    armd("db", "upgrade", "--config", str(config))
    result, _ = run_until(config, lambda: second_order_in_force(tmp), at_most=180.0, at_least=95.0, stop=signal.SIGINT)
    return tmp, config, result


def second_order_in_force(tmp: Path) -> bool:
    """armd has published the order for the swapped rates (b and c first), and its epoch has run for a while."""
    try:
        done = rows(tmp, "SELECT details, finished_at FROM migrations WHERE strategy = 'jisc' AND state = 'done' "
                         "AND finished_at IS NOT NULL ORDER BY id")
    except sqlite3.Error:
        return False
    if len(done) < 2 or first_pair(json.loads(done[-1][0])["new_order"]) != {"b", "c"}:
        return False
    finished = datetime.fromisoformat(done[-1][1]).replace(tzinfo=None)
    mark = rows(tmp, "SELECT max(watermark) FROM batches WHERE query = 'triple' AND watermark IS NOT NULL")[0][0]
    # The source's event time is its wall clock, so results of the new epoch are out a window and a batch after it.
    return mark is not None and datetime.fromisoformat(mark).replace(tzinfo=None) > finished + timedelta(seconds=W_MS / 1000 + 4)


def rows(tmp: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(tmp / "armd.db") as db:
        return db.execute(sql).fetchall()




def test_armd_publishes_the_cheaper_join_order_when_the_rates_change(jisc_run):
    tmp, _, result = jisc_run
    assert result.returncode == 0, result.stderr[-3000:]
    changes = [e for e in log_events(result.stderr) if e["event"] == "join_order_changed"]
    migrations = [json.loads(d) for (d,) in rows(tmp, "SELECT details FROM migrations WHERE strategy = 'jisc' "
                                                      "AND state = 'done' AND finished_at IS NOT NULL ORDER BY id")]
    assert len(migrations) == len(changes) >= 2, (changes, migrations)
    assert [m["epoch"] for m in migrations] == list(range(1, len(migrations) + 1))
    # The slow pair first: a and b before the swap of rates, b and c after it (and at the end).
    assert first_pair(migrations[0]["old_order"]) == {"a", "c"} and first_pair(migrations[0]["new_order"]) == {"a", "b"}
    assert first_pair(migrations[-1]["new_order"]) == {"b", "c"}, migrations
    assert all(m["best_cost"] < 0.8 * m["current_cost"] for m in migrations)
    # By the second change the join has measured every pair's key-match selectivity, and the decision used them.
    measured = migrations[-1]["pair_selectivities"]
    assert set(measured) == {"a,b", "a,c", "b,c"} and all(0 < v <= 1 for v in measured.values()), measured
    control = json.loads((tmp / "triple-order.json").read_text())
    assert control["epoch"] == len(migrations) and control["order"] == migrations[-1]["new_order"]


def test_the_join_measures_each_pairs_key_match_selectivity(jisc_run):
    """With 5 uniform keys every pair matches with probability 1/5: the median of the run's observations is near it.

    (Single observations scatter: 2 s of tuples at 2–8 per second; and formula 4 assumes steady rates, so for
    about a window after the rates cross a pair whose rates moved reads up to 4× off.)
    """
    tmp, _, _ = jisc_run
    observed = [json.loads(p) for (p,) in rows(tmp, "SELECT pair_selectivities FROM observations "
                                                    "WHERE query = 'triple' AND pair_selectivities IS NOT NULL")]
    assert len(observed) >= 20, observed
    for pair in ("a,b", "a,c", "b,c"):
        values = [o[pair] for o in observed if pair in o]
        assert 0.14 < float(np.median(values)) < 0.28, (pair, sorted(values))


def arrivals(config: Path, origin: str) -> dict[str, list[tuple[int, int]]]:
    """Per stream, the (event time µs, key) of every row the synthetic source delivers in the first 200 s."""
    cfg = load_config(config)
    schedules, _, _ = synthetic_parts(cfg)
    out = {}
    for stream in STREAMS:
        options = SourceOptions.parse({"stream": stream, "start": origin, "schedule": json.dumps(schedule_json(schedules[stream])),
                                       "seed": str(cfg.source.seed), "all_streams": ",".join(cfg.plan.streams), "keys": "5"})
        origin_us = int(round(options.start * 1e6))
        out[stream] = [(int(t), int(k)) for times, keys, _ in Arrivals(options).between(0, 200_000)
                       for t, k in zip(origin_us + np.round(times * 1e6).astype(np.int64), keys)]
    return out


def oracle(tuples: dict[str, list[tuple[int, int]]]) -> set[tuple[int, int, int]]:
    """Every (a id, b id, c id) with equal keys whose event times (ms) lie less than the window apart."""
    by_key: dict[str, dict[int, list[tuple[int, int]]]] = {s: defaultdict(list) for s in STREAMS}
    for s in STREAMS:
        for us, key in tuples[s]:
            by_key[s][key].append((us // 1000, us))
        for lst in by_key[s].values():
            lst.sort()
    results = set()
    for key, a_list in by_key["a"].items():
        b_list, c_list = by_key["b"].get(key, []), by_key["c"].get(key, [])
        b_ms, c_ms = [m for m, _ in b_list], [m for m, _ in c_list]
        for a_ms, a_id in a_list:
            bs = b_list[bisect_right(b_ms, a_ms - W_MS):bisect_left(b_ms, a_ms + W_MS)]
            cs = c_list[bisect_right(c_ms, a_ms - W_MS):bisect_left(c_ms, a_ms + W_MS)]
            for bm, b_id in bs:
                for cm, c_id in cs:
                    if max(a_ms, bm, cm) - min(a_ms, bm, cm) < W_MS:
                        results.add((a_id, b_id, c_id))
    return results


def test_spark_emits_exactly_the_join_across_the_order_changes(jisc_run):
    tmp, config, result = jisc_run
    origin = next(e["synthetic_origin"] for e in log_events(result.stderr) if e["event"] == "spark_starting")
    out = pq.read_table(tmp / "out" / "triple").to_pylist()
    assert out, "the join wrote nothing"
    got = Counter((r["a_id"], r["b_id"], r["c_id"]) for r in out)
    assert max(got.values()) == 1, [k for k, n in got.items() if n > 1][:5]
    epochs = Counter(r["epoch"] for r in out)
    assert {1, 2} <= set(epochs), epochs

    truth = oracle(arrivals(config, origin))
    assert not set(got) - truth, sorted(set(got) - truth)[:5]  # nothing that is not a result
    # Every result from a window after the first output (the query started mid-stream) up to the last
    # watermark recorded (less a trigger interval: results come out one batch after the watermark passes them).
    low = min(min(r["a_id"], r["b_id"], r["c_id"]) for r in out) // 1000 + W_MS
    marks = [datetime.fromisoformat(w) for (w,) in rows(tmp, "SELECT watermark FROM batches WHERE query = 'triple' "
                                                              "AND watermark IS NOT NULL")]
    high = int(max(marks).timestamp() * 1000) - 2_000
    assert high - low > 60_000, (low, high)
    want = {r for r in truth if min(r) // 1000 >= low and max(r) // 1000 < high}
    missing = want - set(got)
    assert len(want) > 1000 and not missing, (len(want), sorted(missing)[:5])
