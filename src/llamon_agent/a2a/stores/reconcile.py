"""Ending the tasks a stopped worker left ``submitted`` or ``working``.

What the caller sees:

* ``await reconcile_orphaned_tasks(stores)`` at startup, before serving, ends as ``failed``
  every ``submitted``/``working`` task that this worker (``worker_id()``) left behind when
  it stopped, so ``tasks/get`` answers a retriable ``UPSTREAM_UNAVAILABLE`` /
  ``worker_lost`` error instead of ``working`` forever. Tasks stamped by other workers are
  never touched: replicas sharing one PostgreSQL each reconcile only their own tasks.
* ``await end_unfinished_tasks(task_store, failures, worker=...)`` is the same on a task
  store alone: a live replica ending a dead one's tasks (``a2a.liveness``) calls it with
  ``stamped_only=True``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from uuid import uuid4

from a2a.server.tasks import DatabaseTaskStore, TaskStore
from a2a.types import Message, Role, Task, TaskState, TaskStatus

from llamon_agent.a2a.parts import application_error_to_parts
from llamon_agent.a2a.states import ORPHAN_STATES
from llamon_agent.a2a.stores.failures import FailureStore, StoredFailure
from llamon_agent.a2a.stores.workers import WORKER_METADATA_KEY, worker_id
from llamon_agent.core.errors import ApplicationErrorData, ErrorCode, make_application_error_data
from llamon_agent.core.failures import FailureRecord

try:  # only a2a-sdk's own DatabaseTaskStore (the postgres extra) is queried with them
    from a2a.server.models import TaskModel
    from sqlalchemy import JSON, ColumnElement, or_, select, type_coerce
except ImportError:  # pragma: no cover - without the extra no DatabaseTaskStore exists
    pass

if TYPE_CHECKING:
    from llamon_agent.a2a.stores.open import Stores

__all__ = ["end_unfinished_tasks", "reconcile_orphaned_tasks"]

logger = logging.getLogger(__name__)

_LOGGED_IDS: Final = 20


def _orphan_filter(model: type[TaskModel], worker: str) -> list[ColumnElement[bool]]:
    """SQL conditions: state submitted/working, stamped by ``worker`` or not stamped.

    ``->>`` on PostgreSQL, ``JSON_EXTRACT`` on SQLite; neither can use an index here (a2a
    creates none on the JSON columns), so this is one scan of the table, but only matching
    ids leave the database.
    """
    state = type_coerce(model.status, JSON)["state"].as_string()
    stamp = type_coerce(model.task_metadata, JSON)[WORKER_METADATA_KEY].as_string()
    return [state.in_(ORPHAN_STATES), or_(stamp == worker, stamp.is_(None))]


async def _orphan_ids(store: TaskStore, worker: str) -> list[str] | None:
    """The ids of ``worker``'s unfinished tasks, sorted; ``None`` when ``store`` keeps no
    tasks past this process (memory) or cannot list them."""
    method: Any = getattr(store, "unfinished_task_ids", None)
    if callable(method):  # llamon's SQLite and PostgreSQL stores: a partial index
        ids: list[str] = await method(worker)
        return ids
    if not isinstance(store, DatabaseTaskStore):  # a user's own a2a-sdk store: a scan
        return None
    await store.initialize()
    model = store.task_model
    query = select(model.id).where(*_orphan_filter(model, worker)).order_by(model.id)
    async with store.engine.connect() as connection:
        return list((await connection.scalars(query)).all())


def _is_orphan(task: Task, worker: str, *, stamped_only: bool = False) -> bool:
    """The same test as ``_orphan_filter``, on a loaded task (it may have moved on);
    ``stamped_only``: a task without a stamp is not ``worker``'s."""
    stamp = (task.metadata or {}).get(WORKER_METADATA_KEY)
    unstamped = stamp is None and not stamped_only
    return task.status.state.value in ORPHAN_STATES and (unstamped or stamp == worker)


def _ended_as_failed(task: Task, error: ApplicationErrorData) -> Task:
    """``task`` in state ``failed`` with ``error``; artifacts kept, the old status message
    moved into history as a2a's TaskManager does on every status change."""
    previous = task.status.message
    history = [*(task.history or []), previous] if previous is not None else task.history
    message = Message(
        role=Role.agent,
        parts=application_error_to_parts(error),
        task_id=task.id,
        context_id=task.context_id,
        message_id=str(uuid4()),
    )
    status = TaskStatus(
        state=TaskState.failed, message=message, timestamp=datetime.now(UTC).isoformat()
    )
    return task.model_copy(update={"status": status, "history": history})


async def _end_each(
    store: TaskStore,
    ids: list[str],
    worker: str,
    error: ApplicationErrorData,
    failures: FailureStore | None = None,
    stamped_only: bool = False,
) -> list[str]:
    """Load, fail and save the tasks one at a time; returns the ids actually ended. Each
    ended task's failure goes to ``failures``."""
    ended: list[str] = []
    for task_id in ids:
        task = await store.get(task_id)
        if task is None or not _is_orphan(task, worker, stamped_only=stamped_only):
            continue
        await store.save(_ended_as_failed(task, error))
        ended.append(task_id)
        if failures is not None:
            record = FailureRecord.from_error_data(error)
            failures.record(StoredFailure.of(record, task_id=task_id, context_id=task.context_id))
    return ended


async def reconcile_orphaned_tasks(
    stores: Stores,
    *,
    worker: str | None = None,
    code: ErrorCode = ErrorCode.UPSTREAM_UNAVAILABLE,
    reason: str = "worker_lost",
    retriable: bool = True,
    message: str = "The worker running this task stopped before it finished.",
    stamped_only: bool = False,
) -> list[str]:
    """End as ``failed`` the tasks a stopped worker left ``submitted`` or ``working``.

    Call it once at startup, before the server accepts requests: every task in those
    states whose ``metadata["llamon.worker"]`` is ``worker`` (default ``worker_id()``), or
    that has no stamp, gets a failed status whose message carries the TextPart and
    DataPart of ``make_application_error_data(code, reason, message, retriable=...)``.
    Artifacts and history are kept; each task is saved through the store's own ``save``,
    and its failure kept in ``stores.failures``.
    Tasks in other states (including ``input-required``, which a new message resumes) and
    tasks stamped by other workers are never touched: with replicas sharing PostgreSQL,
    another worker's ``working`` task is most likely still running. Returns the ended ids,
    sorted; memory stores return ``[]`` (their tasks died with the process).
    ``stamped_only``: end only the tasks stamped with ``worker``, none without a stamp (a
    live replica ending another, dead one's tasks: ``a2a.liveness``).

    Cost: one query that returns only matching ids (llamon's SQLite and PostgreSQL
    stores, or any store with ``unfinished_task_ids(worker)``: a partial index over the
    unfinished tasks; a2a-sdk's ``DatabaseTaskStore``: a scan with the JSON filters run in
    the database), then
    one ``get`` and one ``save`` per orphan, so at most one task is in memory at a time.
    """
    return await end_unfinished_tasks(
        stores.task_store,
        stores.failures,
        worker=worker,
        code=code,
        reason=reason,
        retriable=retriable,
        message=message,
        stamped_only=stamped_only,
    )


async def end_unfinished_tasks(
    task_store: TaskStore,
    failures: FailureStore | None = None,
    *,
    worker: str | None = None,
    code: ErrorCode = ErrorCode.UPSTREAM_UNAVAILABLE,
    reason: str = "worker_lost",
    retriable: bool = True,
    message: str = "The worker running this task stopped before it finished.",
    stamped_only: bool = False,
) -> list[str]:
    """``reconcile_orphaned_tasks`` on ``task_store`` alone, each ended task's failure kept
    in ``failures``: the ended ids, sorted (``[]`` for a store that keeps no tasks past its
    process, or cannot list them)."""
    owner = worker if worker is not None else worker_id()
    ids = await _orphan_ids(task_store, owner)
    if ids is None:
        return []
    error = make_application_error_data(code, reason, message, retriable=retriable)
    ended = await _end_each(task_store, ids, owner, error, failures, stamped_only)
    if ended:
        logger.warning(
            "ended %d task(s) left unfinished by worker %r; first ids: %s",
            len(ended),
            owner,
            sorted(ended)[:_LOGGED_IDS],
        )
    return sorted(ended)
