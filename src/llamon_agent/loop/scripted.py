"""``ScriptedModel``: a deterministic fake model for tests and demos.

It answers each ``complete`` call with the next step of its script and records what it
was given::

    model = ScriptedModel([
        tool_call("add_numbers", {"a": 2, "b": 3}),   # round 1: call a tool
        lambda messages: f"The sum is {messages[-1].content}.",  # round 2: read the result
    ])
    outcome = await run_loop(model, registry.view(), "2 + 3?")
    assert model.calls[1].messages[-1].content == "5"

A step is one of:

* a ``str`` -- a text answer (``""`` is an empty answer);
* a ``RawToolCall`` or a list/tuple of them -- tool calls (a call with an empty ``id``
  gets ``call_1``, ``call_2`` ... in script order);
* a ``ModelResponse`` -- used as is;
* an exception instance -- raised by ``complete`` (a provider failure);
* a callable ``fn(messages)`` (or ``fn(messages, tools)``), sync or async, returning any
  of the above, for answers that depend on the transcript.

A script that runs out raises ``ScriptExhaustedError`` (the loop reports ``model_error``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from llamon_agent.loop.model import ChatMessage, ModelResponse, RawToolCall, ToolSpec

__all__ = ["ScriptExhaustedError", "ScriptStep", "ScriptedCall", "ScriptedModel", "tool_call"]

ScriptStep: TypeAlias = (
    str | RawToolCall | Sequence[RawToolCall] | ModelResponse | BaseException | Callable[..., Any]
)
"""One answer of a script (see the module docstring)."""


class ScriptExhaustedError(LookupError):
    """The model was called more often than its script has steps."""


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """What one ``complete`` call received: the transcript and the tools offered."""

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...]

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools the model was offered."""
        return tuple(spec.name for spec in self.tools)


def tool_call(name: str, arguments: Mapping[str, Any] | str = "{}", *, id: str = "") -> RawToolCall:
    """A raw tool call: a mapping is written as JSON, a string is sent as is (break it on
    purpose to test ``malformed_arguments``). An empty ``id`` is filled by the model."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return RawToolCall(id=id, name=name, arguments_json=raw)


class ScriptedModel:
    """A ``Model`` that plays a script (see the module docstring)."""

    def __init__(self, script: Iterable[ScriptStep], *, name: str = "scripted") -> None:
        self.script: list[ScriptStep] = list(script)
        self.name = name
        self.calls: list[ScriptedCall] = []
        self._next_id = 0

    @property
    def remaining(self) -> int:
        """Steps not played yet."""
        return max(0, len(self.script) - len(self.calls))

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        """The next step's answer; raises the step's exception, or ``ScriptExhaustedError``."""
        index = len(self.calls)
        self.calls.append(ScriptedCall(tuple(messages), tuple(tools)))
        if index >= len(self.script):
            raise ScriptExhaustedError(
                f"{self.name}: called {index + 1} times, the script has {len(self.script)} steps"
            )
        return await self._resolve(self.script[index], messages, tools)

    async def _resolve(
        self, step: object, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
    ) -> ModelResponse:
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return replace(step, tool_calls=self._with_ids(step.tool_calls))
        if isinstance(step, str):
            return ModelResponse(content=step)
        if isinstance(step, RawToolCall):
            return ModelResponse(tool_calls=self._with_ids((step,)))
        if isinstance(step, list | tuple) and all(isinstance(c, RawToolCall) for c in step):
            return ModelResponse(tool_calls=self._with_ids(tuple(step)))
        if callable(step):
            takes_tools = len(inspect.signature(step).parameters) >= 2
            produced = step(tuple(messages), tuple(tools)) if takes_tools else step(tuple(messages))
            if inspect.isawaitable(produced):
                produced = await produced
            return await self._resolve(produced, messages, tools)
        raise TypeError(f"{self.name}: cannot play a script step of type {type(step).__name__}")

    def _with_ids(self, calls: Iterable[RawToolCall]) -> tuple[RawToolCall, ...]:
        filled = []
        for call in calls:
            if not call.id:
                self._next_id += 1
                call = replace(call, id=f"call_{self._next_id}")
            filled.append(call)
        return tuple(filled)
