"""llamon's tasks and push configs in PostgreSQL: the store replicas share.

What the caller sees:

* ``PostgresTaskStore`` and ``PostgresPushConfigStore`` are a2a-sdk's ``TaskStore`` and
  ``PushNotificationConfigStore`` over one ``PostgresDatabase`` (``postgres_db``: a writer
  with batched commits, a pool for reads); ``open_stores("postgres")`` builds them. Tables
  exist when ``open_postgres_database`` returns.
* ``save`` returns once the task is committed. Concurrent saves share commits.
* A task is one row of ``llamon_tasks``: its id, context, state, owning worker and starting
  message id as columns, the whole task as JSON text (one serialisation per save).
  Reconciliation finds unfinished tasks through a partial index on the worker over the
  ``submitted``/``working`` rows; ``task_in_context`` and ``tasks_sent_as`` use indexes on
  the context and the message id.
* ``claim_paused(task, paused_state)`` saves ``task`` only if the stored row is still in
  ``paused_state`` (one ``UPDATE ... WHERE state = ...``): of two replicas resuming one
  paused task, exactly one gets ``True``.
* The schema version is the one row of ``llamon_schema`` (``POSTGRES_SCHEMA_VERSION``).
  Tables are created under a transaction-scoped advisory lock, so replicas starting at
  once do not race; a database written by a newer llamon is refused with ``ValueError``.
* A database used by llamon before this store (a2a-sdk's ``tasks`` and
  ``push_notification_configs`` tables) is carried over once, when the schema is created;
  the old tables are left as they were.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import asyncpg
from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.types import PushNotificationConfig, Task, TaskState

from llamon_agent.a2a.states import ORPHAN_STATES
from llamon_agent.a2a.stores.postgres_db import PostgresDatabase
from llamon_agent.a2a.stores.push_rows import PushConfigCodec
from llamon_agent.a2a.stores.task_rows import (
    A2A_TASK_COLUMNS,
    NewerSchemaError,
    TaskRow,
    task_from_a2a_row,
    task_from_body,
    task_row,
)

__all__ = [
    "POSTGRES_SCHEMA_LOCK",
    "POSTGRES_SCHEMA_VERSION",
    "PostgresPushConfigStore",
    "PostgresTaskStore",
    "open_postgres_database",
]

logger = logging.getLogger(__name__)

POSTGRES_SCHEMA_VERSION: Final = 1
"""The ``llamon_schema.version`` this module writes; a newer database is refused."""

POSTGRES_SCHEMA_LOCK: Final = 0x6C6C616D6F6E  # "llamon"
"""The advisory lock key held while the schema is checked and created."""

_UNFINISHED = ", ".join(f"'{state}'" for state in ORPHAN_STATES)
_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS llamon_tasks (
        id text PRIMARY KEY,
        context_id text NOT NULL,
        state text NOT NULL,
        worker text,
        updated_at double precision NOT NULL,
        body text NOT NULL,
        message_id text
    )""",
    "CREATE INDEX IF NOT EXISTS llamon_tasks_context ON llamon_tasks (context_id)",
    """CREATE INDEX IF NOT EXISTS llamon_tasks_message ON llamon_tasks (message_id)
        WHERE message_id IS NOT NULL""",
    f"""CREATE INDEX IF NOT EXISTS llamon_tasks_unfinished ON llamon_tasks (worker, id)
        WHERE state IN ({_UNFINISHED})""",
    """CREATE TABLE IF NOT EXISTS llamon_push_configs (
        task_id text NOT NULL,
        config_id text NOT NULL,
        seq bigserial,
        config bytea NOT NULL,
        PRIMARY KEY (task_id, config_id)
    )""",
)
_SCHEMA_TABLE: Final = "CREATE TABLE IF NOT EXISTS llamon_schema (version integer NOT NULL)"
_LOCK: Final = "SELECT pg_advisory_xact_lock($1)"
_VERSION: Final = "SELECT max(version) FROM llamon_schema"
_SET_VERSION: Final = "INSERT INTO llamon_schema (version) VALUES ($1)"

_COLUMNS: Final = "id, context_id, state, worker, updated_at, body, message_id"
_VALUES: Final = "$1, $2, $3, $4, $5, $6, $7"
_UPSERT_TASK: Final = (
    f"INSERT INTO llamon_tasks ({_COLUMNS}) VALUES ({_VALUES})"  # noqa: S608 - constants
    " ON CONFLICT (id) DO UPDATE SET"
    " context_id = excluded.context_id, state = excluded.state, worker = excluded.worker,"
    " updated_at = excluded.updated_at, body = excluded.body, message_id = excluded.message_id"
)
_INSERT_CARRIED: Final = (
    f"INSERT INTO llamon_tasks ({_COLUMNS}) VALUES ({_VALUES})"  # noqa: S608 - constants
    " ON CONFLICT (id) DO NOTHING"
)
_CLAIM: Final = (
    "UPDATE llamon_tasks SET context_id = $2, state = $3, worker = $4, updated_at = $5,"
    " body = $6, message_id = $7 WHERE id = $1 AND state = $8 RETURNING id"
)
_SELECT_TASK: Final = "SELECT body FROM llamon_tasks WHERE id = $1"
_SELECT_CONTEXT_TASK: Final = "SELECT body FROM llamon_tasks WHERE context_id = $1 LIMIT 1"
_SELECT_SENT_TASKS: Final = "SELECT body FROM llamon_tasks WHERE message_id = $1 LIMIT 100"
_DELETE_TASK: Final = "DELETE FROM llamon_tasks WHERE id = $1"
_SELECT_ORPHANS: Final = (
    f"SELECT id FROM llamon_tasks WHERE state IN ({_UNFINISHED})"  # noqa: S608 - constants
    " AND (worker = $1 OR worker IS NULL) ORDER BY id"
)
_UPSERT_PUSH: Final = (
    "INSERT INTO llamon_push_configs (task_id, config_id, config) VALUES ($1, $2, $3)"
    " ON CONFLICT (task_id, config_id) DO UPDATE SET config = excluded.config"
)
_SELECT_PUSH: Final = (
    "SELECT config_id, config FROM llamon_push_configs WHERE task_id = $1 ORDER BY seq"
)
_DELETE_PUSH: Final = "DELETE FROM llamon_push_configs WHERE task_id = $1"
_DELETE_PUSH_ONE: Final = "DELETE FROM llamon_push_configs WHERE task_id = $1 AND config_id = $2"

_A2A_TASKS: Final = f"SELECT {A2A_TASK_COLUMNS} FROM tasks ORDER BY id"  # noqa: S608 - constants
_A2A_PUSH: Final = (
    "INSERT INTO llamon_push_configs (task_id, config_id, config)"
    " SELECT task_id, config_id, config_data FROM push_notification_configs"
    " ON CONFLICT (task_id, config_id) DO NOTHING"
)
_TABLE_EXISTS: Final = "SELECT to_regclass($1) IS NOT NULL"
_CARRY_CHUNK: Final = 500


# --- the database ----------------------------------------------------------------------------


async def _prepare(connection: asyncpg.Connection) -> None:
    """Check or create the schema under the advisory lock; carry a2a-sdk's tables over
    when it is created."""
    async with connection.transaction():
        await connection.execute(_LOCK, POSTGRES_SCHEMA_LOCK)
        await connection.execute(_SCHEMA_TABLE)
        version = await connection.fetchval(_VERSION)
        if version is not None and version > POSTGRES_SCHEMA_VERSION:
            raise NewerSchemaError(
                f"the PostgreSQL database was written by a newer llamon (schema version"
                f" {version}; this one reads up to {POSTGRES_SCHEMA_VERSION}): upgrade"
                " llamon-agent, or point it at another database"
            )
        for statement in _SCHEMA:
            await connection.execute(statement)
        if version is None:
            await _carry_over_a2a_tables(connection)
            await connection.execute(_SET_VERSION, POSTGRES_SCHEMA_VERSION)


async def _carry_over_a2a_tables(connection: asyncpg.Connection) -> int:
    """Copy the tasks and push configs of a2a-sdk's tables into ours; returns tasks carried."""
    carried = skipped = 0
    if await connection.fetchval(_TABLE_EXISTS, "tasks"):
        rows: list[TaskRow] = []
        async for record in connection.cursor(_A2A_TASKS):
            task = task_from_a2a_row(tuple(record))
            if task is None:
                skipped += 1
                continue
            rows.append(task_row(task))
            if len(rows) >= _CARRY_CHUNK:
                await connection.executemany(_INSERT_CARRIED, rows)
                carried += len(rows)
                rows = []
        if rows:
            await connection.executemany(_INSERT_CARRIED, rows)
            carried += len(rows)
    if await connection.fetchval(_TABLE_EXISTS, "push_notification_configs"):
        await connection.execute(_A2A_PUSH)
    if carried or skipped:
        logger.info(
            "carried %d task(s) over from a2a-sdk's tables (%d unreadable, left there)",
            carried,
            skipped,
        )
    return carried


async def open_postgres_database(dsn: str) -> PostgresDatabase:
    """The ``PostgresDatabase`` at ``dsn`` with llamon's task and push-config tables.

    Raises ``NewerSchemaError`` (a ``ValueError``) if the database was written by a newer
    llamon; connection errors
    (asyncpg's, ``OSError``) propagate.
    """
    return await PostgresDatabase.open(dsn, prepare=_prepare)


# --- the stores ------------------------------------------------------------------------------


class PostgresTaskStore(TaskStore):
    """a2a-sdk's ``TaskStore`` on a ``PostgresDatabase``: one row per task, the task as JSON."""

    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Insert or replace ``task``; returns once it is committed."""
        await self.database.write(_UPSERT_TASK, task_row(task))

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """The task saved last under ``task_id``, or ``None``."""
        row = await self.database.fetch_one(_SELECT_TASK, task_id)
        return None if row is None else task_from_body(row[0])

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Remove the task (a no-op for an unknown id)."""
        await self.database.write(_DELETE_TASK, (task_id,))

    async def claim_paused(self, task: Task, paused_state: TaskState) -> bool:
        """Save ``task`` only if the stored row is still in ``paused_state``; ``True`` if it
        wrote (one conditional ``UPDATE``: of concurrent claims, exactly one wins)."""
        row: tuple[Any, ...] = (*task_row(task), paused_state.value)
        claimed = await self.database.fetch_value(_CLAIM, *row)
        return claimed is not None

    async def task_in_context(self, context_id: str) -> Task | None:
        """One task stored under ``context_id``, or ``None`` (one query, by an index)."""
        row = await self.database.fetch_one(_SELECT_CONTEXT_TASK, context_id)
        return None if row is None else task_from_body(row[0])

    async def tasks_sent_as(self, message_id: str) -> list[Task]:
        """The tasks a message with ``message_id`` started (stamped ``llamon.sent``; one
        query, by an index), of any caller."""
        rows = await self.database.fetch_all(_SELECT_SENT_TASKS, message_id)
        return [task_from_body(row[0]) for row in rows]

    async def unfinished_task_ids(self, worker: str) -> list[str]:
        """Ids of ``submitted``/``working`` tasks stamped by ``worker`` or not stamped, sorted.

        Served by a partial index: its cost grows with the unfinished tasks, not the table.
        """
        rows = await self.database.fetch_all(_SELECT_ORPHANS, worker)
        return [row[0] for row in rows]


class PostgresPushConfigStore(PushNotificationConfigStore):
    """a2a-sdk's ``PushNotificationConfigStore`` on a ``PostgresDatabase``.

    With ``encryption_key`` (a Fernet key) each config is encrypted at rest; a row that
    does not decrypt is read as plain JSON if it is (written before the key was set), else
    skipped with an error log naming the task and config ids (never the URL or token).
    ``delete_info(task_id)`` without a config id deletes all of the task's configs.
    """

    def __init__(self, database: PostgresDatabase, encryption_key: bytes | None = None) -> None:
        self.database = database
        self._codec = PushConfigCodec(encryption_key)

    async def set_info(self, task_id: str, notification_config: PushNotificationConfig) -> None:
        """Insert or replace the config; an id-less config gets the task id as its id."""
        config_id, payload = self._codec.encode(task_id, notification_config)
        await self.database.write(_UPSERT_PUSH, (task_id, config_id, payload))

    async def get_info(self, task_id: str) -> list[PushNotificationConfig]:
        """The task's configs, in the order they were first set."""
        rows = await self.database.fetch_all(_SELECT_PUSH, task_id)
        configs = (self._codec.decode(task_id, row[0], bytes(row[1])) for row in rows)
        return [config for config in configs if config is not None]

    async def delete_info(self, task_id: str, config_id: str | None = None) -> None:
        """Delete one config, or all of the task's when ``config_id`` is ``None``."""
        if config_id is None:
            await self.database.write(_DELETE_PUSH, (task_id,))
        else:
            await self.database.write(_DELETE_PUSH_ONE, (task_id, config_id))
