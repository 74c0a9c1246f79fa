"""Find the stored tasks a message started: how a repeated ``message/send`` is recognised.

A task started by a message without a ``taskId`` carries ``metadata["llamon.sent"]``
(``SENT_METADATA_KEY``): ``{"messageId": ..., "contextId": ..., "at": ...}`` -- the
message's id, the ``contextId`` it was sent with (``""`` when none) and when it was
accepted (seconds since the epoch). ``sent_finder(store)`` is the store's
``tasks_sent_as(message_id)`` -- the stored tasks whose stamp names ``message_id`` (of any
caller; the caller filters) -- or ``None`` when the store cannot look them up:

* llamon's SQLite store: one query by an index on the stamped message id (schema 3);
* llamon's memory store: one dict lookup, for as long as it holds the task;
* a2a-sdk's ``DatabaseTaskStore`` (the ``postgres`` kind): a JSON path query on its tasks
  table's metadata column (no index: a scan of the table);
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

__all__ = ["SENT_METADATA_KEY", "SentFinder", "sent_finder", "sent_message_id"]

SENT_METADATA_KEY: Final = "llamon.sent"
"""The task metadata key of the message that started the task (see the module docstring)."""

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
    from sqlalchemy import JSON, select, type_coerce

    await store.initialize()
    model = store.task_model
    stamped = type_coerce(model.task_metadata, JSON)[(SENT_METADATA_KEY, "messageId")]
    query = select(model).where(stamped.as_string() == message_id).limit(100)
    async with store.async_session_maker() as session:
        rows = (await session.execute(query)).scalars().all()
    return [store._from_orm(row) for row in rows]
