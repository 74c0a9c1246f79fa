"""Fixtures for the A2A tests: a throwaway PostgreSQL schema, and stores of every kind."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from llamon_agent.a2a.stores import Stores, open_stores

POSTGRES_ADMIN_DSN_ENV = "LLAMON_TEST_POSTGRES_DSN"
"""Superuser DSN of the test server; default ``postgresql://postgres@127.0.0.1:5432/test``."""

_DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_TERMINATE_SESSIONS = text(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = :name"
)


async def _admin_connection(admin_dsn: str) -> AsyncConnection:
    """An autocommit connection as the admin, or a test failure saying PostgreSQL is down."""
    url = make_url(admin_dsn).set(drivername="postgresql+asyncpg")
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT", connect_args={"timeout": 5})
    shown = url.render_as_string(hide_password=True)
    try:
        return await engine.connect()
    except (OSError, TimeoutError, DBAPIError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    await engine.dispose()
    pytest.fail(
        f"PostgreSQL is not reachable at {shown} ({problem}). "
        f"These tests need a real server: start it, or set {POSTGRES_ADMIN_DSN_ENV}.",
        pytrace=False,
    )


@pytest.fixture
async def postgres_dsn() -> AsyncIterator[str]:
    """A ``postgresql://`` DSN that sees only a fresh, empty schema of its own."""
    async with postgres_schema() as dsn:
        yield dsn


@asynccontextmanager
async def postgres_schema() -> AsyncIterator[str]:
    """A ``postgresql://`` DSN that sees only a fresh, empty schema of its own.

    A throwaway role (with a password, which trust auth ignores) owns a schema of the same
    name and has it as its only ``search_path``, so the stores' ``tasks`` tables land there
    and never meet other tests' tables. Role and schema are dropped afterwards.
    """
    admin_dsn = os.environ.get(POSTGRES_ADMIN_DSN_ENV, _DEFAULT_ADMIN_DSN)
    admin = await _admin_connection(admin_dsn)
    name = f"llamon_test_{uuid4().hex[:12]}"
    password = uuid4().hex
    try:
        await admin.exec_driver_sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
        await admin.exec_driver_sql(f"CREATE SCHEMA {name} AUTHORIZATION {name}")
        await admin.exec_driver_sql(f"ALTER ROLE {name} SET search_path = {name}")
        url = make_url(admin_dsn).set(drivername="postgresql", username=name, password=password)
        yield url.render_as_string(hide_password=False)
    finally:
        await admin.execute(_TERMINATE_SESSIONS, {"name": name})
        await admin.exec_driver_sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        await admin.exec_driver_sql(f"DROP ROLE IF EXISTS {name}")
        await admin.close()
        await admin.engine.dispose()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    """The served agent's stores: each end-to-end test runs on all three kinds."""
    kind = request.param
    async with AsyncExitStack() as stack:
        dsn = await stack.enter_async_context(postgres_schema()) if kind == "postgres" else None
        opened = await open_stores(kind, dsn=dsn, home=tmp_path)
        stack.push_async_callback(opened.close)
        yield opened
