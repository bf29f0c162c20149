"""The ``spark_cluster`` fixture: one standalone cluster (master + 2 workers) for all cluster tests of a pytest session.

Import it into a test module with ``from support.cluster_fixtures import spark_cluster  # noqa: F401``
and mark the module ``pytestmark = pytest.mark.cluster``. Starting the three
JVMs takes 15–20 s here, so it happens once; the cluster is stopped at the
session's end whatever the tests did.
"""

from __future__ import annotations

from typing import Iterator

import pytest

pytest.importorskip("pyspark")

from support.cluster import StandaloneCluster  # noqa: E402


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(workers=2, cores=1, memory="1g", root=tmp_path_factory.mktemp("spark-cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
