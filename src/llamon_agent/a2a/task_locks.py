"""Who runs a task and who ends it: one claim per task, decided in one place.

A run of the agent on a task (a new message, or the answer to an ``input-required`` /
``auth-required`` pause) holds the task's ``RunClaim`` from the moment it is set up until
its final event is in the task store. While it is held:

* a second ``message/send`` or ``message/stream`` on the task is refused with
  ``task_busy`` (-32041, retriable once the running one ends) instead of starting a
  second agent on the same task;
* ``tasks/cancel`` ends the run through the same claim.

The run's end is decided once (``RunClaim.decide``): the first of the agent's own end
(completed, failed, a new pause) and a cancel wins, and the loser publishes nothing --
no status, no artifact. So a cancel that answers ``canceled`` leaves no answer from
after it, and a cancel that lost answers the state that won.

``TaskClaims.locked(task_id)`` is the short per-task critical section in which a request
reads the task's state and takes (or ends) its claim; nothing else waits on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from a2a.server.events import EventQueue
from a2a.types import JSONRPCError, TaskState
from a2a.utils.errors import ServerError

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import make_protocol_error_data

__all__ = ["TASK_BUSY_CODE", "RunClaim", "TaskClaims", "task_busy"]

TASK_BUSY_CODE = -32041
"""JSON-RPC code of ``task_busy``: the task is running a request already."""


@dataclass(eq=False)
class RunClaim:
    """One run of the agent on one task.

    ``lock`` serialises what the run publishes with the decision of its end;
    ``ended_by`` is the state that won (``None`` while the run goes on); ``done`` is set
    once the run's final state is in the task store (or nobody will write it).
    """

    task_id: str
    context_id: str
    queue: EventQueue | None = None
    producer: asyncio.Task[Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended_by: TaskState | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ended(self) -> bool:
        """Whether the run's end has been decided (its final event may still be on its way)."""
        return self.ended_by is not None

    def decide(self, state: TaskState) -> bool:
        """Claim the run's end for ``state``; ``False`` if another end won already.

        Synchronous, so it is atomic on the event loop; callers hold ``lock`` so that
        nothing the run publishes interleaves with the decision.
        """
        if self.ended_by is not None:
            return False
        self.ended_by = state
        return True


@dataclass
class _TaskLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class TaskClaims:
    """The running claim of every task, and a short lock per task to take or end one."""

    def __init__(self) -> None:
        self._claims: dict[str, RunClaim] = {}
        self._locks: dict[str, _TaskLock] = {}

    @asynccontextmanager
    async def locked(self, task_id: str) -> AsyncIterator[None]:
        """The task's critical section (a lock that exists only while someone holds it)."""
        entry = self._locks.setdefault(task_id, _TaskLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0 and self._locks.get(task_id) is entry:
                del self._locks[task_id]

    def running(self, task_id: str) -> RunClaim | None:
        """The claim of the run still going on for ``task_id``, if any."""
        return self._claims.get(task_id)

    def begin(self, task_id: str, context_id: str, queue: EventQueue | None = None) -> RunClaim:
        """Register a new run of ``task_id`` (the caller checked ``running`` under ``locked``)."""
        claim = RunClaim(task_id=task_id, context_id=context_id, queue=queue)
        self._claims[task_id] = claim
        return claim

    def finish(self, claim: RunClaim) -> None:
        """The run's final state is stored (or will never be): the task is free again."""
        claim.done.set()
        if self._claims.get(claim.task_id) is claim:
            del self._claims[claim.task_id]


def task_busy() -> ServerError:
    """-32041 ``task_busy`` (RATE_LIMITED, retriable): the task is running a request.

    The answer to a ``message/send`` or ``message/stream`` on such a task; on a stream,
    its one JSON-RPC error event.
    """
    data = make_protocol_error_data(
        ErrorCode.RATE_LIMITED,
        "task_busy",
        "This task is already running a request; send again once it has ended "
        "(tasks/get shows its state).",
        retriable=True,
    )
    error = JSONRPCError(code=TASK_BUSY_CODE, message=data.error_message, data=data.to_wire())
    return ServerError(error=error)
