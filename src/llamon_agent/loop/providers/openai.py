"""``OpenAIChatModel``: the ``Model`` protocol over OpenAI Chat Completions (function calling).

Works with any server that speaks the Chat Completions wire format (vLLM, Ollama, LiteLLM,
llama.cpp's server, Azure-compatible gateways): pass its ``base_url``.

Our transcript maps onto the wire as follows (and back):

* ``SystemMessage`` / ``UserMessage`` -> ``{"role": "system"|"user", "content": text}``;
* ``AssistantMessage`` -> ``{"role": "assistant", "content": text|None, "tool_calls":
  [{"id", "type": "function", "function": {"name", "arguments": arguments_json}}]}``;
* ``ToolMessage`` -> ``{"role": "tool", "tool_call_id", "content"}`` (Chat Completions has
  no error flag: ``is_error`` is carried by the content the loop wrote);
* ``ToolSpec`` -> ``{"type": "function", "function": {"name", "description", "parameters"}}``.

An answer's ``message.tool_calls[i].function.arguments`` becomes ``RawToolCall.arguments_json``
exactly as the model wrote it, broken JSON included: the loop parses it, not this adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

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
    call_with_retries,
)

with requires_extra("openai", "llamon_agent.loop.providers.openai"):
    from openai import (
        APIConnectionError,
        APIStatusError,
        APITimeoutError,
        AsyncOpenAI,
        omit,
    )
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )

__all__ = ["OPENAI_API_KEY_ENV", "OpenAIChatModel", "to_openai_messages", "to_openai_tools"]

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"

_ERRORS = SDKErrorTypes(
    provider="OpenAI",
    status=APIStatusError,
    timeout=APITimeoutError,
    connection=APIConnectionError,
)


class OpenAIChatModel(ProviderModel[AsyncOpenAI]):
    """A ``Model`` answering through OpenAI Chat Completions (or a compatible server).

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (a ``MissingAPIKeyError`` naming the
    variable if neither is set); ``base_url`` to the SDK's default (``$OPENAI_BASE_URL`` or
    api.openai.com). ``timeout`` is per attempt, in seconds. Retriable failures (429, 5xx,
    timeouts, connection errors) are retried up to ``max_retries`` times, honouring
    ``Retry-After``; ``sleep`` replaces ``asyncio.sleep`` between attempts (tests).
    ``client`` is a ready ``AsyncOpenAI`` to use instead (its own retries are switched off
    for these calls; it is not closed by ``aclose``).
    """

    api_key_env = OPENAI_API_KEY_ENV
    provider = "OpenAI"

    def _new_client(self, api_key: str, base_url: str | None, timeout: float) -> AsyncOpenAI:
        return AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        """One Chat Completions call (with retries); raises a mapped exception on failure."""
        wire_messages = to_openai_messages(messages)
        wire_tools = to_openai_tools(tools)

        async def attempt() -> ChatCompletion:
            return await self._client.chat.completions.create(
                model=self.model,
                messages=wire_messages,
                tools=wire_tools if wire_tools else omit,
                timeout=self.timeout,
            )

        completion, retries = await call_with_retries(
            attempt,
            policy=self.retry_policy,
            errors=_ERRORS,
            attempt_timeout=self.timeout,
            operation="chat completion",
        )
        return _from_completion(completion, retries)


def to_openai_messages(messages: Sequence[ChatMessage]) -> list[ChatCompletionMessageParam]:
    """Our transcript in the Chat Completions wire format."""
    wire: list[ChatCompletionMessageParam] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            wire.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            wire.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            wire.append(_assistant(message))
        elif isinstance(message, ToolMessage):
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        else:  # pragma: no cover - the union is closed
            assert_never(message)
    return wire


def _assistant(message: AssistantMessage) -> ChatCompletionAssistantMessageParam:
    entry: ChatCompletionAssistantMessageParam = {"role": "assistant"}
    if message.tool_calls:
        calls: list[ChatCompletionMessageFunctionToolCallParam] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in message.tool_calls
        ]
        entry["tool_calls"] = calls
        entry["content"] = message.content
    else:
        # Chat Completions needs content when there are no tool calls.
        entry["content"] = message.content or ""
    return entry


def to_openai_tools(tools: Sequence[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    """Our tool specs as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def _from_completion(completion: object, retries: int) -> ModelResponse:
    if not isinstance(completion, ChatCompletion):
        raise ComponentInvokeError(
            "OpenAI API answered with a body that is not a chat completion",
            provider="openai",
        )
    usage: dict[str, int] = {}
    if completion.usage is not None:
        usage = usage_counts(completion.usage.prompt_tokens, completion.usage.completion_tokens)
    choices: list[Any] = list(completion.choices or [])
    if not choices:
        return ModelResponse(retries=retries, usage=usage)
    message = choices[0].message
    content = getattr(message, "content", None) or getattr(message, "refusal", None) or None
    calls: list[RawToolCall] = []
    for call in getattr(message, "tool_calls", None) or []:
        if getattr(call, "type", None) != "function":
            continue  # custom (free-text) tools are never offered by this adapter
        function = call.function
        calls.append(RawToolCall(call.id, function.name, function.arguments))
    return ModelResponse(
        content=content if isinstance(content, str) else None,
        tool_calls=tuple(calls),
        retries=retries,
        usage=usage,
    )
