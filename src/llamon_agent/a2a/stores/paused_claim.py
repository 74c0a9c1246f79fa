"""Resume a paused task exactly once: a save that writes only while the task is still paused.

Replicas share one task store, so the answers to an ``input-required`` (or
``auth-required``) task may land on two replicas at once. Each builds the resumed task
(state ``working``, stamped with its worker) and calls ``claim_paused(store, task,
paused_state)``: it saves ``task`` only if the stored task's state is still
``paused_state``, and is ``True`` if it wrote. Of two racing claims on one paused task,
exactly one is ``True``; the other replica answers ``task_busy`` (or, if the task ended
meanwhile, that it is in a terminal state) and runs nothing.

* llamon's stores define ``async def claim_paused(self, task: Task, paused_state:
  TaskState) -> bool`` and decide in one step: the memory store within one step of the
  event loop, SQLite and PostgreSQL with one conditional ``UPDATE``.
* Any other store (a user's own ``TaskStore``) can take part by defining the same
  method. Without it, the claim reads the task and saves it if it is still paused: one
  process never runs a task twice (its requests on one task take turns), but two
  replicas may both resume it, as before this check existed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.tasks import TaskStore
from a2a.types import Task, TaskState

__all__ = ["PausedClaimer", "claim_paused"]

PausedClaimer = Callable[[Task, TaskState], Awaitable[bool]]
"""``(task, paused_state)`` -> whether ``task`` was saved over the stored paused one."""


async def claim_paused(store: TaskStore, task: Task, paused_state: TaskState) -> bool:
    """Save ``task`` in ``store`` only if the stored task is still in ``paused_state``;
    ``True`` if it was saved. The store's own ``claim_paused`` when it has one, else a
    read followed by a save (not atomic across processes)."""
    method: Any = getattr(store, "claim_paused", None)
    if callable(method):
        claimer: PausedClaimer = method
        return await claimer(task, paused_state)
    stored = await store.get(task.id)
    if stored is None or stored.status.state != paused_state:
        return False
    await store.save(task)
    return True
