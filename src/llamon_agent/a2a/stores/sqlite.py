"""The embedded default store: llamon's tasks and push configs in one SQLite file.

What the caller sees:

* ``SQLiteTaskStore`` and ``SQLitePushConfigStore`` are a2a-sdk's ``TaskStore`` and
  ``PushNotificationConfigStore`` over one ``SQLiteDatabase`` (``sqlite_db``: batched
  commits on the event loop while the file is free, else on a writer thread; lookups by
  key on the loop, other reads on a reader thread); ``open_stores("sqlite")`` builds all
  three. Tables exist when ``open_sqlite_database`` returns.
* ``save`` returns once the task is committed: a process killed at any moment afterwards
  (SIGKILL, OOM) still finds it on restart. Concurrent saves share commits.
* Every statement is a fixed string, prepared once per connection; there is no
  per-request engine, session, reflection or schema work.
* A task is one row: its id, context, state and owning worker as columns (reconciliation
  finds unfinished tasks through a partial index, ``task_in_context`` a context's tasks
  through an index on the context, ``tasks_sent_as`` the tasks a message started through
  an index on the message id stamped in ``llamon.sent``) and the whole task as JSON.
* A file written by llamon before this store (a2a-sdk's ``tasks`` and
  ``push_notification_configs`` tables) is carried over once, on first open; the old tables
  are left as they were.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Final

from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.types import PushNotificationConfig, Task, TaskState

from llamon_agent.a2a.states import ORPHAN_STATES
from llamon_agent.a2a.stores.failures_sql import SQLITE_FAILURE_SCHEMA
from llamon_agent.a2a.stores.push_rows import PushConfigCodec
from llamon_agent.a2a.stores.sqlite_db import SQLiteDatabase, fetch_all, fetch_one, rollback
from llamon_agent.a2a.stores.task_events_sql import SQLITE_TASK_EVENT_SCHEMA
from llamon_agent.a2a.stores.task_rows import (
    A2A_TASK_COLUMNS,
    NewerSchemaError,
    task_from_a2a_row,
    task_from_body,
    task_row,
)

__all__ = [
    "SQLITE_SCHEMA_VERSION",
    "SQLitePushConfigStore",
    "SQLiteTaskStore",
    "open_sqlite_database",
]

logger = logging.getLogger(__name__)

SQLITE_SCHEMA_VERSION: Final = 5
"""``PRAGMA user_version`` of a file this module wrote; a newer file is refused.

1: the tables; 2: an index on ``llamon_tasks.context_id``; 3: ``llamon_tasks.message_id``
(the message that started the task, from ``llamon.sent``) and its index. An older file is
brought up to date on first open: every schema statement is ``IF NOT EXISTS``, and the
column is added to a table without it (filled from the tasks' stamps); 4: the failure
store's ``llamon_failures`` table and its indexes (``failures_sql``); 5: the task event
store's ``llamon_task_events`` table and its indexes (``task_events_sql``)."""

_UNFINISHED = ", ".join(f"'{state}'" for state in ORPHAN_STATES)
_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS llamon_tasks (
        id TEXT PRIMARY KEY,
        context_id TEXT NOT NULL,
        state TEXT NOT NULL,
        worker TEXT,
        updated_at REAL NOT NULL,
        task TEXT NOT NULL,
        message_id TEXT
    )""",
    f"""CREATE INDEX IF NOT EXISTS llamon_tasks_unfinished
        ON llamon_tasks (id, worker) WHERE state IN ({_UNFINISHED})""",
    "CREATE INDEX IF NOT EXISTS llamon_tasks_context ON llamon_tasks (context_id)",
    """CREATE TABLE IF NOT EXISTS llamon_push_configs (
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        config BLOB NOT NULL,
        PRIMARY KEY (task_id, config_id)
    )""",
)
_MESSAGE_ID_COLUMN: Final = "ALTER TABLE llamon_tasks ADD COLUMN message_id TEXT"
_FILL_MESSAGE_IDS: Final = (
    "UPDATE llamon_tasks SET message_id ="
    " json_extract(task, '$.metadata.\"llamon.sent\".messageId')"
)
_MESSAGE_ID_INDEX: Final = (
    "CREATE INDEX IF NOT EXISTS llamon_tasks_message ON llamon_tasks (message_id)"
    " WHERE message_id IS NOT NULL"
)
_UPSERT_TASK: Final = (
    "INSERT INTO llamon_tasks (id, context_id, state, worker, updated_at, task, message_id)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
    " context_id = excluded.context_id, state = excluded.state, worker = excluded.worker,"
    " updated_at = excluded.updated_at, task = excluded.task, message_id = excluded.message_id"
)
_CLAIM_PAUSED: Final = (
    "UPDATE llamon_tasks SET context_id = ?, state = ?, worker = ?, updated_at = ?, task = ?,"
    " message_id = ? WHERE id = ? AND state = ?"
)
_SELECT_TASK: Final = "SELECT task FROM llamon_tasks WHERE id = ?"
_SELECT_CONTEXT_TASK: Final = "SELECT task FROM llamon_tasks WHERE context_id = ? LIMIT 1"
_SELECT_SENT_TASKS: Final = "SELECT task FROM llamon_tasks WHERE message_id = ? LIMIT 100"
_DELETE_TASK: Final = "DELETE FROM llamon_tasks WHERE id = ?"
_SELECT_ORPHANS: Final = (
    f"SELECT id FROM llamon_tasks WHERE state IN ({_UNFINISHED})"  # noqa: S608 - constants
    " AND (worker = ? OR worker IS NULL) ORDER BY id"
)
_UPSERT_PUSH: Final = (
    "INSERT INTO llamon_push_configs (task_id, config_id, config) VALUES (?, ?, ?)"
    " ON CONFLICT (task_id, config_id) DO UPDATE SET config = excluded.config"
)
_SELECT_PUSH: Final = (
    "SELECT config_id, config FROM llamon_push_configs WHERE task_id = ? ORDER BY rowid"
)
_DELETE_PUSH: Final = "DELETE FROM llamon_push_configs WHERE task_id = ?"
_DELETE_PUSH_ONE: Final = "DELETE FROM llamon_push_configs WHERE task_id = ? AND config_id = ?"

_A2A_TASKS: Final = f"SELECT {A2A_TASK_COLUMNS} FROM tasks"  # noqa: S608 - constants
_A2A_PUSH: Final = (
    "INSERT OR IGNORE INTO llamon_push_configs (task_id, config_id, config)"
    " SELECT task_id, config_id, config_data FROM push_notification_configs"
)


# --- the file ------------------------------------------------------------------------------


def _prepare_file(connection: sqlite3.Connection, path: Path) -> int:
    """Create or check the schema, carrying over a2a-sdk tables; returns tasks carried."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SQLITE_SCHEMA_VERSION:
            raise NewerSchemaError(
                f"{path} was written by a newer llamon (schema version {version}; this one"
                f" reads up to {SQLITE_SCHEMA_VERSION}): upgrade llamon-agent, or point"
                " LLAMON_HOME at another directory"
            )
        for statement in (*_SCHEMA, *SQLITE_FAILURE_SCHEMA, *SQLITE_TASK_EVENT_SCHEMA):
            connection.execute(statement)
        _add_message_id_column(connection)
        carried = _carry_over_a2a_tables(connection) if version == 0 else 0
        connection.execute(f"PRAGMA user_version = {SQLITE_SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        rollback(connection)
        raise
    return carried


def _add_message_id_column(connection: sqlite3.Connection) -> None:
    """Schema 3 on a table written before it: the ``message_id`` column, filled from the
    tasks' ``llamon.sent`` stamps, and its index."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(llamon_tasks)")}
    if "message_id" not in columns:
        connection.execute(_MESSAGE_ID_COLUMN)
        connection.execute(_FILL_MESSAGE_IDS)
    connection.execute(_MESSAGE_ID_INDEX)


def _carry_over_a2a_tables(connection: sqlite3.Connection) -> int:
    """Copy the tasks and push configs of a2a-sdk's tables into ours (first open only)."""
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    carried = skipped = 0
    if "tasks" in tables:
        for row in connection.execute(_A2A_TASKS).fetchall():
            task = task_from_a2a_row(row)
            if task is None:
                skipped += 1
                continue
            connection.execute(_UPSERT_TASK, task_row(task))
            carried += 1
    if "push_notification_configs" in tables:
        connection.execute(_A2A_PUSH)
    if carried or skipped:
        logger.info(
            "carried %d task(s) over from a2a-sdk's tables (%d unreadable, left there)",
            carried,
            skipped,
        )
    return carried


async def open_sqlite_database(path: Path) -> SQLiteDatabase:
    """The ``SQLiteDatabase`` at ``path`` with llamon's task and push-config tables.

    Raises ``NewerSchemaError`` (a ``ValueError``) if the file was written by a newer
    llamon, and ``sqlite3.Error`` naming the file if it is not a database or cannot be
    opened.
    """
    return await SQLiteDatabase.open(path, prepare=_prepare_file)


# --- the stores ------------------------------------------------------------------------------


class SQLiteTaskStore(TaskStore):
    """a2a-sdk's ``TaskStore`` on a ``SQLiteDatabase``: one row per task, the task as JSON."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self.database = database

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Insert or replace ``task``; returns once it is committed."""
        await self.database.write((_UPSERT_TASK, task_row(task)))

    async def claim_paused(self, task: Task, paused_state: TaskState) -> bool:
        """Save ``task`` only if the stored task is still in ``paused_state``; ``True`` if
        it was saved. One conditional ``UPDATE`` in the next commit: of two claims on one
        paused task (from any process on the file) exactly one is ``True``."""
        task_id, *columns = task_row(task)
        parameters = (*columns, task_id, paused_state.value)

        def run(connection: sqlite3.Connection) -> bool:
            return connection.execute(_CLAIM_PAUSED, parameters).rowcount == 1

        return await self.database.write_returning(run, small=True)

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """The task saved last under ``task_id``, or ``None``."""
        row = await self.database.read(fetch_one(_SELECT_TASK, (task_id,)), small=True)
        return None if row is None else task_from_body(row[0])

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Remove the task (a no-op for an unknown id)."""
        await self.database.write((_DELETE_TASK, (task_id,)))

    async def task_in_context(self, context_id: str) -> Task | None:
        """One task stored under ``context_id``, or ``None`` (one query, by an index)."""
        row = await self.database.read(fetch_one(_SELECT_CONTEXT_TASK, (context_id,)), small=True)
        return None if row is None else task_from_body(row[0])

    async def tasks_sent_as(self, message_id: str) -> list[Task]:
        """The tasks a message with ``message_id`` started (stamped ``llamon.sent``; one
        query, by an index), of any caller."""
        rows = await self.database.read(fetch_all(_SELECT_SENT_TASKS, (message_id,)), small=True)
        return [task_from_body(row[0]) for row in rows]

    async def unfinished_task_ids(self, worker: str) -> list[str]:
        """Ids of ``submitted``/``working`` tasks stamped by ``worker`` or not stamped, sorted.

        Served by a partial index: its cost grows with the unfinished tasks, not the table.
        """
        rows = await self.database.read(fetch_all(_SELECT_ORPHANS, (worker,)))
        return [row[0] for row in rows]


class SQLitePushConfigStore(PushNotificationConfigStore):
    """a2a-sdk's ``PushNotificationConfigStore`` on a ``SQLiteDatabase``.

    With ``encryption_key`` (a Fernet key) each config is encrypted at rest; a row that
    does not decrypt is read as plain JSON if it is (written before the key was set), else
    skipped with an error log naming the task and config ids (never the URL or token).
    ``delete_info(task_id)`` without a config id deletes all of the task's configs.
    """

    def __init__(self, database: SQLiteDatabase, encryption_key: bytes | None = None) -> None:
        self.database = database
        self._codec = PushConfigCodec(encryption_key)

    async def set_info(self, task_id: str, notification_config: PushNotificationConfig) -> None:
        """Insert or replace the config; an id-less config gets the task id as its id."""
        config_id, payload = self._codec.encode(task_id, notification_config)
        await self.database.write((_UPSERT_PUSH, (task_id, config_id, payload)))

    async def get_info(self, task_id: str) -> list[PushNotificationConfig]:
        """The task's configs, in the order they were first set."""
        rows = await self.database.read(fetch_all(_SELECT_PUSH, (task_id,)), small=True)
        configs = (self._codec.decode(task_id, config_id, payload) for config_id, payload in rows)
        return [config for config in configs if config is not None]

    async def delete_info(self, task_id: str, config_id: str | None = None) -> None:
        """Delete one config, or all of the task's when ``config_id`` is ``None``."""
        if config_id is None:
            await self.database.write((_DELETE_PUSH, (task_id,)))
        else:
            await self.database.write((_DELETE_PUSH_ONE, (task_id, config_id)))
