"""Push notifications delivered in the background, off the caller's request.

``BackgroundPushSender`` is a2a-sdk's ``PushNotificationSender`` for a served agent:
``send_notification(task)`` only takes a copy of the task and queues it, so a
``message/send`` or ``message/stream`` answers as fast with a slow or dead webhook as with
none. Per task, one worker POSTs the queued tasks in order to every push config the task
has at that moment:

* each URL is checked by the ``PushPolicy`` after resolving its host, and the POST goes
  to the address that was checked (no second resolution between check and connect);
* one attempt is bounded by ``attempt_timeout``; a 5xx answer, a 429, a timeout or a
  connection error is retried with exponential backoff (``retries`` more attempts);
  any other non-2xx answer and a redirect (never followed) end the delivery;
* a task keeps at most ``max_pending`` queued notifications (``max_pending_total`` over
  all tasks): when full, the oldest queued one is dropped, so the latest state still goes;
* httpx's and httpcore's own lines about these POSTs (which name the URL) are not logged.

A delivery given up on (queue full, refused by the policy, retries exhausted, answered
non-2xx, or still queued at shutdown) counts in ``stats.dropped`` (by reason in
``stats.dropped_by_reason``) and logs one WARNING on ``llamon_agent.a2a.push`` naming the
task and the reason, never the URL, its host, credentials or the token.
``aclose(grace)`` stops taking notifications, lets the queued ones go for at most
``grace`` seconds, then cancels the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
from a2a.server.tasks import PushNotificationConfigStore, PushNotificationSender
from a2a.types import InvalidParamsError, PushNotificationConfig, Task
from a2a.utils.errors import ServerError

from llamon_agent.a2a.protocol import protocol_error
from llamon_agent.a2a.push_policy import PushPolicy, PushUrlRefused
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.logs import withhold_http_library_lines

__all__ = ["BackgroundPushSender", "PolicyCheckedConfigStore", "PushStats", "push_url_refusal"]

logger = logging.getLogger("llamon_agent.a2a.push")

TOKEN_HEADER: Final = "X-A2A-Notification-Token"  # noqa: S105 - a header name
_RETRY_STATUSES: Final = frozenset({408, 425, 429})


@dataclass
class PushStats:
    """What the sender did since it started."""

    queued: int = 0
    delivered: int = 0
    retried: int = 0
    dropped: int = 0
    dropped_by_reason: Counter[str] = field(default_factory=Counter)


class _Retry(Exception):
    """One attempt failed in a way another attempt may not."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _GiveUp(Exception):
    """The delivery cannot succeed; ``reason`` says why (no URL in it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BackgroundPushSender(PushNotificationSender):
    """Queues each notification and POSTs it from a per-task background worker.

    ``client``: the ``httpx.AsyncClient`` to POST with (one is made, and closed by
    ``aclose``, when not given; a given one is left open). Redirects are never followed.
    """

    def __init__(
        self,
        config_store: PushNotificationConfigStore,
        policy: PushPolicy | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        attempt_timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_pending: int = 32,
        max_pending_total: int = 10_000,
    ) -> None:
        self._store = config_store
        self._policy = policy or PushPolicy()
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=attempt_timeout)
        self._timeout = attempt_timeout
        self._retries = max(0, retries)
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._max_pending = max(1, max_pending)
        self._max_total = max(1, max_pending_total)
        self._queues: dict[str, deque[dict[str, Any]]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._pending = 0
        self._closed = False
        self.stats = PushStats()

    @property
    def policy(self) -> PushPolicy:
        """The URL policy every delivery is checked against."""
        return self._policy

    async def send_notification(self, task: Task) -> None:
        """Queue ``task`` (as it is now) for its webhooks; returns at once."""
        if self._closed:
            self._drop(task.id, "server stopping")
            return
        payload = task.model_dump(mode="json", exclude_none=True)
        queue = self._queues.setdefault(task.id, deque())
        if len(queue) >= self._max_pending or self._pending >= self._max_total:
            victim = queue or self._fullest_queue()
            if victim:
                dropped = victim.popleft()
                self._pending -= 1
                self._drop(str(dropped.get("id", "")), "queue full")
            else:  # pragma: no cover - every queued item sits in some queue
                self._drop(task.id, "queue full")
                if task.id not in self._workers:
                    self._queues.pop(task.id, None)
                return
        queue.append(payload)
        self._pending += 1
        self.stats.queued += 1
        if task.id not in self._workers:
            worker = asyncio.create_task(self._work(task.id, queue), name=f"push:{task.id}")
            self._workers[task.id] = worker

    def _fullest_queue(self) -> deque[dict[str, Any]] | None:
        queues = [queue for queue in self._queues.values() if queue]
        return max(queues, key=len) if queues else None

    def _drop(self, task_id: str, reason: str) -> None:
        self.stats.dropped += 1
        self.stats.dropped_by_reason[reason] += 1
        logger.warning("push notification for task %s dropped: %s", task_id, reason)

    async def _work(self, task_id: str, queue: deque[dict[str, Any]]) -> None:
        """POST ``task_id``'s queued notifications in order until its queue is empty."""
        withhold_http_library_lines()  # this task's own context: its HTTP lines name the address
        try:
            while queue:
                payload = queue.popleft()
                self._pending -= 1
                try:
                    await self._deliver_all(task_id, payload)
                except asyncio.CancelledError:
                    self._drop(task_id, "server stopping")
                    raise
        finally:
            self._workers.pop(task_id, None)
            if not queue and self._queues.get(task_id) is queue:
                self._queues.pop(task_id, None)

    async def _deliver_all(self, task_id: str, payload: dict[str, Any]) -> None:
        try:
            configs = await self._store.get_info(task_id)
        except Exception:  # a store outage loses this notification, not the worker
            self._drop(task_id, "push configs could not be read")
            return
        for config in configs:
            try:
                await self._deliver(payload, config)
            except _GiveUp as exc:
                self._drop(task_id, exc.reason)
            except Exception:  # its text may hold the URL: only the kind is logged
                self._drop(task_id, "the delivery failed unexpectedly")
            else:
                self.stats.delivered += 1

    async def _deliver(self, payload: dict[str, Any], config: PushNotificationConfig) -> None:
        attempt = 0
        while True:
            try:
                await self._attempt(payload, config)
                return
            except _Retry as exc:
                if attempt >= self._retries:
                    raise _GiveUp(f"{exc.reason}, after {attempt + 1} attempts") from None
            delay = min(self._max_backoff, self._backoff * 2**attempt)
            attempt += 1
            self.stats.retried += 1
            await asyncio.sleep(delay)

    async def _attempt(self, payload: dict[str, Any], config: PushNotificationConfig) -> None:
        try:
            target = await self._policy.resolve(config.url)
        except PushUrlRefused as exc:
            raise _GiveUp(f"webhook URL refused: {exc.rule}") from None
        headers = {"Host": target.host_header()}
        if config.token:
            headers[TOKEN_HEADER] = config.token
        extensions = {"sni_hostname": target.url.host} if target.url.scheme == "https" else None
        try:
            response = await asyncio.wait_for(
                self._client.post(
                    target.pinned_url(),
                    json=payload,
                    headers=headers,
                    follow_redirects=False,
                    extensions=extensions,
                ),
                self._timeout,
            )
        except (TimeoutError, httpx.TimeoutException):
            raise _Retry("the webhook did not answer in time") from None
        except httpx.TransportError:
            raise _Retry("the webhook could not be reached") from None
        status = response.status_code
        if 200 <= status < 300:
            return
        if status >= 500 or status in _RETRY_STATUSES:
            raise _Retry(f"the webhook answered HTTP {status}")
        if 300 <= status < 400:
            raise _GiveUp(f"the webhook answered a redirect (HTTP {status}), not followed")
        raise _GiveUp(f"the webhook answered HTTP {status}")

    async def aclose(self, grace: float = 2.0) -> None:
        """Stop taking notifications; wait at most ``grace`` s for queued ones, cancel the rest.

        Notifications still queued or in flight then count as dropped (``server stopping``).
        """
        self._closed = True
        workers = list(self._workers.values())
        if workers:
            _, pending = await asyncio.wait(workers, timeout=max(0.0, grace))
            for worker in pending:
                worker.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        for task_id, queue in list(self._queues.items()):
            for _ in range(len(queue)):
                self._drop(task_id, "server stopping")
            queue.clear()
        self._queues.clear()
        self._pending = 0
        if self._owns_client:
            await self._client.aclose()


def push_url_refusal(refused: PushUrlRefused) -> ServerError:
    """-32602 ``push_url_refused`` naming the field and the rule, never the URL."""
    return protocol_error(
        InvalidParamsError,
        ErrorCode.INVALID_INPUT,
        "push_url_refused",
        f"Invalid parameters: pushNotificationConfig.url is refused: {refused.rule}.",
    )


class PolicyCheckedConfigStore(PushNotificationConfigStore):
    """A push config store that refuses, on ``set_info``, a URL the policy refuses.

    Every way a config is set goes through it (``message/send`` and ``message/stream``
    with ``configuration.pushNotificationConfig``, ``tasks/pushNotificationConfig/set``),
    so each answers -32602 ``push_url_refused`` (``push_url_refusal``) before anything is
    stored or run. Reads and deletes go to ``inner`` unchanged.
    """

    def __init__(self, inner: PushNotificationConfigStore, policy: PushPolicy) -> None:
        self.inner = inner
        self.policy = policy

    async def set_info(self, task_id: str, notification_config: PushNotificationConfig) -> None:
        try:
            self.policy.check_url(notification_config.url)
        except PushUrlRefused as refused:
            raise push_url_refusal(refused) from None
        await self.inner.set_info(task_id, notification_config)

    async def get_info(self, task_id: str) -> list[PushNotificationConfig]:
        return await self.inner.get_info(task_id)

    async def delete_info(self, task_id: str, config_id: str | None = None) -> None:
        await self.inner.delete_info(task_id, config_id)
