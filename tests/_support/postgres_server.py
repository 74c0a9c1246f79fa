"""A private PostgreSQL server for outage tests: its own data directory and unix socket
directory in a temporary directory, its own free loopback port, trust auth. The shared
server (127.0.0.1:5432) is never touched.

``async with private_postgres() as pg:`` runs ``initdb`` and starts it; ``pg.dsn`` is a
``postgresql://postgres@127.0.0.1:PORT/postgres`` DSN; ``await pg.stop()`` stops it
(``pg_ctl stop -m fast``, waiting until it is down), ``await pg.start()`` starts it again
on the same port with the same data. On exit it is stopped and its directory removed. A
test module calls ``require_postgres_binaries()`` (a skip when ``initdb``/``pg_ctl`` are
missing: the only reason to skip).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests._support.redis_server import free_port

__all__ = [
    "POSTGRES_BIN",
    "READY_TIMEOUT",
    "PrivatePostgres",
    "postgres_binaries",
    "private_postgres",
    "require_postgres_binaries",
]

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
"""Where ``initdb`` and ``pg_ctl`` are (Debian's PostgreSQL 15 layout)."""
READY_TIMEOUT = 30.0
"""Seconds ``initdb``, a start or a stop may take."""


def postgres_binaries() -> tuple[Path, Path] | None:
    """``(initdb, pg_ctl)``, or ``None`` when either is not installed."""
    initdb, pg_ctl = POSTGRES_BIN / "initdb", POSTGRES_BIN / "pg_ctl"
    if initdb.is_file() and pg_ctl.is_file():
        return initdb, pg_ctl
    return None


def require_postgres_binaries() -> tuple[Path, Path]:
    """``(initdb, pg_ctl)``; skips the test when they are not installed."""
    found = postgres_binaries()
    if found is None:
        pytest.skip(f"PostgreSQL server binaries are not installed in {POSTGRES_BIN}")
    return found


def _as_postgres_user() -> dict[str, object]:
    """Run the server binaries as the ``postgres`` user when this process is root
    (``initdb`` and ``postgres`` refuse to run as root)."""
    if os.geteuid() != 0:
        return {}
    import pwd

    entry = pwd.getpwnam("postgres")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


async def _run(*args: str | Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *(str(a) for a in args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        **_as_postgres_user(),  # type: ignore[arg-type]
    )
    output, _ = await asyncio.wait_for(process.communicate(), READY_TIMEOUT)
    if process.returncode != 0:
        raise RuntimeError(f"{Path(str(args[0])).name} failed: {output.decode(errors='replace')}")


class PrivatePostgres:
    """One private PostgreSQL server (see the module docstring)."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sockets"
        self.port = port
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self.running = False

    async def init(self) -> None:
        """Create the data directory (``initdb``, trust auth, user ``postgres``)."""
        initdb, _ = require_postgres_binaries()
        self.sockets.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(self.sockets, "postgres")
        await _run(initdb, "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8")

    async def start(self) -> None:
        """Start it (``pg_ctl start -w``); return once it accepts connections."""
        _, pg_ctl = require_postgres_binaries()
        options = (
            f"-p {self.port} -h 127.0.0.1 -k {self.sockets} -F "
            "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        )
        log = self.root / "server.log"
        await _run(pg_ctl, "start", "-w", "-t", "30", "-D", self.data, "-l", log, "-o", options)
        self.running = True

    async def stop(self) -> None:
        """Stop it (``pg_ctl stop -m fast -w``: open connections are ended)."""
        _, pg_ctl = require_postgres_binaries()
        if self.running:
            await _run(pg_ctl, "stop", "-w", "-t", "30", "-m", "fast", "-D", self.data)
            self.running = False

    async def restart(self) -> None:
        """Stop it, then start it again (same port, same data)."""
        await self.stop()
        await self.start()


@asynccontextmanager
async def private_postgres() -> AsyncIterator[PrivatePostgres]:
    """A started ``PrivatePostgres``, stopped and removed afterwards."""
    require_postgres_binaries()
    root = Path(tempfile.mkdtemp(prefix="llamon-pg-"))
    server = PrivatePostgres(root, free_port())
    try:
        await server.init()
        await server.start()
        yield server
    finally:
        with contextlib.suppress(RuntimeError, TimeoutError):
            await server.stop()
        shutil.rmtree(root, ignore_errors=True)
