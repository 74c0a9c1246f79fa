"""Reading tasks back for an operator: the newest tasks of a store, and a task's failure.

What the caller sees:

* ``await recent_tasks(stores, state="failed", limit=50)``: the newest tasks (llamon's
  SQLite and PostgreSQL stores: by last save; a2a-sdk's ``DatabaseTaskStore``: by id, its
  table keeps no time), optionally of one state.
  ``ValueError`` for a memory store (its tasks live in the serving process only) or an
  unknown state.
* ``await live_tasks(task_store, limit=100)``: the tasks still running (``submitted`` or
  ``working``), newest first, from any of llamon's task stores (memory included).
* ``error_data_of(task)``: the ``ApplicationErrorData`` fields of a failed task's status
  message (the DataPart the caller received), or ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from a2a.server.tasks import TaskStore
from a2a.types import DataPart, Task, TaskState

from llamon_agent.a2a.states import ORPHAN_STATES
from llamon_agent.a2a.stores.memory import BoundedMemoryTaskStore
from llamon_agent.a2a.stores.open import Stores
from llamon_agent.a2a.stores.sqlite import SQLiteTaskStore
from llamon_agent.a2a.stores.task_rows import task_from_body

if TYPE_CHECKING:
    from llamon_agent.a2a.stores.postgres_db import PostgresDatabase

__all__ = ["LIVE_STATES", "TASK_STATES", "error_data_of", "live_tasks", "recent_tasks"]

TASK_STATES: Final = tuple(state.value for state in TaskState)
"""The states ``recent_tasks`` filters by."""

_SQLITE_RECENT: Final = "SELECT task FROM llamon_tasks ORDER BY updated_at DESC LIMIT ?"
_SQLITE_RECENT_IN: Final = (
    "SELECT task FROM llamon_tasks WHERE state = ? ORDER BY updated_at DESC LIMIT ?"
)


LIVE_STATES: Final = ORPHAN_STATES
"""The states of a task still running: ``submitted``, ``working``."""

_SQLITE_LIVE: Final = (  # the partial index over unfinished tasks finds them
    "SELECT task FROM llamon_tasks WHERE state IN ({}) ORDER BY updated_at DESC LIMIT ?".format(  # noqa: S608 - placeholders only
        ", ".join("?" for _ in LIVE_STATES)
    )
)


_PG_RECENT: Final = "SELECT body FROM llamon_tasks ORDER BY updated_at DESC LIMIT $1"
_PG_RECENT_IN: Final = (
    "SELECT body FROM llamon_tasks WHERE state = $1 ORDER BY updated_at DESC LIMIT $2"
)
_PG_LIVE: Final = (  # the partial index over unfinished tasks finds them
    "SELECT body FROM llamon_tasks WHERE state IN ({}) ORDER BY updated_at DESC LIMIT $1".format(  # noqa: S608 - constants only
        ", ".join(f"'{state}'" for state in LIVE_STATES)
    )
)


def _postgres_database(store: TaskStore) -> PostgresDatabase | None:
    """The ``PostgresDatabase`` of llamon's PostgreSQL task store, else ``None`` (also
    without the ``postgres`` extra, when no such store can exist)."""
    try:
        from llamon_agent.a2a.stores.postgres import PostgresTaskStore
    except ImportError:
        return None
    return store.database if isinstance(store, PostgresTaskStore) else None


def _newest(task: Task) -> str:
    return task.status.timestamp or ""


async def live_tasks(store: TaskStore, *, limit: int = 100) -> list[Task]:
    """The newest ``limit`` tasks of ``store`` still running (``LIVE_STATES``).

    llamon's SQLite and PostgreSQL stores: by last save; a2a-sdk's ``DatabaseTaskStore``:
    by status time (one scan of the JSON column);
    memory: by status time. ``ValueError`` for a store of another kind."""
    if isinstance(store, BoundedMemoryTaskStore):
        return sorted(store.tasks_in(LIVE_STATES), key=_newest, reverse=True)[:limit]
    if isinstance(store, SQLiteTaskStore):
        params = (*LIVE_STATES, limit)
        rows = await store.database.read(lambda c: c.execute(_SQLITE_LIVE, params).fetchall())
        return [task_from_body(row[0]) for row in rows]
    database = _postgres_database(store)
    if database is not None:
        found = await database.fetch_all(_PG_LIVE, limit)
        return [task_from_body(row[0]) for row in found]
    from a2a.server.tasks import DatabaseTaskStore

    if not isinstance(store, DatabaseTaskStore):
        raise ValueError(f"cannot list the running tasks of a {type(store).__name__}")
    return await _postgres_live(store, limit)


async def _postgres_live(store: Any, limit: int) -> list[Task]:
    from sqlalchemy import JSON, select, type_coerce

    model = store.task_model
    status = type_coerce(model.status, JSON)
    query = (
        select(model)
        .where(status["state"].as_string().in_(LIVE_STATES))
        .order_by(status["timestamp"].as_string().desc())
        .limit(limit)
    )
    await store.initialize()
    async with store.async_session_maker() as session:
        found = (await session.scalars(query)).all()
    return [store._from_orm(row) for row in found]


async def recent_tasks(stores: Stores, *, state: str | None = None, limit: int = 50) -> list[Task]:
    """The newest ``limit`` tasks of ``stores`` (of ``state`` when given)."""
    if state is not None and state not in TASK_STATES:
        raise ValueError(f"state {state!r}: use one of {', '.join(TASK_STATES)}")
    store = stores.task_store
    if isinstance(store, SQLiteTaskStore):
        sql, params = (
            (_SQLITE_RECENT, (limit,)) if state is None else (_SQLITE_RECENT_IN, (state, limit))
        )
        rows = await store.database.read(lambda c: c.execute(sql, params).fetchall())
        return [task_from_body(row[0]) for row in rows]
    database = _postgres_database(store)
    if database is not None:
        args = (limit,) if state is None else (state, limit)
        found = await database.fetch_all(_PG_RECENT if state is None else _PG_RECENT_IN, *args)
        return [task_from_body(row[0]) for row in found]
    if stores.engine is None:
        raise ValueError(f"the {stores.kind} store keeps its tasks in the serving process")
    return await _postgres_recent(stores, state, limit)


async def _postgres_recent(stores: Stores, state: str | None, limit: int) -> list[Task]:
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy import JSON, select, type_coerce

    store = stores.task_store
    assert isinstance(store, DatabaseTaskStore)  # noqa: S101 - open_stores built it
    model = store.task_model
    query = select(model).order_by(model.id.desc()).limit(limit)
    if state is not None:
        query = query.where(type_coerce(model.status, JSON)["state"].as_string() == state)
    async with store.async_session_maker() as session:
        found = (await session.scalars(query)).all()
    return [store._from_orm(row) for row in found]


def error_data_of(task: Task) -> dict[str, Any] | None:
    """The error data (``errorCode``, ``errorReason`` ...) of a failed task, or ``None``."""
    message = task.status.message
    if message is None:
        return None
    for part in message.parts:
        if isinstance(part.root, DataPart) and "errorCode" in part.root.data:
            return dict(part.root.data)
    return None
