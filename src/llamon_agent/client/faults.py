"""The agent client's fault seam: a downstream fault of the active ``FaultPlan`` made into
what the wire would really have given.

``AgentClient`` asks ``downstream_fault(card_name, url)`` once per attempt, where the
HTTP answer would arrive, so the client's own handling (retries, the ``RemoteAgentError``
family, a stream's recovery) is what runs:

==========================  =============================================================
fault ``kind``              what the attempt gets
==========================  =============================================================
``downstream_unavailable``  a2a-sdk's ``A2AClientHTTPError`` 503, as its transport raises
                            it for an HTTP 503 answer (every call; retried by the policy)
``downstream_failed``       a ``message/send``, ``tasks/get`` or ``message/stream`` is
                            answered with a task that ended ``failed`` with a status
                            text and no error data, as a plain A2A agent ends one:
                            ``remote_error_from_task`` gives ``INTERNAL_ERROR`` /
                            ``remote_task_failed``, not retriable
``downstream_stream_drop``  the ``message/stream`` connection breaks after
                            ``after_events`` events, as a2a-sdk's transport reports a
                            dropped connection (``A2AClientHTTPError`` 503 from
                            ``httpx.RemoteProtocolError``); the resubscribed stream is
                            left alone, so the client's recovery runs
==========================  =============================================================

Without an active plan (every normal run) ``downstream_fault`` is one context lookup.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final, TypeVar

import httpx
from a2a.client.errors import A2AClientHTTPError
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TextPart

from llamon_agent.core.faults import DownstreamFault, active_faults

__all__ = [
    "CALL_FAULTS",
    "FAILED_TASK_TEXT",
    "STREAM_FAULTS",
    "downstream_fault",
    "dropped_connection",
    "dropping_after",
    "failed_task",
    "unavailable_answer",
]

E = TypeVar("E")

FAILED_TASK_TEXT: Final = "The agent could not complete the task."
"""The status text of an injected failed task."""


CALL_FAULTS: Final = frozenset({"downstream_unavailable", "downstream_failed"})
"""The downstream faults a call that is not a stream can suffer."""
STREAM_FAULTS: Final = CALL_FAULTS | {"downstream_stream_drop"}
"""The downstream faults a ``message/stream`` can suffer."""


def downstream_fault(
    card_name: str | None, url: str | None, kinds: frozenset[str] = CALL_FAULTS
) -> DownstreamFault | None:
    """The active plan's fault of one of ``kinds`` for the agent named ``card_name`` or at
    ``url`` (counted as fired), or ``None``."""
    plan = active_faults()
    if plan is None:
        return None
    return plan.for_downstream(card_name, url, url.rstrip("/") if url else None, kinds=kinds)


def unavailable_answer(url: str) -> A2AClientHTTPError:
    """What a2a-sdk's JSON-RPC transport raises when the agent answers HTTP 503."""
    response = httpx.Response(503, request=httpx.Request("POST", url))
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        error = A2AClientHTTPError(503, str(exc))
        error.__cause__ = exc
        return error
    raise AssertionError("a 503 response raises")  # pragma: no cover


def dropped_connection() -> A2AClientHTTPError:
    """What a2a-sdk's transport raises when a stream's connection drops mid-body."""
    cause = httpx.RemoteProtocolError(
        "peer closed connection without sending complete message body (incomplete chunked read)"
    )
    error = A2AClientHTTPError(503, f"Network communication error: {cause}")
    error.__cause__ = cause
    return error


def failed_task(task_id: str | None, context_id: str | None) -> Task:
    """A task that ended ``failed`` the way a plain A2A agent ends one: a status text,
    no error data."""
    task_id = task_id or uuid.uuid4().hex
    context_id = context_id or uuid.uuid4().hex
    message = Message(
        role=Role.agent,
        parts=[Part(root=TextPart(text=FAILED_TASK_TEXT))],
        message_id=uuid.uuid4().hex,
        task_id=task_id,
        context_id=context_id,
    )
    return Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=TaskState.failed, message=message),
    )


async def dropping_after(events: AsyncIterator[E], after: int) -> AsyncGenerator[E]:
    """``events`` until ``after`` of them were given, then ``dropped_connection()``."""
    given = 0
    try:
        while True:
            if given >= after:
                raise dropped_connection()
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            given += 1
            yield event
    finally:
        closing = getattr(events, "aclose", None)
        if closing is not None:
            await closing()
