"""``AnthropicMessagesModel``: the ``Model`` protocol over the Anthropic Messages API.

Works with any server that speaks the Messages wire format: pass its ``base_url``.

Our transcript maps onto the wire as follows (and back):

* every ``SystemMessage`` -> the separate ``system`` parameter (several are joined by a
  blank line);
* ``UserMessage`` -> a ``user`` turn with a ``text`` block;
* ``AssistantMessage`` -> an ``assistant`` turn: a ``text`` block (if any text) then one
  ``tool_use`` block per call, ``input`` = the call's ``arguments_json`` decoded (the API
  wants an object; a call whose arguments are not a JSON object -- possible only in a
  transcript written by another provider -- is sent as
  ``{"invalid_arguments_json": "<the text>"}``); an assistant turn with neither is left out;
* ``ToolMessage`` -> a ``tool_result`` block (``tool_use_id``, ``content``, ``is_error``)
  in a ``user`` turn; consecutive user-side messages are merged into one turn, as the API
  requires all results of one assistant turn in the next user turn;
* ``ToolSpec`` -> ``{"name", "description", "input_schema"}``.

In an answer, ``tool_use.input`` is a JSON object; it is serialized with ``json.dumps``
into ``RawToolCall.arguments_json`` (the loop parses it, like any provider's arguments).
Text blocks are joined with a newline; other block kinds (thinking, server tools) are not
part of the ``Model`` protocol and are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, assert_never

from llamon_agent._extras import requires_extra
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.loop.model import (
    AssistantMessage,
    ChatMessage,
    ModelResponse,
    RawToolCall,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from llamon_agent.loop.providers._base import ProviderModel
from llamon_agent.loop.providers._common import (
    usage_counts,
)
from llamon_agent.loop.providers._retry import (
    SDKErrorTypes,
    SleepFn,
    call_with_retries,
)

with requires_extra("anthropic", "llamon_agent.loop.providers.anthropic"):
    from anthropic import (
        APIConnectionError,
        APIStatusError,
        APITimeoutError,
        AsyncAnthropic,
        omit,
    )
    from anthropic.types import (
        ContentBlockParam,
        Message,
        MessageParam,
        TextBlock,
        TextBlockParam,
        ToolParam,
        ToolUseBlock,
        ToolUseBlockParam,
    )

__all__ = [
    "ANTHROPIC_API_KEY_ENV",
    "AnthropicMessagesModel",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY"

_ERRORS = SDKErrorTypes(
    provider="Anthropic",
    status=APIStatusError,
    timeout=APITimeoutError,
    connection=APIConnectionError,
)


class AnthropicMessagesModel(ProviderModel[AsyncAnthropic]):
    """A ``Model`` answering through the Anthropic Messages API (or a compatible server).

    ``api_key`` defaults to ``$ANTHROPIC_API_KEY`` (a ``MissingAPIKeyError`` naming the
    variable if neither is set; other credential sources of the SDK are not consulted);
    ``base_url`` to the SDK's default. ``timeout`` is per attempt, in seconds;
    ``max_tokens`` caps each answer. Retriable failures (429, 5xx incl. 529 overloaded,
    timeouts, connection errors) are retried up to ``max_retries`` times, honouring
    ``Retry-After``; ``sleep`` replaces ``asyncio.sleep`` between attempts (tests).
    ``client`` is a ready ``AsyncAnthropic`` to use instead (its own retries are switched
    off for these calls; it is not closed by ``aclose``).
    """

    api_key_env = ANTHROPIC_API_KEY_ENV
    provider = "Anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        max_tokens: int = 1024,
        client: AsyncAnthropic | None = None,
        sleep: SleepFn | None = None,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            client=client,
            sleep=sleep,
        )
        self.max_tokens = max_tokens

    def _new_client(self, api_key: str, base_url: str | None, timeout: float) -> AsyncAnthropic:
        return AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        """One Messages call (with retries); raises a mapped exception on failure."""
        system, wire_messages = to_anthropic_messages(messages)
        wire_tools = to_anthropic_tools(tools)

        async def attempt() -> Message:
            return await self._client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                messages=wire_messages,
                system=system if system is not None else omit,
                tools=wire_tools if wire_tools else omit,
                timeout=self.timeout,
            )

        answer, retries = await call_with_retries(
            attempt,
            policy=self.retry_policy,
            errors=_ERRORS,
            attempt_timeout=self.timeout,
            operation="messages call",
        )
        return _from_message(answer, retries)


@dataclass(slots=True)
class _Turn:
    role: Literal["user", "assistant"]
    blocks: list[ContentBlockParam] = field(default_factory=list)


def to_anthropic_messages(
    messages: Sequence[ChatMessage],
) -> tuple[str | None, list[MessageParam]]:
    """Our transcript as ``(system, messages)`` in the Messages wire format."""
    system_parts: list[str] = []
    turns: list[_Turn] = []

    def add(role: Literal["user", "assistant"], blocks: list[ContentBlockParam]) -> None:
        if not blocks:
            return
        if turns and turns[-1].role == role:
            turns[-1].blocks.extend(blocks)
        else:
            turns.append(_Turn(role, blocks))

    for message in messages:
        if isinstance(message, SystemMessage):
            system_parts.append(message.content)
        elif isinstance(message, UserMessage):
            add("user", [_text(message.content)])
        elif isinstance(message, AssistantMessage):
            blocks: list[ContentBlockParam] = []
            if message.content:
                blocks.append(_text(message.content))
            blocks.extend(_tool_use(call) for call in message.tool_calls)
            add("assistant", blocks)
        elif isinstance(message, ToolMessage):
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id,
                        "content": message.content,
                        "is_error": message.is_error,
                    }
                ],
            )
        else:  # pragma: no cover - the union is closed
            assert_never(message)
    system = "\n\n".join(system_parts) if system_parts else None
    wire: list[MessageParam] = []
    for turn in turns:
        if turn.role == "user":
            wire.append({"role": "user", "content": turn.blocks})
        else:
            wire.append({"role": "assistant", "content": turn.blocks})
    return system, wire


def _text(text: str) -> TextBlockParam:
    return {"type": "text", "text": text}


def _tool_use(call: RawToolCall) -> ToolUseBlockParam:
    # Our own transcript going back to the API, which wants an object: not the loop's
    # argument parsing (answers keep their arguments as an unparsed string).
    try:
        decoded = json.loads(call.arguments_json)
    except ValueError:
        decoded = None
    arguments = decoded if isinstance(decoded, dict) else None
    if arguments is None:
        arguments = {"invalid_arguments_json": call.arguments_json}
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}


def to_anthropic_tools(tools: Sequence[ToolSpec]) -> list[ToolParam]:
    """Our tool specs as Messages API tools."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": dict(tool.parameters),
        }
        for tool in tools
    ]


def _from_message(answer: object, retries: int) -> ModelResponse:
    if not isinstance(answer, Message):
        raise ComponentInvokeError(
            "Anthropic API answered with a body that is not a message",
            provider="anthropic",
        )
    texts: list[str] = []
    calls: list[RawToolCall] = []
    for block in answer.content or []:
        if isinstance(block, TextBlock):
            if block.text:
                texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(block.input, ensure_ascii=False)
            calls.append(RawToolCall(block.id, block.name, arguments))
    usage: dict[str, int] = {}
    if answer.usage is not None:
        usage = usage_counts(answer.usage.input_tokens, answer.usage.output_tokens)
    return ModelResponse(
        content="\n".join(texts) if texts else None,
        tool_calls=tuple(calls),
        retries=retries,
        usage=usage,
    )
