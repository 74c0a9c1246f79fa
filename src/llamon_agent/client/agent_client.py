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
raises ``CardMismatchError`` before anything is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx
from a2a.client.middleware import ClientCallContext
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import (
    AgentCard,
    DataPart,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskQueryParams,
    TaskState,
    TextPart,
)

from llamon_agent.client.auth import Credential
from llamon_agent.client.card import DEFAULT_CARD_TTL, fetch_card
from llamon_agent.client.errors import (
    RemoteAgentError,
    remote_error_from_exception,
    remote_error_from_task,
)
from llamon_agent.client.result import RemoteResult
from llamon_agent.client.retry import RetryPolicy
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import LlamonError

if TYPE_CHECKING:
    from llamon_agent.client.push import PushReceiver
    from llamon_agent.client.stream import StreamEvent

__all__ = ["AgentClient", "CardMismatchError", "part_mode"]

_FAILED = frozenset({TaskState.failed, TaskState.rejected})


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
    the well-known path and cached) or its ``AgentCard`` (calls then go to ``card.url``).

    ``auth`` is an ``ApiKey`` or ``Bearer`` credential, applied as the card's security
    schemes say; ``timeout`` bounds each HTTP request in seconds; ``httpx_client`` lends
    your own pooled client (then ``aclose`` leaves it open); ``retry`` is the
    ``RetryPolicy`` of its calls (default ``RetryPolicy()``; ``stream`` follows it when a
    connection drops). Use it as an async context manager, or call ``aclose()``.
    """

    def __init__(
        self,
        url_or_card: str | AgentCard,
        *,
        auth: Credential | None = None,
        timeout: float = 30.0,
        httpx_client: httpx.AsyncClient | None = None,
        card_ttl: float = DEFAULT_CARD_TTL,
        retry: RetryPolicy | None = None,
    ) -> None:
        if isinstance(url_or_card, AgentCard):
            self._card: AgentCard | None = url_or_card
            self._url = url_or_card.url
        else:
            self._card = None
            self._url = url_or_card
        self.auth = auth
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._card_ttl = card_ttl
        self._owns_http = httpx_client is None
        self._http = httpx_client or httpx.AsyncClient(timeout=timeout)
        self._transport: JsonRpcTransport | None = None

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
        """Close the pooled HTTP client (unless it was lent through ``httpx_client``)."""
        if self._owns_http:
            await self._http.aclose()

    async def card(self) -> AgentCard:
        """The called agent's card (fetched once, then from the cache while fresh)."""
        if self._card is not None:
            return self._card
        return await fetch_card(self._http, self._url, ttl=self._card_ttl)

    async def _prepared(self) -> tuple[AgentCard, JsonRpcTransport, ClientCallContext]:
        card = await self.card()
        if self._transport is None:
            self._transport = JsonRpcTransport(self._http, card, url=self._url)
        self._transport.agent_card = card
        headers = await self.auth.headers(card) if self.auth is not None else {}
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

    async def send(
        self,
        message_or_text: Message | str | Sequence[Part],
        *,
        skill: str | None = None,
        context_id: str | None = None,
        task_id: str | None = None,
    ) -> RemoteResult:
        """Send a message and wait for the answer (``message/send``, blocking).

        Returns the ``RemoteResult`` of a completed task, a paused one (``needs_input``),
        or a plain message reply. A failed or rejected task, a JSON-RPC error, an HTTP
        error or no answer at all raises the ``RemoteAgentError`` family; a message that
        does not fit the card raises ``CardMismatchError`` and sends nothing.
        """
        card, transport, context = await self._prepared()
        message = _message(message_or_text, context_id=context_id, task_id=task_id)
        self.check(card, message, skill)
        params = MessageSendParams(
            message=message, configuration=MessageSendConfiguration(blocking=True)
        )
        try:
            answer = await transport.send_message(params, context=context)
        except Exception as exc:
            raise self._error(exc, task_id=task_id, context_id=context_id) from exc
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
        self, result: RemoteResult, answer: Message | str | Sequence[Part]
    ) -> RemoteResult:
        """Answer a paused task (``result.needs_input``): the same task and context."""
        if not result.needs_input or result.task_id is None:
            raise CardMismatchError(
                f"only a task waiting for input can be resumed; this one is {result.state.value}"
            )
        return await self.send(answer, context_id=result.context_id, task_id=result.task_id)

    async def start(
        self,
        message_or_text: Message | str | Sequence[Part],
        *,
        push: PushReceiver,
        skill: str | None = None,
        context_id: str | None = None,
    ) -> RemoteResult:
        """Start a task without waiting for it (``message/send``, non-blocking) and have
        the agent push its progress to ``push`` (``llamon_agent.client.push_receiver``).

        Returns the task as the agent first answered it (usually ``submitted`` or
        ``working``); then ``await push.wait(result.task_id)``. Raises like ``send``, and
        ``CardMismatchError`` when the card does not declare push notifications.
        """
        from llamon_agent.client.push import start_with_push

        message = _message(message_or_text, context_id=context_id, task_id=None)
        return await start_with_push(self, message, push, skill=skill, context_id=context_id)

    async def register_push(self, task_id: str, receiver: PushReceiver) -> None:
        """Have the agent push an existing task's progress to ``receiver``
        (``tasks/pushNotificationConfig/set``); then ``await receiver.wait(task_id)``."""
        from llamon_agent.client.push import register_push

        await register_push(self, task_id, receiver)

    async def get(self, task_id: str, *, history_length: int | None = None) -> RemoteResult:
        """The task's current state (``tasks/get``); a failed task raises like ``send``."""
        card, transport, context = await self._prepared()
        params = TaskQueryParams(id=task_id, history_length=history_length)
        try:
            task = await transport.get_task(params, context=context)
        except Exception as exc:
            raise self._error(exc, task_id=task_id, context_id=None) from exc
        return self._result(card, task)

    def _result(self, card: AgentCard, task: Task) -> RemoteResult:
        if task.status.state in _FAILED:
            raise remote_error_from_task(task, agent=card.name)
        return RemoteResult.from_task(task)

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
