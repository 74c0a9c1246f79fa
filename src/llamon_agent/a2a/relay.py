"""Live task events across replicas, through Redis Streams (the ``redis`` extra).

A server given ``create_app(redis_url=...)`` publishes every event of every run it
executes to the stream ``llamon:events:{task_id}`` (one entry per event: its ``kind``
and its JSON, as the A2A wire has it), and a ``tasks/resubscribe`` reaching a replica
that does not run the task reads the task's events from there. Without ``redis_url``
nothing of this exists and nothing is published.

* ``EventRelay.publish(task_id, event)``: ``XADD`` with an approximate ``MAXLEN`` cap
  (``maxlen``, else ``LLAMON_RELAY_MAXLEN``, else 10 000 entries); the task's final event
  (a terminal state, or ``input-required`` / ``auth-required``) also sets the stream's
  ``EXPIRE`` (``expire``, else ``LLAMON_RELAY_EXPIRE_SECONDS``, else 600 s). A failure
  raises ``RelayUnavailableError``; a setting that is not a positive number, ``ValueError``
  naming it.
* A command on a connection Redis closed (it restarted) is sent once more on a new one,
  so the first request after a restart is answered; a Redis still down fails at once.
* ``EventRelay.post(task_id, event)``: what a run calls for each event. It never waits
  and never raises: the event is serialized at once and published in the background,
  in order (one writer per relay). When Redis does not answer, one WARNING says so (the
  address is never named) and the run goes on; events posted meanwhile are lost for
  other replicas, and a WARNING is logged again only after Redis answered once more.
* ``EventRelay.follow(task_id, after="0-0")``: the task's events in order, as
  ``(stream id, event)``, from the start or after ``after``, ending with the final
  event; it waits with ``XREAD`` blocks of ``block`` seconds (default 1), so it is
  cancelled promptly, and ``idle`` (called after each empty block) may end it early.
  Redis not answering raises ``RelayUnavailableError`` (``UPSTREAM_UNAVAILABLE`` /
  ``event_relay_unavailable``, retriable).
* ``EventRelay.request_cancel(task_id)``: asks every replica to cancel the task, a
  ``PUBLISH`` of its id on the channel ``llamon:cancel`` (``cancel_channel``). Pub/sub,
  not a stream: a cancel request matters only while the run goes on, so it is never kept
  for a replica that listens later (nothing to trim, nothing to expire); the one that asked
  learns the outcome from the task's event stream, and a request lost to a reconnecting
  listener ends in its bounded wait (``CancelUnconfirmedError``, retriable).
* ``EventRelay.listen_cancels(on_request)``: until cancelled, hands each requested task id
  to ``on_request``; ``listening`` is set while subscribed. Redis not answering is one
  WARNING (never the address; again only after it answered once more) and a new attempt
  after a growing pause (``retry_backoff``, up to ``MAX_BACKOFF`` seconds); it never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, cast

from a2a.server.events.event_queue import Event
from a2a.types import Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

from llamon_agent._extras import requires_extra
from llamon_agent.a2a.states import PAUSED_STATES, TERMINAL_STATES
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.settings import relay_expire_setting, relay_maxlen_setting
from llamon_agent.exceptions import LlamonError

with requires_extra("redis", "the Redis event relay"):
    from redis.asyncio import Redis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError

__all__ = [
    "DEFAULT_CANCEL_CHANNEL",
    "DEFAULT_EXPIRE",
    "DEFAULT_MAXLEN",
    "DEFAULT_PREFIX",
    "MAX_BACKOFF",
    "CancelUnconfirmedError",
    "EventRelay",
    "RelayUnavailableError",
    "is_final_event",
]

logger = logging.getLogger("llamon_agent.a2a")

DEFAULT_PREFIX: Final = "llamon:events:"
"""The streams' key prefix: a task's stream is ``{prefix}{task_id}``."""
DEFAULT_MAXLEN: Final = 10_000
"""Entries a task's stream keeps (approximately: Redis trims whole nodes)."""
DEFAULT_EXPIRE: Final = 600.0
"""Seconds a task's stream is kept after its final event."""
DEFAULT_BLOCK: Final = 1.0
"""Seconds one ``XREAD`` of ``follow`` waits for an event."""
DEFAULT_BUFFER: Final = 10_000
"""Events ``post`` holds while they wait to be published; more are dropped."""
DEFAULT_CANCEL_CHANNEL: Final = "llamon:cancel"
"""The pub/sub channel cancel requests are published on (each message: a task id)."""
MAX_BACKOFF: Final = 5.0
"""The longest pause (seconds) before the cancel listener tries Redis again."""
_CONNECT_TIMEOUT: Final = 2.0
_BATCH: Final = 256

_Model = type[Task] | type[Message] | type[TaskStatusUpdateEvent] | type[TaskArtifactUpdateEvent]
_Entry = tuple[str, dict[str, str]]
"""A stream entry as read with ``decode_responses=True``: its id and fields."""
_KINDS: Final[dict[str, _Model]] = {
    "task": Task,
    "message": Message,
    "status-update": TaskStatusUpdateEvent,
    "artifact-update": TaskArtifactUpdateEvent,
}


def _reconnect_once() -> Retry:
    """A command whose connection was closed is sent once more on a new connection: after
    Redis restarted, the idle pooled connections are dead, and the first command on each
    would fail although Redis answers (a Redis still down fails the new connection at
    once; a timeout is never repeated)."""
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


def _retrieved(read: asyncio.Future[Any]) -> None:
    """Mark a read's outcome as seen (a cancelled follower's read may end later)."""
    if not read.cancelled():
        read.exception()


class RelayUnavailableError(
    LlamonError,
    code=ErrorCode.UPSTREAM_UNAVAILABLE,
    reason="event_relay_unavailable",
    retriable=True,
):
    """Redis, which relays the events of tasks other replicas run, did not answer (its
    cause is chained); send the request again."""

    def __init__(self) -> None:
        super().__init__("The event relay is unavailable; send the request again.")


class CancelUnconfirmedError(
    LlamonError,
    code=ErrorCode.UPSTREAM_TIMEOUT,
    reason="cancel_unconfirmed",
    retriable=True,
):
    """A ``tasks/cancel`` of a task another replica runs: the run's end did not arrive in
    time, so whether it was canceled is not known yet; send the cancel again (or
    ``tasks/get``)."""

    def __init__(self) -> None:
        super().__init__("The task's end did not arrive in time; send the cancel again.")


def is_final_event(event: Event) -> bool:
    """Whether ``event`` ends a run: a ``final`` status-update, a task in a terminal or
    paused state, or a message (a run answered with a message has no task)."""
    if isinstance(event, TaskStatusUpdateEvent):
        return event.final
    if isinstance(event, Task):
        return event.status.state in TERMINAL_STATES or event.status.state in PAUSED_STATES
    return isinstance(event, Message)


def _encoded(event: Event) -> tuple[dict[str, str], bool]:
    """The stream entry of ``event`` (its kind and JSON) and whether it is final."""
    body = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"kind": str(body["kind"]), "event": json.dumps(body)}, is_final_event(event)


def _decoded(fields: dict[str, str]) -> Event:
    """The event of a stream entry (``ValueError`` for an entry of no known kind)."""
    model = _KINDS.get(fields.get("kind", ""))
    if model is None:
        raise ValueError("a relayed event of an unknown kind")
    return model.model_validate_json(fields["event"])


class EventRelay:
    """Publishes task events to Redis Streams and follows them (see the module docstring).

    ``url`` is a ``redis://`` URL; ``client`` (instead) a ``redis.asyncio.Redis`` made with
    ``decode_responses=True``, closed by ``aclose`` all the same.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | None = None,
        prefix: str = DEFAULT_PREFIX,
        maxlen: int | None = None,
        expire: float | None = None,
        block: float = DEFAULT_BLOCK,
        buffer: int = DEFAULT_BUFFER,
        cancel_channel: str = DEFAULT_CANCEL_CHANNEL,
        retry_backoff: float = 0.1,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give EventRelay a Redis URL or a client, not both")
        maxlen = maxlen if maxlen is not None else relay_maxlen_setting() or DEFAULT_MAXLEN
        expire = expire if expire is not None else relay_expire_setting() or DEFAULT_EXPIRE
        if maxlen < 1 or expire <= 0 or block <= 0 or buffer < 1 or retry_backoff <= 0:
            raise ValueError(
                "EventRelay's maxlen, expire, block, buffer and retry_backoff must be positive"
            )
        if client is None:
            assert url is not None  # noqa: S101 - checked above
            client = Redis.from_url(
                url,
                decode_responses=True,
                socket_connect_timeout=_CONNECT_TIMEOUT,
                socket_timeout=block + 5.0,
                retry=_reconnect_once(),
            )
        self.redis: Redis = client
        self.prefix = prefix
        self.maxlen = maxlen
        self.expire = expire
        self.block = block
        self._buffer = buffer
        self._pending: deque[tuple[str, dict[str, str], bool]] = deque()
        self._wake = asyncio.Event()
        self._drained = asyncio.Event()  # nothing posted waits to be published
        self._drained.set()
        self._writer: asyncio.Task[None] | None = None
        self._failing = False  # a WARNING was logged; the next one after a success
        self._dropping = False
        self.cancel_channel = cancel_channel
        self.retry_backoff = retry_backoff
        self.listening = asyncio.Event()
        """Set while ``listen_cancels`` is subscribed (cleared when Redis is lost)."""

    def key(self, task_id: str) -> str:
        """The stream of ``task_id``."""
        return f"{self.prefix}{task_id}"

    async def publish(self, task_id: str, event: Event) -> str:
        """Append ``event`` to the task's stream; its stream id. The final event also sets
        the stream's expiry. ``RelayUnavailableError`` when Redis does not answer."""
        fields, final = _encoded(event)
        ids = await self._write([(task_id, fields, final)])
        return ids[0]

    async def _write(self, batch: list[tuple[str, dict[str, str], bool]]) -> list[str]:
        pipe = self.redis.pipeline(transaction=False)
        for task_id, fields, final in batch:
            key = self.key(task_id)
            pipe.xadd(key, fields, maxlen=self.maxlen, approximate=True)  # type: ignore[arg-type]
            if final:
                pipe.expire(key, max(1, round(self.expire)))
        try:
            replies = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise RelayUnavailableError from exc
        return [str(reply) for reply in replies if isinstance(reply, str)]

    def post(self, task_id: str, event: Event) -> None:
        """Publish ``event`` in the background, after every event posted before it; never
        waits, never raises (a failure is one WARNING, see the module docstring)."""
        if len(self._pending) >= self._buffer:
            if not self._dropping:
                self._dropping = True
                logger.warning("event relay: too many events wait for Redis; dropping events")
            return
        fields, final = _encoded(event)
        self._pending.append((task_id, fields, final))
        self._drained.clear()
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_pending())

    async def _write_pending(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                count = min(len(self._pending), _BATCH)
                batch = [self._pending.popleft() for _ in range(count)]
                self._dropping = False
                try:
                    await self._write(batch)
                except RelayUnavailableError as exc:
                    if not self._failing:
                        self._failing = True
                        cause = type(exc.__cause__).__name__
                        logger.warning(
                            "event relay: Redis did not answer (%s); events of running "
                            "tasks are not relayed to other replicas until it answers again",
                            cause,
                        )
                else:
                    self._failing = False
            self._drained.set()

    async def flush(self, within: float = 5.0) -> None:
        """Wait (at most ``within`` seconds) until every posted event was published or
        dropped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drained.wait(), within)

    async def last(self, task_id: str) -> tuple[str, Event] | None:
        """The task's latest entry (stream id, event), or ``None`` when it has none.
        ``RelayUnavailableError`` when Redis does not answer."""
        try:
            entries = await self.redis.xrevrange(self.key(task_id), "+", "-", count=1)
        except (RedisError, OSError) as exc:
            raise RelayUnavailableError from exc
        if not entries:
            return None
        entry_id, fields = cast("_Entry", entries[0])
        return entry_id, _decoded(fields)

    async def follow(
        self,
        task_id: str,
        after: str = "0-0",
        *,
        idle: Callable[[], Awaitable[bool]] | None = None,
    ) -> AsyncIterator[tuple[str, Event]]:
        """The task's events after stream id ``after`` (``"0-0"``: all kept), in order, up
        to and including its final event. ``idle`` is awaited after each ``block`` seconds
        without an event; ``True`` ends the iteration. ``RelayUnavailableError`` when Redis
        does not answer."""
        key = self.key(task_id)
        last = after
        block = max(1, round(self.block * 1000))
        while True:
            read = asyncio.ensure_future(self.redis.xread({key: last}, count=_BATCH, block=block))
            read.add_done_callback(_retrieved)
            try:
                # Waiting on the read through asyncio.wait makes a cancellation of this
                # follower take effect at once: redis-py can absorb a cancel that lands in a
                # blocked read, and the read then goes on until its block ends.
                await asyncio.wait({read})
            except asyncio.CancelledError:
                read.cancel()
                raise
            try:
                reply = read.result()
            except (RedisError, OSError) as exc:
                raise RelayUnavailableError from exc
            if not reply:
                if idle is not None and await idle():
                    return
                continue
            for _key, entries in cast("list[tuple[str, list[_Entry]]]", reply):
                for entry_id, fields in entries:
                    last = entry_id
                    event = _decoded(fields)
                    yield last, event
                    if is_final_event(event):
                        return

    async def request_cancel(self, task_id: str) -> int:
        """Ask every listening replica to cancel ``task_id``; how many replicas heard it.
        ``RelayUnavailableError`` when Redis does not answer."""
        try:
            heard = await self.redis.publish(self.cancel_channel, task_id)
        except (RedisError, OSError) as exc:
            raise RelayUnavailableError from exc
        return int(heard)

    async def listen_cancels(self, on_request: Callable[[str], None]) -> None:
        """Hand each task id a replica asks to cancel to ``on_request`` (which must not
        block), until cancelled; Redis failures are logged once and retried with backoff,
        never raised (see the module docstring)."""
        backoff = self.retry_backoff
        failing = False
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.cancel_channel)
                self.listening.set()
                if failing:
                    failing = False
                    logger.info("cancel requests: Redis answers again")
                backoff = self.retry_backoff
                while True:
                    message = await pubsub.get_message(timeout=self.block)
                    if message is not None and isinstance(message.get("data"), str):
                        on_request(message["data"])
            except (RedisError, OSError) as exc:
                self.listening.clear()
                if not failing:
                    failing = True
                    logger.warning(
                        "cancel requests: Redis did not answer (%s); cancels sent to other "
                        "replicas do not reach the tasks run here until it answers again",
                        type(exc).__name__,
                    )
            finally:
                self.listening.clear()
                with contextlib.suppress(RedisError, OSError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def aclose(self, within: float = 5.0) -> None:
        """Publish what is still posted (at most ``within`` seconds), then close the client."""
        await self.flush(within)
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        await self.redis.aclose()
