"""Event queues that give every consumer of a task its own copy of each event.

a2a-sdk hands the *same* event object to the request that runs a task and to every
``tasks/resubscribe`` of it (``EventQueue.tap``), and its ``TaskManager`` keeps the first
chunk's artifact object inside the task and extends it in place with later chunks. Two
consumers of one event therefore extend one artifact twice: the stored task, and the
events still waiting for a resubscriber, held every chunk twice.

And when the request's consumer reads the task's final event it closes the queue at
once, which also empties every tapped queue: a resubscriber that had not read the final
status-update yet never received it, and its stream ended with the task still working.

``IsolatingQueueManager`` (the default of ``LlamonRequestHandler``) keeps a2a-sdk's
in-memory queue manager, but each tapped queue receives deep copies, and a tapped queue
closed by its parent keeps what it holds until its own reader has read it. A task
nobody resubscribes to has no tapped queue and pays nothing.
"""

from __future__ import annotations

import sys

from a2a.server.events import EventQueue, InMemoryQueueManager
from a2a.server.events.event_queue import Event
from a2a.server.events.queue_manager import TaskQueueExists

__all__ = ["IsolatingQueueManager"]


class _TaskQueue(EventQueue):
    """A task's queue whose taps receive their own copy of each event."""

    def tap(self) -> EventQueue:
        """A child queue that receives a deep copy of every later event."""
        child = _TappedQueue()
        # a2a-sdk's EventQueue.tap appends to this list too; enqueue_event walks it.
        self._children.append(child)
        return child

    async def clear_events(self, clear_child_queues: bool = True) -> None:
        """Drop this queue's unread events; a tapped queue keeps its own for its reader."""
        await super().clear_events(clear_child_queues=False)


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


class IsolatingQueueManager(InMemoryQueueManager):
    """a2a-sdk's ``InMemoryQueueManager`` whose tapped queues receive copied events."""

    async def create_or_tap(self, task_id: str) -> EventQueue:
        """The task's queue, new (an isolating one) or tapped."""
        tapped = await self.tap(task_id)
        if tapped is not None:
            return tapped
        queue = _TaskQueue()
        try:
            await self.add(task_id, queue)
        except TaskQueueExists:  # pragma: no cover - no await between tap and add wins
            tapped = await self.tap(task_id)
            if tapped is None:
                raise
            return tapped
        return queue
