"""The user's sink, read off ``sink=lambda df: df.writeStream.foreachBatch(fn)`` and run under GenMig's filter.

Why: during a migration the old and the new run both write to the user's
own sink, each only its side of T_split, and the old run's side changes
while it runs. A ``foreachBatch`` function can be wrapped to do that (the
``keep`` hook of ``adapters/spark/sinks.BatchWriter``); a DataStreamWriter
Spark has already configured cannot. So the agent calls the user's lambda
on a *probe* that records what it asks of ``writeStream`` (the function,
the output mode, a trigger), and starts each run itself with those,
its own checkpoint and query name, and the function behind armd's filter.
"""

from __future__ import annotations

from typing import Any, Callable

from pyspark.sql import DataFrame

from armd.adapters.spark.sinks import BatchSink

from .settings import AgentError

BatchFunction = Callable[[DataFrame, int], Any]


class _Writer:
    """Stands in for ``DataStreamWriter``: records the calls the agent can honour, refuses the others by name."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.function: BatchFunction | None = None
        self.output_mode: str | None = None
        self.trigger_args: dict[str, Any] | None = None

    def foreachBatch(self, function: BatchFunction) -> "_Writer":  # noqa: N802 - Spark's name
        if not callable(function):
            raise AgentError(f"query {self.query!r}: foreachBatch needs a function (df, batch_id), got {function!r}")
        self.function = function
        return self

    def outputMode(self, mode: str) -> "_Writer":  # noqa: N802 - Spark's name
        self.output_mode = str(mode)
        return self

    def trigger(self, **kwargs: Any) -> "_Writer":
        self.trigger_args = dict(kwargs)
        return self

    def option(self, key: str, value: Any) -> "_Writer":
        if str(key) == "checkpointLocation":
            raise AgentError(f"query {self.query!r}: the agent chooses each run's checkpoint (a migration runs two "
                             "queries at once); give Agent(checkpoint_root=...) instead of checkpointLocation")
        raise AgentError(f"query {self.query!r}: writeStream.option({key!r}, ...) is not passed on by the agent; "
                         "a foreachBatch sink takes its options in the function")

    def queryName(self, name: str) -> "_Writer":  # noqa: N802 - Spark's name; the agent names runs NAME@VERSION
        return self

    def __getattr__(self, name: str) -> Any:
        raise AgentError(f"query {self.query!r}: the sink uses writeStream.{name}, which the agent cannot run under "
                         "GenMig; write the sink as lambda df: df.writeStream.foreachBatch(fn) (optionally with "
                         ".outputMode(...) and .trigger(...)), without .start()")


class _Probe:
    """Stands in for the DataFrame handed to the user's sink lambda."""

    def __init__(self, query: str) -> None:
        self.writeStream = _Writer(query)
        self._query = query

    def __getattr__(self, name: str) -> Any:
        raise AgentError(f"query {self._query!r}: the sink uses df.{name}; transform the DataFrame in the query's "
                         "function and keep the sink to lambda df: df.writeStream.foreachBatch(fn)")


def read_sink(query: str, sink: Callable[[Any], Any]) -> _Writer:
    """What the user's sink lambda asks for; ``AgentError`` (one line) when it is not a ``foreachBatch`` sink."""
    probe = _Probe(query)
    result = sink(probe)
    writer = probe.writeStream
    if result is not None and result is not writer:
        raise AgentError(f"query {query!r}: the sink must return df.writeStream...foreachBatch(fn), not start a query")
    if writer.function is None:
        raise AgentError(f"query {query!r}: the sink names no foreachBatch function; write it as "
                         "lambda df: df.writeStream.foreachBatch(fn)")
    return writer


class UserSink(BatchSink):
    """A ``BatchSink`` over the user's ``foreachBatch`` function: every run's batches (after armd's filter) go there.

    The function gets each run's own batch ids: during a migration two runs
    write, each numbering its batches from where its checkpoint stands.
    """

    def __init__(self, function: BatchFunction) -> None:
        self.function = function

    def write_batch(self, df: DataFrame, query: str, batch_id: int, plan_version: int) -> None:
        self.function(df, batch_id)
