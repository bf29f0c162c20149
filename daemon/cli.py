"""The ``armd`` command line.

Each subcommand parses its arguments, calls into the package and turns a
user mistake into one line on stderr and exit status 2; a traceback means a
bug in armd, never in the user's input.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import math
import os
import re
import signal
import sys
import tomllib
from contextlib import closing, nullcontext
from importlib import metadata
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import NoReturn, Sequence

from armd.adapters.store import SchemaOutdated, SqlStore, StoreError
from armd.costmodel.calibration import CalibrationError, CpuSample, calibrate, cpu_terms
from armd.costmodel.evaluate import PROFILES, estimate
from armd.costmodel.plan import PlanError, PlanSet, parse_plan, unique_keys

from . import heralds_cli, logs, reads, render
from .estimate_view import estimate_json, estimate_table
from .history import history_text
from .units import parse_duration
from .config import Config, ConfigError, load_config
from armd.control.ports import QuerySettings
from .service import Service, StartError, open_store

EXIT_USAGE = 2


class UserError(Exception):
    """A mistake in the user's input; printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()
        return code
    except UserError as exc:
        print(f"armd: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (`armd history --json | head -1`): that is its choice, not an error worth a
        # traceback. Point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


class _Parser(argparse.ArgumentParser):
    """A mistake on the command line is one line too, like every other user mistake (``armd -h`` shows usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}; see {self.prog} -h\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="armd", description="Adaptive resource manager for Spark Structured Streaming")
    parser.add_argument("--version", action="version", version=f"armd {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    est = commands.add_parser("estimate", help="estimate memory and CPU of the queries in a plan file")
    est.add_argument("plan", type=Path, help="plan file (.json or .toml), see docs/plan-format.md")
    est.add_argument("--json", action="store_true", help="print JSON instead of a table")
    est.add_argument("--profile", choices=PROFILES, default="paper", help="engine profile (default: paper)")
    est.set_defaults(handler=_estimate)

    run = commands.add_parser("run", help="run the daemon until SIGTERM or Ctrl-C")
    _config_option(run)
    run.add_argument("--live", action="store_true", help="show a live status on the terminal (logs go to --log-file)")
    run.add_argument("--log-file", type=Path, default=Path("armd.log"), help="log file with --live (default: armd.log)")
    run.add_argument("--standby", action="store_true",
                     help="when another daemon holds the store, wait and take over once its lease lapses (default: exit)")
    run.set_defaults(handler=_run)

    check = commands.add_parser("check-config", help="validate a configuration file without starting")
    check.add_argument("file", type=Path, help="configuration file (TOML), see docs/configuration.md")
    check.add_argument("--json", action="store_true", help="print the validated configuration as JSON (secrets hidden)")
    check.set_defaults(handler=_check_config)

    status = commands.add_parser("status", help="queries, settings, estimated vs measured resources, last decision")
    _config_option(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=_status)

    explain = commands.add_parser("explain", help="why a query has its current settings")
    explain.add_argument("query", help="query name")
    _config_option(explain)
    explain.add_argument("--json", action="store_true", help="print JSON")
    explain.add_argument("--plan", action="store_true", help="show the query's plan derived from Spark beside the Spark operators")
    explain.set_defaults(handler=_explain)

    plan = commands.add_parser("plan", help="derive the cost-model plan of a builder's query from Spark's plan")
    plan.add_argument("builder", help='"module:function", called as function(spark, params) -> DataFrame')
    plan.add_argument("--config", type=Path, default=None, help="configuration giving the streams and [managed] params")
    plan.add_argument("--query", default=None, help="query name (default: its [managed] entry, else the function's name)")
    plan.add_argument("--json", action="store_true", help="print the plan document (a valid plan file)")
    plan.set_defaults(handler=_plan)

    history = commands.add_parser("history", help="one timeline of decisions (old → new settings per query) and events, newest first")
    _config_option(history)
    history.add_argument("--query", default=None, help="only this query's setting changes and events")
    history.add_argument("--since", type=_duration, default=None, help="only the last DURATION (e.g. 90s, 30m, 1h30m, 2d)")
    history.add_argument("--limit", type=_limit, default=20, help="at most this many entries (default 20)")
    history.add_argument("--json", action="store_true", help="print JSON")
    history.set_defaults(handler=_history)

    report = commands.add_parser("report", help="PNG plots of memory, CPU, QoS, decisions and migrations over time")
    report.add_argument("--out", type=Path, required=True, help="folder the PNG files are written to (created when missing)")
    _config_option(report)
    report.add_argument("--since", type=_duration, default=None, help="only the last DURATION (e.g. 90s, 30m, 1h, 2d)")
    report.add_argument("--json", action="store_true", help="print the written files as JSON")
    report.set_defaults(handler=_report)

    cal = commands.add_parser("calibrate", help="fit CPU constants and bytes per state row to the Spark batches in the store")
    _config_option(cal)
    cal.add_argument("--out", type=Path, default=None,
                     help="calibration file to write (default: calibration.json in the configuration's folder)")
    cal.add_argument("--since", type=_duration, default=None, help="only the last DURATION of batches (e.g. 1h)")
    cal.add_argument("--json", action="store_true", help="print the calibration as JSON")
    cal.set_defaults(handler=_calibrate)

    demo = commands.add_parser("jisc-demo", help="JISC and the join-order policy on the single-process host: "
                                                 "a three-way join whose best order changes midway (no Spark, no store)")
    demo.add_argument("--seconds", type=float, default=240.0, help="event time to generate (default 240; the rates change at half)")
    demo.add_argument("--seed", type=int, default=1, help="seed of the generated events (default 1)")
    demo.add_argument("--json", action="store_true", help="print JSON")
    demo.set_defaults(handler=_jisc_demo)

    heralds_cli.add_parsers(commands, _config_option)
    commands.choices["herald"].set_defaults(handler=_herald)

    db = commands.add_parser("db", help="metadata store schema")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_commands.add_parser("upgrade", help="create or upgrade the store's schema to this version of armd")
    _config_option(upgrade)
    upgrade.add_argument("--json", action="store_true", help="print the revisions as JSON")
    upgrade.set_defaults(handler=_db_upgrade)
    return parser


def _jisc_demo(args: argparse.Namespace) -> int:
    if not (args.seconds > 0 and args.seconds <= 3600):
        raise UserError(f"--seconds must be in (0, 3600], got {args.seconds:g}")
    from .jisc_demo import main as demo

    return demo(args.json, args.seconds, args.seed)


def _config_option(parser: argparse.ArgumentParser) -> None:
    default = os.environ.get("ARMD_CONFIG", "config/armd.toml")
    parser.add_argument("--config", type=Path, default=Path(default), help=f"configuration file (default: $ARMD_CONFIG or {default})")


MAX_SINCE_DAYS = 36500
"""``--since`` reaches back a century at most: further is before any store and past what a date can hold."""
MAX_LIMIT = 1_000_000
"""``--limit`` at most: more rows than any terminal shows, and within what every database takes as a LIMIT."""


def _version() -> str:
    try:
        return metadata.version("armd")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree without installing
        return "unknown (not installed)"


def _duration(text: str) -> timedelta:
    seconds = parse_duration(text)
    known_unit = re.fullmatch(r"\s*\d+(?:\.\d+)?\s*([A-Za-z]+)\s*", text)
    if seconds is None and known_unit and parse_duration(f"1{known_unit[1]}") is not None:
        seconds = math.inf  # a number of a known unit too large for any date
    if seconds is None or seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}; allowed: a duration such as 90s, 30m, 1h30m or 2d")
    if seconds > MAX_SINCE_DAYS * 86400:
        raise argparse.ArgumentTypeError(f"duration {text!r} is too long; allowed: at most {MAX_SINCE_DAYS}d")
    return timedelta(seconds=seconds)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number in [1, {MAX_LIMIT}], got {text!r}") from None
    if not 1 <= value <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"expected a whole number in [1, {MAX_LIMIT}], got {text}")
    return value


def load_plan(path: Path) -> PlanSet:
    """Read and validate a plan file; every failure is a ``UserError`` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read plan {path}: not UTF-8 text; allowed: a JSON or TOML plan file") from None
    try:
        doc = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text, object_pairs_hook=unique_keys)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, PlanError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise UserError(f"plan {path} is not valid {kind}: {exc}") from None
    try:
        return parse_plan(doc)
    except PlanError as exc:
        raise UserError(f"plan {path}: {exc}") from None


def _estimate(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    result = estimate(plan, args.profile)
    if args.json:
        print(json.dumps(estimate_json(plan, result), indent=2))
    else:
        print(estimate_table(plan, result))
    return 0


def load(path: Path) -> Config:
    try:
        return load_config(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def _open_store(config: Config) -> SqlStore:
    """The store for a read command: connected and on the current schema, or a ``UserError`` saying why."""
    log = logs.logger(command="cli")
    try:
        return open_store(config, log, must_exist=True)
    except SchemaOutdated as exc:
        raise UserError(str(exc)) from None
    except StoreError as exc:
        raise UserError(f"metadata store unavailable: {config.redact(str(exc))}") from None


def _run(args: argparse.Namespace) -> int:
    config = load(args.config)
    log_stream = None
    if args.live:
        try:
            log_stream = args.log_file.open("a", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot open log file {args.log_file}: {exc.strerror or exc}") from None
    logs.configure(config.redact, stream=log_stream)
    if log_stream is not None:
        # Libraries' own warnings (APScheduler's skipped runs) go to the log file too, not across the live view.
        logging.basicConfig(stream=log_stream, level=logging.WARNING, force=True)
    # `kill -USR1 PID` prints every thread's stack to stderr: what a stuck daemon is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    service = Service(config, logs.logger(), standby=args.standby)
    show, live = None, None
    if args.live:
        from .live import LiveStatus, status_view  # rich is only needed here

        live, words, store_url = LiveStatus(), reads.words(config), config.redact(config.store.url)
        footer = f"logs: {args.log_file}   Ctrl-C stops"

        def show() -> None:
            if service.store is None:
                return
            try:
                data = reads.managed_status(service.store)
                live.show(lambda width: status_view(data, store_url, words, width, footer))
            except StoreError as exc:
                message = f"metadata store unavailable: {config.redact(str(exc))}"
                live.show(lambda _width: message)
    try:
        with live if live is not None else nullcontext():
            service.run(every_tick=show)
    except (SchemaOutdated, StartError) as exc:
        raise UserError(str(exc)) from None
    except StoreError as exc:
        print(f"armd: metadata store unavailable, not starting: {config.redact(str(exc))}", file=sys.stderr)
        return 1
    finally:
        if log_stream is not None:
            log_stream.close()
    return 0


def _check_config(args: argparse.Namespace) -> int:
    config = load(args.file)
    if args.json:
        print(json.dumps(config.public(), indent=2, default=str))
    else:
        print(
            f"{args.file}: ok — {len(config.plan.queries)} queries ({len(config.qos)} with QoS ranges), "
            f"{len(config.plan.streams)} streams, policy {config.policy.name}, "
            f"store {config.redact(config.store.url)}{', dry run' if config.guardrails.dry_run else ''}"
            + (", plan derived from the builders" if config.derivations else "")
            + (f"; starts {', '.join(app.name for app in config.apps)} beside it ([[apps]])" if config.apps else "")
        )
        for query, why in config.unmanaged.items():
            print(f"{query}: runs unmanaged (fixed settings): {why}")
    return 0


def _status(args: argparse.Namespace) -> int:
    config = load(args.config)
    with closing(_open_store(config)) as store:
        data = reads.managed_status(store)
    url = config.redact(config.store.url)
    print(json.dumps(data, indent=2) if args.json else render.status_text(data, url, reads.words(config)))
    return 0


def _plan(args: argparse.Namespace) -> int:
    from .plan_view import PlanViewError, plan_command

    config = load(args.config) if args.config else None
    try:
        return plan_command(args.builder, args.query, config, args.json, print)
    except PlanViewError as exc:
        raise UserError(str(exc)) from None


def _explain(args: argparse.Namespace) -> int:
    config = load(args.config)
    if args.plan:
        from .plan_view import PlanViewError, explain_plan

        try:
            return explain_plan(args.query, config, args.json, print)
        except PlanViewError as exc:
            raise UserError(str(exc)) from None
    words = reads.words(config)
    with closing(_open_store(config)) as store:
        query = store.query(args.query)
        if query is None:
            names = [q["name"] for q in store.status()["queries"]]
            raise UserError(f"no query {args.query!r} in the store; queries: {', '.join(names) or 'none'}")
        explanation = render.explanation(query, store.last_decision(), words, recommended=reads.recommended(store).get(args.query),
                                         busy=reads.busy(store).get(args.query))
    print(json.dumps(explanation, indent=2) if args.json else render.explanation_text(explanation, words))
    return 0


def _history(args: argparse.Namespace) -> int:
    config = load(args.config)
    since = datetime.now(timezone.utc) - args.since if args.since else None
    with closing(_open_store(config)) as store:
        if args.query is not None and store.query(args.query) is None:
            names = [q["name"] for q in store.status()["queries"]]
            raise UserError(f"no query {args.query!r} in the store; queries: {', '.join(names) or 'none'}")
        data = reads.history(store, config, since, args.limit, args.query)
    print(json.dumps(data, indent=2) if args.json else history_text(data["timeline"], reads.words(config)))
    return 0


def _report(args: argparse.Namespace) -> int:
    from . import report  # matplotlib is slow to import; only this command needs it

    config = load(args.config)
    since = datetime.now(timezone.utc) - args.since if args.since else None
    with closing(_open_store(config)) as store:
        series = store.series(since)
        series["batches"] = store.calibration_data(since)["batches"]  # measured CPU: Spark's micro-batch durations
    if not (series["observations"] or series["estimates"] or series["decisions"]):
        period = f" in the last {args.since}" if args.since else ""
        raise UserError(f"nothing to plot: the store at {config.redact(config.store.url)} holds no observations{period}; run the daemon first")
    try:
        drawn = report.write_report(series, config.bounds, args.out)
    except OSError as exc:
        raise UserError(f"cannot write the report to {args.out}: {exc.strerror or exc}") from None
    files = [str(args.out / name) for name in drawn]
    print(json.dumps({"files": files}) if args.json else "\n".join(files))
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    """Fit the cost model to what Spark measured (docs/spark-mapping.md) and write it for ``[model] calibration``."""
    config = load(args.config)
    since = datetime.now(timezone.utc) - args.since if args.since else None
    with closing(_open_store(config)) as store:
        data, settings = store.calibration_data(since), store.current_settings()
    plan = _plan_in_force(config.plan, data["stream_d"], settings)
    terms = cpu_terms(plan, config.model.profile)
    unit = config.model.time_unit_seconds
    samples, state, previous = [], [], {}
    for b in data["batches"]:
        before, previous[b["run_id"]] = previous.get(b["run_id"]), b["event_max"]
        if b["state_rows"]:
            state.append((float(b["state_bytes"]), float(b["state_rows"])))
        if b["query"] in terms and before is not None and b["event_max"] is not None and b["event_max"] > before:
            span = (b["event_max"] - before).total_seconds() / unit
            samples.append(CpuSample(terms[b["query"]], span, b["batch_ms"] / 1000.0))
    if not samples:
        raise UserError(f"nothing to calibrate: the store at {config.redact(config.store.url)} holds no two consecutive "
                        "batches of a managed query; run armd on Spark (source.kind = \"spark\") first")
    try:
        result = calibrate(samples, state, plan.constants)
    except CalibrationError as exc:
        raise UserError(f"cannot calibrate: {exc}") from None
    out = args.out or args.config.parent / "calibration.json"
    try:
        out.write_text(result.to_json() + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps({"file": str(out), **json.loads(result.to_json())}))
    else:
        learned = ", ".join(f"{n}={getattr(result.constants, n):.3g}" for n in result.learned)
        print(f"{out}: {result.samples} batches; bytes per state row {result.bytes_per_row or 'not measured'}; "
              f"CPU constants (seconds per operation) {learned}; rms error {result.residual_seconds:.3g} s per batch\n"
              f"use it with [model] calibration = \"{out.name}\" (CPU bounds are then seconds of work per time unit)")
    return 0


def _plan_in_force(plan: PlanSet, stream_d: dict[str, float], settings: dict[str, QuerySettings]) -> PlanSet:
    """The plan at the measured rates and the settings in force (window sizes by node, granularity per query)."""
    streams = {name: replace(spec, d=stream_d.get(name, spec.d)) for name, spec in plan.streams.items()}
    nodes = dict(plan.nodes)
    for query, s in settings.items():
        if query not in plan.queries:
            continue
        for node_id in plan.query_nodes(query):
            node = nodes[node_id]
            if node.op == "window" and node_id in s.windows:
                nodes[node_id] = replace(node, w=float(s.windows[node_id]))
            elif node.op == "granularity" and s.granularity is not None:
                nodes[node_id] = replace(node, g=float(s.granularity))
    return replace(plan, streams=streams, nodes=nodes)


def _herald(args: argparse.Namespace) -> int:
    config = load(args.config)
    try:
        record = heralds_cli.record_of(args, list(config.plan.streams)) if args.herald_command == "add" else None
    except heralds_cli.HeraldInputError as exc:
        raise UserError(str(exc)) from None
    with closing(_open_store(config)) as store:
        if record is not None:
            record = replace(record, id=store.add_herald(record))
            print(json.dumps(heralds_cli.as_json(record), indent=2) if args.json else heralds_cli.as_text(record))
            return 0
        try:
            records = store.heralds(args.stream)
        except ValueError as exc:  # a row written with SQL that is no herald
            raise UserError(str(exc)) from None
    print(heralds_cli.dumps(records) if args.json else "\n".join(map(heralds_cli.as_text, records)) or "no heralds")
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    config = load(args.config)
    try:
        store = SqlStore.open(config.store.url, retries=config.store.connect_retries,
                              backoff_seconds=config.store.connect_backoff_seconds)
    except StoreError as exc:
        raise UserError(f"metadata store unavailable: {config.redact(str(exc))}") from None
    try:
        before = store.schema_revision()
        store.upgrade()
        after = store.schema_revision()
    finally:
        store.close()
    url = config.redact(config.store.url)
    if args.json:
        print(json.dumps({"store": url, "before": before, "after": after}))
    else:
        print(f"{url}: schema {before or 'empty'} → {after}" if before != after else f"{url}: schema already at {after}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
