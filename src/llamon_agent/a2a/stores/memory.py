"""In-process A2A stores that forget finished tasks, so a long-running server stays bounded.

a2a-sdk's ``InMemoryTaskStore`` keeps every task forever. ``BoundedMemoryTaskStore`` keeps
at most ``MemoryLimits.max_finished`` finished tasks, each for at most
``MemoryLimits.max_finished_age`` seconds after it finished. What the caller sees:

* A task is *finished* when its state is ``completed``, ``canceled``, ``failed`` or
  ``rejected`` (a2a-sdk's own terminal states). Tasks in any other state (``submitted``,
  ``working``, ``input-required``, ``auth-required``, and ``unknown``, which a2a-sdk's
  handler lets a client continue) are never evicted, however many or old they are.
* When more than ``max_finished`` tasks are finished, the one that finished first goes.
  ``max_finished=0`` forgets a task as soon as it is saved finished.
* A finished task is kept ``max_finished_age`` seconds after it finished (``None``: no
  age limit). Re-saving a finished task (a late event, a reconciliation) keeps its finish
  time: it never becomes younger.
* Eviction happens inside ``save`` (count and age) and ``get`` (age), in amortised O(1)
  per call: no background timer, no scan of the whole store.
* ``tasks/get`` (and ``tasks/cancel``, ``tasks/resubscribe``, push-config methods) on an
  evicted task answers a2a's ``TaskNotFoundError``, JSON-RPC code -32001, which llamon
  reports as ``errorCode`` ``NOT_FOUND`` - the same answer as for an id that never
  existed. A caller that needs an answer later than the limits allow should poll sooner
  (or use push notifications), or the server should use the SQLite or PostgreSQL store.
* ``BoundedMemoryPushConfigStore`` keeps push-notification configs with the semantics of
  a2a-sdk's database store; give its ``forget`` to the task store as ``on_evict`` so the
  configs of evicted tasks go with them::

      push_store = BoundedMemoryPushConfigStore()
      task_store = BoundedMemoryTaskStore(MemoryLimits(), on_evict=push_store.forget)

  With ``max_finished=0`` that also forgets the configs before a2a-sdk sends the final
  push notification of the task, so that notification is not sent.
* ``claim_paused(task, paused_state)`` saves ``task`` only while the stored task is still
  in ``paused_state`` (``paused_claim``): of two answers to one paused task, one resumes it.
* ``task_in_context(context_id)`` answers the task saved last under ``context_id`` while
  the store holds it (one dict lookup; how a context's owner is learned again once the
  server's memory of recent contexts has forgotten it), else ``None``.
* ``tasks_sent_as(message_id)`` answers the tasks held now that a message with that id
  started (stamped ``llamon.sent``; how a repeated ``message/send`` is recognised once the
  server's memory of recent messages has forgotten it), one dict lookup.
* Everything lives in this process and is lost when it stops.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.types import PushNotificationConfig, Task, TaskState

from llamon_agent.a2a.states import TERMINAL_STATES
from llamon_agent.a2a.stores.sent_lookup import sent_message_id

__all__ = [
    "FINISHED_STATES",
    "BoundedMemoryPushConfigStore",
    "BoundedMemoryTaskStore",
    "MemoryLimits",
]

logger = logging.getLogger("llamon_agent.a2a")

FINISHED_STATES: Final = TERMINAL_STATES
"""The states in which a task counts as finished and may be evicted (see ``a2a.states``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryLimits:
    """How many finished tasks ``BoundedMemoryTaskStore`` keeps, and for how long.

    ``max_finished``: finished tasks kept; past it the oldest-finished is evicted first.
    ``0`` forgets a task as soon as it is saved finished. ``max_finished_age``: seconds a
    finished task is kept after it finished; ``None`` keeps it until ``max_finished``
    pushes it out. Unfinished tasks are never counted or evicted. Bad values raise
    ``ValueError`` naming the field and the value.
    """

    max_finished: int = 10_000
    max_finished_age: float | None = 3600.0

    def __post_init__(self) -> None:
        count = self.max_finished
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"max_finished must be an int >= 0, got {count!r}")
        age = self.max_finished_age
        if age is None:
            return
        if (
            isinstance(age, bool)
            or not isinstance(age, int | float)
            or not math.isfinite(age)
            or age <= 0
        ):
            raise ValueError(
                f"max_finished_age must be a finite number of seconds > 0 or None, got {age!r}"
            )


def _call_on_evict(on_evict: Callable[[str], None] | None, task_id: str) -> None:
    if on_evict is None:
        return
    try:
        on_evict(task_id)
    except Exception:
        logger.exception("task %s: on_evict failed; the task is evicted anyway", task_id)


class BoundedMemoryTaskStore(TaskStore):
    """a2a-sdk ``TaskStore`` in this process that evicts finished tasks by count and age.

    ``limits`` defaults to ``MemoryLimits()`` (10 000 finished tasks, one hour).
    ``clock`` gives seconds and must never go backwards (``time.monotonic``). ``on_evict``
    is called with the id of every evicted task (not of deleted ones); an exception from
    it is logged, never raised. ``get`` of an evicted or unknown id returns ``None``.

    An unfinished task is stored as given (the ``TaskManager`` that saves it keeps and
    mutates the same object between saves), and ``get`` returns a deep copy of it: unlike
    a2a-sdk's ``InMemoryTaskStore``, a second reader of a running task (a
    ``tasks/resubscribe``, whose ``TaskManager`` applies every event again) never
    mutates the object the first one applies them to, so the stored task holds each
    streamed chunk once, as on the database stores. A finished task is stored as its
    JSON text and ``get`` returns a new ``Task`` parsed from it: a string is invisible
    to the garbage collector, so the thousands of finished tasks a busy server keeps cost
    no time in full collections (p99 at 16 concurrent sends: see bench/README.md) and
    about a third of the memory.
    """

    # No asyncio.Lock, unlike a2a-sdk's store: no method awaits anything, so each call runs
    # to completion within one step of one coroutine and no other can interleave with it.

    def __init__(
        self,
        limits: MemoryLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_evict: Callable[[str], None] | None = None,
    ) -> None:
        self._limits = limits if limits is not None else MemoryLimits()
        self._clock = clock
        self._on_evict = on_evict
        self._tasks: dict[str, Task | str] = {}  # finished tasks as JSON text
        # id -> when it finished, oldest first. OrderedDict, not dict: popping the first
        # item of a dict leaves holes that the next ``next(iter(...))`` walks over.
        self._finished: OrderedDict[str, float] = OrderedDict()
        # context id -> the task saved last in it; entries of removed tasks are pruned
        # once they outnumber the tasks (amortised O(1) per save).
        self._context_tasks: dict[str, str] = {}
        # message id -> the tasks it started (llamon.sent); pruned with the contexts
        self._sent_tasks: dict[str, list[str]] = {}

    @property
    def limits(self) -> MemoryLimits:
        """The limits this store enforces."""
        return self._limits

    @property
    def finished_count(self) -> int:
        """Finished tasks held now (some may be past their age until the next save/get)."""
        return len(self._finished)

    @property
    def unfinished_count(self) -> int:
        """Tasks held now that are not finished; these are never evicted."""
        return len(self._tasks) - len(self._finished)

    def __len__(self) -> int:
        """Tasks held now, finished and unfinished."""
        return len(self._tasks)

    def __bool__(self) -> bool:
        """Always true, even when empty: ``task_store or InMemoryTaskStore()`` keeps it."""
        return True

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Store ``task`` (unfinished: as given; finished: as JSON), then evict by count and
        age.

        A task saved finished for the first time starts its age now; saved finished again,
        it keeps its first finish time. Saved unfinished, it leaves the finished set. A task
        saved after it was evicted is stored anew.
        """
        now = self._clock()
        task_id = task.id
        finished = self._finished
        context_tasks = self._context_tasks
        context_tasks[task.context_id] = task_id
        message_id = sent_message_id(task)
        if message_id is not None:
            started = self._sent_tasks.setdefault(message_id, [])
            if task_id not in started:
                started.append(task_id)
        bound = 2 * len(self._tasks) + 1024
        if len(context_tasks) > bound or len(self._sent_tasks) > bound:
            self._prune_contexts()
        if task.status.state in FINISHED_STATES:
            self._tasks[task_id] = task.model_dump_json()
            if task_id not in finished:
                finished[task_id] = now
        else:
            self._tasks[task_id] = task
            if task_id in finished:
                del finished[task_id]
        limit = self._limits.max_finished
        while len(finished) > limit:
            self._evict(finished.popitem(last=False)[0])
        self._evict_old(now)

    async def claim_paused(self, task: Task, paused_state: TaskState) -> bool:
        """Save ``task`` only if the stored task is still in ``paused_state`` (a paused
        task is never evicted); ``True`` if it was saved. Nothing awaits between the check
        and the save, so of two claims on one paused task exactly one is ``True``."""
        stored = self._tasks.get(task.id)
        if not isinstance(stored, Task) or stored.status.state != paused_state:
            return False
        await self.save(task)
        return True

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """A copy of the task with ``task_id``, or ``None`` when unknown or evicted (age
        checked now)."""
        self._evict_old(self._clock())
        stored = self._tasks.get(task_id)
        if stored is None:
            return None
        if isinstance(stored, str):
            return Task.model_validate_json(stored)
        return stored.model_copy(deep=True)

    def tasks_in(self, states: tuple[str, ...]) -> list[Task]:
        """Copies of the kept tasks in one of ``states`` that are not finished (a running
        task is stored as given; finished ones are not parsed)."""
        return [
            stored.model_copy(deep=True)
            for stored in self._tasks.values()
            if not isinstance(stored, str) and stored.status.state.value in states
        ]

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Forget ``task_id``, finished or not; ``on_evict`` is not called. Unknown ids are
        ignored."""
        self._tasks.pop(task_id, None)
        self._finished.pop(task_id, None)

    async def task_in_context(self, context_id: str) -> Task | None:
        """A copy of the task saved last under ``context_id``, or ``None`` when the store
        no longer holds it (evicted, deleted) or never did."""
        task_id = self._context_tasks.get(context_id)
        return None if task_id is None else await self.get(task_id)

    async def tasks_sent_as(self, message_id: str) -> list[Task]:
        """Copies of the tasks held now that a message with ``message_id`` started."""
        found = [await self.get(task_id) for task_id in self._sent_tasks.get(message_id, ())]
        return [task for task in found if task is not None]

    def _prune_contexts(self) -> None:
        tasks = self._tasks
        self._context_tasks = {c: t for c, t in self._context_tasks.items() if t in tasks}
        sent = ((m, [t for t in ids if t in tasks]) for m, ids in self._sent_tasks.items())
        self._sent_tasks = {m: ids for m, ids in sent if ids}

    def _evict_old(self, now: float) -> None:
        max_age = self._limits.max_finished_age
        finished = self._finished
        if max_age is None or not finished:
            return
        cutoff = now - max_age
        while finished:
            task_id, finished_at = next(iter(finished.items()))
            if finished_at >= cutoff:
                return
            del finished[task_id]
            self._evict(task_id)

    def _evict(self, task_id: str) -> None:
        del self._tasks[task_id]
        _call_on_evict(self._on_evict, task_id)


class BoundedMemoryPushConfigStore(PushNotificationConfigStore):
    """a2a-sdk ``PushNotificationConfigStore`` in this process, with the database store's
    semantics and a ``forget`` for ``BoundedMemoryTaskStore``'s ``on_evict``.

    ``set_info`` stores a copy (a missing ``id`` becomes the task id; the caller's object
    is never changed) and replaces a config with the same id in place. ``get_info`` lists
    a task's configs in the order they were first set. ``delete_info(task_id)`` without a
    config id deletes all the task's configs.
    """

    # No asyncio.Lock: as in BoundedMemoryTaskStore, no method awaits anything.

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, PushNotificationConfig]] = {}

    def __len__(self) -> int:
        """Tasks that have at least one config."""
        return len(self._configs)

    def __bool__(self) -> bool:
        """Always true, even when empty: ``store or InMemory...Store()`` keeps it."""
        return True

    async def set_info(self, task_id: str, notification_config: PushNotificationConfig) -> None:
        """Store a copy of ``notification_config`` for ``task_id``, replacing one with the
        same id (a missing id is the task id)."""
        config = notification_config.model_copy(deep=True)
        if config.id is None:
            config.id = task_id
        self._configs.setdefault(task_id, {})[config.id] = config

    async def get_info(self, task_id: str) -> list[PushNotificationConfig]:
        """The configs of ``task_id`` in the order first set; empty when it has none.

        A new list of the stored objects: read them, do not change them.
        """
        configs = self._configs.get(task_id)
        return list(configs.values()) if configs else []

    async def delete_info(self, task_id: str, config_id: str | None = None) -> None:
        """Delete config ``config_id`` of ``task_id``, or all its configs when ``None``.
        Unknown ids are ignored."""
        if config_id is None:
            self._configs.pop(task_id, None)
            return
        configs = self._configs.get(task_id)
        if configs is None:
            return
        configs.pop(config_id, None)
        if not configs:
            del self._configs[task_id]

    def forget(self, task_id: str) -> None:
        """Drop every config of ``task_id`` (synchronous: fit for ``on_evict``)."""
        self._configs.pop(task_id, None)
