"""The one object the daemon wires when it runs on Spark.

``SparkRuntime.create`` builds the session, attaches the progress listener,
and makes the query manager, the statistics source (``StatsSource`` port)
and the applier (``Applier`` port: the lossy naive restart, or GenMig
with ``migration="genmig"``) over them, so that the
daemon's entry point only has to register its managed queries and hand
``runtime.stats`` and ``runtime.applier`` to the controller.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from armd.control.ports import EventRecord
from armd.migrations.genmig import Migration

from .genmig import DEFAULT_TIMEOUT_SECONDS, GenMigApplier

from .listener import ProgressListener, SparkStats, TerminatedQuery, TerminationHook
from .managed import NaiveRestartApplier, QueryManager
from .session import build_session


@dataclass
class SparkRuntime:
    spark: Any
    listener: ProgressListener
    manager: QueryManager
    stats: SparkStats
    applier: NaiveRestartApplier | GenMigApplier
    log: Any = None

    @classmethod
    def create(
        cls,
        *,
        checkpoint_root: str | Path,
        time_unit_seconds: float,
        master: str = "local[2]",
        app_name: str = "armd",
        conf: Mapping[str, str] | None = None,
        state_store: str = "hdfs",
        streams: Mapping[str, Sequence[str]] | None = None,
        queries: Iterable[str] | None = None,
        on_event: Callable[[EventRecord], None] | None = None,
        on_terminated: TerminationHook | None = None,
        log: Any = None,
        migration: str = "genmig",
        on_transition: Callable[[Migration], None] | None = None,
        migration_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        nodes: Mapping[str, Mapping[str, str]] | None = None,
    ) -> "SparkRuntime":
        """Everything the daemon needs; ``[spark]`` of the configuration gives master, app_name and conf.

        ``nodes``: per query, observation label → plan node id (``[managed.NAME] nodes``; ``SparkStats.node_id``).
        """
        spark = build_session(master, app_name, conf, state_store=state_store)
        listener = ProgressListener().attach(spark)
        manager = QueryManager(spark, checkpoint_root)
        if on_terminated is not None:
            def terminated(info: TerminatedQuery) -> None:
                if not manager.failed_at_start(info.run_id):  # the start retried it or raised
                    on_terminated(info)

            listener.add_termination_hook(terminated)
        stats = SparkStats(listener, time_unit_seconds, streams=streams, queries=queries, stateful=manager.stateful,
                           nodes=nodes)
        applier: NaiveRestartApplier | GenMigApplier
        if migration == "genmig":
            applier = GenMigApplier(manager, listener, time_unit_seconds, on_transition=on_transition, log=log,
                                    timeout_seconds=migration_timeout_seconds)
        elif migration == "naive-restart":
            applier = NaiveRestartApplier(manager, time_unit_seconds, on_event=on_event, log=log)
            applier.announce()
        else:
            raise ValueError(f"migration must be naive-restart or genmig, got {migration!r}")
        return cls(spark, listener, manager, stats, applier, log)

    def close(self, *, stop_session: bool = False) -> None:
        """Stop every managed query and detach the listener (and stop Spark with ``stop_session``).

        A migration still in progress keeps its runs' checkpoints, so the next
        start resumes it (``GenMigApplier.resume``). If Spark is gone already
        (its JVM got the stop signal too, e.g. from a process-group kill), the
        rest is skipped with a warning: nothing can be stopped any more, and
        the checkpoints stay for the next start.
        """
        steps = [("stop the open migrations", self.applier.close)] if isinstance(self.applier, GenMigApplier) else []
        steps += [("stop the managed queries", self.manager.stop_all), ("detach the listener", lambda: self.listener.detach(self.spark))]
        if stop_session:
            steps.append(("stop Spark", self.spark.stop))
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - a dead JVM fails every further call the same way
                if self.log is not None:
                    self.log.warning("spark_close_failed", step=what, error=f"{type(exc).__name__}: {exc}"[:500],
                                     hint="Spark was gone before armd could stop it (did the JVM get the stop signal "
                                          "too? with systemd use KillMode=mixed); checkpoints are kept")
                return
