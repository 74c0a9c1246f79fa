"""asyncpg's exceptions, provoked against the real PostgreSQL, in the one table: a database
that does not answer (or not now) is ``database_unavailable``, retriable, text withheld; a
programming error is ``INTERNAL_ERROR``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from llamon_agent.a2a.stores.postgres_db import as_lost, asyncpg_dsn
from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import ErrorCode
from tests._support.redis_server import free_port
from tests._support.stores import POSTGRES_ADMIN_DSN_ENV, postgres_schema

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/test"
UNAVAILABLE = (ErrorCode.UPSTREAM_UNAVAILABLE, "database_unavailable", True)


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    async with postgres_schema() as fresh:
        yield asyncpg_dsn(fresh)


async def _raised(action: Callable[[], Awaitable[Any]]) -> BaseException:
    try:
        await action()
    except Exception as exc:
        return exc
    raise AssertionError("nothing was raised")


def _unavailable(exc: BaseException, sqlstate: str | None) -> Classification:
    assert getattr(exc, "sqlstate", None) == sqlstate
    found = classify_exception(exc)
    assert found.as_tuple() == UNAVAILABLE
    assert found.expose_text is False
    return found


@pytest.mark.reason("database_unavailable")
async def test_a_statement_timeout_is_database_unavailable(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("SET statement_timeout = 10")
        exc = await _raised(lambda: connection.execute("SELECT pg_sleep(5)"))
        assert type(exc).__name__ == "QueryCanceledError"
        _unavailable(exc, "57014")
    finally:
        await connection.close()


TERMINATED_STATES = {
    "AdminShutdownError": "57P01",
    "ConnectionDoesNotExistError": "08003",
    "InterfaceError": None,
}
"""What a query on a connection whose backend was terminated raises, and its SQLSTATE."""


async def _gone(admin: asyncpg.Connection, pid: int) -> None:
    """Wait until the backend ``pid`` has left ``pg_stat_activity`` (at most 10 s)."""
    async with asyncio.timeout(10):
        while await admin.fetchval(  # noqa: ASYNC110 - the server is polled, not an event
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid
        ):
            await asyncio.sleep(0.01)


@pytest.mark.reason("database_unavailable")
async def test_a_terminated_connection_is_database_unavailable(dsn: str) -> None:
    victim = await asyncpg.connect(dsn)
    killer = await asyncpg.connect(dsn)
    try:
        pid = victim.get_server_pid()
        assert await killer.fetchval("SELECT pg_terminate_backend($1)", pid) is True
        await _gone(killer, pid)  # the backend has exited: nothing of it is in flight
        during = await _raised(lambda: victim.fetchval("SELECT 1"))
        if isinstance(during, asyncpg.InternalClientError):
            # now and then asyncpg reports the ended backend as a protocol-state error; the
            # PostgreSQL store reports an error on a connection the server closed as lost
            assert victim.is_closed()
            during = as_lost(during, victim)
            assert isinstance(during, ConnectionResetError)
            assert classify_exception(during).as_tuple()[2] is True
        else:  # the server's own answer (57P01), asyncpg's "connection was closed"
            # (08003), or the connection already known closed (no SQLSTATE)
            _unavailable(during, TERMINATED_STATES[type(during).__name__])
        after = await _raised(lambda: victim.fetchval("SELECT 1"))
        assert type(after).__name__ == "InterfaceError"
        assert "connection is closed" in str(after)
        _unavailable(after, None)
    finally:
        victim.terminate()
        await killer.close()


@pytest.mark.reason("database_unavailable")
async def test_too_many_connections_is_database_unavailable(dsn: str) -> None:
    first = await asyncpg.connect(dsn)
    admin = await asyncpg.connect(os.environ.get(POSTGRES_ADMIN_DSN_ENV, ADMIN_DSN))
    try:
        role = await first.fetchval("SELECT current_user")
        await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 1')
        exc = await _raised(lambda: asyncpg.connect(dsn))
        assert type(exc).__name__ == "TooManyConnectionsError"
        _unavailable(exc, "53300")
    finally:
        await first.close()
        await admin.close()


@pytest.mark.reason("database_unavailable")
async def test_a_deadlock_is_database_unavailable(dsn: str) -> None:
    one, two = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        await one.execute(
            "CREATE TABLE locks (id int PRIMARY KEY); INSERT INTO locks VALUES (1), (2)"
        )
        first, second = one.transaction(), two.transaction()
        await first.start()
        await second.start()
        await one.execute("UPDATE locks SET id = id WHERE id = 1")
        await two.execute("UPDATE locks SET id = id WHERE id = 2")
        outcomes = await asyncio.gather(
            one.execute("UPDATE locks SET id = id WHERE id = 2"),
            two.execute("UPDATE locks SET id = id WHERE id = 1"),
            return_exceptions=True,
        )
        failed = [exc for exc in outcomes if isinstance(exc, BaseException)]
        assert len(failed) == 1
        assert type(failed[0]).__name__ == "DeadlockDetectedError"
        _unavailable(failed[0], "40P01")
        await first.rollback()
        await second.rollback()
    finally:
        await one.close()
        await two.close()


@pytest.mark.reason("database_unavailable")
async def test_a_serialization_failure_is_database_unavailable(dsn: str) -> None:
    one, two = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        await one.execute("CREATE TABLE counter (n int); INSERT INTO counter VALUES (0)")
        first = one.transaction(isolation="repeatable_read")
        second = two.transaction(isolation="repeatable_read")
        await first.start()
        await second.start()
        assert await one.fetchval("SELECT n FROM counter") == 0
        assert await two.fetchval("SELECT n FROM counter") == 0
        await one.execute("UPDATE counter SET n = n + 1")
        await first.commit()
        exc = await _raised(lambda: two.execute("UPDATE counter SET n = n + 1"))
        assert type(exc).__name__ == "SerializationError"
        _unavailable(exc, "40001")
        await second.rollback()
    finally:
        await one.close()
        await two.close()


@pytest.mark.reason("database_unavailable")
async def test_a_refused_connection_is_retriable() -> None:
    exc = await _raised(
        lambda: asyncpg.connect(f"postgresql://postgres@127.0.0.1:{free_port()}/test", timeout=5)
    )
    assert isinstance(exc, OSError)
    found = classify_exception(exc)
    assert found.code == ErrorCode.UPSTREAM_UNAVAILABLE
    assert found.retriable is True


async def test_a_syntax_error_is_internal_error_with_its_text_kept_inside(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        exc = await _raised(lambda: connection.execute("SELEC 1"))
    finally:
        await connection.close()
    assert type(exc).__name__ == "PostgresSyntaxError"
    assert getattr(exc, "sqlstate", None) == "42601"
    found = classify_exception(exc)
    assert found.as_tuple() == (ErrorCode.INTERNAL_ERROR, "postgres_syntax_error", False)
    assert found.mapped is False


async def test_wrong_arguments_are_internal_error(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        exc = await _raised(lambda: connection.fetchval("SELECT $1::int", 1, 2))
    finally:
        await connection.close()
    assert type(exc).__name__ == "InterfaceError"
    found = classify_exception(exc)
    assert found.as_tuple() == (ErrorCode.INTERNAL_ERROR, "interface_error", False)
