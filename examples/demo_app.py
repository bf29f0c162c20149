"""armd's demo application: an ordinary PySpark streaming program with ``armd.agent`` inside.

``make run`` starts it beside the daemon (``[[apps]]`` in config/armd.toml);
it is also what docs/tutorial.md walks through. It is written the way a
team writes its own job — its own queries, its own ``foreachBatch`` sink —
and declares only what armd may change:

* ``clicks_per_key``: clicks per key over a sliding window (window 5 s to
  60 s, slide 1 s to 4 s, weight 2);
* ``big_click_average``: the average of the clicks worth more than 0.5
  over a sliding window (the same ranges);
* ``clicks_with_orders``: clicks joined with orders of the same key within
  R seconds of each other (R from 2 s to 30 s), a stream-stream join.

The streams come from armd's replayable synthetic source (``armd-synthetic``,
standing in for the team's Kafka topics): ``clicks`` at 20 rows a second,
bursting to four times that two minutes in for three minutes, ``orders``
at 5 a second, 20 keys each. Every result is appended to
``armd-output/QUERY.jsonl`` by the sink; the runs' checkpoints stay in
``armd-checkpoints/APP/`` (a migration open at the stop is resumed from
them at the next start). SIGTERM or Ctrl-C stops the application cleanly
(``agent.stop()``: its queries stop and the store marks it stopped).

    ARMD_STORE=sqlite:///config/armd.db python examples/demo_app.py [--burst-at 120] ...

The store's URL comes from ``ARMD_STORE`` (``armd run`` sets it, with
``ARMD_APP`` and ``ARMD_TIME_UNIT_SECONDS``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import functions as F

from armd.adapters.spark.builders import genmig_hints
from armd.adapters.spark.session import build_session
from armd.adapters.spark.source import schedule_json
from armd.adapters.synthetic import Schedule
from armd.agent import Agent, AgentError

DELAY = "2 seconds"
"""The watermark delay of every query."""
QUERIES = ("clicks_per_key", "big_click_average", "clicks_with_orders")


def clicks_per_key(spark: Any, s: Any) -> Any:
    clicks = s.source("clicks").withWatermark("event_time", "2 seconds")
    return clicks.groupBy(F.window("event_time", s.window("w"), s.slide("w")), "key").agg(F.count(F.lit(1)).alias("n"))


def big_click_average(spark: Any, s: Any) -> Any:
    clicks = s.source("clicks").withWatermark("event_time", DELAY).where(F.col("value") > 0.5)
    return clicks.groupBy(F.window("event_time", s.window("w"), s.slide("w"))).agg(
        F.avg("value").alias("avg_value"), F.count(F.lit(1)).alias("n"))


@genmig_hints("greatest(ct, ot)", emits="arrival")  # a join result belongs to the later of its two rows' times
def clicks_with_orders(spark: Any, s: Any) -> Any:
    span = F.expr(f"INTERVAL {s.window('j')}")
    clicks = s.source("clicks").withWatermark("event_time", DELAY).select(
        F.col("event_time").alias("ct"), F.col("key").alias("ck"), F.col("value").alias("cv"))
    orders = s.source("orders").withWatermark("event_time", DELAY).select(
        F.col("event_time").alias("ot"), F.col("key").alias("ok"), F.col("value").alias("ov"))
    return clicks.join(orders, (F.col("ck") == F.col("ok")) & (F.col("ot") >= F.col("ct") - span)
                       & (F.col("ot") <= F.col("ct") + span))


def sources(origin: float, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The two synthetic streams, as ``Agent`` takes them (``format`` and reader options)."""
    bursts = ((args.burst_at, args.burst_seconds, args.burst_factor),) if args.burst_factor != 1 else ()
    rates = {"clicks": Schedule(args.clicks_rate, (), bursts), "orders": Schedule(args.orders_rate)}
    return {name: {"format": "armd-synthetic", "start": repr(origin), "schedule": json.dumps(schedule_json(schedule)),
                   "seed": args.seed, "all_streams": ",".join(rates), "keys": args.keys}
            for name, schedule in rates.items()}


def jsonl_sink(path: Path) -> Callable[[Any, int], None]:
    """The team's own ``foreachBatch`` function: every result row appended to a JSON-lines file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def write(df: Any, batch_id: int) -> None:
        rows = [row.asDict(recursive=True) for row in df.collect()]
        with lock, path.open("a") as out:
            for row in rows:
                out.write(json.dumps(row, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)) + "\n")

    return write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default=os.environ.get("ARMD_APP", "demo"), help="the application's name (default $ARMD_APP or demo)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--clicks-rate", type=float, default=20.0, help="clicks per second (default 20)")
    parser.add_argument("--orders-rate", type=float, default=5.0, help="orders per second (default 5)")
    parser.add_argument("--keys", type=int, default=20, help="distinct keys of each stream (default 20)")
    parser.add_argument("--burst-at", type=float, default=120.0, help="seconds after the start the clicks burst (default 120)")
    parser.add_argument("--burst-seconds", type=float, default=180.0, help="how long the burst lasts (default 180)")
    parser.add_argument("--burst-factor", type=float, default=4.0, help="the clicks' rate is multiplied by this (default 4; 1: none)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval (default 5)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default="armd-output", help="folder of the results (default armd-output)")
    parser.add_argument("--checkpoints", default="armd-checkpoints", help="folder of the runs' checkpoints (default armd-checkpoints)")
    parser.add_argument("--only", action="append", choices=QUERIES, metavar="QUERY",
                        help=f"run only this query (repeatable; default all: {', '.join(QUERIES)})")
    args = parser.parse_args(argv)
    store = os.environ.get("ARMD_STORE")
    if not store:
        print("demo_app: ARMD_STORE is not set; give the store's URL, e.g. ARMD_STORE=sqlite:///config/armd.db "
              "(armd run sets it for its [[apps]])", file=sys.stderr)
        return 2

    spark = build_session(args.master, f"armd-{args.app}")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # after Spark's start, which installs its own SIGINT handler
        signal.signal(signum, lambda *_: stop.set())
    origin = float(int(time.time()))
    # A lasting folder: a migration left open when the application stopped is resumed from it at the next start.
    checkpoints = Path(args.checkpoints) / args.app
    try:
        agent = Agent(spark, store=store, app=args.app, checkpoint_root=checkpoints,
                      time_unit_seconds=float(os.environ.get("ARMD_TIME_UNIT_SECONDS", "1")))
    except AgentError as exc:
        print(f"demo_app: {exc}", file=sys.stderr)
        return 2
    streams = sources(origin, args)
    trigger = f"{args.trigger_seconds:g} seconds"
    declare = {
        "clicks_per_key": (clicks_per_key, {"windows": {"w": ("5 seconds", "60 seconds")}, "slides": {"w": ("1 second", "4 seconds")},
                                            "weight": 2}),
        "big_click_average": (big_click_average, {"windows": {"w": ("5 seconds", "60 seconds")},
                                                  "slides": {"w": ("1 second", "4 seconds")}}),
        "clicks_with_orders": (clicks_with_orders, {"windows": {"j": ("2 seconds", "30 seconds")}}),
    }
    declare = {name: declare[name] for name in args.only or declare}
    code = 0
    try:
        for name, (function, ranges) in declare.items():
            if stop.is_set():
                break
            used = ("clicks", "orders") if name == "clicks_with_orders" else ("clicks",)
            agent.query(name, sources={s: streams[s] for s in used}, streams=used, **ranges)(function)
            sink = jsonl_sink(Path(args.output) / f"{name}.jsonl")
            agent.start(name, sink=lambda df, sink=sink: df.writeStream.foreachBatch(sink).trigger(processingTime=trigger))
            # The next query starts once this one ran a batch: each start launches a Python process for the source,
            # and several launched at once on a loaded machine can miss Spark's 10 s wait for them to connect back.
            deadline = time.monotonic() + 120
            while agent.listener.latest(name) is None and not agent.loop.stopped.is_set() and time.monotonic() < deadline:
                stop.wait(0.2)
                if stop.is_set():
                    break
            agent.await_termination(0)  # a query that failed to start ends the application here, in one line
        print(f"demo_app: {len(declare)} queries started under armd (store {agent.store.url_redacted}); "
              "SIGTERM or Ctrl-C stops", file=sys.stderr, flush=True)
        while not stop.is_set() and not agent.await_termination(0.5):
            pass
    except AgentError as exc:
        print(f"demo_app: {exc}", file=sys.stderr)
        code = 1
    finally:
        agent.stop()
        spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
