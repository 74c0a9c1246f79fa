"""Streaming a call to another agent: typed events, and recovery after a dropped connection.

``AgentClient.stream(...)`` (a thin wrapper of :func:`stream_events`) sends
``message/stream`` and yields, in order:

* :class:`StatusEvent` -- the task's state moved on (``working``, with the agent's progress
  text); the task's last status is not one of these, it is the end;
* :class:`ArtifactChunk` -- new parts of an artifact (``parts`` holds only what the caller
  has not been given yet; ``append`` False means "drop what you hold for this artifact
  first");
* :class:`FinalEvent` -- the last event: its ``result`` is the ``RemoteResult`` of the
  completed (or canceled) task, or of a task paused for input (``result.needs_input``).

A task that ends ``failed`` or ``rejected`` raises the ``RemoteAgentError`` family
(``remote_error_from_task``) after the chunks already yielded: they stay delivered. A
JSON-RPC error in the stream raises that error, typed, the same way.

What is guaranteed when the connection drops
--------------------------------------------
A connection that breaks before the task's end (a read error, a reset, a timeout, an SSE
stream that ends without a final event) does not end the iteration: the client reads the
task again (``tasks/get`` by its id) and follows it on (``tasks/resubscribe``), or, when
the server cannot be followed (no resubscribe for that task: after a restart, on another
replica, a server without it), polls ``tasks/get``. Reconnecting is retried by the call's
``RetryPolicy`` (backoff with full jitter, ``max_attempts``, ``deadline``); the budget
starts again whenever the task shows progress, so a long task that keeps moving is
followed to its end, and one that shows none for a whole budget raises the last failure
(``remote_stream_lost`` when the server answered but could not be followed), carrying the
task id for a later ``AgentClient.get``.

Every part of every artifact reaches the caller exactly once and in order -- no duplicate,
no gap -- as the called agent's task holds it. Before a drop, chunks come from the stream
as they arrive; after one, their content comes from the task as the server stores it
(a resubscribe does not replay what was sent before it attached, and a2a-sdk's servers
send only the events after it; the stored task holds every chunk), and each event of the
resubscribed stream only tells the client to read it again. Parts the caller was given
are compared with the stored artifact: only the parts past them are yielded; an artifact
whose stored parts no longer begin with what was yielded (the agent replaced it) is
yielded whole with ``append=False``. Status events are not repeated (the same state and
message twice is yielded once), but a status seen only while disconnected is not
replayed: the task's current status is.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    AgentCard,
    Message,
    MessageSendParams,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
)
from a2a.utils.helpers import append_artifact_to_task

from llamon_agent.client.errors import (
    RemoteAgentError,
    RemoteUnavailableError,
    remote_error_from_task,
)
from llamon_agent.client.result import RemoteResult
from llamon_agent.client.retry import RetryPolicy, call_with_retry
from llamon_agent.core.codes import ErrorCode

if TYPE_CHECKING:
    from llamon_agent.client.agent_client import AgentClient

__all__ = [
    "ArtifactChunk",
    "FinalEvent",
    "StatusEvent",
    "StreamEvent",
    "stream_events",
]

_FAILED: Final = frozenset({TaskState.failed, TaskState.rejected})
_TERMINAL: Final = frozenset(
    {TaskState.completed, TaskState.canceled, TaskState.failed, TaskState.rejected}
)
_PAUSED: Final = frozenset({TaskState.input_required, TaskState.auth_required})
_ENDS: Final = _TERMINAL | _PAUSED

_NO_FOLLOW: Final = frozenset({-32602, -32001, -32004})
"""JSON-RPC codes a resubscribe is refused with when the task cannot be followed: invalid
params (a2a-sdk: the task already ended), task not found (no stream for it in this
process), unsupported operation."""

_Event = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


@dataclass(frozen=True, slots=True)
class StatusEvent:
    """The called agent's task moved on: ``state`` (``working``...), ``text`` joins the
    TextParts of its status ``message`` ("" without one)."""

    state: TaskState
    text: str
    message: Message | None
    task_id: str
    context_id: str


@dataclass(frozen=True, slots=True)
class ArtifactChunk:
    """New parts of one artifact, each given to the caller once.

    ``parts`` are the parts the caller has not been given yet (possibly none, on a closing
    event that only says ``last_chunk``); ``text`` joins their TextParts. ``append`` True:
    add them to what you hold for ``artifact_id``; False: this artifact starts here (new,
    or replaced by the agent: drop what you held).
    """

    artifact_id: str
    name: str | None
    parts: tuple[Part, ...]
    text: str
    append: bool
    last_chunk: bool
    task_id: str


@dataclass(frozen=True, slots=True)
class FinalEvent:
    """The stream's last event: the task completed (or was canceled) or paused for input
    (``result.needs_input``); ``result`` holds every artifact, whole."""

    result: RemoteResult


StreamEvent = StatusEvent | ArtifactChunk | FinalEvent
"""What ``AgentClient.stream`` yields."""


def _text(parts: Sequence[Part]) -> str:
    return "".join(p.root.text for p in parts if isinstance(p.root, TextPart))


def _status_key(status: TaskStatus) -> tuple[TaskState, str | None]:
    message = status.message
    return status.state, None if message is None else message.message_id


class _Dropped(Exception):
    """The connection ended before the task's end (no failure of the task)."""


@dataclass(slots=True)
class _Step:
    """What one reconnection found: the task as stored, and the resubscribed stream."""

    snapshot: Task
    events: AsyncGenerator[_Event] | None = None
    first: _Event | None = None


@dataclass(slots=True)
class _Follower:
    """One streamed call: what the caller was given, and how to read the task again."""

    client: AgentClient
    card: AgentCard
    policy: RetryPolicy
    sleep: Callable[[float], Awaitable[None]]
    clock: Callable[[], float]
    rng: Callable[[], float]
    task: Task | None = None
    delivered: dict[str, list[Part]] = field(default_factory=dict)
    status: tuple[TaskState, str | None] | None = None
    message: Message | None = None

    @property
    def known(self) -> Task:
        """The task as the caller knows it (set by the stream's first event)."""
        if self.task is None:  # pragma: no cover - the first event names the task
            raise RuntimeError("no task yet")
        return self.task

    # -- what the caller is given --------------------------------------------------------

    def _chunk(
        self, artifact_id: str, name: str | None, full: list[Part], *, last: bool
    ) -> ArtifactChunk | None:
        """The chunk that brings the caller from what it holds to ``full``."""
        held = self.delivered.get(artifact_id)
        if held is not None and full[: len(held)] == held:
            new, append = full[len(held) :], True
        else:
            new, append = full, False
        self.delivered[artifact_id] = list(full)
        if not new and append and not last:
            return None
        return ArtifactChunk(
            artifact_id=artifact_id,
            name=name,
            parts=tuple(new),
            text=_text(new),
            append=append,
            last_chunk=last,
            task_id=self.known.id,
        )

    def _status(self, status: TaskStatus) -> StatusEvent | None:
        key = _status_key(status)
        if key == self.status or status.state in _ENDS:
            return None
        self.status = key
        message = status.message
        return StatusEvent(
            state=status.state,
            text="" if message is None else _text(message.parts),
            message=message,
            task_id=self.known.id,
            context_id=self.known.context_id,
        )

    def live(self, event: _Event) -> list[StreamEvent]:
        """Apply one event of an unbroken stream (every event since the task began)."""
        if isinstance(event, Message):
            self.message = event
            return []
        if isinstance(event, Task):
            return self.reconcile(event)
        if self.task is None:
            self.task = Task(id=event.task_id, context_id=event.context_id, status=_SUBMITTED)
        if isinstance(event, TaskStatusUpdateEvent):
            self.task.status = event.status
            found = self._status(event.status)
            return [found] if found is not None else []
        held = self.delivered.get(event.artifact.artifact_id)
        append_artifact_to_task(self.task, event.model_copy(deep=True))
        full = list(event.artifact.parts)
        if event.append and held is not None:
            full = held + full
        chunk = self._chunk(
            event.artifact.artifact_id, event.artifact.name, full, last=bool(event.last_chunk)
        )
        return [chunk] if chunk is not None else []

    def reconcile(self, snapshot: Task) -> list[StreamEvent]:
        """Give the caller what ``snapshot`` (the task as stored) holds beyond what it has."""
        self.task = snapshot.model_copy(deep=True)
        found: list[StreamEvent] = []
        for artifact in snapshot.artifacts or []:
            parts = list(artifact.parts)
            chunk = self._chunk(artifact.artifact_id, artifact.name, parts, last=False)
            if chunk is not None:
                found.append(chunk)
        status = self._status(snapshot.status)
        if status is not None:
            found.append(status)
        return found

    def has_news(self, snapshot: Task) -> bool:
        """Whether ``snapshot`` holds anything the caller was not given."""
        if snapshot.status.state in _ENDS or _status_key(snapshot.status) != self.status:
            return True
        for artifact in snapshot.artifacts or []:
            if list(artifact.parts) != self.delivered.get(artifact.artifact_id):
                return True
        return False

    @property
    def ended(self) -> bool:
        return self.message is not None or (
            self.task is not None and self.task.status.state in _ENDS
        )

    def end(self) -> FinalEvent:
        """The final event; a failed or rejected task raises instead."""
        if self.message is not None:
            return FinalEvent(RemoteResult.from_message(self.message))
        task = self.known
        if task.status.state in _FAILED:
            raise remote_error_from_task(task, agent=self.card.name)
        return FinalEvent(RemoteResult.from_task(task))

    # -- the wire --------------------------------------------------------------------------

    def _error(self, exc: Exception) -> RemoteAgentError:
        task_id = self.task.id if self.task is not None else None
        context_id = self.task.context_id if self.task is not None else None
        return self.client._error(exc, task_id=task_id, context_id=context_id)

    async def get(self) -> Task:
        _, transport, context = await self.client._prepared()
        try:
            return await transport.get_task(TaskQueryParams(id=self.known.id), context=context)
        except Exception as exc:
            raise self._error(exc) from exc

    def lost(self) -> RemoteUnavailableError:
        task = self.known
        return RemoteUnavailableError(
            f"agent {self.card.name!r}: the stream of its task was cut and the task cannot "
            "be followed again yet (it may still be running; read it with get(task_id))",
            code=ErrorCode.UPSTREAM_UNAVAILABLE,
            reason="remote_stream_lost",
            retriable=True,
            task_id=task.id,
            context_id=task.context_id,
            agent=self.card.name,
        )

    async def reconnect(self) -> _Step:
        """Read the task again and resubscribe to it (one attempt, retried by the policy).

        Returns the stored task, with the resubscribed stream and its first event when the
        server can be followed, or alone when it shows progress or its end. Raises
        ``remote_stream_lost`` when it shows neither and cannot be followed.
        """
        snapshot = await self.get()
        if snapshot.status.state in _ENDS:
            return _Step(snapshot)
        _, transport, context = await self.client._prepared()
        events = transport.resubscribe(TaskIdParams(id=self.known.id), context=context)
        try:
            return _Step(snapshot, events, await anext(events))
        except StopAsyncIteration:
            pass  # the stream ended at once: the task ended in between, or cannot be followed
        except A2AClientJSONRPCError as exc:
            await events.aclose()
            if exc.error.code not in _NO_FOLLOW:
                raise self._error(exc) from exc
        except Exception as exc:
            await events.aclose()
            raise self._error(exc) from exc
        except BaseException:
            await events.aclose()
            raise
        snapshot = await self.get()
        if self.has_news(snapshot):
            return _Step(snapshot)
        raise self.lost()

    async def recover(self) -> AsyncIterator[StreamEvent]:
        """Follow the task after a drop until its end (see the module docstring).

        A round (one reconnection) that gives the caller nothing new counts as idle; after
        ``max_attempts`` idle rounds in a row the task is lost (``remote_stream_lost``).
        """
        idle = 0
        while not self.ended:
            if idle >= self.policy.max_attempts:
                raise self.lost()
            step = await call_with_retry(
                self.reconnect,
                policy=self.policy,
                idempotent=True,
                sleep=self.sleep,
                clock=self.clock,
                rng=self.rng,
                operation="tasks/resubscribe",
            )
            idle += 1
            for found in self.reconcile(step.snapshot):
                idle = 0
                yield found
            if step.events is None or step.first is None:
                continue
            try:
                async for found in self._follow(step.first, step.events):
                    idle = 0
                    yield found
            except _Dropped:
                continue
            finally:
                await step.events.aclose()

    async def _follow(
        self, first: _Event, events: AsyncGenerator[_Event]
    ) -> AsyncIterator[StreamEvent]:
        """A resubscribed stream: each event says the task moved; its content is read from
        the stored task (the stream has no positions, and missed what came before it)."""
        event: _Event | None = first
        while event is not None and not self.ended:
            if isinstance(event, Message):
                self.message = event
                return
            if isinstance(event, TaskStatusUpdateEvent) and not _ends(event):
                for found in self.live(event):
                    yield found
            else:
                snapshot = await self.get()
                if isinstance(event, TaskStatusUpdateEvent) and snapshot.status.state not in _ENDS:
                    snapshot.status = event.status  # the end, before the store said so
                for found in self.reconcile(snapshot):
                    yield found
            if self.ended:
                return
            event = await _next(events, self)


_SUBMITTED: Final = TaskStatus(state=TaskState.submitted)


def _ends(event: TaskStatusUpdateEvent) -> bool:
    return bool(event.final) or event.status.state in _ENDS


async def _next(events: AsyncGenerator[_Event], follower: _Follower) -> _Event | None:
    """The stream's next event; ``_Dropped`` when the connection broke (or the stream ended)
    before the task's end; a JSON-RPC error (or any other failure) raised typed."""
    try:
        return await anext(events)
    except StopAsyncIteration:
        if follower.ended:
            return None
        raise _Dropped from None
    except A2AClientJSONRPCError as exc:
        raise follower._error(exc) from exc
    except Exception as exc:
        error = follower._error(exc)
        if error.jsonrpc_code is None and error.code in _DROP_CODES and error.retriable:
            raise _Dropped from exc
        raise error from exc


_DROP_CODES: Final = frozenset({ErrorCode.UPSTREAM_UNAVAILABLE, ErrorCode.UPSTREAM_TIMEOUT})


def _check_streaming(card: AgentCard) -> None:
    from llamon_agent.client.agent_client import CardMismatchError

    if not (card.capabilities and card.capabilities.streaming):
        raise CardMismatchError(
            f"agent {card.name!r} does not stream: its card does not declare "
            "capabilities.streaming (use send() instead)"
        )


async def stream_events(
    client: AgentClient,
    message: Message,
    *,
    skill: str | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: Callable[[], float] = random.random,
) -> AsyncGenerator[StreamEvent]:
    """``message/stream`` of ``message`` through ``client``: the events of the module
    docstring, recovering from a dropped connection.

    Before anything is sent, a card that does not declare ``capabilities.streaming``, or a
    message that does not fit the card (``AgentClient.check``), raises
    ``CardMismatchError``. Opening the stream is retried under ``policy`` (the same
    ``messageId`` each time); ``sleep``, ``clock`` and ``rng`` replace ``asyncio.sleep``,
    ``time.monotonic`` and ``random.random`` for every wait (tests).
    """
    card = await client.card()
    _check_streaming(card)
    client.check(card, message, skill)
    follower = _Follower(client, card, policy or client.retry, sleep, clock, rng)
    params = MessageSendParams(message=message)

    async def open_stream() -> tuple[AsyncGenerator[_Event], _Event]:
        _, transport, context = await client._prepared()
        events = transport.send_message_streaming(params, context=context)
        try:
            return events, await anext(events)
        except StopAsyncIteration:
            await events.aclose()
            raise RemoteUnavailableError(
                f"agent {card.name!r} ended the stream before its first event",
                reason="a2a_invalid_response",
                agent=card.name,
            ) from None
        except BaseException as exc:
            await events.aclose()
            if isinstance(exc, Exception):
                raise client._error(
                    exc, task_id=message.task_id, context_id=message.context_id
                ) from exc
            raise

    events, first = await call_with_retry(
        open_stream,
        policy=follower.policy,
        idempotent=True,
        sleep=sleep,
        clock=clock,
        rng=rng,
        operation="message/stream",
    )
    try:
        event: _Event | None = first
        while event is not None:
            for found in follower.live(event):
                yield found
            if follower.ended or (isinstance(event, TaskStatusUpdateEvent) and _ends(event)):
                break
            event = await _next(events, follower)
    except _Dropped:
        if follower.task is None:  # pragma: no cover - the first event names the task
            raise follower.lost() from None
    finally:
        await events.aclose()
    if not follower.ended:
        async for found in follower.recover():
            yield found
    yield follower.end()
