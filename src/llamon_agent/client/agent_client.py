"""``AgentClient``: call another A2A agent and get its answer, or a typed failure.

Built on a2a-sdk's JSON-RPC transport over one pooled ``httpx.AsyncClient`` per
``AgentClient``; works against any A2A 0.3 server, llamon or not::

    async with AgentClient("http://127.0.0.1:8000") as agent:
        result = await agent.send("What is 2 + 2?")
        if result.needs_input:
            result = await agent.resume(result, "four, please")
        print(result.text)

Every failure raises the ``RemoteAgentError`` family (see ``llamon_agent.client.errors``);
a call that does not fit the card (a part the skill does not accept, an unknown skill)
raises ``CardMismatchError`` before anything is sent. Each call is retried by the kind of
its failure under the client's ``RetryPolicy`` (or the one given to the call), and a
caller's task cancelled during ``send`` / ``resume`` / ``wait`` cancels the remote task,
best-effort (see docs/client-retry.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar, cast

import httpx
from a2a.client.middleware import ClientCallContext
from a2a.types import (
    AgentCard,
    DataPart,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TextPart,
)

from llamon_agent.client.auth import Credential
from llamon_agent.client.card import DEFAULT_CARD_TTL, fetch_card
from llamon_agent.client.errors import (
    RemoteAgentError,
    RemoteInvalidInputError,
    RemoteTimeoutError,
    remote_error_from_exception,
    remote_error_from_task,
)
from llamon_agent.client.extensions import IDEMPOTENT_SEND_EXTENSION
from llamon_agent.client.faults import (
    CALL_FAULTS,
    downstream_fault,
    failed_task,
    unavailable_answer,
)
from llamon_agent.client.result import RemoteResult
from llamon_agent.client.retry import SYSTEM_CLOCK, RetryClock, RetryPolicy, call_with_retry
from llamon_agent.client.sdk_spans import SdkJsonRpcTransport
from llamon_agent.core.classify import classify_received
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.events import RunnerEvent, current_scope, emit, failure_metadata, observed
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.faults import DownstreamFailed, DownstreamUnavailable
from llamon_agent.core.telemetry import inject_trace_headers
from llamon_agent.exceptions import LlamonError

if TYPE_CHECKING:
    from llamon_agent.client.catalog import CatalogClient
    from llamon_agent.client.push import PushReceiver
    from llamon_agent.client.stream import StreamEvent

__all__ = [
    "CANCEL_TIMEOUT",
    "DEFAULT_RETRY",
    "DEFAULT_WAIT_DEADLINE",
    "AgentClient",
    "CardMismatchError",
    "RemoteTaskNotCancelableError",
    "part_mode",
]

logger = logging.getLogger("llamon_agent.client")

T = TypeVar("T")

_FAILED = frozenset({TaskState.failed, TaskState.rejected})
_DONE = frozenset(
    {
        TaskState.completed,
        TaskState.canceled,
        TaskState.failed,
        TaskState.rejected,
        TaskState.input_required,
        TaskState.auth_required,
    }
)
"""States ``wait`` stops at: terminal, or paused for the caller."""

DEFAULT_RETRY: Final = RetryPolicy()
"""The policy of a client given none (``RetryPolicy()``: 4 attempts within 30 s)."""
DEFAULT_WAIT_DEADLINE: Final = 300.0
"""Seconds ``wait`` polls before it gives up (``UPSTREAM_TIMEOUT``)."""
CANCEL_TIMEOUT: Final = 5.0
"""Seconds a best-effort ``tasks/cancel`` after a cancelled caller may take."""


class RemoteTaskNotCancelableError(RemoteInvalidInputError):
    """``INVALID_INPUT`` ``remote_task_not_cancelable``: ``cancel`` was refused because the
    task had already ended (A2A ``TaskNotCancelableError``, JSON-RPC -32002)."""


class CardMismatchError(LlamonError, ValueError, code=ErrorCode.INVALID_INPUT):
    """The call does not fit the called agent's card (a part in a mode the skill does not
    accept, an unknown skill); nothing was sent. ``INVALID_INPUT``, not retriable; also a
    ``ValueError``."""


def part_mode(part: Part) -> str:
    """The media type a part is sent as: ``text/plain``, ``application/json`` (a
    DataPart), or a file's own MIME type (``application/octet-stream`` when unset)."""
    root = part.root
    if isinstance(root, TextPart):
        return "text/plain"
    if isinstance(root, DataPart):
        return "application/json"
    return root.file.mime_type or "application/octet-stream"


def _accepts(modes: Sequence[str], mode: str) -> bool:
    kind = mode.split("/", 1)[0]
    return any(m in (mode, "*/*", "*", f"{kind}/*") for m in modes)


def _message(
    message_or_text: Message | str | Sequence[Part],
    *,
    context_id: str | None,
    task_id: str | None,
) -> Message:
    if isinstance(message_or_text, Message):
        updates: dict[str, Any] = {}
        if context_id is not None:
            updates["context_id"] = context_id
        if task_id is not None:
            updates["task_id"] = task_id
        return message_or_text.model_copy(update=updates) if updates else message_or_text
    if isinstance(message_or_text, str):
        parts = [Part(root=TextPart(text=message_or_text))]
    else:
        parts = list(message_or_text)
    return Message(
        role=Role.user,
        parts=parts,
        message_id=uuid.uuid4().hex,
        context_id=context_id,
        task_id=task_id,
    )


class AgentClient:
    """A client for one agent: ``url_or_card`` is its base URL (the card is fetched from
    the well-known path and cached), its ``AgentCard`` (calls then go to ``card.url``), or
    ``"catalog://NAME[@RANGE]"`` (``catalog://orders@^2``, ``catalog://acme/orders@~1.2``;
    no range: the latest version): the card is resolved through ``catalog`` (a
    ``CatalogClient``; default ``CatalogClient()`` from ``LLAMON_CATALOG_URL`` /
    ``LLAMON_CATALOG_KEY``), calls go to its ``url``, and the resolution is redone once
    ``card_ttl`` seconds have passed. A malformed ``catalog://`` URL raises
    ``ConfigValidationError`` here; a failed resolution raises the ``Registry*``
    exceptions (see ``CatalogClient.resolve``) before anything is sent to the agent.

    ``auth`` is an ``ApiKey`` or ``Bearer`` credential, applied as the card's security
    schemes say; ``timeout`` bounds each HTTP request in seconds; ``httpx_client`` lends
    your own pooled client (then ``aclose`` leaves it open). ``retry`` is the
    ``RetryPolicy`` of every call (``client.retry``; each call method takes ``retry=`` to
    use another for that call; ``stream`` follows it when a connection drops); ``clock``
    is where retries and polls take their time (``RetryClock``: sleep, monotonic clock,
    jitter), the real one unless you record a schedule. Use it as an async context
    manager, or call ``aclose()``.
    """

    def __init__(
        self,
        url_or_card: str | AgentCard,
        *,
        auth: Credential | None = None,
        timeout: float = 30.0,
        httpx_client: httpx.AsyncClient | None = None,
        card_ttl: float = DEFAULT_CARD_TTL,
        retry: RetryPolicy = DEFAULT_RETRY,
        clock: RetryClock = SYSTEM_CLOCK,
        catalog: CatalogClient | None = None,
    ) -> None:
        self._catalog_ref: tuple[str, str] | None = None
        self._catalog = catalog
        self._owns_catalog = False
        self._resolved: tuple[AgentCard, float] | None = None
        if isinstance(url_or_card, AgentCard):
            self._card: AgentCard | None = url_or_card
            self._url = url_or_card.url
        elif url_or_card.startswith("catalog:"):
            from llamon_agent.client.catalog import CatalogClient, parse_catalog_url

            self._catalog_ref = parse_catalog_url(url_or_card)
            self._card = None
            self._url = ""
            if catalog is None:
                self._catalog, self._owns_catalog = CatalogClient(), True
        else:
            self._card = None
            self._url = url_or_card
        self.auth = auth
        self.timeout = timeout
        self.retry = retry
        self.clock = clock
        self._card_ttl = card_ttl
        self._owns_http = httpx_client is None
        self._http = httpx_client or httpx.AsyncClient(timeout=timeout)
        self._transport: SdkJsonRpcTransport | None = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled HTTP client (unless it was lent through ``httpx_client``) and
        the ``CatalogClient`` made for a ``catalog://`` URL (not one you passed)."""
        if self._owns_http:
            await self._http.aclose()
        if self._owns_catalog and self._catalog is not None:
            await self._catalog.aclose()

    async def card(self) -> AgentCard:
        """The called agent's card (fetched once, then from the cache while fresh; for a
        ``catalog://`` URL, resolved through the catalog, again after ``card_ttl``)."""
        if self._card is not None:
            return self._card
        if self._catalog_ref is not None:
            return await self._catalog_card(self._catalog_ref)
        return await fetch_card(self._http, self._url, ttl=self._card_ttl)

    async def _catalog_card(self, ref: tuple[str, str]) -> AgentCard:
        """The card the catalog resolves ``ref`` (name, range) to, kept ``card_ttl`` s."""
        now = time.monotonic()
        if self._resolved is not None and self._resolved[1] > now:
            return self._resolved[0]
        assert self._catalog is not None  # noqa: S101 - set with the reference
        card = await self._catalog.resolve(*ref)
        self._resolved = (card, now + self._card_ttl)
        self._url = card.url
        if self._transport is not None:
            self._transport.url = card.url
        return card

    async def _prepared(self) -> tuple[AgentCard, SdkJsonRpcTransport, ClientCallContext]:
        card = await self.card()
        if self._transport is None:
            self._transport = SdkJsonRpcTransport(self._http, card, url=self._url)
        self._transport.agent_card = card
        headers = dict(await self.auth.headers(card)) if self.auth is not None else {}
        inject_trace_headers(headers)  # W3C traceparent: the called agent's span is a child
        kwargs: dict[str, Any] = {"timeout": self.timeout}
        if headers:
            kwargs["headers"] = headers
        return card, self._transport, ClientCallContext(state={"http_kwargs": kwargs})

    def check(self, card: AgentCard, message: Message, skill: str | None = None) -> None:
        """Raise ``CardMismatchError`` when ``message`` does not fit ``card`` (a part
        whose mode the skill, or the card's defaults, do not accept; an unknown skill)."""
        modes: Sequence[str] = card.default_input_modes
        where = "the agent's default input modes"
        if skill is not None:
            found = next((s for s in card.skills if s.id == skill), None)
            if found is None:
                known = ", ".join(s.id for s in card.skills) or "none"
                raise CardMismatchError(
                    f"agent {card.name!r} has no skill {skill!r} (skills: {known})"
                )
            if found.input_modes:
                modes, where = found.input_modes, f"skill {skill!r} input modes"
        refused = sorted({part_mode(p) for p in message.parts if not _accepts(modes, part_mode(p))})
        if refused:
            raise CardMismatchError(
                f"agent {card.name!r} does not accept {', '.join(refused)}; "
                f"{where}: {', '.join(modes) or 'none'}"
            )

    # -- calls ----------------------------------------------------------------------------

    async def send(
        self,
        message_or_text: Message | str | Sequence[Part],
        *,
        skill: str | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        retry: RetryPolicy | None = None,
        blocking: bool = True,
    ) -> RemoteResult:
        """Send a message and wait for the answer (``message/send``, blocking).

        Returns the ``RemoteResult`` of a completed task, a paused one (``needs_input``),
        or a plain message reply; with ``blocking=False``, the task as the agent accepted
        it (``submitted`` / ``working``: follow it with ``wait``). A failed or rejected
        task, a JSON-RPC error, an HTTP error or no answer at all raises the
        ``RemoteAgentError`` family; a message that does not fit the card raises
        ``CardMismatchError`` and sends nothing.

        Retried under ``retry`` (else ``self.retry``) by the kind of failure. The message
        is built once: every attempt sends the same ``messageId``, so a timed-out new
        message is sent again (a llamon agent answers a repeat with the task it started,
        without running twice). A message that continues a task (``task_id``) is sent
        again after a timeout only to an agent whose card declares
        ``IDEMPOTENT_SEND_EXTENSION`` (a llamon agent answers the retried answer with its
        task); any other agent might run it twice. Cancelling the caller's task cancels
        the remote task, best-effort (``tasks/cancel``).
        """
        message = _message(message_or_text, context_id=context_id, task_id=task_id)
        params = MessageSendParams(
            message=message, configuration=MessageSendConfiguration(blocking=blocking)
        )
        continues = message.task_id is not None
        try:
            if continues:
                card = await self.card()
            card, answer = await self._call(
                "message/send",
                lambda transport, context: transport.send_message(params, context=context),
                retry=retry,
                idempotent=not continues or _declares_idempotent_sends(card),
                task_id=task_id,
                context_id=context_id,
                before=lambda card: self.check(card, message, skill),
            )
        except asyncio.CancelledError:
            await self._cancel_remote(message.task_id, resend=None if continues else params)
            raise
        if isinstance(answer, Message):
            return RemoteResult.from_message(answer)
        return self._result(card, answer)

    def stream(
        self,
        message_or_text: Message | str | Sequence[Part],
        *,
        skill: str | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> AsyncGenerator[StreamEvent]:
        """Send a message and follow the answer as it comes (``message/stream``).

        Yields ``StatusEvent``, ``ArtifactChunk`` (each part once) and, last, a
        ``FinalEvent`` with the ``RemoteResult`` (completed, or ``needs_input``). A failed
        or rejected task raises the ``RemoteAgentError`` family after the chunks before
        it. A dropped connection is recovered (``tasks/resubscribe``, ``tasks/get``) under
        ``retry`` (default: the client's policy); see ``llamon_agent.client.stream`` for
        what is guaranteed. A card without ``capabilities.streaming``, or a message that
        does not fit it, raises ``CardMismatchError`` and sends nothing.
        """
        from llamon_agent.client.stream import stream_events

        message = _message(message_or_text, context_id=context_id, task_id=task_id)
        return stream_events(self, message, skill=skill, policy=retry or self.retry)

    async def resume(
        self,
        result: RemoteResult,
        answer: Message | str | Sequence[Part],
        *,
        retry: RetryPolicy | None = None,
    ) -> RemoteResult:
        """Answer a paused task (``result.needs_input``): the same task and context.
        Retried like ``send`` (never sent twice after a timeout); cancelling the caller's
        task cancels the remote task."""
        if not result.needs_input or result.task_id is None:
            raise CardMismatchError(
                f"only a task waiting for input can be resumed; this one is {result.state.value}"
            )
        return await self.send(
            answer, context_id=result.context_id, task_id=result.task_id, retry=retry
        )

    async def start(
        self,
        message_or_text: Message | str | Sequence[Part],
        *,
        push: PushReceiver,
        skill: str | None = None,
        context_id: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> RemoteResult:
        """Start a task without waiting for it (``message/send``, non-blocking) and have
        the agent push its progress to ``push`` (``llamon_agent.client.push_receiver``).

        Returns the task as the agent first answered it (usually ``submitted`` or
        ``working``); then ``await push.wait(result.task_id)``. Raises like ``send``, and
        ``CardMismatchError`` when the card does not declare push notifications. Retried
        like ``send`` (the same ``messageId`` on every attempt).
        """
        from llamon_agent.client.push import start_with_push

        message = _message(message_or_text, context_id=context_id, task_id=None)
        return await start_with_push(
            self, message, push, skill=skill, context_id=context_id, retry=retry
        )

    async def register_push(
        self, task_id: str, receiver: PushReceiver, *, retry: RetryPolicy | None = None
    ) -> None:
        """Have the agent push an existing task's progress to ``receiver``
        (``tasks/pushNotificationConfig/set``, retried); then ``await
        receiver.wait(task_id)``."""
        from llamon_agent.client.push import register_push

        await register_push(self, task_id, receiver, retry=retry)

    async def get(
        self,
        task_id: str,
        *,
        history_length: int | None = None,
        retry: RetryPolicy | None = None,
    ) -> RemoteResult:
        """The task's current state (``tasks/get``, retried: it only reads); a failed task
        raises like ``send``."""
        params = TaskQueryParams(id=task_id, history_length=history_length)
        card, task = await self._call(
            "tasks/get",
            lambda transport, context: transport.get_task(params, context=context),
            retry=retry,
            idempotent=True,
            task_id=task_id,
        )
        return self._result(card, task)

    async def wait(
        self,
        task_id: str,
        *,
        deadline: float | None = DEFAULT_WAIT_DEADLINE,
        retry: RetryPolicy | None = None,
    ) -> RemoteResult:
        """Poll the task (``tasks/get``) until it ends or pauses for input; its result.

        Between polls the client waits the policy's backoff (full jitter, growing up to
        ``max_delay``); each poll is retried like ``get``, within what is left of
        ``deadline`` (seconds from now; None waits for as long as it takes). A task still
        running at the deadline raises ``RemoteTimeoutError`` (``UPSTREAM_TIMEOUT``,
        ``remote_wait_deadline_exceeded``, retriable: wait again). A failed task raises like
        ``send``; ``input-required`` returns (``result.needs_input``). Cancelling the
        caller's task cancels the remote task, best-effort.
        """
        policy = retry or self.retry
        clock = self.clock
        started = clock.monotonic()
        polls = 0

        def left() -> float | None:
            return None if deadline is None else deadline - (clock.monotonic() - started)

        params = TaskQueryParams(id=task_id)
        try:
            while True:
                card, task = await self._call(
                    "tasks/get",
                    lambda transport, context: transport.get_task(params, context=context),
                    retry=_within(policy, left()),
                    idempotent=True,
                    task_id=task_id,
                )
                if task.status.state in _DONE:
                    return self._result(card, task)
                remaining = left()
                if remaining is not None and remaining <= 0:
                    raise self._wait_expired(card, task, deadline or 0.0)
                polls += 1
                pause = policy.backoff(polls, clock.random)
                await clock.sleep(pause if remaining is None else min(pause, remaining))
        except asyncio.CancelledError:
            await self._cancel_remote(task_id)
            raise

    async def cancel(self, task_id: str, *, retry: RetryPolicy | None = None) -> RemoteResult:
        """Cancel the task (``tasks/cancel``, retried: cancelling twice is cancelling once);
        the task as the agent answered (``canceled``). A task that already ended raises
        ``RemoteTaskNotCancelableError`` (``INVALID_INPUT``, ``remote_task_not_cancelable``);
        an unknown one ``RemoteNotFoundError``."""
        params = TaskIdParams(id=task_id)
        try:
            _card, task = await self._call(
                "tasks/cancel",
                lambda transport, context: transport.cancel_task(params, context=context),
                retry=retry,
                idempotent=True,
                task_id=task_id,
            )
        except RemoteAgentError as exc:
            if exc.jsonrpc_code == _TASK_NOT_CANCELABLE:
                raise _not_cancelable(exc) from exc
            raise
        return RemoteResult.from_task(task)

    async def events(self, task_id: str, *, forward: bool = False) -> AsyncIterator[RunnerEvent]:
        """The called agent's runner events of ``task_id`` (its ``GET /tasks/{id}/events``,
        a llamon agent served with an ``EventBus``), until the one that ends the task's turn.

        Each becomes a ``RunnerEvent`` with ``RunnerEvent.from_dict``: fields this SDK does
        not know are kept in ``extra``, scrubbed by value. ``forward``: each is also
        published to the bus of the surrounding ``event_scope`` (your server's, inside a
        task), as received. A refused request (no such task for you, credentials, no
        events route) raises the ``RemoteAgentError`` family, like any call.
        """
        card = await self.card()
        headers = await self.auth.headers(card) if self.auth is not None else {}
        url = f"{self._url.rstrip('/')}/tasks/{task_id}/events"
        scope = current_scope() if forward else None
        try:
            async with self._http.stream("GET", url, headers=headers, timeout=None) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    event = RunnerEvent.from_dict(json.loads(line.removeprefix("data:")))
                    if scope is not None and scope.bus.active:
                        scope.bus.publish(event)
                    yield event
        except (httpx.HTTPError, ValueError) as exc:
            raise self._error(exc, task_id=task_id, context_id=None) from exc

    # -- one call, retried ----------------------------------------------------------------

    async def _call(
        self,
        operation: str,
        request: Callable[[SdkJsonRpcTransport, ClientCallContext], Awaitable[T]],
        *,
        retry: RetryPolicy | None,
        idempotent: bool,
        task_id: str | None = None,
        context_id: str | None = None,
        before: Callable[[AgentCard], None] | None = None,
    ) -> tuple[AgentCard, T]:
        """``request`` through the transport, retried under ``retry`` (else the client's
        policy): the card and what the transport answered. Each attempt reads the card
        (cached) and the credential's headers again (a refreshed token is sent); ``before``
        checks the card before anything is sent. What the transport raises becomes the
        ``RemoteAgentError`` family. Under an active ``FaultPlan`` a downstream fault naming
        this agent takes the answer's place (``client.faults``)."""

        kinds = CALL_FAULTS if operation in _ANSWERED_WITH_A_TASK else _UNAVAILABLE_ONLY
        if self._catalog_ref is not None:
            await self.card()  # a failed resolution raises here, as the catalog answered

        async def attempt() -> tuple[AgentCard, T]:
            card, transport, context = await self._prepared()
            if before is not None:
                before(card)
            try:
                fault = downstream_fault(card.name, self._url, kinds)
                if isinstance(fault, DownstreamUnavailable):
                    raise unavailable_answer(self._url)
                if isinstance(fault, DownstreamFailed):
                    return card, cast("T", failed_task(task_id, context_id))
                return card, await request(transport, context)
            except Exception as exc:
                raise self._error(exc, task_id=task_id, context_id=context_id) from exc

        clock = self.clock
        retried = call_with_retry(
            attempt,
            policy=retry or self.retry,
            idempotent=idempotent,
            refresh=self.auth.refresh if self.auth is not None else None,
            sleep=clock.sleep,
            clock=clock.monotonic,
            rng=clock.random,
            operation=operation,
        )
        if not observed():
            return await retried
        try:
            answered = await retried
        except Exception as exc:
            record = FailureRecord.from_exception(exc, stage=Stage.A2A_CALL)
            failed = {"operation": operation, "outcome": "failed", **failure_metadata(record)}
            emit("remote.call", Stage.A2A_CALL, metadata=failed)
            raise
        card, answer = answered
        metadata: dict[str, object] = {"operation": operation, "outcome": "ok"}
        if isinstance(answer, Task):
            metadata["state"] = answer.status.state.value
            if answer.status.state in _FAILED:  # answered with a failed task
                record = FailureRecord.from_exception(
                    remote_error_from_task(answer, agent=card.name), stage=Stage.A2A_CALL
                )
                metadata.update(outcome="failed", **failure_metadata(record))
        emit("remote.call", Stage.A2A_CALL, metadata=metadata)
        return answered

    async def _cancel_remote(
        self, task_id: str | None, *, resend: MessageSendParams | None = None
    ) -> None:
        """After the caller's task was cancelled: cancel the remote task, best-effort,
        shielded and bounded by ``CANCEL_TIMEOUT``; logged at INFO, never raised. Without a
        task id, ``resend`` (the same message, non-blocking) learns it, only from an agent
        whose card declares ``IDEMPOTENT_SEND_EXTENSION``."""

        async def run() -> None:
            card, transport, context = await self._prepared()
            known = task_id
            if known is None:
                if resend is None or not _declares_idempotent_sends(card):
                    logger.info(
                        "caller cancelled; the remote task could not be cancelled: its id "
                        "is not known yet and the agent does not declare idempotent sends"
                    )
                    return
                again = resend.model_copy(
                    update={"configuration": MessageSendConfiguration(blocking=False)}
                )
                answer = await transport.send_message(again, context=context)
                if not isinstance(answer, Task):
                    return  # a plain message reply: no task to cancel
                known = answer.id
            await transport.cancel_task(TaskIdParams(id=known), context=context)
            logger.info("caller cancelled; cancelled the remote task %s", known)

        try:
            await asyncio.shield(asyncio.wait_for(run(), CANCEL_TIMEOUT))
        except asyncio.CancelledError:
            logger.info("caller cancelled again; the remote task is cancelled in the background")
        except Exception as exc:
            found = classify_received(exc)
            logger.info(
                "caller cancelled; cancelling the remote task %s failed (%s %s)",
                task_id or "(id unknown)",
                found.code.value,
                found.reason,
            )

    # -- answers --------------------------------------------------------------------------

    def _result(self, card: AgentCard, task: Task) -> RemoteResult:
        if task.status.state in _FAILED:
            raise remote_error_from_task(task, agent=card.name)
        return RemoteResult.from_task(task)

    def _wait_expired(self, card: AgentCard, task: Task, deadline: float) -> RemoteTimeoutError:
        return RemoteTimeoutError(
            f"agent {card.name!r}: task {task.id} was still {task.status.state.value} "
            f"when the wait's deadline of {deadline:g} s passed",
            reason="remote_wait_deadline_exceeded",
            retriable=True,
            task_id=task.id,
            context_id=task.context_id,
            agent=card.name,
        )

    def _error(
        self, exc: Exception, *, task_id: str | None, context_id: str | None
    ) -> RemoteAgentError:
        card = self._card or (self._transport.agent_card if self._transport else None)
        name = card.name if card is not None else None
        error = remote_error_from_exception(exc, agent=name)
        if error.task_id is None and task_id is not None:
            error.task_id = task_id
        if error.context_id is None and context_id is not None:
            error.context_id = context_id
        return error


_ANSWERED_WITH_A_TASK: Final = frozenset({"message/send", "tasks/get"})
"""The calls a ``downstream_failed`` fault answers with a failed task."""
_UNAVAILABLE_ONLY: Final = frozenset({"downstream_unavailable"})
"""The downstream fault every other call can suffer."""

_TASK_NOT_CANCELABLE: Final = -32002
"""A2A's ``TaskNotCancelableError`` JSON-RPC code."""


def _not_cancelable(error: RemoteAgentError) -> RemoteTaskNotCancelableError:
    return RemoteTaskNotCancelableError(
        f"{f'agent {error.agent!r}' if error.agent else 'the called agent'} refused to cancel "
        f"task {error.task_id}: it has already ended",
        reason="remote_task_not_cancelable",
        retriable=False,
        http_status=error.http_status,
        jsonrpc_code=error.jsonrpc_code,
        task_id=error.task_id,
        context_id=error.context_id,
        agent=error.agent,
        data=error.data,
        raw_data=error.raw_data,
    )


def _declares_idempotent_sends(card: AgentCard) -> bool:
    extensions = card.capabilities.extensions or []
    return any(extension.uri == IDEMPOTENT_SEND_EXTENSION for extension in extensions)


def _within(policy: RetryPolicy, left: float | None) -> RetryPolicy:
    """``policy`` bounded by the ``left`` seconds of a wait (one attempt when none is)."""
    if left is None:
        return policy
    if left <= 0:
        return policy.with_(max_attempts=1)
    if policy.deadline is None or policy.deadline > left:
        return policy.with_(deadline=left)
    return policy
