"""ScriptedModel: deterministic answers, recorded calls."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from llamon_agent.loop import (
    ChatMessage,
    ModelResponse,
    RawToolCall,
    ScriptedModel,
    ScriptExhaustedError,
    ToolSpec,
    UserMessage,
    tool_call,
)

SPEC = ToolSpec("t", "a tool", {"type": "object"})


async def test_steps_are_played_in_order_and_calls_recorded() -> None:
    model = ScriptedModel(
        [
            "text",
            tool_call("t", {"x": 1}),
            [tool_call("t", "{"), tool_call("t", id="mine")],
            ModelResponse(content="as is", retries=2),
        ]
    )
    hello = [UserMessage("hi")]
    first = await model.complete(hello, [SPEC])
    second = await model.complete(hello, [])
    third = await model.complete(hello, [])
    fourth = await model.complete(hello, [])

    assert first == ModelResponse(content="text")
    assert second.tool_calls == (RawToolCall("call_1", "t", '{"x": 1}'),)
    assert third.tool_calls == (RawToolCall("call_2", "t", "{"), RawToolCall("mine", "t", "{}"))
    assert (fourth.content, fourth.retries) == ("as is", 2)
    assert model.calls[0].messages == (UserMessage("hi"),)
    assert model.calls[0].tool_names == ("t",)
    assert model.remaining == 0


async def test_callables_see_the_transcript() -> None:
    def by_messages(messages: Sequence[ChatMessage]) -> str:
        return f"{len(messages)} messages"

    async def by_tools(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> object:
        return tool_call(tools[0].name)

    model = ScriptedModel([by_messages, by_tools])
    assert (await model.complete([UserMessage("a")], [SPEC])).content == "1 messages"
    assert (await model.complete([], [SPEC])).tool_calls[0].name == "t"


async def test_exceptions_are_raised_and_an_empty_script_says_so() -> None:
    model = ScriptedModel([ConnectionError("down")])
    with pytest.raises(ConnectionError):
        await model.complete([], [])
    with pytest.raises(ScriptExhaustedError, match="called 2 times"):
        await model.complete([], [])


async def test_an_unknown_step_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="int"):
        await ScriptedModel([42]).complete([], [])  # type: ignore[list-item]
