"""``bench/fleet.py``: armd governing many applications.

``--simulated-agents AxQ`` (``bench/fleet_agents.py``): the real daemon and
the real PostgreSQL with A simulated applications of Q queries each, every
one reporting each second through the agent's own code; prints
``{"agents": A, "queries": A*Q, "observation_lag_p99_s": …, "decision_ms": …,
"store_rows_per_day": …}`` (targets: p99 lag ≤ 2 s, decision ≤ 1 s).

Without it (``bench/fleet_cluster.py``): a standalone master and two
workers on 127.0.0.1, PostgreSQL, the daemon, and two applications
``spark-submit``ted with ``armd.agent`` inside (three governed queries, one a
stream-stream join, ``foreachBatch`` sinks); a burst forces migrations and
every result is checked against an oracle. Prints ``{"cluster": "spark://…",
"apps": 2, "queries": N, "decisions": N, "migrations": N, "lost": 0,
"duplicated": 0, "wrong": 0, "peak_state_over_bound": r,
"seconds_over_bound": s, "agent_overhead_pct": p}``. ``--keep DIR`` keeps
the run's files and database; ``--evaluate DIR`` recomputes a kept run's
figures; ``--overhead-only`` runs only the agent-overhead pairs, and
``--agent-args ARGS`` gives their agent application extra arguments (e.g.
``--no-instrument``) for bisecting the overhead.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def shape(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    if not match or int(match[1]) < 1 or int(match[2]) < 1:
        raise argparse.ArgumentTypeError(f"expected APPLICATIONSxQUERIES, e.g. 100x10, got {text!r}")
    return int(match[1]), int(match[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulated-agents", type=shape, metavar="AxQ",
                        help="A simulated applications of Q queries each (e.g. 100x10)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--seconds", type=float, default=60.0, help="measurement window after the warm-up (default 60)")
    parser.add_argument("--workers", type=int, default=4, help="processes the simulated applications run in (default 4)")
    parser.add_argument("--rate", type=float, default=10.0, help="elements per second of each query's stream (default 10)")
    parser.add_argument("--warmup-limit", type=float, default=180.0,
                        help="longest wait for every query to be admitted before measuring (default 180 s)")
    parser.add_argument("--daemon-log", metavar="FILE", help="--simulated-agents: write the daemon's log lines to FILE")
    parser.add_argument("--memory-bytes", type=float, default=None, help="the cluster run's memory bound")
    parser.add_argument("--keep", metavar="DIR", help="the cluster run: keep its files and database in DIR")
    parser.add_argument("--evaluate", metavar="DIR", help="the cluster run: recompute the figures of a run kept in DIR")
    parser.add_argument("--replay", action="store_true",
                        help="the cluster run: the applications' migrations replay the new plan's window (Agent(replay=True))")
    parser.add_argument("--overhead-only", action="store_true",
                        help="the cluster run: only its agent-overhead pairs (no daemon, no burst), for development")
    parser.add_argument("--agent-args", default="", metavar="ARGS",
                        help="--overhead-only: extra arguments of the agent's application, e.g. '--no-instrument'")
    args = parser.parse_args(argv)
    if args.simulated_agents is None:
        import fleet_cluster

        cluster_args = [*(["--memory-bytes", str(args.memory_bytes)] if args.memory_bytes else []),
                        *(["--keep", args.keep] if args.keep else []), *(["--evaluate", args.evaluate] if args.evaluate else []),
                        *(["--overhead-only"] if args.overhead_only else []), *(["--replay"] if args.replay else []),
                        *([f"--agent-args={args.agent_args}"] if args.agent_args else [])]
        result = fleet_cluster.main(cluster_args)
        print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
        return 0
    if args.workers < 1 or args.seconds <= 0:
        print("fleet: --workers must be ≥ 1 and --seconds > 0", file=sys.stderr)
        return 2
    from fleet_agents import run

    agents, queries = args.simulated_agents
    result = run(agents, queries, args.seconds, min(args.workers, agents), args.rate, args.warmup_limit, args.daemon_log)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
