"""``build_agent_context``: which keys of a flow's state go where, and which never leave."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from a2a.types import DataPart, TextPart

from llamon_agent import build_agent_context as top_level_build
from llamon_agent.client import AgentCallContext, build_agent_context


def _parts(context: AgentCallContext) -> list[Any]:
    return [part.root for part in context.to_message().parts]


def test_query_is_the_text_and_nothing_else_is_sent_unless_named() -> None:
    state = {
        "query": "What is 2 + 2?",
        "thread_id": "task-1",
        "subject": "math",
        "data": [{"x": 1}],
    }
    context = build_agent_context(state)
    assert context == AgentCallContext(text="What is 2 + 2?")
    message = context.to_message()
    assert [type(p) for p in _parts(context)] == [TextPart]
    assert message.context_id is None
    assert message.metadata is None
    assert "task-1" not in message.model_dump_json()


def test_input_then_the_last_message_are_the_text_when_there_is_no_query() -> None:
    @dataclass
    class Said:
        content: Any

    assert build_agent_context({"input": "from input"}).text == "from input"
    assert build_agent_context({"messages": [Said("first"), Said("last")]}).text == "last"
    assert build_agent_context({"messages": [{"role": "user", "content": "dict"}]}).text == "dict"
    blocks = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    assert build_agent_context({"messages": [Said(blocks)]}).text == "ab"
    assert build_agent_context({"query": 3, "input": "not a str query"}).text == "not a str query"
    assert build_agent_context({}).text == ""


def test_context_id_continues_the_called_agents_conversation() -> None:
    message = build_agent_context({"query": "q", "context_id": "ctx-9"}).to_message()
    assert message.context_id == "ctx-9"


def test_named_keys_go_to_a_data_part_and_the_metadata() -> None:
    state = {
        "query": "q",
        "subject": "math",
        "profile": {"name": "Kim", "api_key": "sk-123", "nested": [{"sessionId": "s"}]},
        "trace": "abc",
    }
    context = build_agent_context(
        state, data_keys=["subject", "profile", "missing"], metadata_keys=["trace"]
    )
    text, data = _parts(context)
    assert isinstance(text, TextPart)
    assert isinstance(data, DataPart)
    # credential-looking keys inside a sent value are left out; a missing key is skipped
    assert data.data == {"subject": "math", "profile": {"name": "Kim", "nested": [{}]}}
    assert context.to_message().metadata == {"trace": "abc"}


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("thread_id", "an internal key"),
        ("__interrupt__", "an internal key"),
        ("_private", "an internal key"),
        ("llamon_sent", "an internal key"),
        ("api_key", "it looks like a credential"),
        ("accessToken", "it looks like a credential"),
        ("db_password", "it looks like a credential"),
        ("Authorization", "it looks like a credential"),
        ("session_cookie", "it looks like a credential"),
    ],
)
def test_a_named_key_that_is_never_sent_is_refused_without_its_value(key: str, why: str) -> None:
    with pytest.raises(ValueError, match="is never sent") as caught:
        build_agent_context({key: "s3cr3t-value"}, data_keys=[key])
    assert str(caught.value) == f"state key {key!r} is never sent to another agent: {why}"
    assert "s3cr3t" not in str(caught.value)


def test_plain_words_that_merely_contain_auth_are_sent() -> None:
    context = build_agent_context(
        {"author": "Han", "authorName": "Kang"}, data_keys=["author", "authorName"]
    )
    assert context.data == {"author": "Han", "authorName": "Kang"}


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (object(), "state key 'v' is not JSON (a object)"),
        (b"raw", "state key 'v' is not JSON (a bytes)"),
        (math.nan, "state key 'v' is not JSON (a non-finite float)"),
        ({"deep": [1, {2: "x"}]}, "state key 'v.deep[1]' is not JSON (a non-string key)"),
    ],
)
def test_a_value_that_is_not_json_is_refused_by_its_key(value: object, shown: str) -> None:
    with pytest.raises(ValueError, match="is not JSON") as caught:
        build_agent_context({"v": value}, data_keys=["v"])
    assert str(caught.value) == shown


def test_each_message_gets_a_new_message_id_and_the_top_level_name_is_the_same() -> None:
    context = build_agent_context({"query": "q"})
    assert context.to_message().message_id != context.to_message().message_id
    assert context.to_message("fixed").message_id == "fixed"
    assert top_level_build is build_agent_context
