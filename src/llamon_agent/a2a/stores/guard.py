"""The task store as the server uses it: outages classified, terminal states never lost.

``GuardedTaskStore`` wraps any a2a-sdk ``TaskStore`` (``guard_task_store(store)``); the
request handler and the executor use it, never the raw store. What the caller sees:

* A read or write that fails for a transient reason (the table in ``core.classify`` says
  retriable: a refused or reset connection, a timeout, a locked SQLite file) raises
  ``TaskStoreUnavailableError``: JSON-RPC -32603 with ``UPSTREAM_UNAVAILABLE`` /
  ``database_unavailable``, retriable, and no driver text (it names hosts and paths). Any
  other failure (a task the store cannot encode ...) is raised unchanged and classified
  by the table like every exception (unmapped: ``INTERNAL_ERROR`` with an incident id).
* ``end_task(task_id, status)`` writes a terminal status (a task whose request failed, a
  task ended at shutdown). If the store refuses it for a transient reason, the status is
  kept in a small pending set and written again: as soon as any later write succeeds,
  and in the background with backoff (0.1 s doubling to 5 s) until the store answers.
  Meanwhile ``get`` already answers the task with its pending terminal status, so
  ``tasks/get`` never shows ``working`` for a task that has ended.
* ``claim_paused(task, paused_state)`` saves ``task`` only while the stored task is still
  in ``paused_state`` (``paused_claim``), and is ``False`` for a task whose terminal
  status is pending: of two answers to one paused task, one resumes it.
* ``task_in_context(context_id)`` finds a stored task of a context (``context_lookup``),
  its failures classified the same way; ``None`` when there is none or the store cannot
  look contexts up.
* ``drain()`` at shutdown makes one last attempt (bounded) and stops the retries; what is
  still pending then is ended at the next start by ``reconcile_orphaned_tasks``.

The fault seam of the task store is here, the one wrapper every store goes through: under
an active ``FaultPlan`` with ``task_store_fails_once``, the first ``save`` fails as a
SQLite store does when its file stays locked (``sqlite3.OperationalError: database is
locked``), so the caller gets ``TaskStoreUnavailableError`` like for the real outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from dataclasses import dataclass
from typing import Final, NoReturn

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.states import TERMINAL_STATES
from llamon_agent.a2a.stores.context_lookup import context_finder
from llamon_agent.a2a.stores.paused_claim import claim_paused
from llamon_agent.a2a.stores.sent_lookup import sent_finder
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.faults import active_faults
from llamon_agent.exceptions import LlamonError

__all__ = ["GuardedTaskStore", "TaskStoreUnavailableError", "guard_task_store"]

logger = logging.getLogger("llamon_agent.a2a")

FIRST_RETRY_DELAY: Final = 0.1
MAX_RETRY_DELAY: Final = 5.0
DRAIN_TIMEOUT: Final = 5.0


class TaskStoreUnavailableError(
    LlamonError,
    code=ErrorCode.UPSTREAM_UNAVAILABLE,
    reason="database_unavailable",
    retriable=True,
):
    """The task store did not answer (its cause is chained); send the request again."""

    def __init__(self) -> None:
        super().__init__("The task store is unavailable; send the request again.")


@dataclass
class _Pending:
    status: TaskStatus
    fallback: Task | None


def _transient(exc: BaseException) -> bool:
    return classify_exception(exc).retriable


class GuardedTaskStore(TaskStore):
    """``inner`` with its outages classified and its refused terminal writes retried."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self._pending: dict[str, _Pending] = {}
        self._wake = asyncio.Event()
        self._retrier: asyncio.Task[None] | None = None
        self._find_context = context_finder(inner)
        self._find_sent = sent_finder(inner)

    # -- TaskStore ------------------------------------------------------------------

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Save ``task``; a transient failure raises ``TaskStoreUnavailableError``."""
        try:
            plan = active_faults()
            if plan is not None and plan.store_fails():
                raise sqlite3.OperationalError("database is locked")
            await self.inner.save(task, context)
        except Exception as exc:
            _raise_classified(exc)
        if task.status.state in TERMINAL_STATES:
            self._pending.pop(task.id, None)
        if self._pending:
            self._wake.set()  # the store answers again: write the pending states now

    async def claim_paused(self, task: Task, paused_state: TaskState) -> bool:
        """Save ``task`` only if the stored task is still in ``paused_state``; ``True`` if
        it was saved (``paused_claim``: the inner store's own conditional save, else a read
        then a save). ``False`` while a terminal status of the task waits to be written:
        the task has ended. A transient failure raises ``TaskStoreUnavailableError``."""
        if task.id in self._pending:
            return False
        try:
            claimed = await claim_paused(self.inner, task, paused_state)
        except Exception as exc:
            _raise_classified(exc)
        if self._pending:
            self._wake.set()  # the store answers again: write the pending states now
        return claimed

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """The stored task, with its terminal status if that is still waiting to be written."""
        try:
            task = await self.inner.get(task_id, context)
        except Exception as exc:
            _raise_classified(exc)
        pending = self._pending.get(task_id)
        if pending is None or task is None:
            return task
        if await self._write(task_id, pending):
            return await self.inner.get(task_id, context)
        return _with_status(task, pending.status) if task_id in self._pending else task

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Delete ``task_id`` (and forget any pending terminal status of it)."""
        self._pending.pop(task_id, None)
        try:
            await self.inner.delete(task_id, context)
        except Exception as exc:
            _raise_classified(exc)

    async def task_in_context(self, context_id: str) -> Task | None:
        """A stored task of ``context_id``, or ``None`` (none stored, or the store cannot
        look contexts up); a transient failure raises ``TaskStoreUnavailableError``."""
        if self._find_context is None:
            return None
        try:
            return await self._find_context(context_id)
        except Exception as exc:
            _raise_classified(exc)

    async def tasks_sent_as(self, message_id: str) -> list[Task]:
        """The stored tasks a message with ``message_id`` started (``[]`` when the store
        cannot look them up); a transient failure raises ``TaskStoreUnavailableError``."""
        if self._find_sent is None:
            return []
        try:
            return await self._find_sent(message_id)
        except Exception as exc:
            _raise_classified(exc)

    # -- terminal states ------------------------------------------------------------

    @property
    def pending_ids(self) -> list[str]:
        """Tasks whose terminal status is waiting for the store, sorted."""
        return sorted(self._pending)

    async def end_task(
        self, task_id: str, status: TaskStatus, *, fallback: Task | None = None, now: bool = True
    ) -> bool:
        """Write ``status`` as the task's terminal status; ``True`` once written.

        The stored task gets the status (its previous status message moves into the
        history); ``fallback`` is saved instead when the store has no such task (without
        it, a task the store never held is left alone: nobody knows its id). A task the
        store already holds in a terminal state is not changed. If the store refuses for a
        transient reason the status is kept and written later (see the module docstring);
        ``now=False`` skips the immediate attempt and leaves it to the background.
        """
        pending = _Pending(status, fallback)
        self._pending[task_id] = pending
        if now and await self._write(task_id, pending):
            return True
        if task_id in self._pending:
            self._start_retrying()
        return False

    async def flush(self) -> list[str]:
        """Try every pending write once; the ids still pending afterwards."""
        for task_id, pending in list(self._pending.items()):
            await self._write(task_id, pending)
        return self.pending_ids

    async def drain(self) -> list[str]:
        """At shutdown: one last attempt (at most ``DRAIN_TIMEOUT``), then stop retrying;
        the ids left."""
        if self._retrier is not None:
            self._retrier.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrier
            self._retrier = None
        if self._pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), DRAIN_TIMEOUT)
        left = self.pending_ids
        if left:
            logger.warning(
                "%d task(s) could not be ended in the task store; the next start ends them",
                len(left),
            )
        return left

    async def _write(self, task_id: str, pending: _Pending) -> bool:
        """One attempt; drops the entry when written or when retrying cannot help."""
        try:
            stored = await self.inner.get(task_id)
            if stored is None and pending.fallback is None:
                done = True  # never stored: nobody knows this task, nothing to end
            elif stored is not None and stored.status.state in TERMINAL_STATES:
                done = True  # ended meanwhile (tasks/cancel ...): keep that state
            else:
                base = stored if stored is not None else pending.fallback
                assert base is not None  # noqa: S101 - checked above
                await self.inner.save(_with_status(base, pending.status))
                done = True
        except Exception as exc:
            if _transient(exc):
                return False
            logger.error(
                "task %s: its terminal state cannot be written (%s); giving up",
                task_id,
                type(exc).__name__,
            )
            done = False
        if self._pending.get(task_id) is pending:
            del self._pending[task_id]
        return done

    def _start_retrying(self) -> None:
        if self._retrier is None or self._retrier.done():
            self._retrier = asyncio.create_task(self._retry(), name="llamon-terminal-retry")

    async def _retry(self) -> None:
        delay = FIRST_RETRY_DELAY
        while self._pending:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            if not await self.flush():
                break
            delay = min(delay * 2, MAX_RETRY_DELAY)
        if not self._pending:
            logger.info("the task store answers again: pending terminal states written")


def _raise_classified(exc: Exception) -> NoReturn:
    """Raise ``TaskStoreUnavailableError`` for a transient failure, else ``exc`` itself."""
    if _transient(exc):
        raise TaskStoreUnavailableError() from exc
    raise exc


def _with_status(task: Task, status: TaskStatus) -> Task:
    """``task`` with ``status``; its previous status message moved into the history, as
    a2a's TaskManager does on every status change."""
    previous = task.status.message
    history = [*(task.history or []), previous] if previous is not None else task.history
    message = status.message
    if message is not None and (message.task_id is None or message.context_id is None):
        message = message.model_copy(update={"task_id": task.id, "context_id": task.context_id})
        status = status.model_copy(update={"message": message})
    return task.model_copy(update={"status": status, "history": history})


def guard_task_store(store: TaskStore) -> GuardedTaskStore:
    """``store`` guarded (returned as is when it already is)."""
    return store if isinstance(store, GuardedTaskStore) else GuardedTaskStore(store)
