"""Secrets are hidden by structure: URL userinfo, credential query parameters, configured secrets as whole values.

Each case was seen leaking: a ``?password=`` in the store URL printed by ``check-config`` (text and
``--json``) and in the ``run`` and ``status`` errors, ``user:password@`` in a webhook URL in
``check-config --json``, and a one-character secret masked everywhere (``sqlit***:///…``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from armd.daemon.cli import main
from armd.daemon.config import load_config
from armd.daemon.config.masking import redact_text
from support.config_cases import MINIMAL

UNREACHABLE = "postgresql+psycopg://armd@127.0.0.1:1/armd?password=hunter2-query&connect_timeout=1&sslmode=disable"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "armd.toml"
    path.write_text(MINIMAL + text)
    return path


@pytest.fixture
def query_password(tmp_path: Path) -> Path:
    return write(tmp_path, f"[store]\nurl = '{UNREACHABLE}'\nconnect_retries = 0\nconnect_backoff_seconds = 0.01\n")


def test_a_query_password_is_hidden_by_check_config(query_password, capsys):
    code, out, _ = cli(capsys, "check-config", str(query_password))
    assert code == 0 and "hunter2" not in out and "password=***" in out and "connect_timeout=1" in out
    code, out, _ = cli(capsys, "check-config", "--json", str(query_password))
    assert code == 0 and "hunter2" not in out
    assert json.loads(out)["store"]["url"] == UNREACHABLE.replace("hunter2-query", "***")


def test_a_query_password_is_hidden_in_the_status_error(query_password, capsys):
    code, out, err = cli(capsys, "status", "--config", str(query_password))
    assert code == 2 and "metadata store unavailable" in err
    assert "hunter2" not in out + err and "password=***" in err


def test_a_query_password_is_hidden_in_the_run_error(query_password, tmp_path):
    done = subprocess.run([sys.executable, "-m", "armd.daemon.cli", "run", "--config", str(query_password)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "metadata store unavailable" in done.stderr
    assert "hunter2" not in done.stdout + done.stderr


def test_a_webhook_password_is_hidden_by_check_config_json(tmp_path, capsys):
    path = write(tmp_path, "[[alerts]]\nkind = 'webhook'\nurl = 'https://alice:wh-pass@hooks.example/armd?token=tk-1&team=streams'\n")
    code, out, _ = cli(capsys, "check-config", "--json", str(path))
    assert code == 0 and "wh-pass" not in out and "tk-1" not in out
    assert json.loads(out)["alerts"][0]["url"] == "https://alice:***@hooks.example/armd?token=***&team=streams"


def test_a_one_character_secret_gives_nothing_away(tmp_path, capsys):
    path = write(tmp_path, "[store]\nurl = 'postgresql+psycopg://armd:s@db.example/armd'\n"
                           "[[alerts]]\nkind = 'webhook'\nurl = 'https://hooks.example/s'\nsecret = 's'\n")
    code, out, _ = cli(capsys, "check-config", str(path))
    assert code == 0 and "store postgresql+psycopg://armd:***@db.example/armd" in out
    code, out, _ = cli(capsys, "check-config", "--json", str(path))
    public = json.loads(out)
    assert public["store"]["url"] == "postgresql+psycopg://armd:***@db.example/armd"
    assert public["alerts"][0] == {**public["alerts"][0], "secret": "***", "url": "https://hooks.example/***"}
    assert public["source"]["kind"] == "synthetic" and public["metrics"]["address"] == "127.0.0.1"
    assert out.count("***") == 3
    config = load_config(path, environ={})
    assert config.redact("sqlite:///armd.db: streams clicks, queries per_second") == \
        "sqlite:///armd.db: streams clicks, queries per_second"


def test_a_secret_the_environment_put_into_a_url_is_hidden_as_that_part(tmp_path):
    path = write(tmp_path, "[store]\nurl = 'postgresql+psycopg://${DB_USER}:${DB_PASSWORD}@db.example/armd'\n")
    config = load_config(path, environ={"DB_USER": "svc-armd-42", "DB_PASSWORD": "x"})
    assert config.public()["store"]["url"] == "postgresql+psycopg://***:***@db.example/armd"
    assert config.redact("login failed for svc-armd-42") == "login failed for ***"
    assert config.redact("x marks the spot") == "x marks the spot"


@pytest.mark.parametrize("text, shown", [
    ("sqlite:///p.db", "sqlite:///p.db"),
    ("postgresql+psycopg://u:p@h:5432/db", "postgresql+psycopg://u:***@h:5432/db"),
    ("postgresql+psycopg://u@h/db?sslmode=require&PASSWORD=p", "postgresql+psycopg://u@h/db?sslmode=require&PASSWORD=***"),
    ("https://h.example/x?api_key=k&access_token=t#frag", "https://h.example/x?api_key=***&access_token=***#frag"),
    ("https://h.example/services/p/hook", "https://h.example/services/***/hook"),
    ("dbname=armd user=u password=p host=h", "dbname=armd user=u password=*** host=h"),
    ("p", "***"),
    ("a person paid", "a person paid"),
])
def test_masking_by_structure(text, shown):
    assert redact_text(text, {"p"}) == shown
