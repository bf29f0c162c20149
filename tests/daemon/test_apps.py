"""``[[apps]]``: the applications ``armd run`` starts beside itself, watches and stops (daemon/apps.py), with real processes.

Each application here is a few lines of Python standing in for a Spark
program: it writes what it was given (its environment, its folder) and
reacts to SIGTERM as an agent application does (stops and exits 0), or
ignores it (and is killed after ``stop_seconds``), or exits on its own.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from armd.daemon.apps import Applications
from armd.daemon.config.sections import AppConfig

SCRIPT = """
import json, os, signal, sys, time
stop = []
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
with open("seen.json", "w") as out:
    json.dump({"env": {k: v for k, v in os.environ.items() if k.startswith(("ARMD_", "PATH", "EXTRA"))},
               "cwd": os.getcwd(), "python": sys.executable}, out)
print("started", flush=True)
if sys.argv[1] == "exit":
    sys.exit(3)
while not stop:
    time.sleep(0.05)
print("stopped cleanly", flush=True)
"""


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict]] = []

    def __call__(self, kind: str, severity: str, message: str, query: str | None, details: dict | None = None, **_: object) -> None:
        self.seen.append((kind, severity, details or {}))

    def kinds(self) -> list[str]:
        return [kind for kind, _severity, _details in self.seen]


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict]] = []

    def __getattr__(self, level: str):
        return lambda event, **fields: self.lines.append((event, fields))


def wait_for(path: Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def supervisor(tmp_path: Path, *apps: AppConfig) -> tuple[Applications, Events, Log]:
    (tmp_path / "app.py").write_text(SCRIPT)
    events, log = Events(), Log()
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return Applications(apps, tmp_path, {"ARMD_STORE": "sqlite:///x.db", "ARMD_TIME_UNIT_SECONDS": "1.0"}, events, log,
                        environ=environ), events, log


def test_an_application_gets_the_store_and_armds_python_and_stops_on_sigterm(tmp_path):
    (tmp_path / "run").mkdir()
    app = AppConfig("demo", ("python", "../app.py", "stop"), cwd="run", env={"EXTRA": "yes"})
    apps, events, log = supervisor(tmp_path, app)
    apps.start()
    wait_for(tmp_path / "run" / "seen.json")
    seen = json.loads((tmp_path / "run" / "seen.json").read_text())
    assert seen["env"]["ARMD_STORE"] == "sqlite:///x.db" and seen["env"]["ARMD_APP"] == "demo"
    assert seen["env"]["EXTRA"] == "yes" and seen["env"]["ARMD_TIME_UNIT_SECONDS"] == "1.0"
    assert seen["env"]["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)  # armd's own python first
    assert Path(seen["python"]).parent == Path(sys.executable).parent
    assert seen["cwd"] == str(tmp_path / "run")
    apps.watch()
    assert events.kinds() == ["app_started"]
    apps.terminate()
    asked = time.monotonic()
    apps.wait()
    assert time.monotonic() - asked < 10
    assert ("app_stopped", {"app": "demo", "status": 0}) in log.lines
    assert (tmp_path / "run" / "demo.log").read_text() == "started\nstopped cleanly\n"  # its output, in NAME.log


def test_one_that_exits_is_said_once_and_one_that_ignores_sigterm_is_killed(tmp_path):
    leaving = AppConfig("leaving", ("python", "app.py", "exit"), log="leaving.out")
    stubborn = AppConfig("stubborn", ("python", "app.py", "ignore"), stop_seconds=0.5)
    apps, events, log = supervisor(tmp_path, leaving, stubborn)
    apps.start()
    deadline = time.monotonic() + 30
    while "app_exited" not in events.kinds():
        assert time.monotonic() < deadline, "the leaving application's exit was never said"
        apps.watch()
        time.sleep(0.05)
    apps.watch()
    while not (tmp_path / "stubborn.log").exists() or "started" not in (tmp_path / "stubborn.log").read_text():
        assert time.monotonic() < deadline, "the stubborn application never started"
        time.sleep(0.05)
    exited = [details for kind, severity, details in events.seen if kind == "app_exited"]
    assert exited == [{"app": "leaving", "status": 3, "log": str(tmp_path / "leaving.out")}]
    assert (tmp_path / "leaving.out").read_text() == "started\n"
    apps.terminate()
    apps.wait()
    assert [event for event, fields in log.lines if fields.get("app") == "stubborn"] == ["app_killed"]
    assert apps.running[1].process.returncode is not None


def test_a_program_that_vanished_after_the_check_is_an_error_event_and_the_others_start(tmp_path):
    gone = AppConfig("gone", ("./not-there",))
    fine = AppConfig("fine", ("python", "app.py", "stop"))
    apps, events, _log = supervisor(tmp_path, gone, fine)
    apps.start()
    assert [(kind, severity) for kind, severity, _ in events.seen] == [("app_not_started", "error"), ("app_started", "info")]
    apps.terminate()
    apps.wait()
