"""Checkpointers for served flows: the same kinds as the task stores.

A served flow always has a checkpointer, so its failure context can be read back:
``memory`` for tests, ``sqlite`` (``checkpoints.db`` under ``LLAMON_HOME``) by default,
``postgres`` by DSN (the one the task store uses). ``attach_checkpointer`` gives a
``GraphBuilder`` or a compiled graph the checkpointer when it has none of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from llamon_agent._extras import requires_extra
from llamon_agent.core.settings import (
    DATABASE_URL_ENV,
    StoreKind,
    database_url_setting,
    llamon_home,
)
from llamon_agent.flow.builder import GraphBuilder

with requires_extra("langgraph", "llamon_agent.flow"):
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.pregel import Pregel

__all__ = ["CHECKPOINTS_FILENAME", "attach_checkpointer", "open_checkpointer"]

CHECKPOINTS_FILENAME = "checkpoints.db"


def _psycopg_dsn(dsn: str) -> str:
    scheme, sep, rest = dsn.partition("://")
    if not sep:
        raise ValueError("a PostgreSQL DSN must look like postgresql://user@host/db")
    return f"postgresql://{rest}" if scheme.startswith("postgres") else dsn


@asynccontextmanager
async def open_checkpointer(
    kind: StoreKind, *, dsn: str | None = None, home: Path | None = None
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """A checkpointer of ``kind``, closed on exit (tables are set up for PostgreSQL)."""
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        path = (home or llamon_home()) / CHECKPOINTS_FILENAME
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            yield saver
    else:
        url = dsn or database_url_setting()
        if not url:
            raise ValueError(f"postgres checkpoints need a DSN (or {DATABASE_URL_ENV})")
        with requires_extra("postgres", "postgres flow checkpoints"):
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        async with AsyncPostgresSaver.from_conn_string(_psycopg_dsn(url)) as saver:
            await saver.setup()
            yield saver


def attach_checkpointer(agent: object, saver: BaseCheckpointSaver[Any]) -> object:
    """``agent`` with ``saver`` when it is a flow without a checkpointer of its own."""
    if isinstance(agent, GraphBuilder):
        return agent.compile(checkpointer=saver)
    if isinstance(agent, Pregel) and agent.checkpointer is None:
        agent.checkpointer = saver
    return agent
