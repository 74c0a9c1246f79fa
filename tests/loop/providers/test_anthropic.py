"""AnthropicMessagesModel: the Messages wire format, both ways."""

from __future__ import annotations

import json

import pytest
from anthropic import AsyncAnthropic

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
from llamon_agent.loop.providers import AnthropicMessagesModel
from llamon_agent.loop.providers.anthropic import to_anthropic_messages
from tests.loop.providers.fakes import SECRET, AnthropicWire, FakeProvider, FakeSleep

WIRE = AnthropicWire()
SCHEMA = {
    "type": "object",
    "properties": {"account": {"type": "string"}},
    "required": ["account"],
}
TOOLS = [ToolSpec("check_account", "Check an account's status.", SCHEMA)]
TRANSCRIPT: list[ChatMessage] = [
    SystemMessage("You are a bank assistant."),
    SystemMessage("Answer briefly."),
    UserMessage("Are accounts 42 and 43 open?"),
    AssistantMessage(
        "Let me check both.",
        (
            RawToolCall("toolu_1", "check_account", '{"account": "42"}'),
            RawToolCall("toolu_2", "check_account", '{"account": "43"}'),
        ),
    ),
    ToolMessage("toolu_1", "check_account", "open"),
    ToolMessage("toolu_2", "check_account", "lookup failed: upstream down", is_error=True),
]


async def test_tool_use_round_trip(fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(
        WIRE.answer(
            "Retrying the failed one.",
            [("toolu_3", "check_account", {"account": "43", "note": "Zürich ✓"})],
        )
    )
    async with WIRE.make(fake.url, sleep=sleeper, max_tokens=256) as model:
        assert isinstance(model, Model)
        response = await model.complete(TRANSCRIPT, TOOLS)

    assert response.content == "Retrying the failed one."
    (call,) = response.tool_calls
    assert (call.id, call.name) == ("toolu_3", "check_account")
    # input is an object on this wire: serialized with json.dumps, not re-shaped.
    assert call.arguments_json == json.dumps(
        {"account": "43", "note": "Zürich ✓"}, ensure_ascii=False
    )
    assert response.usage == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}

    body = fake.requests[0].body
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 256
    assert body["system"] == "You are a bank assistant.\n\nAnswer briefly."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Are accounts 42 and 43 open?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check both."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "check_account",
                    "input": {"account": "42"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "check_account",
                    "input": {"account": "43"},
                },
            ],
        },
        {
            # both results of one assistant turn travel in one user turn
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "open",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "lookup failed: upstream down",
                    "is_error": True,
                },
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "check_account",
            "description": "Check an account's status.",
            "input_schema": SCHEMA,
        }
    ]


async def test_several_text_blocks_and_no_system(fake: FakeProvider, sleeper: FakeSleep) -> None:
    reply = WIRE.answer("first")
    reply.body["content"].append({"type": "text", "text": "second"})
    fake.script(reply)
    async with WIRE.make(fake.url, sleep=sleeper) as model:
        response = await model.complete([UserMessage("hi")], [])
    assert response.content == "first\nsecond"
    body = fake.requests[0].body
    assert "system" not in body
    assert "tools" not in body


def test_user_text_after_tool_results_joins_their_turn() -> None:
    system, wire = to_anthropic_messages(
        [
            UserMessage("go"),
            AssistantMessage(None, (RawToolCall("t1", "x", "{}"),)),
            ToolMessage("t1", "x", "done"),
            UserMessage("and now?"),
        ]
    )
    assert system is None
    assert [turn["role"] for turn in wire] == ["user", "assistant", "user"]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "done", "is_error": False},
        {"type": "text", "text": "and now?"},
    ]


def test_empty_assistant_turn_is_left_out() -> None:
    _, wire = to_anthropic_messages([UserMessage("a"), AssistantMessage(), UserMessage("b")])
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


@pytest.mark.parametrize("arguments", ['{"a": ', "[1, 2]", "null"])
def test_arguments_that_are_no_object_are_sent_as_text(arguments: str) -> None:
    _, wire = to_anthropic_messages([AssistantMessage(None, (RawToolCall("t1", "x", arguments),))])
    assert list(wire[0]["content"]) == [
        {
            "type": "tool_use",
            "id": "t1",
            "name": "x",
            "input": {"invalid_arguments_json": arguments},
        }
    ]


async def test_a_client_passed_in_is_used_without_its_retries(
    fake: FakeProvider, sleeper: FakeSleep
) -> None:
    client = AsyncAnthropic(api_key=SECRET, base_url=fake.url, max_retries=5)
    fake.script(WIRE.error(529, "overloaded"))
    model = AnthropicMessagesModel("claude-test", client=client, sleep=sleeper, max_retries=1)
    with pytest.raises(Exception, match="HTTP 529"):
        await model.complete([UserMessage("hi")], [])
    assert len(fake.requests) == 2  # 529 overloaded is a retriable 5xx; the client's 5 are off
    await model.aclose()
    assert not client.is_closed()
    await client.close()


def test_client_and_base_url_together_are_refused() -> None:
    client = AsyncAnthropic(api_key=SECRET, base_url="http://127.0.0.1:1")
    with pytest.raises(ConfigValidationError):
        AnthropicMessagesModel("claude-test", client=client, base_url="http://127.0.0.1:2")
