"""Event queues whose closing never holds up other tasks.

a2a-sdk's ``InMemoryQueueManager.close`` awaits a graceful ``EventQueue.close()`` -- which
waits until every event put on the queue has been read -- while holding the lock that
every ``message/send`` and ``message/stream`` needs to get its own queue. One queue that
nobody reads any more (its reader stopped when a task-store write failed) then blocks
the whole server. ``LlamonQueueManager`` takes the queue out under the lock and closes it
outside; ``abandon_queue`` is what the request handler calls when a task's reader stops:
the events nobody will read are dropped at once, and later publishes are no-ops.
"""

from __future__ import annotations

from a2a.server.events import EventQueue, InMemoryQueueManager
from a2a.server.events.queue_manager import NoTaskQueue

__all__ = ["LlamonQueueManager", "abandon_queue"]


class LlamonQueueManager(InMemoryQueueManager):
    """``InMemoryQueueManager`` whose ``close`` waits for one queue without the shared lock."""

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
