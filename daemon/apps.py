"""The applications ``armd run`` starts beside itself (``[[apps]]``) and stops with itself.

Why: an ``armd.agent`` application is an ordinary Spark program of its own
(the daemon runs no Spark for it), yet the embedded demo must stay one
command: ``make run`` starts the daemon, the daemon starts the demo
application, and Ctrl-C stops both. So the daemon supervises the programs
the configuration names, once it holds the store's lease (a daemon in
standby starts none):

* each runs in its own session (a terminal's Ctrl-C reaches only the
  daemon, which then stops them in order), with its output appended to its
  log file and the store's URL in ``ARMD_STORE`` (with ``ARMD_APP``,
  ``ARMD_CONFIG``, ``ARMD_TIME_UNIT_SECONDS``); armd's own ``bin`` folder
  leads ``PATH``, so ``python`` is the interpreter armd runs on;
* one that exits while the daemon runs is said once (``app_exited``, a
  warning naming its status and log file) and not restarted: the agent
  inside marked its application stopped, or the daemon marks it gone;
* at the stop each gets SIGTERM (the agent's application stops its queries
  and marks itself stopped) and ``stop_seconds`` to exit; then its whole
  process group (Spark's JVM included) is killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Mapping

from .config.sections import AppConfig

Emit = Callable[..., None]


def search_path(environ: Mapping[str, str]) -> str:
    """``PATH`` with the folder of armd's interpreter first: ``python`` and ``spark-submit`` are armd's own."""
    own = str(Path(sys.executable).parent)
    return os.pathsep.join([own, *(p for p in environ.get("PATH", os.defpath).split(os.pathsep) if p and p != own)])


def resolve(app: AppConfig, folder: Path, environ: Mapping[str, str]) -> tuple[Path, str]:
    """The folder ``app`` runs in and its program's path; ``ValueError`` naming what cannot be found."""
    cwd = (folder / app.cwd).resolve()
    if not cwd.is_dir():
        raise ValueError(f"cwd: {str(cwd)!r} is not a folder; allowed: a folder relative to the configuration's")
    program = app.command[0]
    found = (str(cwd / program) if os.access(cwd / program, os.X_OK) else None) if os.sep in program else \
        shutil.which(program, path=search_path(environ))
    if found is None:
        raise ValueError(f"command: program {program!r} not found (searched {'its folder' if os.sep in program else 'PATH'}); "
                         "allowed: an executable on PATH or a path relative to cwd")
    return cwd, found


@dataclass
class Running:
    app: AppConfig
    process: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    said: bool = False
    """Its exit was said already (``app_exited`` or at the stop)."""


class Applications:
    """Start, watch and stop the ``[[apps]]`` of one configuration (see the module docstring)."""

    def __init__(self, apps: tuple[AppConfig, ...], folder: Path, env: Mapping[str, str], emit: Emit, log: Any,
                 environ: Mapping[str, str] | None = None) -> None:
        self.apps, self.folder, self.emit, self.log = apps, folder, emit, log
        base = dict(os.environ if environ is None else environ)
        self.env = {**base, "PATH": search_path(base), **env}
        self.env.setdefault("PYSPARK_PYTHON", sys.executable)
        self.env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        self.running: list[Running] = []

    def start(self) -> None:
        for app in self.apps:
            try:
                cwd, program = resolve(app, self.folder, self.env)
                log_path = cwd / (app.log or f"{app.name}.log")
                log = log_path.open("ab")
                process = subprocess.Popen([program, *app.command[1:]], cwd=cwd, env={**self.env, **app.env, "ARMD_APP": app.name},
                                           stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            except (OSError, ValueError) as exc:
                self.emit("app_not_started", "error", f"application {app.name!r} could not be started: {exc}", None,
                          {"app": app.name, "command": list(app.command)})
                continue
            self.running.append(Running(app, process, log_path, log))
            self.emit("app_started", "info", f"application {app.name!r} started (pid {process.pid}); its output goes to {log_path}",
                      None, {"app": app.name, "pid": process.pid, "log": str(log_path), "command": list(app.command)})

    def watch(self) -> None:
        """Say once each application that exited on its own."""
        for r in self.running:
            code = r.process.poll()
            if code is not None and not r.said:
                r.said = True
                self.emit("app_exited", "warning", f"application {r.app.name!r} exited with status {code}; see {r.log_path}", None,
                          {"app": r.app.name, "status": code, "log": str(r.log_path)})

    def terminate(self) -> None:
        """SIGTERM to every application still running (their agents stop their queries); ``wait`` then reaps them."""
        for r in self.running:
            if r.process.poll() is None:
                try:
                    r.process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def wait(self) -> None:
        """Up to each one's ``stop_seconds`` for it to exit, then kill its process group; close the log files."""
        asked = time.monotonic()
        for r in self.running:
            try:
                r.process.wait(timeout=max(0.0, asked + r.app.stop_seconds - time.monotonic()))
                self.log.info("app_stopped", app=r.app.name, status=r.process.returncode)
            except subprocess.TimeoutExpired:
                self.log.warning("app_killed", app=r.app.name, message=f"application {r.app.name!r} did not stop within "
                                 f"{r.app.stop_seconds:g} s of SIGTERM; killed")
            try:
                os.killpg(r.process.pid, signal.SIGKILL)  # what is left of its group: Spark's JVM, workers
            except (ProcessLookupError, PermissionError):
                pass
            r.process.wait()
            r.log.close()
