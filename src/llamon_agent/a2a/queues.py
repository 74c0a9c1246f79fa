"""Event queues for llamon's request handler: one per task, isolated and never blocking.

``LlamonQueueManager`` (the default of ``LlamonRequestHandler``) is a2a-sdk's
``InMemoryQueueManager`` with five repairs:

* **Closing never holds up other tasks.** a2a-sdk's ``close`` awaits a graceful
  ``EventQueue.close()`` -- which waits until every event put on the queue has been read --
  while holding the lock that every ``message/send`` and ``message/stream`` needs to get
  its own queue. One queue nobody reads any more (its reader stopped when a task-store
  write failed) then blocked the whole server. Here the queue is taken out under the lock
  and closed outside it; ``abandon_queue`` is what the request handler calls when a task's
  reader stops: the events nobody will read are dropped at once, and later publishes are
  no-ops.
* **Every resubscriber gets its own copy of each event.** a2a-sdk hands the *same* event
  object to the request that runs a task and to every ``tasks/resubscribe`` of it
  (``EventQueue.tap``), and its ``TaskManager`` keeps the first chunk's artifact object
  inside the task and extends it in place with later chunks. Two consumers of one event
  therefore extended one artifact twice: the stored task, and the events still waiting
  for a resubscriber, held every chunk twice. A tapped queue here receives deep copies; a
  task nobody resubscribes to has no tapped queue and pays nothing.
* **Each run of a task has its own queue.** ``create`` replaces the queue of a run that
  has ended but is still closing, and ``release`` closes one run's queue without
  touching the next run's (a2a-sdk tapped the old queue for the new run, and the old
  run's cleanup then closed the new run's queue).
* **A resubscriber reads the task's end.** When the request's consumer reads the final
  event it closes the queue at once, which emptied every tapped queue: a resubscriber
  that had not read the final status-update yet never received it. A tapped queue closed
  by its parent keeps what it holds until its own reader has read it, and never makes the
  task wait for that reader.
* **A resubscriber never waits on a closed queue.** A ``tasks/resubscribe`` that taps a
  run's queue after it closed (the run just ended) gets a closed tap, so its stream ends
  at once instead of receiving keep-alives forever; the request handler then answers the
  task's stored end.

A queue's own operations (``enqueue_event``, ``dequeue_event``, ``task_done`` ...) open
a2a-sdk's per-call span only when a tracer provider is configured
(``llamon_agent.a2a.sdk_spans``); without one that span records nothing, and skipping it
takes a third of the event loop's time off every streamed chunk.

Given ``post`` (``LlamonQueueManager(post=EventRelay.post)``: a server with ``redis_url``),
each run's queue also hands every event it takes to ``post(task_id, event)``, so other
replicas can follow the run (``llamon_agent.a2a.relay``); without it a run's queue is the
plain one and nothing is handed on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from a2a.server.events import EventQueue
from a2a.server.events.event_queue import Event
from a2a.server.events.queue_manager import NoTaskQueue, TaskQueueExists

from llamon_agent.a2a.sdk_spans import SdkEventQueue, SdkQueueManager
from llamon_agent.core.telemetry import tracer_provider_set

__all__ = ["LlamonQueueManager", "Post", "abandon_queue"]


class _TaskQueue(SdkEventQueue):
    """A task's queue whose taps receive their own copy of each event."""

    def tap(self) -> EventQueue:
        """A child queue that receives a deep copy of every later event; closed at once
        when this queue is closed already (no event will come, and a closing parent may
        have closed its children before this one joined them)."""
        child = _TappedQueue()
        if self._is_closed:
            child._is_closed = True
            return child
        # a2a-sdk's EventQueue.tap appends to this list too; enqueue_event walks it.
        self._children.append(child)
        return child

    async def clear_events(self, clear_child_queues: bool = True) -> None:
        """Drop this queue's unread events; a tapped queue keeps its own for its reader."""
        if self.queue.empty() and not tracer_provider_set():
            return  # nothing to drop
        await super().clear_events(clear_child_queues=False)

    async def close(self, immediate: bool = False) -> None:
        """a2a-sdk's ``close``; a graceful one of a queue with no taps waits for its reader
        directly (a2a-sdk gathers that wait with its taps' closes in a new task)."""
        if immediate or self._children or tracer_provider_set() or sys.version_info >= (3, 13):
            await super().close(immediate)
            return
        async with self._lock:
            if self._is_closed:
                return
            self._is_closed = True
        await self.queue.join()


class _TappedQueue(_TaskQueue):
    """A resubscriber's queue: its own copies, kept until read when the parent closes."""

    async def enqueue_event(self, event: Event) -> None:
        await super().enqueue_event(event.model_copy(deep=True))

    async def close(self, immediate: bool = False) -> None:
        """Take no new events; keep the unread ones for this queue's reader, and never
        wait for that reader (a resubscriber that went away must not hold up the task).

        a2a-sdk's close(immediate=True) would drop the unread events (the task's final
        status-update among them), and close() would wait until the reader read them.
        """
        async with self._lock:
            self._is_closed = True
        if sys.version_info >= (3, 13):  # pragma: no cover - the tests run on 3.11
            self.queue.shutdown(False)
        for child in self._children:
            await child.close(immediate)


class _PostingQueue(_TaskQueue):
    """A run's queue that hands each event it takes to ``post`` (the event relay)."""

    def __init__(self, post: Callable[[Event], None]) -> None:
        super().__init__()
        self._post = post

    async def enqueue_event(self, event: Event) -> None:
        if not self._is_closed:  # a closed queue drops the event (a2a-sdk's)
            self._post(event)
        await super().enqueue_event(event)


Post = Callable[[str, Event], None]
"""Takes each event of a run as it is published, with its task's id; never raises."""


class LlamonQueueManager(SdkQueueManager):
    """``InMemoryQueueManager`` whose taps get copies and whose ``close`` waits for one
    queue without the shared lock (see the module docstring); with ``post``, each run's
    events are also handed to it."""

    def __init__(self, post: Post | None = None) -> None:
        super().__init__()
        self._post = post

    def _new_queue(self, task_id: str) -> _TaskQueue:
        post = self._post
        if post is None:
            return _TaskQueue()
        return _PostingQueue(lambda event: post(task_id, event))

    async def create_or_tap(self, task_id: str) -> EventQueue:
        """The task's queue, new (an isolating one) or tapped."""
        tapped = await self.tap(task_id)
        if tapped is not None:
            return tapped
        queue = self._new_queue(task_id)
        try:
            await self.add(task_id, queue)
        except TaskQueueExists:  # pragma: no cover - no await between tap and add wins
            tapped = await self.tap(task_id)
            if tapped is None:
                raise
            return tapped
        return queue

    async def create(self, task_id: str) -> EventQueue:
        """A new queue for a new run of ``task_id``.

        A queue still registered for the task belongs to a run whose end is already
        stored (only one run of a task goes on at a time, ``task_locks``) and is merely
        being closed: it is replaced, never tapped, so the new run shares nothing with it.
        """
        queue = self._new_queue(task_id)
        async with self._lock:
            self._task_queue[task_id] = queue
        return queue

    async def release(self, task_id: str, queue: EventQueue) -> None:
        """Close ``queue`` (one run's), unregistering it if it is still ``task_id``'s.

        A later run's queue is left alone.
        """
        async with self._lock:
            if self._task_queue.get(task_id) is queue:
                del self._task_queue[task_id]
        await queue.close()

    async def close(self, task_id: str) -> None:
        """Remove the task's queue, then close it (the wait concerns this task only).

        Raises ``NoTaskQueue`` when the task has no queue, as a2a-sdk's does.
        """
        async with self._lock:
            queue = self._task_queue.pop(task_id, None)
        if queue is None:
            raise NoTaskQueue
        await queue.close()


async def abandon_queue(queue: EventQueue) -> None:
    """Close ``queue`` (and its taps) now: pending events dropped, waiters released.

    For a queue whose reader has stopped for good. Whoever waits for it to drain (a
    graceful close) is released, and any event published afterwards is dropped without
    waiting.
    """
    await queue.close(immediate=True)
