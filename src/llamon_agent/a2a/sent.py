"""A repeated ``message/send`` is answered with the task it started, not run again.

A message without a ``taskId`` starts a task. The server remembers it under its key --
the caller (``ownership.owner_of``), the ``contextId`` it was sent with (``""`` when
none) and its ``messageId`` -- for ``window`` seconds (default ``DEFAULT_WINDOW``, 24 h;
``create_app(idempotency_window=)``, ``LLAMON_IDEMPOTENCY_WINDOW``). A message with the
same key within the window is a repeat: the request handler answers it with that task
as it is now instead of running the agent again. What the caller sees:

* Only the same caller's message is a repeat: the same ``messageId`` from another caller
  (or in another context) starts its own task and never reveals the first one.
* A message that continues a task (``taskId`` given) is never a repeat.
* After the window a message with the same key starts a new task.
* Durable: the key is stamped on the task (``metadata["llamon.sent"]``,
  ``stores.sent_lookup``), so a restarted server still recognises a repeat on the SQLite
  and PostgreSQL stores, and on the memory store for as long as it keeps the task. The
  most recent ``SENT_MEMORY`` keys are also kept in memory (no store query for them).
* A task the store no longer holds (deleted, evicted) is no answer: the message runs.
* Simultaneous: a repeat that arrives while the first send is still starting (its task
  not stored yet) waits for that task (``claim``) instead of starting a second run; if
  the first send fails before its task is stored, the repeat runs.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from a2a.server.context import ServerCallContext
from a2a.types import Message, Task

from llamon_agent.a2a.ownership import OWNER_METADATA_KEY, owner_of
from llamon_agent.a2a.stores.guard import GuardedTaskStore
from llamon_agent.a2a.stores.sent_lookup import SENT_METADATA_KEY

__all__ = ["DEFAULT_WINDOW", "SENT_MEMORY", "SentKey", "SentMessages", "check_window"]

DEFAULT_WINDOW: Final = 24 * 3600.0
"""Seconds a repeated ``message/send`` is answered with the task it started."""

SENT_MEMORY: Final = 10_000
"""How many sent messages the server remembers in memory (the oldest are forgotten first;
the task store still knows them)."""


@dataclass(frozen=True, slots=True)
class SentKey:
    """What makes two messages the same send: caller, context as sent, message id."""

    owner: str
    context_id: str
    message_id: str


def check_window(window: float) -> float:
    """``window`` as seconds; ``ValueError`` naming it unless a finite number >= 0."""
    if (
        isinstance(window, bool)
        or not isinstance(window, int | float)
        or not math.isfinite(window)
        or window < 0
    ):
        raise ValueError(f"idempotency_window must be a number of seconds >= 0, got {window!r}")
    return float(window)


class SentMessages:
    """The sends a server accepted in the last ``window`` seconds (module docstring).

    ``clock`` gives wall-clock seconds (a stamp outlives the process); ``window=0``
    recognises no repeat (tasks are still stamped).
    """

    def __init__(
        self,
        store: GuardedTaskStore,
        window: float = DEFAULT_WINDOW,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.window = check_window(window)
        self.clock = clock
        self._recent: OrderedDict[SentKey, tuple[str, float]] = OrderedDict()
        self._starting: dict[SentKey, asyncio.Future[str | None]] = {}

    @staticmethod
    def key(message: Message, context: ServerCallContext | None) -> SentKey | None:
        """The key of ``message`` as sent; ``None`` for one that continues a task."""
        if message.task_id:
            return None
        return SentKey(owner_of(context), message.context_id or "", message.message_id)

    def stamp(self, key: SentKey) -> dict[str, Any]:
        """The ``llamon.sent`` metadata of the task ``key``'s message starts, accepted now."""
        return {"messageId": key.message_id, "contextId": key.context_id, "at": self.clock()}

    def remember(self, key: SentKey, task_id: str, stamp: dict[str, Any]) -> None:
        """``key``'s message started ``task_id`` (with ``stamp``)."""
        self._recent[key] = (task_id, float(stamp["at"]))
        self._recent.move_to_end(key)
        while len(self._recent) > SENT_MEMORY:
            self._recent.popitem(last=False)

    def claim(self, key: SentKey) -> tuple[bool, asyncio.Future[str | None]]:
        """Take ``key``'s send if no other request is starting it: ``(True, future)``,
        and the caller must ``started`` or ``release`` it. Else ``(False, future)``: the
        future gives the id of the task the other request starts (``None`` if it failed
        before its task was stored)."""
        starting = self._starting.get(key)
        if starting is not None:
            return False, starting
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        recent = self._recent.get(key)
        if recent is not None and recent[1] >= self.clock() - self.window:
            future.set_result(recent[0])  # started while this request read the store
            return False, future
        self._starting[key] = future
        return True, future

    def started(self, key: SentKey, task_id: str, stamp: dict[str, Any]) -> None:
        """``key``'s task is stored as ``task_id``: remember it and answer the waiters."""
        self.remember(key, task_id, stamp)
        future = self._starting.pop(key, None)
        if future is not None and not future.done():
            future.set_result(task_id)

    def release(self, key: SentKey, future: asyncio.Future[str | None]) -> None:
        """The request holding ``key``'s claim (``future``) is done; waiters that still
        wait learn that it stored no task."""
        if self._starting.get(key) is future:
            del self._starting[key]
        if not future.done():
            future.set_result(None)

    async def earlier(self, key: SentKey) -> str | None:
        """The id of the task ``key``'s message started within the window, or ``None``.

        Remembered keys cost a dict lookup; others one task-store query."""
        if self.window <= 0:
            return None
        oldest = self.clock() - self.window
        recent = self._recent.get(key)
        if recent is not None:
            task_id, at = recent
            return task_id if at >= oldest else None
        for task in await self.store.tasks_sent_as(key.message_id):
            accepted = _accepted_at(task, key)
            if accepted is not None and accepted >= oldest:
                self.remember(key, task.id, {"at": accepted})
                return task.id
        return None


def _accepted_at(task: Task, key: SentKey) -> float | None:
    """When ``task`` was started by ``key``'s message, from its stamps; ``None`` when it
    was another caller's, another context's or another message's."""
    metadata = task.metadata or {}
    stamp = metadata.get(SENT_METADATA_KEY)
    if not isinstance(stamp, dict):
        return None
    owner = metadata.get(OWNER_METADATA_KEY, "")
    if (
        owner != key.owner
        or stamp.get("messageId") != key.message_id
        or stamp.get("contextId") != key.context_id
    ):
        return None
    at = stamp.get("at")
    return float(at) if isinstance(at, int | float) else None
