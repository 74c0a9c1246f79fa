"""Find the stored tasks a message started: how a repeated ``message/send`` is recognised.

A task started by a message without a ``taskId`` carries ``metadata["llamon.sent"]``
(``SENT_METADATA_KEY``): ``{"messageId": ..., "contextId": ..., "at": ...}`` -- the
message's id, the ``contextId`` it was sent with (``""`` when none) and when it was
accepted (seconds since the epoch). ``sent_finder(store)`` is the store's
``tasks_sent_as(message_id)`` -- the stored tasks whose stamp names ``message_id`` (of any
caller; the caller filters) -- or ``None`` when the store cannot look them up:

* llamon's SQLite and PostgreSQL stores: one query by an index on the stamped message id;
* llamon's memory store: one dict lookup, for as long as it holds the task;
* a2a-sdk's ``DatabaseTaskStore`` (a store a user passes in): a JSON path query on its tasks
  table's metadata column, served on PostgreSQL by the expression index
  ``POSTGRES_SENT_INDEX`` when created (``postgres_sent_index(table)``; else a scan);
* any other store (a user's own ``TaskStore``) can take part by defining
  ``async def tasks_sent_as(self, message_id: str) -> list[Task]``; without it, a repeat
  is recognised only while this process remembers the message (``a2a.sent``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from a2a.server.tasks import DatabaseTaskStore, TaskStore
from a2a.types import Task

__all__ = [
    "POSTGRES_SENT_INDEX",
    "SENT_METADATA_KEY",
    "SentFinder",
    "postgres_sent_index",
    "sent_finder",
    "sent_message_id",
]

SENT_METADATA_KEY: Final = "llamon.sent"
"""The task metadata key of the message that started the task (see the module docstring)."""

_SENT_PATH: Final = "#>> '{llamon.sent,messageId}'"
POSTGRES_SENT_INDEX: Final = "llamon_tasks_sent"
"""The name of the PostgreSQL expression index on the stamped message id."""


def postgres_sent_index(table: str) -> str:
    """The ``CREATE INDEX`` of ``POSTGRES_SENT_INDEX`` on a2a-sdk's tasks ``table``."""
    return f"CREATE INDEX IF NOT EXISTS {POSTGRES_SENT_INDEX} ON {table} ((metadata {_SENT_PATH}))"


SentFinder = Callable[[str], Awaitable[list[Task]]]
"""``message_id`` -> the stored tasks started by a message with that id."""


def sent_message_id(task: Task) -> str | None:
    """The id of the message that started ``task``, from its stamp; ``None`` without one."""
    stamp = (task.metadata or {}).get(SENT_METADATA_KEY)
    if not isinstance(stamp, dict):
        return None
    message_id = stamp.get("messageId")
    return message_id if isinstance(message_id, str) else None


def sent_finder(store: TaskStore) -> SentFinder | None:
    """How to find the tasks a message id started in ``store``; ``None`` when it cannot."""
    method: Any = getattr(store, "tasks_sent_as", None)
    if callable(method):
        finder: SentFinder = method
        return finder
    if isinstance(store, DatabaseTaskStore):
        return partial(_database_tasks_sent_as, store)
    return None


async def _database_tasks_sent_as(store: DatabaseTaskStore, message_id: str) -> list[Task]:
    from sqlalchemy import JSON, bindparam, literal_column, select, type_coerce

    await store.initialize()
    model = store.task_model
    if store.engine.dialect.name == "postgresql":  # the exact expression of the index
        table = model.__tablename__
        stamped: Any = literal_column(f"{table}.metadata {_SENT_PATH}")
        condition = stamped == bindparam("message_id", message_id)
    else:
        path = type_coerce(model.task_metadata, JSON)[(SENT_METADATA_KEY, "messageId")]
        condition = path.as_string() == message_id
    query = select(model).where(condition).limit(100)
    async with store.async_session_maker() as session:
        rows = (await session.execute(query)).scalars().all()
    return [store._from_orm(row) for row in rows]
