"""A team's streaming application under armd, for ``bench/fleet.py``: submitted with ``spark-submit`` to the cluster.

Why a program of its own: the fleet benchmark must govern applications the
way users run them — their own driver, executors on the cluster's workers,
their own ``foreachBatch`` sink — with armd present only as ``armd.agent``.
Two kinds share the replayed synthetic streams ``views`` and ``clicks``
(the same rows for every reader; ``views`` bursts):

* ``shop``: views per page (a sliding count) and views joined with clicks
  within a time range (a stream-stream join);
* ``ads``: views per ad (another sliding count over the same stream).

The user's sink appends every result to ``SHARED/results/QUERY.jsonl``; the
benchmark checks those files against its oracle. ``--plain`` runs the same
queries at their initial settings without the agent (the throughput
baseline of the agent's overhead), writing under ``SHARED/plain/``; with
``--mode recommend`` the agent applies nothing. At the end of the streams
the application writes ``SHARED/APP.json``: each query's input rows and the
wall seconds its batches took.

    spark-submit --master spark://… bench/fleet_app.py KIND APP STORE_URL SHARED START END [--plain] [--mode M]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from armd.adapters.spark.builders import genmig_hints

DELAY = "2 seconds"
KINDS = {"shop": ("views_per_page", "views_clicks"), "ads": ("views_per_ad",)}


@genmig_hints("window.end")
def count_per_key(spark: Any, s: Any) -> Any:
    """Views per key over a sliding window (node ``w``)."""
    views = s.source("views").withWatermark("event_time", DELAY)
    return views.groupBy(F.window("event_time", s.window("w"), s.slide("w")), "key").agg(F.count(F.lit(1)).alias("n"))


@genmig_hints("greatest(vt, ct)", emits="arrival")
def views_with_clicks(spark: Any, s: Any) -> Any:
    """Views and clicks of the same key within R of each other (R the window ``j``)."""
    span = f"INTERVAL {s.window('j')}"
    views = s.source("views").withWatermark("event_time", DELAY).select(
        F.col("event_time").alias("vt"), F.col("key").alias("vk"))
    clicks = s.source("clicks").withWatermark("event_time", DELAY).select(
        F.col("event_time").alias("ct"), F.col("key").alias("ck"))
    return views.join(clicks, (F.col("vk") == F.col("ck")) & (F.col("ct") >= F.col("vt") - F.expr(span))
                      & (F.col("ct") <= F.col("vt") + F.expr(span)))


QUERIES: dict[str, dict[str, Any]] = {
    "views_per_page": {"function": count_per_key, "windows": {"w": ("4 seconds", "16 seconds")},
                       "slides": {"w": ("1 second", "4 seconds")}, "streams": ("views",)},
    "views_per_ad": {"function": count_per_key, "windows": {"w": ("4 seconds", "16 seconds")},
                     "slides": {"w": ("1 second", "4 seconds")}, "streams": ("views",)},
    "views_clicks": {"function": views_with_clicks, "windows": {"j": ("1 second", "6 seconds")}, "slides": {},
                     "streams": ("views", "clicks")},
}


def base_name(name: str) -> str:
    return next(base for base in QUERIES if name.startswith(base))


def user_sink(path: Path) -> Callable[[Any, int], None]:
    """The team's own ``foreachBatch`` function: every row appended to a JSON-lines file (times as epoch seconds)."""
    lock = threading.Lock()
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(df: Any, batch_id: int) -> None:
        rows = [row.asDict(recursive=True) for row in df.collect()]
        with lock, path.open("a") as out:
            for row in rows:
                out.write(json.dumps(row, default=lambda v: v.timestamp() if isinstance(v, datetime) else str(v)) + "\n")

    return write


def read_to_end(listener: Any, names: list[str], end: float, timeout: float,
                newest: Callable[[str], str | None] = lambda name: None) -> None:
    """Until every query's newest run has read every source to ``end`` seconds of event time.

    ``newest(name)``: that run's id (the agent's query may have two runs, and an old run reads to the end before a new
    one that replays its window); None: the query's latest progress of any run."""
    def done(name: str) -> bool:
        run = newest(name)
        latest = listener.latest(name) if run is None else listener.latest_of_run(run)
        return latest is not None and bool(latest.sources) and all(
            json.loads(s.end_offset or "{}").get("event_ms", 0) >= end * 1000 for s in latest.sources)

    deadline = time.monotonic() + timeout
    while not all(done(n) for n in names) and time.monotonic() < deadline:
        time.sleep(0.5)


def throughput(listener: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """Per query: input rows and batch seconds, of every batch and of the steady batches (each run's first left out).

    A run's first batch carries the executor's and the Python workers' start-up (40-70 s at load 15 here, against
    2-5 s for a later batch): it is start-up, not throughput, and it varies more between two runs of the same code
    than the whole effect measured. ``phase_seconds`` sums Spark's ``durationMs`` per phase.
    """
    out = {}
    for name in names:
        records = [r for r in listener.records(name) if r.input_rows > 0]
        firsts = {}
        for r in records:
            firsts.setdefault(r.run_id, r.seq)
        steady = [r for r in records if r.seq != firsts[r.run_id]]
        phases: dict[str, float] = {}
        for r in records:
            for phase, ms in r.durations_ms.items():
                phases[phase] = phases.get(phase, 0.0) + ms / 1000
        out[name] = {"rows": sum(r.input_rows for r in records), "batch_seconds": sum(r.batch_ms for r in records) / 1000,
                     "steady_rows": sum(r.input_rows for r in steady),
                     "steady_batch_seconds": sum(r.batch_ms for r in steady) / 1000,
                     "batches": [[r.batch_id, r.input_rows, r.batch_ms] for r in records],
                     "phase_seconds": {k: round(v, 3) for k, v in sorted(phases.items())}}
    return out


def barrier(spark: Any, where: str | None, app: str, timeout: float = 600.0) -> None:
    """Warm up, say ``app`` is ready to start its queries (``WHERE/APP.ready``), then wait for ``WHERE/go``.

    The overhead pairs start both applications' streams at the same moment, so that their batches run side by side
    under the same load of the machine (drivers start up 20-40 s apart otherwise, and a first batch that also
    launches the executor and its Python workers takes 40-70 s, against 2-5 s for the others).
    """
    if where is None:
        return
    warm_up(spark)
    Path(where, f"{app}.ready").touch()
    deadline = time.monotonic() + timeout
    while not Path(where, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def cpu_seconds(spark: Any) -> dict[str, float]:
    """CPU seconds the application used: its executors' tasks (Spark's ``executorCpuTime`` over every stage), its
    driver JVM and its driver Python process. Less sensitive to the machine's load than batch time, so the pairs
    can say where a difference comes from."""
    import resource

    sc = spark.sparkContext
    jvm_ = sc._jvm
    try:  # Spark's status store (what the UI shows, kept with the UI off too): every stage's executorCpuTime
        stages = sc._jsc.sc().statusStore().stageList(jvm_.java.util.ArrayList(), False, False,
                                                      sc._gateway.new_array(jvm_.double, 0), jvm_.java.util.ArrayList())
        executor = sum(int(stages.apply(i).executorCpuTime()) for i in range(stages.size())) / 1e9
    except Exception:  # noqa: BLE001 - a figure for the record only
        executor = float("nan")
    pid = int(sc._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid())
    try:  # utime and stime of the driver JVM, in clock ticks (proc(5))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        jvm = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        jvm = float("nan")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"executors": round(executor, 3), "driver_jvm": round(jvm, 3), "driver_python": round(usage.ru_utime + usage.ru_stime, 3)}


def jvm_internal(spark: Any) -> dict[str, float]:
    """The driver JVM's own work, which no Java thread counts: JIT compilation and garbage collection (their seconds)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    try:
        return {"jit": management.getCompilationMXBean().getTotalCompilationTime() / 1000,
                "gc": sum(bean.getCollectionTime() for bean in management.getGarbageCollectorMXBeans()) / 1000}
    except Exception:  # noqa: BLE001 - a figure for the record only
        return {}


class SteadyMark:
    """``cpu_seconds`` once every query's first batch with input has finished: what the steady batches used is the
    end's figures less these (start-up — imports, the agent's plan derivation, the first batch — left out)."""

    def __init__(self, spark: Any, listener: Any, names: list[str], clocks: "DriverClocks") -> None:
        self.clocks = clocks
        self.at: dict[str, float] | None = None
        self.py4j_at: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, args=(spark, listener, names), daemon=True)
        self._thread.start()

    def _run(self, spark: Any, listener: Any, names: list[str]) -> None:
        while not all(any(r.input_rows > 0 for r in listener.records(n)) for n in names):
            time.sleep(0.2)
        self.at = cpu_seconds(spark)
        self.py4j_at = dict(self.clocks.py4j.threads)

    def steady(self, end: dict[str, float]) -> dict[str, float]:
        return {k: round(v - self.at[k], 3) for k, v in end.items() if k in self.at} if self.at else {}


def jvm_thread_seconds(spark: Any) -> dict[str, float]:
    """CPU seconds of the driver JVM's live threads, by name with its numbers left out (``py4j-gateway-init``,
    ``task-result-getter-``…): where the driver's CPU goes, for the overhead pairs to compare (threads that ended are
    not counted)."""
    try:
        mx = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getThreadMXBean()
        out: dict[str, float] = {}
        for info in mx.getThreadInfo(mx.getAllThreadIds()):
            if info is None:
                continue
            seconds = mx.getThreadCpuTime(info.getThreadId()) / 1e9
            name = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "#", str(info.getThreadName()))
            out[name] = out.get(name, 0.0) + max(0.0, seconds)
        return {k: round(v, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v >= 0.05}
    except Exception:  # noqa: BLE001 - a figure for the record only
        return {}


class GcClock:
    """CPU seconds the driver Python spends in its garbage collector, per generation (``gc.callbacks``)."""

    def __init__(self) -> None:
        import gc

        self.seconds = [0.0, 0.0, 0.0]
        self._began = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.thread_time()
        else:
            self.seconds[info["generation"]] += time.thread_time() - self._began

    def report(self) -> list[float]:
        return [round(v, 3) for v in self.seconds]


class Py4jCalls:
    """Python → JVM py4j commands of the driver, counted per Python thread, with every 16th call's nearest armd or
    bench frame: which code crosses into the JVM, and how often (the driver JVM serves each command)."""

    def __init__(self) -> None:
        from py4j import clientserver, java_gateway

        self.threads: dict[str, int] = {}
        self.callers: dict[str, int] = {}
        self._n = 0
        for cls in (clientserver.ClientServerConnection, java_gateway.GatewayConnection):
            cls.send_command = self._wrap(cls.send_command)

    def _wrap(self, send: Callable[..., Any]) -> Callable[..., Any]:
        import sys

        def counted(connection: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
            name = re.sub(r"\d+", "#", threading.current_thread().name)
            self.threads[name] = self.threads.get(name, 0) + 1
            self._n += 1
            if self._n % 16 == 0:
                frame = sys._getframe(1)
                while frame is not None and not any(k in frame.f_code.co_filename for k in ("armd", "bench")):
                    frame = frame.f_back
                where = "other" if frame is None else f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
                self.callers[where] = self.callers.get(where, 0) + 16
            return send(connection, command, *args, **kwargs)

        return counted

    def report(self) -> dict[str, Any]:
        top = sorted(self.callers.items(), key=lambda kv: -kv[1])[:12]
        return {"threads": dict(sorted(self.threads.items(), key=lambda kv: -kv[1])), "callers": dict(top)}


class DriverClocks:
    """The driver Python's own counters, installed before the Spark session so that they see its every py4j call."""

    def __init__(self) -> None:
        self.gc, self.py4j = GcClock(), Py4jCalls()


def driver_figures(spark: Any, mark: SteadyMark) -> dict[str, Any]:
    """Where the driver's CPU went, the same keys for the agent's application and the plain one."""
    cpu, py4j = cpu_seconds(spark), mark.clocks.py4j
    return {"cpu_seconds": cpu, "steady_cpu_seconds": mark.steady(cpu), "jvm_threads": jvm_thread_seconds(spark),
            "jvm_internal": jvm_internal(spark), "python_gc_seconds": mark.clocks.gc.report(), "py4j": py4j.report(),
            "steady_py4j_calls": {k: v - mark.py4j_at.get(k, 0) for k, v in py4j.threads.items()}}


def warm_up(spark: Any) -> None:
    """Bring up the application's executor and a Python worker on it: the same small job on both sides of a pair."""
    spark.sparkContext.parallelize(range(4), 1).map(lambda x: x + 1).sum()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("kind", "app", "store", "shared"):
        parser.add_argument(name)
    parser.add_argument("start", type=float)
    parser.add_argument("end", type=float)
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--mode", default="apply")
    parser.add_argument("--no-instrument", action="store_true", help="the agent without armd's probes in the plans")
    parser.add_argument("--replay", action="store_true", help="migrations replay the new plan's window (docs/genmig.md)")
    parser.add_argument("--barrier", metavar="DIR", help="start the queries only once DIR/go exists (see barrier)")
    parser.add_argument("--suffix", default="", help="added to every query name (a second run beside the first)")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    clocks = DriverClocks()
    shared = Path(args.shared)
    sources = json.loads((shared / "sources.json").read_text())
    spark = SparkSession.builder.appName(args.app).getOrCreate()
    from armd.adapters.spark.source import register

    register(spark)  # armd's replayable synthetic source stands in for the team's Kafka topics
    names = [base + args.suffix for base in KINDS[args.kind]]
    if args.plain:
        plain(spark, args, names, sources, shared, clocks)
        return
    from armd.agent import Agent

    agent = Agent(spark, store=args.store, app=args.app, mode=args.mode, checkpoint_root=str(shared / "checkpoints" / args.app),
                  poll_seconds=1.0, instrument=not args.no_instrument, replay=args.replay)
    barrier(spark, args.barrier, args.app)
    for name in names:
        spec = QUERIES[base_name(name)]
        agent.query(name, windows=spec["windows"], slides=spec["slides"], streams=spec["streams"],
                    sources={s: sources[s] for s in spec["streams"]})(spec["function"])
        agent.start(name, sink=lambda df, name=name: df.writeStream.foreachBatch(user_sink(shared / "results" / f"{name}.jsonl")))
    mark = SteadyMark(spark, agent.listener, names, clocks)
    def newest(name: str) -> str | None:
        run = agent.manager.get(name).query
        return None if run is None else str(run.runId)

    read_to_end(agent.listener, names, args.end, args.timeout, newest)
    deadline = time.monotonic() + 120
    while agent.applier.running_migrations() and time.monotonic() < deadline:  # a migration still open finishes first
        time.sleep(0.5)
    read_to_end(agent.listener, names, args.end, args.timeout, newest)  # its new run too, if it replays behind
    for name in names:
        query = agent.manager.get(name).query
        if query is not None:
            query.processAllAvailable()
    report = {"app": args.app, "throughput": throughput(agent.listener, names),
              "final_plans": {name: agent.manager.get(name).params.as_json() for name in names},
              "agent_cpu_seconds": agent.loop.cpu_seconds, "agent_rounds": agent.loop.rounds, **driver_figures(spark, mark)}
    agent.stop()
    (shared / f"{args.app}.json").write_text(json.dumps(report))


def plain(spark: Any, args: Any, names: list[str], sources: dict, shared: Path, clocks: DriverClocks) -> None:
    """The same queries at their largest windows and smallest slides, without armd: the overhead baseline."""
    from armd.adapters.spark.listener import ProgressListener
    from armd.adapters.spark.managed import QueryParams
    from armd.agent.settings import Range, Settings

    listener = ProgressListener().attach(spark)
    barrier(spark, args.barrier, args.app)
    queries = []
    for name in names:
        spec = QUERIES[base_name(name)]
        windows = {n: Range.parse(v, n) for n, v in spec["windows"].items()}
        slides = {n: Range.parse(v, n) for n, v in spec["slides"].items()}
        params = QueryParams(windows={n: r.high for n, r in windows.items()},
                             slides={n: r.low for n, r in slides.items()},
                             extra={"sources": {s: sources[s] for s in spec["streams"]}})
        df = spec["function"](spark, Settings(spark, params, windows, slides))
        queries.append(df.writeStream.queryName(f"{name}@0").foreachBatch(user_sink(shared / "plain" / f"{name}.jsonl"))
                       .option("checkpointLocation", str(shared / "checkpoints" / "plain" / name)).start())
    mark = SteadyMark(spark, listener, names, clocks)
    read_to_end(listener, names, args.end, args.timeout)
    for query in queries:
        query.processAllAvailable()
    report = {"app": args.app, "throughput": throughput(listener, names), **driver_figures(spark, mark)}
    for query in queries:
        query.stop()
    (shared / f"{args.app}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
