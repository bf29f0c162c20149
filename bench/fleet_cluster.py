"""``bench/fleet.py`` on a real Spark cluster: two ``spark-submit`` applications under one armd daemon on PostgreSQL.

Why: armd's claim for teams is that it governs *their* applications — their
own drivers, executors on a cluster, ``foreachBatch`` sinks — through
``armd.agent`` and the store alone, and that a plan change there loses,
repeats and changes no result. This measures it end to end:

1. a standalone master and two workers on 127.0.0.1 (``tests/support/cluster.py``),
   a fresh database on the PostgreSQL of ``scripts/postgres-up``, and
   ``armd run`` deciding for every agent query in that store;
2. ``bench/fleet_app.py`` submitted twice (``shop``: a sliding count and a
   stream-stream join; ``ads``: a sliding count), all over the replayed
   synthetic streams ``views`` and ``clicks``; ``views`` bursts ×4, which
   pushes the state over the bound and makes the daemon cut windows, which
   the agents apply by GenMig inside the applications;
3. the oracle: each query run alone, in a local Spark session here, at every
   settings version it had (from the store's migrations), over the same
   replayed input; a result is right when it equals the oracle's of the
   version in force at its reference point (T_split splits versions);
4. the agent's overhead: ``ads`` again in ``recommend`` mode (the agent
   present, applying nothing) and without the agent, side by side on the
   same cluster over the same input read from its start (saturated):
   processed rows per second of batch time, the agent's against the plain.

Measured state over the bound comes from the progress the agents reported
(``batches``: every run's newest state bytes, summed each second).
"""

from __future__ import annotations

import contextlib
import json
import re
import math
import os
import pickle
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

import migration  # noqa: E402
from support.cluster import StandaloneCluster, spark_env, submit_command  # noqa: E402
from support.daemon import HEARTBEAT  # noqa: E402

from armd.adapters.spark.source import schedule_json  # noqa: E402
from armd.adapters.synthetic import Schedule  # noqa: E402

APP = REPO / "bench" / "fleet_app.py"
END = 150.0
"""Seconds of event time the streams last (they run at wall-clock speed)."""
BURST = (50.0, 50.0, 4.0)
"""(at, duration, factor) of the burst on ``views``, in seconds of the stream."""
RATES = {"views": 40.0, "clicks": 10.0}
KEYS = 1000
DECIDE_SECONDS = 2.0
DELAY_SECONDS = 2.0
WINDOW_MAX_SECONDS = 16.0

CONFIG = """
[store]
url = "{url}"
application_timeout_seconds = 60

[model]
profile = "spark"

[bounds]
memory_bytes = {memory}
cpu = 1e9
reserve = 0

[schedule]
observe_seconds = 1
decide_seconds = {decide}
apply_seconds = 0.5

""" + HEARTBEAT


BATCH_SECONDS = 4.0
"""The most event time a paced batch reads (``sources``)."""


def sources(start: float, end: float = END, burst: tuple[float, float, float] | None = BURST,
            speed: float = 1.0, paced: bool = True) -> dict[str, dict[str, Any]]:
    """The applications' ``armd-synthetic`` options per stream: ``end`` seconds long, ``views`` with ``burst`` (or none),
    ``speed`` seconds of the stream per wall-clock second.

    ``paced``: a batch reads at most ``BATCH_SECONDS`` of the stream, so that two runs reading a backlog read it in the
    same batches (the overhead pairs, saturated) and a test's batches have a known length. Not paced (the burst run),
    a batch reads everything that has arrived, as a Kafka application's does with the default trigger: a run behind
    the clock — a driver that started late, a migration's new run that took seconds to start — catches up in its next
    batch instead of staying behind for good (paced, it can only gain what its batches take less than their span)."""
    names = ",".join(RATES)
    out = {}
    for name, rate in RATES.items():
        bursts = (burst,) if name == "views" and burst else ()
        out[name] = {"format": "armd-synthetic", "start": repr(start), "schedule": json.dumps(schedule_json(Schedule(rate, (), bursts))),
                     "seed": 11, "all_streams": names, "keys": KEYS, "end_seconds": end, "speed": speed,
                     **({"max_seconds_per_batch": BATCH_SECONDS} if paced else {})}
    return out


def postgres_database() -> tuple[str, Any]:
    """A fresh database on the loopback PostgreSQL (``scripts/postgres-up``); its URL and a function dropping it."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    server = subprocess.run(["bash", str(REPO / "scripts" / "postgres-up")], check=True, capture_output=True, text=True).stdout.strip()
    name = f"armd_fleet_{os.getpid()}"
    admin = create_engine(make_url(server).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(server).set(database=name).render_as_string(hide_password=False), drop


def submit(master: str, args: list[str], log: Path) -> subprocess.Popen:
    """``spark-submit`` an application in the background: one executor of one core, its output to ``log``."""
    conf = {"spark.cores.max": "1", "spark.executor.memory": "512m", "spark.sql.shuffle.partitions": "2"}
    return subprocess.Popen(submit_command(master, APP, args, conf), env=spark_env(), stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)


@contextlib.contextmanager
def stopped_on_exit(procs: dict[str, subprocess.Popen]) -> Iterator[dict[str, subprocess.Popen]]:
    """``procs`` (submitted applications, each in a session of its own) stopped if still running when the block ends:
    a failed application, a timeout or a stopped benchmark does not leave the others running."""
    try:
        yield procs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)


def wait_all(procs: dict[str, subprocess.Popen], logs: dict[str, Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for name, proc in procs.items():
        try:
            code = proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            raise RuntimeError(f"application {name} did not finish in {timeout:g} s; its log: {logs[name]}") from None
        if code != 0:
            tail = "\n".join(logs[name].read_text().splitlines()[-15:])
            raise RuntimeError(f"application {name} exited with {code}:\n{tail}")


def read_results(path: Path) -> list[dict[str, Any]]:
    """The user's sink's rows, with their times as datetimes again (what ``migration.results`` reads)."""
    def at(value: float) -> datetime:
        return datetime.fromtimestamp(value, tz=timezone.utc)

    rows = []
    for line in path.read_text().splitlines() if path.exists() else ():
        row = json.loads(line)
        if "window" in row:
            row["window"] = {k: at(v) for k, v in row["window"].items()}
        for key in ("vt", "ct"):
            if key in row:
                row[key] = at(row[key])
        rows.append(row)
    return rows


def versions(engine: Any, query: str) -> list[tuple[float, dict]]:
    """The query's settings versions as (from event time, QueryParams JSON): the first from −∞, each migration's from T_split.

    A migration that failed before its new run started changed nothing: the old plan's version goes on. Results
    the old run's sink filter held back meanwhile (it is set to T_split before the new run starts) count as lost.
    """
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text("SELECT details, state FROM migrations WHERE query = :q ORDER BY started_at"),
                            {"q": query}).all()
    out: list[tuple[float, dict]] = []
    for details, state in rows:
        details = json.loads(details) if isinstance(details, str) else details
        if state == "rolled_back":
            continue  # superseded before its new run wrote a result (a deeper cut): the old plan went on
        if state == "failed" and "live" not in details:
            continue  # its new run never started (e.g. Spark's Python worker did not connect back): the old plan went on
        if state == "done" and "live" not in details and details.get("old") is None:
            continue  # the query's first settings, put into force as it started (no run before it): nothing to split
        if state == "failed" or "live" not in details:
            raise RuntimeError(f"migration of {query} ended {state}: its old run answered alone again, which this "
                               "benchmark's oracle does not model")
        live = details["live"]  # one still open at the streams' end splits the results all the same
        if not out:
            out.append((-math.inf, live["old_plan"]))
        out.append((float(live["t_split"]), live["new_plan"]))
    return out


def oracle(queries: dict[str, list[tuple[float, dict]]], start: float, shared: Path, end: float = END) -> dict[str, dict]:
    """Each query's results as the oracle gives them: every version run alone over the same input, split at T_split."""
    import fleet_app
    from armd.adapters.spark.listener import ProgressListener
    from armd.adapters.spark.managed import ManagedSpec, QueryManager, QueryParams
    from armd.adapters.spark.session import build_session
    from armd.adapters.spark.sinks import MemorySink
    from armd.agent.settings import Range, Settings

    spark = build_session("local[2]", "armd-fleet-oracle", shuffle_partitions=2)
    listener = ProgressListener().attach(spark)
    manager, sink = QueryManager(spark, shared / "oracle-checkpoints"), MemorySink()
    runs: dict[str, list[tuple[float, str]]] = {}
    for query, chain in queries.items():
        spec = fleet_app.QUERIES[query]
        windows = {n: Range.parse(v, n) for n, v in spec["windows"].items()}
        slides = {n: Range.parse(v, n) for n, v in spec["slides"].items()}

        def build(spark: Any, params: QueryParams, function: Any = spec["function"], windows: Any = windows,
                  slides: Any = slides) -> Any:
            return function(spark, Settings(spark, params, windows, slides))

        for i, (since, plan) in enumerate(chain):
            name = f"{query}_v{i}"
            manager.register(ManagedSpec(name, build, sink, QueryParams.from_json(plan)))
            manager.start(name)
            # One at a time: a start launches Python workers that must connect back to the JVM within Spark's
            # timeout, which several started together miss on a loaded machine (the query then fails).
            listener.wait_for(lambda name=name: listener.latest(name) is not None, 120)
            runs.setdefault(query, []).append((since, name))
    names = [n for chain in runs.values() for _, n in chain]
    fleet_app.read_to_end(listener, names, end, 600)
    for name in names:
        manager.get(name).query.processAllAvailable()
        manager.stop(name)
    out = {}
    for query, chain in runs.items():
        expected: dict = {}
        bounds = [since for since, _ in chain][1:] + [math.inf]
        for (since, name), until in zip(chain, bounds):
            for identity, values in migration.results(sink.rows(name), start).items():
                if since - start <= identity[0] < until - start:
                    expected[identity] = values
        out[query] = expected
    listener.detach(spark)
    return out


SILENT_SECONDS = 5.0
"""A run that has not reported for this long (no migration says when it stopped) has stopped: the streams ended."""


def state_over_bound(engine: Any, bound: float, burst_at: float) -> dict[str, float]:
    """Measured state against the bound from the burst on: each second, every run alive then, its newest report summed.

    A run is alive from its first report until the migration that replaced it stopped it (the agent records the
    migration done then, or, when the new run was still catching up, at ``old_stopped_at``), or until it has been
    silent for ``SILENT_SECONDS``. Two figures:
    ``seconds_over_bound`` counts the seconds over the bound; ``back_under_bound_s`` is the time from the first
    second over the bound until the state is back under it for good (the issue's target, against
    ``burst_limit_s``).
    """
    from sqlalchemy import text

    with engine.connect() as conn:
        rows = conn.execute(text("SELECT run_id, query, plan_version, at, state_bytes FROM batches ORDER BY at")).all()
        replaced = conn.execute(text("SELECT query, details, finished_at FROM migrations "
                                     "WHERE state = 'done' AND finished_at IS NOT NULL")).all()
    return state_figures(
        [(r[0], r[1], r[2], _epoch(r[3]), float(r[4])) for r in rows],
        {(query, int(_details(details)["live"]["old_plan"]["version"])): _old_stopped(_details(details), finished)
         for query, details, finished in replaced if "live" in _details(details)},
        bound, burst_at)


def _old_stopped(details: dict[str, Any], finished: datetime) -> float:
    """When a migration's old run stopped: as it finished, or earlier when the new run was still catching up then."""
    stopped = details["live"]["facts"].get("old_stopped_at")
    return _epoch(finished) if stopped is None else min(float(stopped), _epoch(finished))


def _epoch(at: datetime) -> float:
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp()


def _details(details: Any) -> dict[str, Any]:
    return json.loads(details) if isinstance(details, str) else details


def state_figures(points: list[tuple[str, str, int | None, float, float]], ended: dict[tuple[str, int], float],
                  bound: float, burst_at: float) -> dict[str, float]:
    """``state_over_bound``'s figures from (run, query, plan version, at, state bytes) reports, oldest first, and the
    time each replaced (query, plan version) stopped."""
    if not points:
        return {"peak_state_over_bound": 0.0, "seconds_over_bound": 0.0, "back_under_bound_s": 0.0}
    first, last = math.floor(points[0][3]), math.ceil(points[-1][3])
    peak, over, latest, i = 0.0, [], {}, 0
    for second in range(first, last + 1):
        while i < len(points) and points[i][3] <= second:
            run, query, version, at, size = points[i]
            latest[run] = (at, size, ended.get((query, version)) if version is not None else None)
            i += 1
        held = sum(size for at, size, stop in latest.values()
                   if second - at <= SILENT_SECONDS and (stop is None or second < stop))
        if second >= burst_at:
            peak = max(peak, held / bound)
            if held > bound:
                over.append(second)
    back = float(over[-1] + 1 - over[0]) if over else 0.0
    return {"peak_state_over_bound": round(peak, 3), "seconds_over_bound": float(len(over)), "back_under_bound_s": back}


def run(memory_bytes: float, shared: Path, keep_store: bool = False, replay: bool = False) -> dict[str, Any]:
    from armd.adapters.store.sql import SqlStore

    url, drop = postgres_database()
    store = SqlStore.open(url)
    store.upgrade()
    config = shared / "armd.toml"
    config.write_text(CONFIG.format(url=url, memory=int(memory_bytes), decide=DECIDE_SECONDS))
    daemon_log = (shared / "daemon.log").open("w")
    daemon = subprocess.Popen([sys.executable, "-m", "armd.daemon.cli", "run", "--config", str(config)],
                              stdout=daemon_log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster = StandaloneCluster(workers=2, cores=2, memory="1g").start()
    try:
        start = migration.ALIGN * math.ceil((time.time() + 45) / migration.ALIGN)  # the drivers need ~30 s to start
        (shared / "sources.json").write_text(json.dumps(sources(start, paced=False)))
        logs = {app: shared / f"{app}.log" for app in APPS}
        with stopped_on_exit({}) as procs:
            for app, kind in APPS.items():
                procs[app] = submit(cluster.master_url, [kind, app, url, str(shared), repr(start), repr(END),
                                                         *(["--replay"] if replay else [])], logs[app])
            wait_all(procs, logs, END + 600)
        out = evaluate(url, shared, start, memory_bytes)
        out = {"cluster": cluster.master_url, **out}
        (shared / "fleet.json").write_text(json.dumps(out))  # kept if the overhead phase fails
        out.update(agent_overhead(cluster.master_url, url, shared))
        return out
    finally:
        cluster.stop()
        daemon.terminate()
        daemon.wait(30)
        store.close()
        if keep_store:
            print(f"the run's store is kept: {url}", file=sys.stderr)
        else:
            drop()


APPS = {"shop": "shop", "ads": "ads"}
"""Application name → kind (``fleet_app.KINDS``)."""


def evaluate(url: str, shared: Path, start: float, memory_bytes: float) -> dict[str, Any]:
    """The figures of a finished run: its store, the applications' result files, and the oracle run here."""
    import fleet_app
    from sqlalchemy import create_engine

    engine = create_engine(url)
    decisions = store_count(engine, "SELECT count(*) FROM decisions")
    migrations = {app: store_count(engine, "SELECT count(*) FROM migrations m JOIN queries q ON q.name = m.query "
                                   "WHERE q.app = :app AND m.state = 'done'", app=app) for app in APPS}
    queries = [q for kind in APPS.values() for q in fleet_app.KINDS[kind]]
    finals = {q: plan for app in APPS for q, plan in json.loads((shared / f"{app}.json").read_text())["final_plans"].items()}
    chains = {q: versions(engine, q) or [(-math.inf, finals[q])] for q in queries}
    over = state_over_bound(engine, memory_bytes, start + BURST[0])
    engine.dispose()
    wanted = oracle(chains, start, shared)
    got = {q: migration.results(read_results(shared / "results" / f"{q}.jsonl"), start) for q in queries}
    counts = {q: migration.compare(wanted[q], got[q]) for q in queries}
    with (shared / "evaluation.pickle").open("wb") as out:  # for looking into a result that is off
        pickle.dump({"chains": chains, "wanted": wanted, "got": got, "start": start}, out)
    return {
        "apps": len(APPS), "queries": len(queries), "decisions": decisions, "migrations": sum(migrations.values()),
        **{k: sum(c[k] for c in counts.values()) for k in ("lost", "duplicated", "wrong")},
        **over,
        "burst_limit_s": WINDOW_MAX_SECONDS + DELAY_SECONDS + 2 * DECIDE_SECONDS,
        "migrations_per_app": migrations, "per_query": counts,
        "results": {q: sum(len(v) for v in got[q].values()) for q in queries}, "bound_bytes": memory_bytes,
    }


def store_count(engine: Any, sql: str, **params: Any) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


OVERHEAD_PAIRS = 3
"""Side-by-side pairs (agent, plain) the overhead is the median of: one pair on a shared 2-core machine is noise."""


def agent_overhead(master: str, url: str, shared: Path, pairs: int = OVERHEAD_PAIRS,
                   agent_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """Percent fewer rows per second of batch time with the agent (recommend mode) than without, same input, same time.

    Each pair runs ``ads`` twice side by side on the same cluster over the same replayed input (all of it there:
    read at full speed), once with the agent and once plain; which of the two is submitted first alternates from
    pair to pair, and both start their streams at the same moment (``fleet_app.barrier``: their drivers start up
    20-40 s apart), so that their batches meet the same load of the machine. The figure counts each run's steady
    batches (its first one, which carries the executor's start-up, left out: ``fleet_app.throughput``), the same
    batches of the same input on both sides; ``agent_overhead_with_first_batch_pct`` counts every batch. The figure
    is the median of the pairs' overheads; the spread (max − min, in points) and every pair's figure go beside it,
    and the agent's own thread's CPU seconds per pair (``agent/loop.py``) say how much of the driver the agent
    itself took. ``agent_args`` go to the agent's application only (e.g. ``--no-instrument``: bisecting the overhead).
    """
    figures, with_first, agent_cpu, cpu_pairs, thread_pairs, steady_pairs = [], [], [], [], [], []
    for pair in range(pairs):
        where = shared / "overhead" / f"pair{pair}"
        where.mkdir(parents=True, exist_ok=True)
        (where / "sources.json").write_text(json.dumps(sources(time.time() - END - 10)))
        agent_app = f"ads_recommend{pair}"  # a name of its own in the store for each pair's agent application
        gate = where / "barrier"
        gate.mkdir(exist_ok=True)
        names = {agent_app: ["ads", agent_app, url, str(where), "0", repr(END), "--mode", "recommend",
                             "--suffix", f"_recommend{pair}", "--barrier", str(gate), *agent_args],
                 "ads_plain": ["ads", "ads_plain", url, str(where), "0", repr(END), "--plain", "--barrier", str(gate)]}
        order = list(names) if pair % 2 == 0 else list(reversed(names))
        logs = {name: where / f"{name}.log" for name in names}
        with stopped_on_exit({}) as procs:
            for name in order:
                procs[name] = submit(master, names[name], logs[name])
            open_barrier(gate, procs, 600)
            wait_all(procs, logs, 900)
        speed, speed_all, cpu, threads, steady = {}, {}, {}, {}, {}
        for name in names:
            report = json.loads((where / f"{name}.json").read_text())
            cpu[name] = report.get("cpu_seconds") or {}
            threads[name] = {re.sub(r"stream execution thread for .*", "stream execution thread", k): v
                             for k, v in (report.get("jvm_threads") or {}).items()}
            steady[name] = report.get("steady_cpu_seconds") or {}
            queries = report["throughput"].values()
            speed[name] = sum(q["steady_rows"] for q in queries) / max(1e-9, sum(q["steady_batch_seconds"] for q in queries))
            speed_all[name] = sum(q["rows"] for q in queries) / max(1e-9, sum(q["batch_seconds"] for q in queries))
            if "agent_cpu_seconds" in report:
                agent_cpu.append(round(report["agent_cpu_seconds"], 2))
        figures.append(round(100.0 * (1.0 - speed[agent_app] / speed["ads_plain"]), 2))
        with_first.append(round(100.0 * (1.0 - speed_all[agent_app] / speed_all["ads_plain"]), 2))
        cpu_pairs.append({"agent": cpu[agent_app], "plain": cpu["ads_plain"]})
        thread_pairs.append({"agent": threads[agent_app], "plain": threads["ads_plain"]})
        steady_pairs.append({"agent": steady[agent_app], "plain": steady["ads_plain"]})
    return {"agent_overhead_pct": round(statistics.median(figures), 2),
            "agent_overhead_spread_pct": round(max(figures) - min(figures), 2),
            "agent_overhead_pairs_pct": figures,
            "agent_overhead_with_first_batch_pct": round(statistics.median(with_first), 2),
            "agent_overhead_with_first_batch_pairs_pct": with_first, "agent_cpu_seconds": agent_cpu,
            **cpu_split(cpu_pairs), "agent_jvm_thread_extra_seconds": thread_split(thread_pairs),
            "steady": cpu_split(steady_pairs)}


def cpu_split(pairs: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """What the agent's application used more than the plain one, in CPU seconds per part (median of the pairs), and
    in percent of the plain one's total: the machine's load moves CPU seconds far less than batch seconds."""
    parts = sorted({part for pair in pairs for side in pair.values() for part in side})
    if not parts:
        return {}
    extra = {part: round(statistics.median(p["agent"].get(part, math.nan) - p["plain"].get(part, math.nan) for p in pairs), 2)
             for part in parts}
    percent = [100.0 * (sum(p["agent"].values()) / sum(p["plain"].values()) - 1.0) for p in pairs if sum(p["plain"].values()) > 0]
    return {"agent_cpu_extra_seconds": extra, "agent_cpu_overhead_pct": round(statistics.median(percent), 2) if percent else None,
            "cpu_seconds_pairs": pairs}


def thread_split(pairs: list[dict[str, dict[str, float]]], top: int = 8) -> dict[str, float]:
    """The driver JVM's threads the agent's application spent most more CPU in than the plain one (median of the pairs)."""
    names = {name for pair in pairs for side in pair.values() for name in side}
    extra = {name: statistics.median(p["agent"].get(name, 0.0) - p["plain"].get(name, 0.0) for p in pairs) for name in names}
    return {name: round(v, 2) for name, v in sorted(extra.items(), key=lambda kv: -abs(kv[1]))[:top]}


def open_barrier(gate: Path, procs: dict[str, subprocess.Popen], timeout: float) -> None:
    """``GATE/go`` once every application said it is ready (or one ended: ``wait_all`` then reports it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all((gate / f"{name}.ready").exists() for name in procs):
        if any(proc.poll() is not None for proc in procs.values()):
            break
        time.sleep(0.2)
    (gate / "go").touch()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import argparse

    parser = argparse.ArgumentParser(description="the fleet benchmark on a standalone Spark cluster")
    parser.add_argument("--memory-bytes", type=float, default=6_000_000)
    parser.add_argument("--keep", help="keep the run's files (and its database) in this directory")
    parser.add_argument("--replay", action="store_true",
                        help="the applications' migrations replay the new plan's window (Agent(replay=True), docs/genmig.md)")
    parser.add_argument("--evaluate", metavar="DIR", help="only compute the figures of a run kept with --keep")
    parser.add_argument("--overhead-only", action="store_true",
                        help="only the agent-overhead pairs (cluster and database, no daemon, no burst run): for development")
    parser.add_argument("--agent-args", default="", help="extra arguments of the overhead pairs' agent application, e.g. "
                        "'--no-instrument' (bisecting the overhead; see bench/fleet_app.py)")
    args = parser.parse_args(argv)
    # A stopped benchmark (kill, timeout) still stops its cluster and daemon and drops its database: ``run``'s finally.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.evaluate:
        where = Path(args.evaluate)
        url = next(line.split('"')[1] for line in (where / "armd.toml").read_text().splitlines() if line.startswith("url"))
        start = float(json.loads((where / "sources.json").read_text())["views"]["start"])
        return evaluate(url, where, start, args.memory_bytes)
    shared = Path(args.keep or tempfile.mkdtemp(prefix="armd-fleet-"))
    shared.mkdir(parents=True, exist_ok=True)
    if args.overhead_only:
        return overhead_only(shared, tuple(args.agent_args.split()))
    return run(args.memory_bytes, shared, keep_store=bool(args.keep), replay=args.replay)


def overhead_only(shared: Path, agent_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """``agent_overhead`` alone on a cluster and a database of its own (the agents in recommend mode need no daemon)."""
    from armd.adapters.store.sql import SqlStore

    url, drop = postgres_database()
    store = SqlStore.open(url)
    store.upgrade()
    store.close()
    cluster = StandaloneCluster(workers=2, cores=2, memory="1g").start()
    try:
        return {"cluster": cluster.master_url, **agent_overhead(cluster.master_url, url, shared, agent_args=agent_args)}
    finally:
        cluster.stop()
        drop()


if __name__ == "__main__":
    print(json.dumps(main()))
