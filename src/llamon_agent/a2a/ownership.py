"""Tasks and contexts belong to the caller that created them.

The caller is the request's authenticated principal: the name ``AuthConfig`` gives its
secret (``AuthMiddleware`` puts it in ``scope["user"]``; a2a-sdk passes it on as
``ServerCallContext.user``). Secrets given to ``AuthConfig`` positionally, and every
request when auth is off, are one caller: the default one.

What a caller sees:

* Every method on a task of another caller -- ``tasks/get``, ``tasks/cancel``,
  ``tasks/resubscribe``, ``tasks/pushNotificationConfig/{set,get,list,delete}``, and
  ``message/send`` / ``message/stream`` naming its ``taskId`` -- answers exactly as for a
  task that does not exist: JSON-RPC -32001, the same message and data.
* ``message/send`` / ``message/stream`` naming another caller's ``contextId`` (without a
  ``taskId``) is answered the same way (-32001) instead of joining that context.
* Push configs are answered with their ``token``, their authentication credentials and
  the user-info of their URL masked as ``***`` (``masked_push_config``).

How: ``OwnedTaskStore`` is the task store a2a-sdk's request handling reads and writes
through (every such read passes the request's ``ServerCallContext``). A write stamps the
task's metadata with ``llamon.owner``, an opaque digest of the caller's name (never a
key, token or the name itself; the default caller stamps nothing, so its tasks look as
they always did). A read with a context returns ``None`` for a task whose stamp is not the
caller's -- the request then fails exactly as for an unknown task -- and strips the stamp
from what it returns, so no caller ever reads it. Reads and writes without a context
(the server's own: ending a task whose request failed, reconciling at start) see the
stored task as it is. A task stored without a stamp belongs to the default caller.

Contexts: a context belongs to the caller of its tasks. The store remembers the owner of
each context it has seen a task of (in memory, the most recent ``CONTEXT_MEMORY``
contexts), so a message naming no context or a remembered one costs one dict lookup. A
message naming a context not remembered (after a restart, or once forgotten) asks the
task store for one task of that context -- one query, ``context_lookup`` -- and remembers
its owner: contexts stay owned across restarts on the SQLite and PostgreSQL stores, and
for as long as the memory store keeps one of the context's tasks. A task store that
cannot look contexts up (a user's own ``TaskStore`` without ``task_in_context``) knows a
context only while it is remembered: after a restart, until one of its tasks is read or
written.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import (
    Message,
    PushNotificationConfig,
    Task,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import ServerError

from llamon_agent.a2a.stores.context_lookup import context_finder
from llamon_agent.a2a.stores.paused_claim import claim_paused

__all__ = [
    "CONTEXT_MEMORY",
    "MASK",
    "OWNER_METADATA_KEY",
    "OwnedTaskStore",
    "masked_push_config",
    "owner_of",
]

OWNER_METADATA_KEY: Final = "llamon.owner"
"""The task metadata key holding the owner's digest (stored; never answered to a caller)."""

MASK: Final = "***"
"""What a push config's token, credentials and URL user-info read as."""

CONTEXT_MEMORY: Final = 100_000
"""How many contexts' owners the store remembers (the oldest are forgotten first)."""

_DEFAULT: Final = ""
"""The default caller's stamp: none."""


@lru_cache(maxsize=4096)
def _digest(name: str) -> str:
    return hashlib.sha256(b"llamon-agent task owner\x00" + name.encode()).hexdigest()[:32]


def owner_of(context: ServerCallContext | None) -> str:
    """The stamp of the caller of ``context``: ``""`` for the default caller (auth off,
    a positional secret, no context), else a digest of the caller's name."""
    if context is None:
        return _DEFAULT
    user = context.user
    if not user.is_authenticated:
        return _DEFAULT
    name = user.user_name
    return _digest(name) if name else _DEFAULT


def _stamp(task: Task) -> str:
    metadata = task.metadata
    return str(metadata.get(OWNER_METADATA_KEY, _DEFAULT)) if metadata else _DEFAULT


class OwnedTaskStore(TaskStore):
    """``inner`` with every task owned by the caller that created it (module docstring)."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self._contexts: dict[str, str] = {}
        self._find_context = context_finder(inner)

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Save ``task``, stamped with the caller of ``context`` (when there is one and
        the task carries no stamp yet: a stamp is never changed)."""
        await self.inner.save(self._stamped(task, context), context)

    async def claim_paused(
        self, task: Task, paused_state: TaskState, context: ServerCallContext | None = None
    ) -> bool:
        """Save ``task``, stamped as ``save`` does, only if the stored task is still in
        ``paused_state``; ``True`` if it was saved (``paused_claim``)."""
        return await claim_paused(self.inner, self._stamped(task, context), paused_state)

    def _stamped(self, task: Task, context: ServerCallContext | None) -> Task:
        if context is None:
            return task
        owner = owner_of(context)
        self._remember(task.context_id, owner)
        if not owner or _stamp(task):
            return task
        metadata = {**(task.metadata or {}), OWNER_METADATA_KEY: owner}
        return task.model_copy(update={"metadata": metadata})

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """The task, or ``None`` when ``context``'s caller does not own it."""
        task = await self.inner.get(task_id, context)
        if task is None or context is None:
            return task
        stamp = _stamp(task)
        self._remember(task.context_id, stamp)
        if stamp != owner_of(context):
            return None
        if not stamp:
            return task
        metadata = {k: v for k, v in (task.metadata or {}).items() if k != OWNER_METADATA_KEY}
        return task.model_copy(update={"metadata": metadata or None})

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Delete the task (only a task ``context``'s caller owns)."""
        if context is not None and await self.get(task_id, context) is None:
            return
        await self.inner.delete(task_id, context)

    def check_message(self, message: Message, context: ServerCallContext | None) -> str | None:
        """Refuse, as for an unknown task (-32001), a message without a ``taskId`` that
        names a context another caller owns, as far as remembered. One dict lookup.

        Returns the message's ``contextId`` when its owner is not remembered and the task
        store can be asked: the caller then awaits ``check_context`` with it."""
        if message.task_id or not message.context_id or context is None:
            return None
        context_id = message.context_id
        known = self._contexts.get(context_id)
        if known is None:
            return context_id if self._find_context is not None else None
        if known != owner_of(context):
            raise ServerError(error=TaskNotFoundError())
        return None

    async def check_context(self, context_id: str, context: ServerCallContext | None) -> None:
        """``check_message`` for a context not remembered: ask the task store for one of
        its tasks (one query) and remember its owner; refuse (-32001) when that is
        another caller. A context without stored tasks is anyone's to start."""
        if self._find_context is None or context is None:
            return
        task = await self._find_context(context_id)
        if task is None:
            return
        stamp = _stamp(task)
        self._remember(context_id, stamp)
        if stamp != owner_of(context):
            raise ServerError(error=TaskNotFoundError())

    def _remember(self, context_id: str, owner: str) -> None:
        if context_id in self._contexts:
            return
        if len(self._contexts) >= CONTEXT_MEMORY:
            del self._contexts[next(iter(self._contexts))]
        self._contexts[context_id] = owner


def _masked_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{MASK}@{host}"))


def masked_push_config(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """``config`` as a caller may read it: ``token``, authentication ``credentials`` and
    the URL's user-info (``user:password@``) replaced by ``***``."""
    push: PushNotificationConfig = config.push_notification_config
    update: dict[str, object] = {"url": _masked_url(push.url)}
    if push.token:
        update["token"] = MASK
    if push.authentication is not None and push.authentication.credentials:
        update["authentication"] = push.authentication.model_copy(update={"credentials": MASK})
    return config.model_copy(update={"push_notification_config": push.model_copy(update=update)})
