"""A Spark standalone cluster on 127.0.0.1 — one master, N workers — started from the pyspark package itself.

Why: armd's Spark code must work where a query's tasks run in executors on
other JVMs and other Python processes than the driver (issue 18), not only
in ``local[2]``. The pyspark wheel ships everything a standalone cluster
needs (``bin/spark-class``, the master and worker classes, the jars), so
nothing is downloaded: ``SPARK_HOME`` is the package's directory. Every
process gets a free port, small resources (the test machine has 2 cores),
the venv's Python for its Python workers (``PYSPARK_PYTHON``), and its own
process group so that ``stop`` ends it and its children (executors) for
sure, on a failed test too.

Paths every worker sees: the cluster runs on this machine, so any local
directory (checkpoints, file sinks) is shared by the driver and all
executors; on a real cluster they must be on a shared file system.

Used by the ``spark_cluster`` fixture (``tests/support/cluster_fixtures.py``),
by ``scripts/spark-cluster`` (for people, and for benchmarks) and by
``submit`` (``spark-submit --master spark://…``).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
"""The pyspark package's directory: it has ``bin/``, ``sbin/`` and ``jars/`` like a Spark distribution."""
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of every cluster process: the package as SPARK_HOME, loopback only, this Python for workers."""
    env = dict(os.environ if base is None else base)
    env.update({
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
    })
    env.update(extra)
    return env


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each; ``start`` waits until all registered."""

    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    root: Path | None = None
    """Logs and the workers' work directories (executors' stdout/stderr); a temporary directory by default."""
    startup_timeout: float = 90.0
    master_port: int = 0
    webui_port: int = 0
    _procs: list[subprocess.Popen] = field(default_factory=list, repr=False)
    _own_root: bool = field(default=False, repr=False)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def start(self) -> "StandaloneCluster":
        if self.root is None:
            self.root, self._own_root = Path(tempfile.mkdtemp(prefix="armd-spark-cluster-")), True
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)  # the JVMs run in sessions of their own: nothing else ends them if Python exits early
        self.master_port = self.master_port or free_port()
        self.webui_port = self.webui_port or free_port()
        try:
            self._spawn("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
                                   "--webui-port", str(self.webui_port)])
            self._wait(lambda state: True, "the master to answer")
            for i in range(self.workers):
                work = self.root / f"worker-{i}"
                work.mkdir(exist_ok=True)
                self._spawn(f"worker-{i}", [WORKER_CLASS, "--host", "127.0.0.1", "--port", str(free_port()),
                                            "--webui-port", str(free_port()), "--cores", str(self.cores),
                                            "--memory", self.memory, "--work-dir", str(work), self.master_url])
            self._wait(lambda state: len(alive_workers(state)) >= self.workers, f"{self.workers} workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict:
        """The master's status JSON (``/json/``): workers, their cores and memory, running and completed applications."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as response:
            return json.load(response)

    def stop(self) -> None:
        """End every process (workers first, then the master) with its process group; kill what does not stop in 10 s."""
        for proc in reversed(self._procs):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        for proc in self._procs:
            _signal_group(proc, signal.SIGKILL)  # executors a worker left behind share its group
        self._procs.clear()
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def logs(self, tail: int = 40) -> str:
        """The last lines of every process's log (and executors' stderr), for a failure message."""
        assert self.root is not None
        parts = []
        for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("worker-*/*/*/stderr")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"== {path.relative_to(self.root)}\n" + "\n".join(lines))
        return "\n".join(parts)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        assert self.root is not None
        log = open(self.root / f"{name}.log", "wb")
        self._procs.append(subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
            env=spark_env(SPARK_LOG_DIR=str(self.root), SPARK_WORKER_DIR=str(self.root),
                          SPARK_DAEMON_MEMORY="256m"),  # the master and worker themselves; executors get --memory
            start_new_session=True))
        log.close()

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Spark cluster process exited with {dead[0].returncode} while waiting for {what}:\n{self.logs()}")
            try:
                if ready(self.state()):
                    return
            except (OSError, urllib.error.URLError, ValueError):
                pass  # not listening yet
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {self.startup_timeout:g} s waiting for {what}:\n{self.logs()}")


def alive_workers(state: Mapping) -> list[Mapping]:
    return [w for w in state.get("workers", ()) if w.get("state") == "ALIVE"]


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def submit_command(master: str, app: str | Path, args: Sequence[str] = (), conf: Mapping[str, str] | None = None) -> list[str]:
    """``bin/spark-submit --master MASTER … APP ARGS`` for a Python application.

    The driver runs here (client deploy mode) with the venv's Python, as do
    the executors' Python workers; ``-Xss16m`` as ``build_session`` gives
    a driver it starts itself (the JVM already runs when the app's code does).
    Run it with ``env=spark_env()``.
    """
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master,
               "--driver-java-options", "-Dlog4j2.level=error -Xss16m",
               "--conf", "spark.ui.enabled=false", "--conf", f"spark.pyspark.python={sys.executable}"]
    for key, value in (conf or {}).items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(app), *args]


def submit(master: str, app: str | Path, args: Sequence[str] = (), *, conf: Mapping[str, str] | None = None,
           timeout: float = 300.0, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run a Python application with ``submit_command`` and wait for it to end."""
    return subprocess.run(submit_command(master, app, args, conf), env=spark_env(), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, start_new_session=True)


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer:
    """A Spark Connect server from the package's jars (``spark-submit --class …SparkConnectServer``) on 127.0.0.1.

    ``master`` is where its driver runs the queries (``local[2]`` or a
    standalone cluster's ``spark://…``); clients connect to ``url``.
    """

    master: str = "local[2]"
    root: Path | None = None
    startup_timeout: float = 180.0
    port: int = 0
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> "ConnectServer":
        self.root = self.root or Path(tempfile.mkdtemp(prefix="armd-spark-connect-"))
        self.port = self.port or free_port()
        atexit.register(self.stop)
        log = open(self.root / "connect-server.log", "wb")
        # A daemon class gets SPARK_DAEMON_MEMORY unless told otherwise; its driver needs Spark's minimum (~450 MB).
        self._proc = subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.master, "--class", CONNECT_SERVER_CLASS,
             "--driver-memory", "1g", "--conf", f"spark.connect.grpc.binding.port={self.port}",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", f"spark.pyspark.python={sys.executable}",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2", "spark-internal"],
            stdout=log, stderr=subprocess.STDOUT, env=spark_env(), start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {self._proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(1)
        self.stop()
        raise RuntimeError(f"the Spark Connect server did not listen within {self.startup_timeout:g} s:\n{self.log()}")

    def log(self, tail: int = 40) -> str:
        path = (self.root or Path("/nonexistent")) / "connect-server.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-tail:]) if path.exists() else ""

    def stop(self) -> None:
        if self._proc is not None:
            _signal_group(self._proc, signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                _signal_group(self._proc, signal.SIGKILL)
                self._proc.wait(timeout=10)
            self._proc = None


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="spark-cluster",
        description="Run a Spark standalone master and workers on 127.0.0.1 from the pyspark package until interrupted. "
                    "Prints one JSON line {\"master\": \"spark://…\", \"webui\": \"http://…\", \"workers\": N, \"root\": …} "
                    "once every worker has registered.")
    parser.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    parser.add_argument("--memory", default="1g", help="memory each worker offers to executors (default 1g)")
    parser.add_argument("--port", type=int, default=0, help="the master's port (default: a free one)")
    parser.add_argument("--webui-port", type=int, default=0, help="the master's web UI / JSON port (default: a free one)")
    parser.add_argument("--root", type=Path, default=None, help="directory for logs and work dirs (default: a temporary one, removed at exit)")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.cores < 1:
        parser.error("--workers and --cores must be whole numbers >= 1")
    cluster = StandaloneCluster(args.workers, args.cores, args.memory, args.root, master_port=args.port, webui_port=args.webui_port)
    stopping = started = False

    def stop(signum, frame):  # noqa: ARG001
        nonlocal stopping
        if not started:
            raise KeyboardInterrupt  # start() stops what it started on any exception
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        cluster.start()
    except RuntimeError as exc:
        print(f"spark-cluster: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    started = True
    try:
        print(json.dumps({"master": cluster.master_url, "webui": cluster.webui_url, "workers": args.workers,
                          "root": str(cluster.root)}), flush=True)
        while not stopping and all(p.poll() is None for p in cluster._procs):
            time.sleep(0.5)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
