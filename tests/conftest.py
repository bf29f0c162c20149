"""Shared fixtures: fresh databases for the metadata store's contract tests (and the test JVMs' JIT setting, and the
units of work of ``make test``'s two pytest-xdist workers).

``store_url`` gives every test an empty database, once on SQLite and once on
a real PostgreSQL server. The server comes from ``ARMD_TEST_POSTGRES_URL``
(``make test`` sets it from ``scripts/postgres-up``); each test gets its own
database on it, dropped afterwards, so concurrent test runs on one machine
do not meet. Without a reachable server the PostgreSQL half is skipped with
the reason, or fails when ``ARMD_REQUIRE_POSTGRES=1`` (CI).
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from armd.adapters.store import redact_url

# Every JVM a test starts runs the C1 JIT alone. Those JVMs live a minute or two on 2 shared cores, where the C2
# compiler's threads cost more than its faster code ever pays back: with C1 alone the Spark daemon test ran in 65-89 s
# against 119-134 s (interleaved pairs, same load). Tests check behaviour, not JVM speed; the benchmarks do not load
# this file and run Spark's default JIT. Three routes, one per kind of JVM:
# - drivers (the session fixture's, the daemons' and applications' in subprocesses, a Spark Connect server,
#   spark-submit to the test cluster) inherit SPARK_SUBMIT_OPTS through spark-submit;
# - the test cluster's master and workers (support/cluster.py passes this environment on) read SPARK_DAEMON_JAVA_OPTS;
# - executors get their options from the application's configuration, not from any environment: spark-submit reads
#   support/spark-conf/spark-defaults.conf (spark.executor.defaultJavaOptions) through SPARK_CONF_DIR.
TEST_JIT = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JIT)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", TEST_JIT)
os.environ.setdefault("SPARK_CONF_DIR", str(Path(__file__).resolve().parent / "support" / "spark-conf"))

POSTGRES_URL_ENV = "ARMD_TEST_POSTGRES_URL"
REQUIRE_POSTGRES_ENV = "ARMD_REQUIRE_POSTGRES"
TEST_DATABASE_PREFIX = "armd_t_"


def xdist_unit(nodeid: str) -> str:
    """The unit of work ``make test``'s two pytest-xdist workers take whole: a test module, so its module-scoped
    fixtures (a stream run once for several tests) are set up once, and the standalone-cluster modules (named
    ``*cluster*``) together, so one test cluster runs at a time."""
    module = nodeid.split("::", 1)[0]
    return "standalone cluster" if "cluster" in Path(module).stem else module


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ByModuleGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    return ByModuleGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("cluster") and xdist_unit(item.nodeid) != "standalone cluster":
            raise pytest.UsageError(f"{item.nodeid}: a module of cluster tests must have 'cluster' in its name (tests/conftest.py)")


def _postgres_unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_POSTGRES_ENV, "") not in ("", "0"):
        pytest.fail(f"{reason}, and {REQUIRE_POSTGRES_ENV}=1 requires the PostgreSQL tests to run", pytrace=False)
    pytest.skip(f"{reason}; start one with `scripts/postgres-up` (or use `make test`)")


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[tuple[Engine, str]]:
    """An AUTOCOMMIT engine on the test server's maintenance database, and the server's URL."""
    url = os.environ.get(POSTGRES_URL_ENV, "").strip()
    if not url:
        _postgres_unavailable(f"no PostgreSQL server for the tests: {POSTGRES_URL_ENV} is not set")
    engine = create_engine(url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5}, pool_pre_ping=True)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        engine.dispose()
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        _postgres_unavailable(f"the PostgreSQL server at {redact_url(url)} ({POSTGRES_URL_ENV}) is unreachable: {reason}")
    yield engine, url
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh, empty (never upgraded) database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'armd.db'}"
    else:
        yield request.getfixturevalue("postgres_database")


@pytest.fixture
def postgres_database(postgres_admin: tuple[Engine, str]) -> Iterator[str]:
    """URL of a fresh, empty database of its own on the PostgreSQL server, dropped afterwards."""
    engine, server_url = postgres_admin
    name = f"{TEST_DATABASE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        _drop(engine, name)


def _drop(engine: Engine, name: str, attempts: int = 20) -> None:
    """Drop database ``name``, closing its connections. FORCE may not end a backend of another role — an autovacuum
    worker that happens to be busy on the database — so a refusal is tried again once that worker has finished."""
    for attempt in range(attempts):
        try:
            with engine.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            return
        except SQLAlchemyError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.25)
