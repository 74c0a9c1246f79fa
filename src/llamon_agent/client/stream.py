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
as they arrive; after one, their content comes from the task as the server stores it: a
resubscribe does not replay what was sent before it attached (a2a-sdk's servers, llamon's
included, send only the events after it), but the stored task holds every chunk. Each
event of the resubscribed stream (its first one, and every artifact event) only tells the
client to read the task again; a chunk sent while the client was reattaching therefore
arrives with the task's next event, at the latest with its end. The parts the caller was
given are compared with the stored artifact: only the parts past them are yielded; an
artifact whose stored parts no longer begin with them (the agent replaced it) is yielded
whole with ``append=False``. The end is yielded (or raised) once, after every chunk.
Status events are not repeated (the same state and message twice is yielded once), and a
status the task passed through while the caller was disconnected is not replayed: its
current one is.

a2a-sdk 0.3's own server (not llamon's) stores a chunk twice when a client resubscribes
while the task streams (its request and its resubscriber extend one shared artifact); the
caller then holds the task as that server stores it, as ``tasks/get`` answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from llamon_agent.client.faults import (
    STREAM_FAULTS,
    downstream_fault,
    dropping_after,
    failed_task,
    unavailable_answer,
)
from llamon_agent.client.result import RemoteResult
from llamon_agent.client.retry import RetryPolicy, call_with_retry
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.events import emit, observed
from llamon_agent.core.faults import DownstreamFailed, DownstreamStreamDrop, DownstreamUnavailable
from llamon_agent.core.scrub import scrub_text

if TYPE_CHECKING:
    from llamon_agent.client.agent_client import AgentClient

__all__ = [
    "ArtifactChunk",
    "FinalEvent",
    "StatusEvent",
    "StreamEvent",
    "stream_events",
]

logger = logging.getLogger("llamon_agent.client")

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


class _Refused(Exception):
    """The server cannot follow the task (resubscribe refused, or ended at once)."""


@dataclass(slots=True)
class _Follower:
    """One streamed call: what the caller was given, and how to read the task again."""

    client: AgentClient
    card: AgentCard
    policy: RetryPolicy
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
        self,
        artifact_id: str,
        name: str | None,
        full: list[Part],
        *,
        last: bool,
        stored: bool = False,
    ) -> ArtifactChunk | None:
        """The chunk that brings the caller from what it holds to ``full`` (``stored``:
        the artifact as the store holds it, which may lag what the stream gave)."""
        held = self.delivered.get(artifact_id)
        if held is not None and full[: len(held)] == held:
            new, append = full[len(held) :], True
        elif stored and held is not None and held[: len(full)] == full:
            # a store read from before the stream's last chunks were saved: nothing new,
            # and the caller keeps what it has
            new, append, full = [], True, held
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
        before = list(self.task.artifacts or []) if self.task is not None else []
        self.task = snapshot.model_copy(deep=True)
        found: list[StreamEvent] = []
        for artifact in self.task.artifacts or []:
            parts = list(artifact.parts)
            chunk = self._chunk(artifact.artifact_id, artifact.name, parts, last=False, stored=True)
            if chunk is not None:
                found.append(chunk)
            artifact.parts = list(self.delivered[artifact.artifact_id])  # never behind
        stored = {artifact.artifact_id for artifact in self.task.artifacts or []}
        behind = [artifact for artifact in before if artifact.artifact_id not in stored]
        if behind:  # given by the stream, not saved yet when the store was read
            self.task.artifacts = [*(self.task.artifacts or []), *behind]
        status = self._status(snapshot.status)
        if status is not None:
            found.append(status)
        return found

    def has_news(self, snapshot: Task) -> bool:
        """Whether ``snapshot`` holds anything the caller was not given."""
        if snapshot.status.state in _ENDS or _status_key(snapshot.status) != self.status:
            return True
        for artifact in snapshot.artifacts or []:
            parts, held = list(artifact.parts), self.delivered.get(artifact.artifact_id)
            if held is None or (parts != held and held[: len(parts)] != parts):
                return True  # new parts, or a replaced artifact; not a lagging read
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

    async def poll(self) -> Task:
        """Read the task (one attempt, retried by the policy): the stored task when it holds
        something the caller was not given; else ``remote_stream_lost``."""
        snapshot = await self.get()
        if self.has_news(snapshot):
            return snapshot
        raise self.lost()

    async def _retried(self, call: Callable[[], Awaitable[Task]], operation: str) -> Task:
        return await call_with_retry(
            call,
            policy=self.policy,
            idempotent=True,
            sleep=self.client.clock.sleep,
            clock=self.client.clock.monotonic,
            rng=self.client.clock.random,
            operation=operation,
        )

    async def recover(self) -> AsyncIterator[StreamEvent]:
        """Follow the task after a drop until its end (see the module docstring).

        Each round reads the task (``tasks/get``, retried by the policy), gives the caller
        what it holds, then follows it (``tasks/resubscribe``); a server that cannot be
        followed is polled (``tasks/get`` until it shows news, retried by the policy). A
        round that gives the caller nothing counts as idle; after ``max_attempts`` idle
        rounds in a row the task is lost (``remote_stream_lost``).
        """
        logger.info(
            "agent %r, task %s: the stream broke before the task's end; following it again",
            self.card.name,
            self.known.id,
        )
        self._resume_event("stream_broke")
        idle = 0
        snapshot = await self._retried(self.get, "tasks/get")
        while True:
            idle += 1
            for found in self.reconcile(snapshot):
                idle = 0
                yield found
            if self.ended:
                return
            if idle > self.policy.max_attempts:
                raise self.lost()
            try:
                async for found in self._follow():
                    idle = 0
                    yield found
                if self.ended:
                    return
            except _Dropped:
                logger.info(
                    "task %s: the resubscribed stream broke; reading it again", self.known.id
                )
                self._resume_event("resubscribe_broke")
                snapshot = await self._retried(self.get, "tasks/get")
                continue
            except _Refused:
                logger.info("task %s: it cannot be followed; polling it", self.known.id)
                self._resume_event("polling")
            snapshot = await self._retried(self.poll, "tasks/get")

    def _resume_event(self, how: str) -> None:
        """A ``remote.resume`` runner event: why the called task is followed again."""
        if observed():
            metadata = {"resume": how, "remote_task_id": scrub_text(self.known.id, max_length=200)}
            emit("remote.resume", Stage.A2A_CALL, metadata=metadata)

    async def _follow(self) -> AsyncIterator[StreamEvent]:
        """A resubscribed stream: each artifact event (and the first event, whatever it is)
        says the task moved; its content is read from the stored task (the stream has no
        positions, and missed what came before it attached). Status events are yielded. A
        stream silent for ``QUIET_CHECK`` seconds has the task read again (a resubscriber
        can be left waiting on a run that already ended).

        Raises ``_Refused`` when the server cannot follow the task (the stream is refused
        or ends at once), ``_Dropped`` when it breaks before the task's end.
        """
        _, transport, context = await self.client._prepared()
        events = transport.resubscribe(TaskIdParams(id=self.known.id), context=context)
        reader = _with_quiet(events, QUIET_CHECK)
        received = 0
        try:
            while not self.ended:
                try:
                    event = await anext(reader)
                except StopAsyncIteration:
                    raise (_Refused if received == 0 else _Dropped) from None
                except A2AClientJSONRPCError as exc:
                    if received == 0 and exc.error.code in _NO_FOLLOW:
                        raise _Refused from exc
                    raise self._error(exc) from exc
                except Exception as exc:
                    raise _dropped_or_error(self, exc) from exc
                if event is None:  # quiet for a while: read the task
                    for found in self.reconcile(await self.get()):
                        yield found
                    continue
                received += 1
                if isinstance(event, Message):
                    self.message = event
                    return
                if isinstance(event, TaskStatusUpdateEvent) and not _ends(event) and received > 1:
                    for found in self.live(event):
                        yield found
                    continue
                snapshot = await self.get()
                if isinstance(event, TaskStatusUpdateEvent) and snapshot.status.state not in _ENDS:
                    snapshot.status = event.status  # the end, before the store said so
                for found in self.reconcile(snapshot):
                    yield found
        finally:
            await reader.aclose()
            await events.aclose()


QUIET_CHECK: Final = 5.0
"""Seconds a resubscribed stream may stay silent before the task is read again."""


async def _with_quiet(events: AsyncIterator[_Event], quiet: float) -> AsyncGenerator[_Event | None]:
    """``events``, with a None after each ``quiet`` seconds without one."""
    pending: asyncio.Future[_Event] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=quiet)
            if not done:
                yield None
                continue
            arrived, pending = pending, None
            try:
                event = arrived.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


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
        raise _dropped_or_error(follower, exc) from exc


def _dropped_or_error(follower: _Follower, exc: Exception) -> Exception:
    """``_Dropped`` for a broken connection (a retriable transport failure), else the
    failure, typed."""
    error = follower._error(exc)
    if error.jsonrpc_code is None and error.code in _DROP_CODES and error.retriable:
        return _Dropped()
    return error


_DROP_CODES: Final = frozenset({ErrorCode.UPSTREAM_UNAVAILABLE, ErrorCode.UPSTREAM_TIMEOUT})


async def _one(event: _Event) -> AsyncGenerator[_Event]:
    yield event


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
) -> AsyncGenerator[StreamEvent]:
    """``message/stream`` of ``message`` through ``client``: the events of the module
    docstring, recovering from a dropped connection. Under an active ``FaultPlan`` a
    downstream fault naming the agent is applied when the stream is opened
    (``client.faults``): a dropped stream is recovered like a real one.

    Before anything is sent, a card that does not declare ``capabilities.streaming``, or a
    message that does not fit the card (``AgentClient.check``), raises
    ``CardMismatchError``. Opening the stream is retried under ``policy`` (the same
    ``messageId`` each time); every wait takes its time from the client's ``clock``
    (``RetryClock``).
    """
    card = await client.card()
    _check_streaming(card)
    client.check(card, message, skill)
    follower = _Follower(client, card, policy or client.retry)
    params = MessageSendParams(message=message)

    async def open_stream() -> tuple[AsyncGenerator[_Event], _Event]:
        _, transport, context = await client._prepared()
        fault = downstream_fault(card.name, client._url, STREAM_FAULTS)
        events: AsyncGenerator[_Event]
        if isinstance(fault, DownstreamUnavailable):
            raise client._error(
                unavailable_answer(client._url),
                task_id=message.task_id,
                context_id=message.context_id,
            )
        if isinstance(fault, DownstreamFailed):
            events = _one(failed_task(message.task_id, message.context_id))
        else:
            events = transport.send_message_streaming(params, context=context)
        if isinstance(fault, DownstreamStreamDrop):
            events = dropping_after(events, fault.after_events)
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
        sleep=client.clock.sleep,
        clock=client.clock.monotonic,
        rng=client.clock.random,
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
