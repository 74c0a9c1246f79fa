"""Find a stored task of a context: how the owner of a forgotten context is learned again.

``context_finder(store)`` is the store's ``task_in_context(context_id)`` -- a task stored
under ``context_id`` (any one: a context's tasks all belong to one caller), or ``None``
when the store holds none -- or ``None`` when the store cannot look contexts up:

* llamon's SQLite store and memory store have the method (one indexed query; one dict
  lookup);
* llamon's PostgreSQL store has it too (one indexed query); a2a-sdk's
  ``DatabaseTaskStore`` (a store a user passes in) is queried by its tasks
  table's ``context_id`` column;
* any other store (a user's own ``TaskStore``) can take part by defining
  ``async def task_in_context(self, context_id: str) -> Task | None``; without it, it
  cannot, and a context is known only while remembered in memory.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from a2a.server.tasks import DatabaseTaskStore, TaskStore
from a2a.types import Task

__all__ = ["ContextFinder", "context_finder"]

ContextFinder = Callable[[str], Awaitable[Task | None]]
"""``context_id`` -> a stored task of that context, or ``None``."""


def context_finder(store: TaskStore) -> ContextFinder | None:
    """How to find a task of a context in ``store``; ``None`` when it cannot."""
    method: Any = getattr(store, "task_in_context", None)
    if callable(method):
        finder: ContextFinder = method
        return finder
    if isinstance(store, DatabaseTaskStore):
        return partial(_database_task_in_context, store)
    return None


async def _database_task_in_context(store: DatabaseTaskStore, context_id: str) -> Task | None:
    from sqlalchemy import select

    await store.initialize()
    model = store.task_model
    query = select(model).where(model.context_id == context_id).limit(1)
    async with store.async_session_maker() as session:
        row = (await session.execute(query)).scalar_one_or_none()
    return None if row is None else store._from_orm(row)
