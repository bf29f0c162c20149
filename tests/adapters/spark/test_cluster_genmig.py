"""GenMig on a Spark standalone cluster: an application submitted with spark-submit migrates a windowed count exactly.

The cluster (a master and two workers of one core each, from the pyspark
package) is ``support.cluster``'s; the application is
``support/cluster_genmig_app.py``, submitted with the package's
``bin/spark-submit --master spark://127.0.0.1:PORT``. Its queries' tasks
run in the two executors; checkpoints and the Parquet sink live in a
directory the driver and both executors use. One application, one set of
checks: the three runs (old alone, new alone, old → new by GenMig) are the
expensive part.
"""

from __future__ import annotations

import json
import sys

import pytest
from support import REPO
from support.cluster import submit
from support.cluster_fixtures import spark_cluster  # noqa: F401

pytestmark = pytest.mark.cluster

APP = REPO / "tests" / "support" / "cluster_genmig_app.py"


@pytest.fixture(scope="module")
def report(spark_cluster, tmp_path_factory):  # noqa: F811
    shared = tmp_path_factory.mktemp("shared")
    out = shared / "report.json"
    done = submit(spark_cluster.master_url, APP, [str(out), str(shared)], timeout=600)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join(done.stderr.splitlines()[-60:])
        pytest.fail(f"spark-submit exited with {done.returncode}:\n{tail}\n{spark_cluster.logs(20)}")
    return {**json.loads(out.read_text()), "apps": spark_cluster.state().get("completedapps", []),
            "workers": sorted(p for p in spark_cluster.root.glob("worker-*") if p.is_dir())}


def test_genmig_on_the_cluster_loses_repeats_and_changes_no_result(report):
    assert report["master"].startswith("spark://127.0.0.1:")
    assert {k: report[k] for k in ("lost", "duplicated", "wrong")} == {"lost": 0, "duplicated": 0, "wrong": 0}
    assert report["got"] == report["expected"] > 50
    # Both plans answered, each on its side of T_split, and the migration went through GenMig's states.
    assert report["results_before_split"] > 0 and report["results_from_split"] > 0
    assert report["states"] == ["running", "draining", "done"] and report["versions"] == [0, 1]


def test_the_work_ran_in_two_executors_with_the_venv_python_on_shared_paths(report):
    assert report["executors"] == 2
    # Both workers launched an executor for the application (its directory holds the executor's stdout/stderr).
    assert len(report["workers"]) == 2 and all(list(worker.glob("app-*/*/stderr")) for worker in report["workers"]), report["workers"]
    tasks = report["tasks"]
    assert len({t["executor_pid"] for t in tasks}) == 2 and report["driver_pid"] not in {t["pid"] for t in tasks}
    assert {t["python"] for t in tasks} == {sys.executable}  # PYSPARK_PYTHON reached the executors' Python workers
    # Executors wrote the sink's files and both runs of the migrated query kept checkpoints in the shared directory.
    assert all(n > 0 for n in report["parquet_files"].values())
    assert sum(1 for c in report["checkpoints"] if c.startswith("checkpoints/c/")) == 2
    app = next(a for a in report["apps"] if a["name"] == "armd-cluster-genmig")
    assert app["state"] == "FINISHED" and app["cores"] == 2
