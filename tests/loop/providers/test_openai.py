"""OpenAIChatModel: the Chat Completions wire format, both ways."""

from __future__ import annotations

import pytest
from openai import AsyncOpenAI

from llamon_agent.exceptions import ConfigValidationError
from llamon_agent.loop.model import (
    AssistantMessage,
    ChatMessage,
    Model,
    RawToolCall,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from llamon_agent.loop.providers import OpenAIChatModel
from llamon_agent.loop.providers.openai import to_openai_messages
from tests.loop.providers.fakes import SECRET, FakeProvider, FakeSleep, OpenAIWire, Reply

WIRE = OpenAIWire()
SCHEMA = {
    "type": "object",
    "properties": {"account": {"type": "string"}},
    "required": ["account"],
}
TOOLS = [ToolSpec("check_account", "Check an account's status.", SCHEMA)]
TRANSCRIPT: list[ChatMessage] = [
    SystemMessage("You are a bank assistant."),
    UserMessage("Is account 42 open?"),
    AssistantMessage(
        "Let me check.", (RawToolCall("call_1", "check_account", '{"account": "42"}'),)
    ),
    ToolMessage("call_1", "check_account", "lookup failed: upstream down", is_error=True),
]


async def test_tool_calls_round_trip(fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(
        WIRE.answer(
            None,
            [
                ("call_2", "check_account", '{"account": "42"}'),
                ("call_3", "check_account", '{"account": "43"}'),
            ],
        )
    )
    async with WIRE.make(fake.url, sleep=sleeper) as model:
        assert isinstance(model, Model)
        response = await model.complete(TRANSCRIPT, TOOLS)

    assert response.content is None
    assert response.tool_calls == (
        RawToolCall("call_2", "check_account", '{"account": "42"}'),
        RawToolCall("call_3", "check_account", '{"account": "43"}'),
    )
    assert response.retries == 0
    body = fake.requests[0].body
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": "You are a bank assistant."},
        {"role": "user", "content": "Is account 42 open?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "check_account", "arguments": '{"account": "42"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "lookup failed: upstream down"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "check_account",
                "description": "Check an account's status.",
                "parameters": SCHEMA,
            },
        }
    ]
    assert "stream" not in body or body["stream"] is False


async def test_broken_arguments_are_passed_through_verbatim(
    fake: FakeProvider, sleeper: FakeSleep
) -> None:
    broken = '{"account": "42", '
    fake.script(WIRE.answer("partial", [("call_9", "check_account", broken)]))
    async with WIRE.make(fake.url, sleep=sleeper) as model:
        response = await model.complete(TRANSCRIPT, TOOLS)
    assert response.content == "partial"
    assert response.tool_calls == (RawToolCall("call_9", "check_account", broken),)


async def test_no_tools_means_no_tools_field(fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(WIRE.answer("plain"))
    async with WIRE.make(fake.url, sleep=sleeper) as model:
        response = await model.complete([UserMessage("hi")], [])
    assert response.content == "plain"
    assert "tools" not in fake.requests[0].body


async def test_refusal_is_the_content(fake: FakeProvider, sleeper: FakeSleep) -> None:
    reply = WIRE.answer(None)
    reply.body["choices"][0]["message"]["refusal"] = "I can't help with that."
    fake.script(reply)
    async with WIRE.make(fake.url, sleep=sleeper) as model:
        response = await model.complete([UserMessage("hi")], [])
    assert response.content == "I can't help with that."


async def test_no_choices_is_an_empty_response(fake: FakeProvider, sleeper: FakeSleep) -> None:
    reply = WIRE.answer(None)
    reply.body["choices"] = []
    del reply.body["usage"]
    fake.script(Reply(body=reply.body))
    async with WIRE.make(fake.url, sleep=sleeper) as model:
        response = await model.complete([UserMessage("hi")], [])
    assert (response.content, response.tool_calls, response.usage) == (None, (), {})


def test_assistant_without_text_or_calls_sends_empty_content() -> None:
    assert to_openai_messages([AssistantMessage()]) == [{"role": "assistant", "content": ""}]
    call = RawToolCall("c", "t", "{}")
    assert to_openai_messages([AssistantMessage(None, (call,))]) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        }
    ]


async def test_a_client_passed_in_is_used_without_its_retries(
    fake: FakeProvider, sleeper: FakeSleep
) -> None:
    client = AsyncOpenAI(api_key=SECRET, base_url=f"{fake.url}/v1", max_retries=5)
    fake.script(WIRE.error(500, "boom"))
    model = OpenAIChatModel("gpt-test", client=client, sleep=sleeper, max_retries=1)
    with pytest.raises(Exception, match="HTTP 500"):
        await model.complete([UserMessage("hi")], [])
    assert len(fake.requests) == 2  # ours: 1 + 1 retry; the client's 5 are off
    await model.aclose()
    assert not client.is_closed()  # the caller's client stays theirs
    await client.close()


def test_client_and_api_key_together_are_refused() -> None:
    client = AsyncOpenAI(api_key=SECRET, base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ConfigValidationError):
        OpenAIChatModel("gpt-test", client=client, api_key="other")


def test_negative_max_retries_is_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        OpenAIChatModel("gpt-test", api_key=SECRET, max_retries=-1)
