"""The task event store in a database: the ``llamon_task_events`` table on SQLite and PostgreSQL.

What the caller sees:

* ``SQLiteTaskEventStore(database)`` writes through the ``SQLiteDatabase`` the task store
  uses: one batch of events is one write (one ``executemany``), joining the next batched
  commit; reads run on the reader thread. The table and its indexes are part
  of the SQLite schema (``SQLITE_TASK_EVENT_SCHEMA``, created by ``open_sqlite_database``).
* ``PostgresTaskEventStore(engine)`` uses the engine of the PostgreSQL task store; one
  batch is one transaction with one multi-row INSERT. ``await
  create_postgres_task_event_table(connection)`` creates the table and indexes.
* A row is one event: the task's id, an id that follows the writes (the order events were
  published in), the event's time and type, and the whole event as JSON
  (``event_to_json``). ``for_task`` reads one task's rows through the index on
  ``(task_id, id)``; pruning by age uses the index on ``time``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from llamon_agent.a2a.stores.retention import (
    EventRetention,
    prune_statements,
    sqlite_prune_job,
)
from llamon_agent.a2a.stores.task_events import TaskEventStore, event_from_json
from llamon_agent.core.events import RunnerEvent, event_to_json

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from llamon_agent.a2a.stores.sqlite_db import SQLiteDatabase

__all__ = [
    "SQLITE_TASK_EVENT_SCHEMA",
    "TASK_EVENT_TABLE",
    "PostgresTaskEventStore",
    "SQLiteTaskEventStore",
    "create_postgres_task_event_table",
]

TASK_EVENT_TABLE: Final = "llamon_task_events"


def _table(id_column: str, real: str) -> str:
    return f"""CREATE TABLE IF NOT EXISTS {TASK_EVENT_TABLE} (
        id {id_column},
        task_id TEXT NOT NULL,
        time {real} NOT NULL,
        type TEXT NOT NULL,
        event TEXT NOT NULL
    )"""


_INDEXES: Final = (
    f"CREATE INDEX IF NOT EXISTS {TASK_EVENT_TABLE}_task ON {TASK_EVENT_TABLE} (task_id, id)",
    f"CREATE INDEX IF NOT EXISTS {TASK_EVENT_TABLE}_time ON {TASK_EVENT_TABLE} (time)",
)

SQLITE_TASK_EVENT_SCHEMA: Final = (_table("INTEGER PRIMARY KEY", "REAL"), *_INDEXES)
"""The SQLite statements that create the task event table and its indexes (idempotent)."""
_POSTGRES_SCHEMA: Final = (_table("BIGSERIAL PRIMARY KEY", "DOUBLE PRECISION"), *_INDEXES)

_INSERT: Final = (
    f"INSERT INTO {TASK_EVENT_TABLE} (task_id, time, type, event)"  # noqa: S608 - constants
    " VALUES (:task_id, :time, :type, :event)"
)
_SELECT: Final = (  # the newest ``limit`` of the task, given oldest first
    f"SELECT event FROM (SELECT id, event FROM {TASK_EVENT_TABLE}"  # noqa: S608 - constants
    " WHERE task_id = :task_id ORDER BY id DESC LIMIT :limit) AS newest ORDER BY id"
)


def _rows(events: Sequence[RunnerEvent]) -> list[dict[str, Any]]:
    return [
        {
            "task_id": event.task_id,
            "time": event.time,
            "type": event.type,
            "event": event_to_json(event),
        }
        for event in events
        if event.task_id is not None
    ]


class SQLiteTaskEventStore(TaskEventStore):
    """The task event store in the SQLite file of the tasks (``SQLiteDatabase``)."""

    def __init__(self, database: SQLiteDatabase, retention: EventRetention | None = None) -> None:
        super().__init__(retention)
        self.database = database

    async def add(self, events: Sequence[RunnerEvent]) -> None:
        """Insert ``events`` in order; returns once the writer's batch holding them is
        committed."""
        rows = _rows(events)
        if not rows:
            return

        def run(connection: sqlite3.Connection) -> None:
            connection.executemany(_INSERT, rows)

        await self.database.write_returning(run, small=True)

    async def for_task(self, task_id: str, *, limit: int = 1000) -> list[RunnerEvent]:
        """The kept events of ``task_id``, oldest first (at most the ``limit`` newest)."""
        if limit < 1:
            return []
        params = {"task_id": task_id, "limit": limit}
        rows = await self.database.read(lambda c: c.execute(_SELECT, params).fetchall())
        return [event_from_json(row[0]) for row in rows]

    async def prune(self, now: float | None = None) -> int:
        """Delete events past the retention and refresh the planner's statistics, in one
        commit; returns how many rows went."""
        moment = time.time() if now is None else now
        job = sqlite_prune_job(TASK_EVENT_TABLE, self.retention, moment)
        return await self.database.write_returning(job)


async def create_postgres_task_event_table(connection: AsyncConnection) -> None:
    """Create the task event table and its indexes on PostgreSQL if missing, in the
    transaction of ``connection`` (``open_stores`` runs it with a2a's tables)."""
    from sqlalchemy import text

    for statement in _POSTGRES_SCHEMA:
        await connection.execute(text(statement))


class PostgresTaskEventStore(TaskEventStore):
    """The task event store in the PostgreSQL database of the tasks."""

    def __init__(self, engine: AsyncEngine, retention: EventRetention | None = None) -> None:
        super().__init__(retention)
        self.engine = engine

    async def add(self, events: Sequence[RunnerEvent]) -> None:
        """Insert ``events`` in order, in a transaction of their own."""
        from sqlalchemy import text

        rows = _rows(events)
        if not rows:
            return
        async with self.engine.begin() as connection:
            await connection.execute(text(_INSERT), rows)

    async def for_task(self, task_id: str, *, limit: int = 1000) -> list[RunnerEvent]:
        """The kept events of ``task_id``, oldest first (at most the ``limit`` newest)."""
        from sqlalchemy import text

        if limit < 1:
            return []
        async with self.engine.connect() as connection:
            result = await connection.execute(text(_SELECT), {"task_id": task_id, "limit": limit})
            return [event_from_json(row[0]) for row in result.all()]

    async def prune(self, now: float | None = None) -> int:
        """Delete events past the retention, in one transaction; returns how many."""
        from sqlalchemy import text

        removed = 0
        moment = time.time() if now is None else now
        statements = prune_statements(TASK_EVENT_TABLE, self.retention, moment, sqlite=False)
        async with self.engine.begin() as connection:
            for sql, params in statements:
                result = await connection.execute(text(sql), params)
                removed += max(result.rowcount, 0)
        return removed
