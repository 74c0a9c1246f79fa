"""The provider-neutral model protocol the tool loop talks to.

A model receives the transcript (``ChatMessage``s) and the tools it may call
(``ToolSpec``s, JSON schemas) and answers a ``ModelResponse``: text content and/or raw
tool calls. A raw call is ``(id, name, arguments_json)`` -- the arguments stay a JSON
*string*: they are parsed at the loop boundary, never inside a provider adapter, so broken
JSON is a failure the loop can show the model (``malformed_arguments``).

Provider adapters (OpenAI Chat Completions, Anthropic Messages) and the deterministic
``ScriptedModel`` all implement ``Model``. A provider failure is raised as an exception
(classified by ``core.classify``), after the adapter's own retries; ``ModelResponse.retries``
reports how many retries the answer took.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

__all__ = [
    "AssistantMessage",
    "ChatMessage",
    "Model",
    "ModelResponse",
    "RawToolCall",
    "SystemMessage",
    "ToolMessage",
    "ToolSpec",
    "UserMessage",
]


@dataclass(frozen=True, slots=True)
class RawToolCall:
    """A tool call as the model wrote it: the arguments are an unparsed JSON string."""

    id: str
    name: str
    arguments_json: str


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model sees of a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SystemMessage:
    content: str
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """The model's turn: text and/or tool calls."""

    content: str | None = None
    tool_calls: tuple[RawToolCall, ...] = ()
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """A tool's result (or failure) returned to the model under the call's id."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = "tool"


ChatMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model answer: ``content`` text and/or ``tool_calls``; ``retries`` it took."""

    content: str | None = None
    tool_calls: tuple[RawToolCall, ...] = ()
    retries: int = 0
    usage: Mapping[str, int] = field(default_factory=dict)


@runtime_checkable
class Model(Protocol):
    """Anything that can answer a transcript with text or tool calls."""

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        """One model call. Raises on provider failure (after the adapter's retries)."""
        ...
