"""The native loop end to end: a LoopAgent on the OpenAI adapter, against the local
OpenAI-wire server, served over A2A and called with a2a-sdk's client (all on 127.0.0.1)."""

from __future__ import annotations

import json
import logging

import pytest
from a2a.types import TaskQueryParams, TaskState

from llamon_agent.a2a.server import create_app
from llamon_agent.loop import LoopAgent, ToolRegistry, tool
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)
from tests._support.parts import artifacts_of
from tests.loop.providers.fakes import FakeProvider, FakeSleep, OpenAIWire

WIRE = OpenAIWire()


@tool
async def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_tool_calls_broken_json_and_an_answer(fake: FakeProvider) -> None:
    fake.script(
        WIRE.answer(calls=[("call_1", "add_numbers", '{"a": 2, "b": ')]),  # broken JSON
        WIRE.answer(calls=[("call_2", "add_numbers", '{"a": 2, "b": 3}')]),
        WIRE.answer("2 + 3 = 5"),
    )
    agent = LoopAgent(WIRE.make(fake.url), ToolRegistry([add_numbers]))
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("what is 2 + 3?"))
    assert task.status.state == TaskState.completed
    assert texts(task)[-1] == "2 + 3 = 5"
    second_request = fake.requests[1].body
    tool_messages = [m for m in second_request["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["tool_call_id"] == "call_1"
    assert tool_messages[0]["content"].startswith("malformed_arguments")
    third_request = fake.requests[2].body
    assert [m["content"] for m in third_request["messages"] if m["role"] == "tool"][-1] == "5"


async def test_provider_rate_limit_fails_the_task_with_retry_after(fake: FakeProvider) -> None:
    fake.script(WIRE.error(429, "slow down", {"Retry-After": "2"}))
    model = WIRE.make(fake.url, max_retries=1, sleep=FakeSleep())
    agent = LoopAgent(model, ToolRegistry([add_numbers]))
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("hi"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))
    data = error_data(fetched)
    assert fetched.status.state == TaskState.failed
    assert (data["errorCode"], data["retriable"], data["retryAfterMs"]) == (
        "RATE_LIMITED",
        True,
        2000,
    )
    assert "sk-test" not in json.dumps(fetched.model_dump(mode="json"))


@pytest.mark.reason("max_rounds_exceeded")
async def test_max_rounds_keeps_the_partial_tool_results(fake: FakeProvider) -> None:
    fake.script(
        *[WIRE.answer(calls=[(f"c{i}", "add_numbers", f'{{"a": {i}, "b": 1}}')]) for i in range(3)]
    )
    agent = LoopAgent(WIRE.make(fake.url), ToolRegistry([add_numbers]), max_rounds=2)
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("keep adding"))
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"]) == (
        "UPSTREAM_UNAVAILABLE",
        "max_rounds_exceeded",
    )
    assert [a.name for a in artifacts_of(task.artifacts)] == ["tool_results"]


@pytest.mark.parametrize(
    ("status", "headers", "code", "reason"),
    [
        (429, {"Retry-After": "1"}, "RATE_LIMITED", "rate_limited"),
        (503, {}, "UPSTREAM_UNAVAILABLE", "http_5xx"),
    ],
)
async def test_provider_failure_shows_no_upstream_location_and_reports_retries(
    fake: FakeProvider,
    caplog: pytest.LogCaptureFixture,
    status: int,
    headers: dict[str, str],
    code: str,
    reason: str,
) -> None:
    """The caller reads what failed and how often the server tried, never where the
    provider is (its URL, host, port or path), and neither does any server log line."""
    fake.script(*[WIRE.error(status, "busy", headers)] * 3, WIRE.answer("recovered"))
    model = WIRE.make(fake.url, max_retries=2, sleep=FakeSleep())
    agent = LoopAgent(model, ToolRegistry([add_numbers]))
    host_port = fake.url.removeprefix("http://")
    with caplog.at_level(logging.DEBUG):
        async with (
            running_server(create_app(agent, make_card())) as url,
            a2a_client(url) as client,
        ):
            task = await send(client, user_message("hi"))
            fetched = await client.get_task(TaskQueryParams(id=task.id))
            following = await send(client, user_message("again"))
    data = error_data(fetched)
    assert fetched.status.state == TaskState.failed
    assert (data["errorCode"], data["errorReason"], data["retriable"], data["retried"]) == (
        code,
        reason,
        True,
        2,
    )
    assert len(fake.requests) == 4  # three tries of the failing call, then the next request
    seen_by_client = json.dumps(fetched.model_dump(mode="json"))
    for location in (host_port, "127.0.0.1", WIRE.path, "http://"):
        assert location not in seen_by_client
    assert data["errorMessage"].startswith(f"OpenAI API answered HTTP {status}")
    assert caplog.records  # the server logged the failure (and the provider's requests)
    assert host_port not in caplog.text
    assert WIRE.path not in caplog.text
    assert following.status.state == TaskState.completed
    assert texts(following)[-1] == "recovered"
