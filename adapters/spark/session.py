"""One way to build the local SparkSession armd runs its queries in.

Why a module of its own: a PySpark session only works for armd when the
Python workers run the *same* interpreter as the daemon (the venv, which has
numpy and armd installed). ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON``
must name it *before* the JVM starts, otherwise tasks fail with "Python
worker failed to connect back" or import errors. Every armd entry point
(daemon, tests, benchmarks) builds its session here so that this and the
other settings (few shuffle partitions, no UI, quiet logs, the state store
provider) are decided once.
"""

from __future__ import annotations

import os
import sys
from typing import Mapping

from pyspark.sql import SparkSession

STATE_STORES = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
"""State store provider by armd's short name; ``hdfs`` is Spark's default (state in JVM heap maps)."""

LOG_LEVELS = ("ALL", "DEBUG", "ERROR", "FATAL", "INFO", "OFF", "TRACE", "WARN")


def use_this_python() -> None:
    """Make Spark's Python workers run this interpreter (``sys.executable``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def build_session(
    master: str | None = "local[2]",
    app_name: str = "armd",
    conf: Mapping[str, str] | None = None,
    *,
    state_store: str = "hdfs",
    shuffle_partitions: int = 2,
    log_level: str = "ERROR",
    register_sources: bool = True,
) -> SparkSession:
    """A SparkSession for armd (``getOrCreate``: a running session is reused and given these settings).

    ``master`` None leaves the master to ``spark-submit --master`` (an
    application submitted to a cluster); otherwise it replaces it.
    ``conf`` (e.g. ``[spark].conf`` of the configuration) overrides the
    defaults set here. ``state_store`` is ``hdfs`` or ``rocksdb``. With
    ``register_sources`` the ``armd-synthetic`` data source is registered.
    """
    if state_store not in STATE_STORES:
        raise ValueError(f"state_store must be one of {', '.join(STATE_STORES)}, got {state_store!r}")
    if int(shuffle_partitions) < 1:
        raise ValueError(f"shuffle_partitions must be a whole number >= 1, got {shuffle_partitions!r}")
    if log_level.upper() not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    use_this_python()
    settings = {
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.default.parallelism": str(int(shuffle_partitions)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stateStore.providerClass": STATE_STORES[state_store],
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "false",  # AQE does not apply to streaming and only adds noise to plans
        "spark.sql.streaming.metricsEnabled": "false",
        "spark.python.worker.reuse": "true",
        # Stopping a query interrupts its batch; Spark then matches the error text against regular expressions
        # whose recursion overflows the default 1 MiB thread stack on long Python tracebacks, killing the thread
        # with locks held (later batches and stops hang). A larger default stack avoids it.
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=error -Xss16m",
    }
    settings.update({str(k): str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in settings.items():
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)  # a reused session keeps its old runtime settings otherwise
    spark.sparkContext.setLogLevel(log_level.upper())
    if register_sources:
        from .source import register

        register(spark)
    return spark
