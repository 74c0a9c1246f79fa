"""What an A2A task state means to llamon: finished, paused, or left behind by a crash.

* ``TERMINAL_STATES``: ``completed``, ``failed``, ``canceled``, ``rejected`` -- the task
  will not change again (a2a-sdk's terminal states). ``unknown`` is not one: a2a-sdk lets
  a client continue such a task. A finished task may be evicted from memory, its refused
  final write is retried, and a stream ends at it.
* ``PAUSED_STATES``: ``input-required``, ``auth-required`` -- the run stopped and waits
  for the caller's next message, which resumes the same task.
* ``ORPHAN_STATES``: ``submitted``, ``working`` -- a task still in one of these when its
  worker stopped was left behind; crash reconciliation ends it ``failed``.
"""

from __future__ import annotations

from typing import Final

from a2a.types import TaskState

__all__ = ["ORPHAN_STATES", "PAUSED_STATES", "TERMINAL_STATES"]

TERMINAL_STATES: Final[frozenset[TaskState]] = frozenset(
    {TaskState.completed, TaskState.failed, TaskState.canceled, TaskState.rejected}
)
PAUSED_STATES: Final[frozenset[TaskState]] = frozenset(
    {TaskState.input_required, TaskState.auth_required}
)
ORPHAN_STATES: Final[tuple[str, ...]] = (TaskState.submitted.value, TaskState.working.value)
"""As the stored strings (the SQL of reconciliation compares them)."""
