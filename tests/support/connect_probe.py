"""What of armd's Spark code works over Spark Connect: a probe that prints one JSON object.

Why a probe and not a test: a Connect server is one more driver JVM
(a minute or more to start on the shared test machine), and most of what
it finds is a limitation to document (docs/cluster.md), not behaviour armd
promises. Run it again after a pyspark upgrade:

    .venv/bin/python tests/support/connect_probe.py [--master spark://127.0.0.1:PORT]

Each check is "ok" or the first line of the error it met:
``data_source`` (registering ``armd-synthetic``), ``listener_records``
(armd's ``ProgressListener`` over Connect, records of one query),
``batch_writer_batches`` (armd's ``BatchWriter`` as ``foreachBatch`` into a
``ParquetSink``), ``live_keep_change`` (whether a sink filter set in the
client while the query runs reaches the batches — GenMig needs it for the
old run: ``rows_after_change`` > 0 means it did not).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.cluster import ConnectServer  # noqa: E402


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


def batch_rows(root: Path, query: str) -> dict[int, int]:
    """Rows per batch id the ParquetSink wrote for ``query``."""
    import pyarrow.parquet as pq

    out: dict[int, int] = {}
    for batch in root.glob(f"plan_version=*/query={query}/batch_id=*"):
        out[int(batch.name.split("=")[1])] = sum(pq.read_metadata(f).num_rows for f in batch.glob("*.parquet"))
    return out


def probe(spark: Any, root: Path) -> dict[str, Any]:
    from armd.adapters.spark.listener import ProgressListener
    from armd.adapters.spark.sinks import BatchWriter, ParquetSink
    from armd.adapters.spark.source import register

    found: dict[str, Any] = {}
    try:
        register(spark)
        found["data_source"] = "ok"
    except Exception as exc:  # noqa: BLE001 — the probe reports whatever fails
        found["data_source"] = first_line(exc)
    listener = ProgressListener().attach(spark)
    sink = ParquetSink(root / "sink")
    writer = BatchWriter(sink, "q", 0)
    rate = spark.readStream.format("rate").option("rowsPerSecond", "20").load()
    try:
        query = (rate.writeStream.queryName("q@0").option("checkpointLocation", str(root / "checkpoint"))
                 .foreachBatch(writer).trigger(processingTime="1 second").start())
    except Exception as exc:  # noqa: BLE001
        found["batch_writer_batches"] = first_line(exc)
        return found
    deadline = time.monotonic() + 60
    while len(batch_rows(sink.root, "q")) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    found["batch_writer_batches"] = len(batch_rows(sink.root, "q"))
    changed_at = max(batch_rows(sink.root, "q"), default=-1)
    writer.keep = lambda df: df.limit(0)  # from now on: write nothing
    time.sleep(6)
    after = {b: n for b, n in batch_rows(sink.root, "q").items() if b > changed_at + 1}
    found["live_keep_change"] = {"batches_after_change": len(after), "rows_after_change": sum(after.values())}
    found["listener_records"] = len(listener.records("q"))
    found["query_error"] = first_line(query.exception()) if query.exception() else None
    query.stop()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", default="local[2]", help="the Connect server's master (default local[2])")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="armd-connect-probe-"))
    server = ConnectServer(args.master, root)
    began = time.monotonic()
    server.start()
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(server.url).getOrCreate()
        found = {"server": server.url, "master": args.master, "startup_s": round(time.monotonic() - began, 1),
                 **probe(spark, root)}
        spark.stop()
    except Exception as exc:  # noqa: BLE001
        found = {"server": server.url, "error": first_line(exc), "log": server.log(20)}
    finally:
        server.stop()
    print(json.dumps(found))
    return 0 if "error" not in found else 1


if __name__ == "__main__":
    sys.exit(main())
