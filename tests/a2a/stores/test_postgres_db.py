"""The PostgreSQL database of the stores: an error on a connection the server closed is
reported as the connection lost (retriable), whatever asyncpg called it; any other error
is left as it is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from llamon_agent.a2a.stores.guard import TaskStoreUnavailableError, guard_task_store
from llamon_agent.a2a.stores.postgres import PostgresTaskStore, open_postgres_database
from llamon_agent.a2a.stores.postgres_db import as_lost, asyncpg_dsn
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from tests._support.stores import postgres_schema

PROTOCOL_STATE = "cannot switch to state 11; another operation (2) is in progress"
"""What asyncpg's ``InternalClientError`` says now and then for a backend that ended."""


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    async with postgres_schema() as fresh:
        yield asyncpg_dsn(fresh)


async def _terminate(admin: asyncpg.Connection, pid: int) -> None:
    """End the backend ``pid`` and wait until it is gone (at most 10 s)."""
    assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid) is True
    async with asyncio.timeout(10):
        while await admin.fetchval(  # noqa: ASYNC110 - the server is polled, not an event
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid
        ):
            await asyncio.sleep(0.01)


@pytest.mark.reason("database_unavailable")
async def test_an_error_on_a_connection_the_server_closed_is_the_connection_lost(
    dsn: str,
) -> None:
    victim = await asyncpg.connect(dsn)
    admin = await asyncpg.connect(dsn)
    try:
        await _terminate(admin, victim.get_server_pid())
        with pytest.raises(Exception):  # noqa: B017, PT011 - whichever way asyncpg says it
            await victim.fetchval("SELECT 1")
        assert victim.is_closed()
        confused = asyncpg.InternalClientError(PROTOCOL_STATE)
        assert classify_exception(confused).code is ErrorCode.INTERNAL_ERROR  # on its own
        lost = as_lost(confused, victim)
        assert isinstance(lost, ConnectionResetError)
        assert str(lost) == "the database closed the connection"
        assert lost.__cause__ is confused
        # retriable by the one table; the guarded store answers it database_unavailable
        assert classify_exception(lost).as_tuple() == (
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "network_error",
            True,
        )
    finally:
        victim.terminate()
        await admin.close()


async def test_an_error_on_an_open_connection_is_left_as_it_is(dsn: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.PostgresSyntaxError) as raised:
            await connection.execute("SELEC 1")
        assert as_lost(raised.value, connection) is raised.value
        assert not connection.is_closed()
    finally:
        await connection.close()


@pytest.mark.reason("database_unavailable")
async def test_reads_on_pooled_connections_the_server_ended_fail_retriable_then_work(
    dsn: str,
) -> None:
    database = await open_postgres_database(dsn)
    store = guard_task_store(PostgresTaskStore(database))
    admin = await asyncpg.connect(dsn)
    try:
        assert await store.get("nothing") is None
        pids = await admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE usename = current_user AND pid <> $1",
            admin.get_server_pid(),
        )
        for row in pids:  # every connection of the store: the pool's and the writer's
            await _terminate(admin, row["pid"])
        answers: list[object] = []
        for _ in range(3):  # a read may meet a dead pooled connection; then it is replaced
            try:
                answers.append(await store.get("nothing"))
            except TaskStoreUnavailableError as exc:
                answers.append(exc)
        assert answers[-1] is None  # served again, no restart
        assert all(a is None or isinstance(a, TaskStoreUnavailableError) for a in answers)
    finally:
        await admin.close()
        await database.close()
