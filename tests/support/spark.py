"""One local SparkSession for all Spark tests of a pytest session, and a progress listener per test module.

Import the fixtures into a test module with
``from support.spark import spark, progress_listener  # noqa: F401``.
Starting the JVM takes most of the Spark tests' time, so it happens once.
"""

from __future__ import annotations

from typing import Iterator

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from armd.adapters.spark.listener import ProgressListener  # noqa: E402
from armd.adapters.spark.session import build_session  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator["object"]:
    session = build_session("local[2]", "armd-tests", shuffle_partitions=2)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="module")
def progress_listener(spark) -> Iterator[ProgressListener]:
    # Module scope, detached at the module's end: pytest makes one instance per importing module whatever the
    # scope, and listeners left on Spark's one listener bus delayed every later module's progress by seconds.
    listener = ProgressListener().attach(spark)
    yield listener
    listener.detach(spark)
