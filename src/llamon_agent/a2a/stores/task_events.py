"""Every served task's runner events, kept in the same database as the tasks.

A server with a store keeps the ``RunnerEvent``\\s of each task it runs (the task's life
cycle and everything that ran inside it: loop steps, flow nodes, MCP tools, model and
agent calls), so ``llamon task ID`` and the web console can show a task's events in order
after the fact, from another process or another machine on the same database.

``TaskEventStore.for_task(task_id)`` answers the kept events of one task, oldest first.
Events are written in the background like failure records: keeping them never slows or
changes an answer; a write that fails is logged and counted (``dropped``), never raised.
Events have already passed the security boundary when they are published (see
``llamon_agent.core.events``); the store keeps them as they are.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Final

from llamon_agent.core.events import RunnerEvent

__all__ = ["MEMORY_PER_TASK", "MEMORY_TASKS", "MemoryTaskEventStore", "TaskEventStore"]

MEMORY_PER_TASK: Final = 1000
"""Events the memory store keeps per task (the oldest go first)."""
MEMORY_TASKS: Final = 1000
"""Tasks whose events the memory store keeps (the least recently written go first)."""


class TaskEventStore(ABC):
    """Where served tasks' events are kept; see the module docstring."""

    dropped: int = 0
    """Events not stored (the write failed, or too many were waiting)."""

    @abstractmethod
    async def add(self, events: Sequence[RunnerEvent]) -> None:
        """Store ``events`` (each with a ``task_id``; others are ignored) now, in order;
        raises what the database raises."""

    @abstractmethod
    async def for_task(self, task_id: str, *, limit: int = 1000) -> list[RunnerEvent]:
        """The kept events of ``task_id``, oldest first; at most the ``limit`` newest."""

    async def flush(self) -> None:
        """Wait until every event handed over so far is stored (or dropped)."""
        return None

    async def close(self) -> None:
        """Finish the writes in flight (the database itself is closed by its owner)."""
        await self.flush()


class MemoryTaskEventStore(TaskEventStore):
    """This process's memory: the last ``per_task`` events of the last ``tasks`` tasks."""

    def __init__(self, *, per_task: int = MEMORY_PER_TASK, tasks: int = MEMORY_TASKS) -> None:
        self._per_task = per_task
        self._tasks = tasks
        self._events: OrderedDict[str, deque[RunnerEvent]] = OrderedDict()

    async def add(self, events: Sequence[RunnerEvent]) -> None:
        for event in events:
            if event.task_id is None:
                continue
            kept = self._events.get(event.task_id)
            if kept is None:
                kept = self._events[event.task_id] = deque(maxlen=self._per_task)
                while len(self._events) > self._tasks:
                    self._events.popitem(last=False)
            else:
                self._events.move_to_end(event.task_id)
            kept.append(event)

    async def for_task(self, task_id: str, *, limit: int = 1000) -> list[RunnerEvent]:
        kept = self._events.get(task_id)
        if not kept:
            return []
        return list(kept)[-limit:] if limit > 0 else []
