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

What the caller sees:

* ``store.subscribe(bus)`` makes the store an ``EventBus`` subscriber with its own bounded
  queue: each event of a task is buffered (O(1), never awaited by the emitter), and each
  burst is written with one ``add`` (one batched INSERT) in a background task, at most one
  in flight; what arrives meanwhile joins the next batch. Events past ``MAX_WAITING``
  buffered ones, or of a failed write, are counted in ``dropped`` and logged.
  ``await store.flush()`` waits until everything handed over so far is stored or dropped.
* ``stores.events`` (from ``open_stores``) is the store in the tasks' database: the
  ``llamon_task_events`` table of the SQLite file or PostgreSQL (``task_events_sql``), or
  ``MemoryTaskEventStore``. The database stores prune rows past ``retention``
  (``EventRetention``: 7 days, 1 000 000 events, or ``LLAMON_EVENTS_MAX_AGE`` /
  ``LLAMON_EVENTS_MAX_ROWS``) when they open and every ``PRUNE_EVERY`` writes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from llamon_agent.a2a.stores.retention import PRUNE_EVERY, EventRetention
from llamon_agent.core.events import EventBus, RunnerEvent, Subscription

__all__ = [
    "MAX_WAITING",
    "MEMORY_PER_TASK",
    "MEMORY_TASKS",
    "EventRetention",
    "MemoryTaskEventStore",
    "TaskEventStore",
    "event_from_json",
]

logger = logging.getLogger(__name__)

MAX_WAITING: Final = 10_000
"""Events the store buffers while a write is in flight; further ones are dropped."""

MEMORY_PER_TASK: Final = 1000
"""Events the memory store keeps per task (the oldest go first)."""
MEMORY_TASKS: Final = 1000
"""Tasks whose events the memory store keeps (the least recently written go first)."""


def event_from_json(text: str | bytes) -> RunnerEvent:
    """The ``RunnerEvent`` a store kept as ``event_to_json`` text (its fields as they were
    published: they passed the security boundary then)."""
    data: Mapping[str, Any] = json.loads(text)
    metadata = data.get("trace_metadata")
    extra = data.get("extra")
    raw_time = data.get("time")
    return RunnerEvent(
        type=str(data.get("type") or "unknown"),
        stage=str(data.get("stage") or "unknown"),
        run_id=str(data.get("run_id") or ""),
        round=int(data.get("round") or 0),
        tool=data.get("tool"),
        step_id=data.get("step_id"),
        trace_metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        task_id=data.get("task_id"),
        context_id=data.get("context_id"),
        node=data.get("node"),
        time=float(raw_time) if isinstance(raw_time, int | float) else 0.0,
        extra=dict(extra) if isinstance(extra, Mapping) else {},
    )


class _Sink:
    """The bus subscriber of a store: buffers each event; after each burst (``flush``,
    called by the bus when the subscriber's queue empties) starts the store's write."""

    __slots__ = ("store",)

    def __init__(self, store: TaskEventStore) -> None:
        self.store = store

    def __call__(self, event: RunnerEvent) -> None:
        self.store.keep(event)

    def flush(self) -> None:
        self.store.write_soon()


class TaskEventStore(ABC):
    """Where served tasks' events are kept; see the module docstring.

    Subclasses implement ``add`` and ``for_task`` (and ``prune`` for a bounded table);
    the background writing (``keep``, ``write_soon``, ``subscribe``, ``flush``) is shared.
    """

    def __init__(self, retention: EventRetention | None = None) -> None:
        self.retention = retention if retention is not None else EventRetention()
        self.dropped = 0
        """Events not stored (the write failed, or too many were waiting)."""
        self.written = 0
        """Events stored by the background writer."""
        self._buffer: list[RunnerEvent] = []
        self._writer: asyncio.Task[None] | None = None
        self._since_prune = 0

    def subscribe(self, bus: EventBus, *, maxsize: int = MAX_WAITING) -> Subscription:
        """Keep every event of ``bus`` that belongs to a task, from now on: a subscriber
        with its own queue of ``maxsize`` events, drained at each turn of the event loop
        (events dropped there are counted in the returned ``Subscription.dropped``)."""
        return bus.subscribe(_Sink(self), maxsize=maxsize, name="task-event-store")

    def keep(self, event: RunnerEvent) -> None:
        """Buffer ``event`` for the next write (ignored without a ``task_id``); never
        waits, never raises. ``write_soon`` writes the buffer."""
        if event.task_id is None:
            return
        if len(self._buffer) >= MAX_WAITING:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                logger.warning(
                    "task events not stored: %d waiting (%d dropped)", MAX_WAITING, self.dropped
                )
            return
        self._buffer.append(event)

    def write_soon(self) -> None:
        """Start writing the buffered events in the background, unless a write is in
        flight (it takes them next)."""
        if not self._buffer or (self._writer is not None and not self._writer.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - the bus calls it on its loop
            return
        self._writer = loop.create_task(self._write_buffered(), name="llamon-task-events")

    async def _write_buffered(self) -> None:
        while self._buffer:
            batch, self._buffer = self._buffer, []
            try:
                await self.add(batch)
                self.written += len(batch)
                self._since_prune += 1
                if self._since_prune >= PRUNE_EVERY:
                    self._since_prune = 0
                    await self.prune()
            except Exception as exc:
                self.dropped += len(batch)
                logger.warning("%d task event(s) not stored: %s", len(batch), type(exc).__name__)

    @abstractmethod
    async def add(self, events: Sequence[RunnerEvent]) -> None:
        """Store ``events`` (each with a ``task_id``; others are ignored) now, in order;
        raises what the database raises."""

    @abstractmethod
    async def for_task(self, task_id: str, *, limit: int = 1000) -> list[RunnerEvent]:
        """The kept events of ``task_id``, oldest first; at most the ``limit`` newest."""

    async def prune(self, now: float | None = None) -> int:
        """Delete events past the retention (``now``: epoch seconds); returns how many.
        The memory store is bounded by its counts instead, and prunes nothing here."""
        return 0

    async def flush(self) -> None:
        """Wait until every event handed over so far is stored (or dropped)."""
        self.write_soon()
        while self._writer is not None and not self._writer.done():
            await asyncio.wait([self._writer])
            self.write_soon()

    async def close(self) -> None:
        """Finish the writes in flight (the database itself is closed by its owner)."""
        await self.flush()


class MemoryTaskEventStore(TaskEventStore):
    """This process's memory: the last ``per_task`` events of the last ``tasks`` tasks."""

    def __init__(self, *, per_task: int = MEMORY_PER_TASK, tasks: int = MEMORY_TASKS) -> None:
        super().__init__()
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
