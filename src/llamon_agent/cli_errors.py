"""What ``llamon serve`` prints for a mistake the operator can fix, instead of a traceback.

``listen_problem(exc, ...)`` and ``store_problem(exc, ...)`` return one or two lines naming
the problem and the fix for an exception raised while the server starts: a port in use,
out of range or not available; a ``tasks.db`` that is corrupt, unwritable or written by a
newer llamon; a PostgreSQL database that does not exist, rejects the login, cannot be
reached or was written by a newer llamon; ``redis_problem`` one line for a Redis at
``--redis-url`` that does not answer.
They return ``None`` for anything else (a bug, which keeps its traceback).
``UserError`` carries such a message from the command's own checks. No line repeats a
database URL, a password or a database host: the operator knows which ones they gave, and
terminal output ends up in CI logs.
"""

from __future__ import annotations

import errno
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from llamon_agent.a2a.stores import SQLITE_FILENAME
from llamon_agent.a2a.stores.sqlite import SQLITE_SCHEMA_VERSION
from llamon_agent.a2a.stores.task_rows import NewerSchemaError

__all__ = ["UserError", "listen_problem", "redis_problem", "store_problem"]

_DATABASE_URL: Final = "--database-url (or LLAMON_DATABASE_URL)"


class UserError(Exception):
    """A mistake in the command line or environment; ``str()`` is what to print."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, the DB-API error SQLAlchemy wraps (``.orig``), and its causes."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        todo += [orig if isinstance(orig, BaseException) else None, current.__cause__]


def _sqlstate(exc: BaseException) -> str | None:
    for item in _chain(exc):
        for name in ("sqlstate", "pgcode"):
            value = getattr(item, name, None)
            if isinstance(value, str) and value:
                return value
    return None


def _postgres_problem(exc: BaseException) -> str | None:
    if isinstance(exc, NewerSchemaError):
        return (
            f"the PostgreSQL database in {_DATABASE_URL} was written by a newer llamon-agent.\n"
            "  Upgrade llamon-agent, or point the URL at another database."
        )
    state = _sqlstate(exc)
    if state == "3D000":
        return (
            f"the PostgreSQL database named in {_DATABASE_URL} does not exist.\n"
            "  Create it (createdb NAME, or CREATE DATABASE) or fix the name in the URL."
        )
    if state is not None and state.startswith("28"):
        return (
            f"PostgreSQL rejected the user or password in {_DATABASE_URL}.\n"
            "  Fix the credentials in the URL (postgresql://USER:PASSWORD@HOST:PORT/DB)."
        )
    for item in _chain(exc):
        if isinstance(item, socket.gaierror):
            return (
                f"the PostgreSQL host in {_DATABASE_URL} cannot be resolved.\n"
                "  Fix the host name in the URL."
            )
        if isinstance(item, ConnectionRefusedError | TimeoutError) or (
            isinstance(item, OSError) and item.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH)
        ):
            return (
                f"PostgreSQL at the address in {_DATABASE_URL} refused the connection.\n"
                "  Start the database server, or fix the host and port in the URL."
            )
    return None


_SQLITE_DAMAGED: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_SQLITE_UNWRITABLE: Final = frozenset({3, 8, 14})  # SQLITE_PERM, SQLITE_READONLY, _CANTOPEN


def _sqlite_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of ``exc`` or of what it was raised from."""
    for item in _chain(exc):
        code = getattr(item, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF
    return None


def _schema_version(database: Path) -> int:
    """``PRAGMA user_version`` of ``database`` (0 if it cannot be read)."""
    try:
        connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
        try:
            return int(connection.execute("PRAGMA user_version").fetchone()[0])
        finally:
            connection.close()
    except (sqlite3.Error, ValueError):
        return 0


def _sqlite_problem(exc: BaseException, home: str) -> str | None:
    database = Path(home) / SQLITE_FILENAME
    if isinstance(exc, ValueError) and _schema_version(database) > SQLITE_SCHEMA_VERSION:
        return (
            f"{database} was written by a newer llamon-agent.\n"
            "  Upgrade llamon-agent, or point LLAMON_HOME at another directory."
        )
    code = _sqlite_code(exc)
    if code in _SQLITE_DAMAGED:
        return (
            f"{database} is corrupt or not a llamon task database.\n"
            "  Move it away (a new one is created) or point LLAMON_HOME at another directory."
        )
    if code in _SQLITE_UNWRITABLE:
        return (
            f"cannot write the task database in LLAMON_HOME ({home}).\n"
            "  Make the directory writable, or point LLAMON_HOME at one that is."
        )
    return None


def listen_problem(exc: BaseException, *, host: str, port: int) -> str | None:
    """One or two lines for a socket that could not listen on ``host:port``, else ``None``."""
    if isinstance(exc, OverflowError):
        return f"--port {port} is out of range.\n  Use a port from 1 to 65535 (0 picks a free one)."
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on {host!r}: unknown host.\n  Fix --host (e.g. 127.0.0.1)."
    if not isinstance(exc, OSError):
        return None
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use.\n"
            "  Stop the other server, or choose another port: --port N (0 picks a free one)."
        )
    return (
        f"cannot listen on {host}:{port} ({exc.strerror or 'refused by the system'}).\n"
        "  Use an address of this machine (--host) and a port you may open (--port)."
    )


def redis_problem(exc: BaseException) -> str | None:
    """One line for a Redis at ``--redis-url`` that did not answer at startup, else
    ``None`` (the URL, which may hold a password, is never repeated)."""
    try:
        from llamon_agent.a2a.relay import RelayUnavailableError  # the redis extra's
    except ImportError:
        return None
    if any(isinstance(item, RelayUnavailableError) for item in _chain(exc)):
        return "Redis at --redis-url did not answer; start it, or fix the host and port in the URL."
    return None


def store_problem(exc: BaseException, *, home: str) -> str | None:
    """One or two lines for a task store that could not be opened, else ``None``.

    ``home`` is the ``LLAMON_HOME`` directory of the SQLite store ("" for another store),
    named because the operator chose it.
    """
    return (_sqlite_problem(exc, home) if home else None) or _postgres_problem(exc)
