"""Checkpointers of every kind for the flow tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from tests._support.stores import postgres_schema


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """An in-memory, SQLite or PostgreSQL LangGraph checkpointer."""
    if request.param == "memory":
        yield InMemorySaver()
    elif request.param == "sqlite":
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
            yield saver
    else:
        async with postgres_schema() as dsn, AsyncPostgresSaver.from_conn_string(dsn) as saver:
            await saver.setup()
            yield saver
