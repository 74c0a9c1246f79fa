"""A user mistake gets one or two lines naming the problem and the fix, and a non-zero exit:
the real ``llamon`` command in a subprocess, never a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from llamon_agent.demo import demo_agent_path
from tests._support.stores import postgres_schema

LLAMON = str(Path(sys.executable).with_name("llamon"))
"""The console script, as a user runs it (not ``python -m``, which adds the cwd to the path)."""

AGENT = f"{demo_agent_path()}:agent"
PG_PASSWORD = "pw-not-shown-7f3a"


def llamon(*args: str, home: Path, cwd: Path | None = None, **env: str) -> tuple[int, str]:
    """Run ``llamon *args``; its exit code and everything it printed."""
    environ = {k: v for k, v in os.environ.items() if k != "LLAMON_DATABASE_URL"}
    environ.update({"LLAMON_HOME": str(home), "COLUMNS": "200"})
    environ.update(env)
    done = subprocess.run(  # noqa: S603 - our own console script
        [LLAMON, *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=environ,
        cwd=cwd,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def assert_short_error(code: int, output: str, *phrases: str) -> None:
    assert code != 0, output
    assert "Traceback" not in output
    assert "╭" not in output  # no rich box either
    lines = output.strip().splitlines()
    assert 1 <= len(lines) <= 2, output
    assert lines[0].startswith("llamon serve: ")
    for phrase in phrases:
        assert phrase in output


@pytest.fixture
def busy_port() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_a_port_in_use(tmp_path: Path, busy_port: int) -> None:
    code, output = llamon("serve", AGENT, "--port", str(busy_port), home=tmp_path)
    assert code == 1
    assert_short_error(code, output, f"port {busy_port} on 127.0.0.1 is already in use", "--port")


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range(tmp_path: Path, port: str) -> None:
    code, output = llamon("serve", AGENT, "--port", port, home=tmp_path)
    assert code == 2
    assert_short_error(code, output, f"--port {port} is out of range", "1 to 65535")


def test_llamon_home_that_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "not-a-dir"
    home.write_text("x")
    code, output = llamon("serve", AGENT, "--port", "0", home=home)
    assert_short_error(code, output, f"LLAMON_HOME ({home}) is not a directory", "writable")


def test_llamon_home_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    home = blocker / "home"  # a directory under a regular file cannot exist
    code, output = llamon("serve", AGENT, "--port", "0", home=home)
    assert_short_error(code, output, f"LLAMON_HOME ({home}) is not a directory", "writable")


def _read_only(path: Path, on: bool) -> None:
    """Make ``path`` unwritable even for root (the immutable flag), or writable again."""
    if on:
        path.chmod(0o555)
    if os.geteuid() == 0:
        flag = "+i" if on else "-i"
        subprocess.run(["chattr", flag, str(path)], check=True)  # noqa: S603, S607
    if not on:
        path.chmod(0o755)


def test_llamon_home_without_write_permission(tmp_path: Path) -> None:
    home = tmp_path / "ro"
    home.mkdir()
    _read_only(home, True)
    try:
        code, output = llamon("serve", AGENT, "--port", "0", home=home)
    finally:
        _read_only(home, False)
    assert_short_error(code, output, "is not a directory this user can write")


def test_a_corrupt_tasks_db(tmp_path: Path) -> None:
    (tmp_path / "tasks.db").write_bytes(b"this is not an SQLite database, " * 64)
    code, output = llamon("serve", AGENT, "--port", "0", home=tmp_path)
    assert_short_error(code, output, f"{tmp_path}/tasks.db is corrupt", "Move it away")


def test_a_tasks_db_from_a_newer_llamon(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "tasks.db") as connection:
        connection.execute("PRAGMA user_version = 999")
    code, output = llamon("serve", AGENT, "--port", "0", home=tmp_path)
    assert_short_error(code, output, "written by a newer llamon-agent", "Upgrade llamon-agent")


@pytest.mark.parametrize(
    ("target", "kind"), [("os:path", "module"), ("json:dumps", "function"), ("sys:maxsize", "int")]
)
def test_a_target_that_is_not_an_agent(tmp_path: Path, target: str, kind: str) -> None:
    code, output = llamon("serve", target, "--port", "0", home=tmp_path)
    assert code == 2
    assert_short_error(code, output, f"{target} is a {kind}, not an agent", "async def")


def test_postgres_without_a_url_names_the_flag(tmp_path: Path) -> None:
    code, output = llamon("serve", AGENT, "--store", "postgres", home=tmp_path)
    assert code == 2
    assert_short_error(code, output, "--store postgres needs", "--database-url")


def test_a_postgres_database_that_does_not_exist(tmp_path: Path) -> None:
    url = f"postgresql://postgres:{PG_PASSWORD}@127.0.0.1:5432/llamon_no_such_db_4f1c"
    code, output = llamon("serve", AGENT, "--port", "0", "--database-url", url, home=tmp_path)
    assert code == 1
    assert_short_error(code, output, "database named in --database-url", "does not exist")
    assert PG_PASSWORD not in output
    assert "127.0.0.1" not in output


async def test_a_postgres_database_from_a_newer_llamon(tmp_path: Path) -> None:
    async with postgres_schema() as dsn:
        connection = await asyncpg.connect(dsn)
        try:
            await connection.execute("CREATE TABLE llamon_schema (version integer NOT NULL)")
            await connection.execute("INSERT INTO llamon_schema (version) VALUES (999)")
        finally:
            await connection.close()
        code, output = await asyncio.to_thread(
            llamon, "serve", AGENT, "--port", "0", "--database-url", dsn, home=tmp_path
        )
    assert_short_error(
        code, output, "database in --database-url", "written by a newer llamon-agent", "Upgrade"
    )
    assert "127.0.0.1" not in output
    assert "llamon_test_" not in output  # neither the role nor the schema


def test_a_postgres_server_that_refuses(tmp_path: Path, busy_port: int) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    url = f"postgresql://postgres:{PG_PASSWORD}@127.0.0.1:{port}/test"
    code, output = llamon("serve", AGENT, "--port", "0", home=tmp_path, LLAMON_DATABASE_URL=url)
    assert code == 1
    assert_short_error(code, output, "refused the connection", "--database-url")
    assert PG_PASSWORD not in output
    assert str(port) not in output


def test_errors_import_finds_a_module_in_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "mymod_rules.py").write_text(
        "from llamon_agent.core.classify import register_exception\n"
        "from llamon_agent.core.codes import ErrorCode\n"
        "register_exception('vendorx.QuotaError', ErrorCode.RATE_LIMITED, retriable=True)\n"
    )
    code, output = llamon(
        "errors", "--json", "--import", "mymod_rules", home=tmp_path, cwd=tmp_path
    )
    assert code == 0, output
    rows = {row["exception"]: row for row in json.loads(output)["exceptionMapping"]}
    assert rows["vendorx.QuotaError"]["errorCode"] == "RATE_LIMITED"


@pytest.mark.parametrize("columns", ["80", "120"])
def test_errors_never_cuts_names(tmp_path: Path, columns: str) -> None:
    _, document = llamon("errors", "--json", home=tmp_path)
    model = json.loads(document)
    names = [row["exception"] for row in model["exceptionMapping"]]
    names += [row["reason"] for row in model["reasons"]]
    names += [row["operatorAction"] for row in model["reasons"]]
    code, output = llamon("errors", home=tmp_path, COLUMNS=columns)
    assert code == 0
    assert "…" not in output
    for name in names:
        assert name in output, name


def test_a_database_url_that_is_not_postgres(tmp_path: Path) -> None:
    url = f"mysql://app:{PG_PASSWORD}@db.internal:3306/tasks"
    code, output = llamon("serve", AGENT, "--database-url", url, home=tmp_path)
    assert code == 2
    assert_short_error(code, output, "is not a PostgreSQL URL", "postgresql://")
    assert PG_PASSWORD not in output
    assert "db.internal" not in output


def test_a_redis_that_does_not_answer_is_refused_in_one_line(tmp_path: Path) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    url = f"redis://:{PG_PASSWORD}@127.0.0.1:{port}/0"
    code, output = llamon(
        "serve", AGENT, "--port", "0", "--store", "sqlite", "--redis-url", url, home=tmp_path
    )
    assert code == 1  # as for a PostgreSQL that refuses
    assert output.strip().splitlines() == [
        "llamon serve: Redis at --redis-url did not answer; start it, or fix the host and "
        "port in the URL."
    ]
    assert not (tmp_path / "tasks.db").exists()  # refused before any store was opened
    assert PG_PASSWORD not in output
    assert str(port) not in output


@pytest.mark.parametrize(
    ("settings", "line"),
    [
        (
            {"LLAMON_HEARTBEAT_SECONDS": "5", "LLAMON_WORKER_LEASE_SECONDS": "5"},
            "the worker lease (LLAMON_WORKER_LEASE_SECONDS, 5 s) must be longer than the "
            "heartbeat (LLAMON_HEARTBEAT_SECONDS, 5 s); three beats or more is usual.",
        ),
        (
            {"LLAMON_RELAY_MAXLEN": "lots"},
            "LLAMON_RELAY_MAXLEN must be a whole number >= 1, got 'lots'.",
        ),
        (
            {"LLAMON_RELAY_EXPIRE_SECONDS": "-1"},
            "LLAMON_RELAY_EXPIRE_SECONDS must be a number of seconds > 0, got '-1'.",
        ),
    ],
    ids=["heartbeat-lease", "relay-maxlen", "relay-expire"],
)
def test_redis_settings_that_do_not_fit_are_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], line: str
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)  # the command inherits this environment
    redis_url = "redis://127.0.0.1:6379/0"
    code, output = llamon("serve", AGENT, "--port", "0", "--redis-url", redis_url, home=tmp_path)
    assert code == 2
    assert output.strip().splitlines() == [f"llamon serve: --redis-url: {line}"]
