"""``armd-test-flaky``: a Python streaming data source whose reader fails to start the first ``failures`` times.

Spark creates a Python data source's stream reader while it initialises a
run's sources, in a Python worker of its own; raising there fails the run
before its first batch, the way a worker that cannot connect back does on a
loaded machine. The count of starts is kept in the file ``counter`` (the
workers are separate processes). Once started it yields nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

FORMAT = "armd-test-flaky"
MESSAGE = "flaky start of the test source"


class FlakyReader(DataSourceStreamReader):
    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self) -> dict:
        return {"n": 0}

    def partitions(self, start: dict, end: dict) -> list:
        return [InputPartition(0)]

    def read(self, partition: Any):
        return iter(())


class FlakySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return "value int"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        counter = Path(self.options["counter"])
        starts = int(counter.read_text() or 0) + 1 if counter.exists() else 1
        counter.write_text(str(starts))
        if starts <= int(self.options["failures"]):
            raise RuntimeError(f"{MESSAGE} ({starts})")
        return FlakyReader()


def flaky(spark: Any, params: Any) -> Any:
    """A builder: the flaky source with the counter and failures of ``params.extra``."""
    spark.dataSource.register(FlakySource)
    return (spark.readStream.format(FORMAT).option("counter", params.extra["counter"])
            .option("failures", str(params.extra["failures"])).load())
