"""``AgentClient`` against real llamon servers on 127.0.0.1: answers, failures with every
error-data field, a paused task resumed, and a failure re-raised by an agent that called."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from a2a.types import TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    AgentClient,
    RemoteAgentError,
    RemoteNotFoundError,
    RemoteRateLimitedError,
    RemoteUnavailableError,
    clear_card_cache,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import a2a_client, error_data, make_card, running_server, send
from tests._support.a2a_server import user_message as message


async def scripted(ctx: AgentContext) -> str | HITLInterrupt:
    """Answers by command: ``quota`` and ``down`` fail, ``ask`` pauses for a birthday."""
    if ctx.text == "quota":
        raise_application_error(
            ErrorCode.RATE_LIMITED,
            "classifier_quota_exceeded",
            message="quota used up",
            retriable=True,
            retryAfterMs=60_000,
            errorSource="llm:classifier",
            domain="subject-management",
            domainCode="DOC_005",
        )
    if ctx.text == "down":
        raise ComponentInvokeError("search index down")
    if ctx.text == "ask":
        return HITLInterrupt(payload={"question": "What is your birthday?"})
    if ctx.resumed:
        return f"born on {ctx.text}"
    return f"echo {ctx.text}"


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async with running_server(create_app(scripted, make_card())) as url:
        yield url


async def test_a_completed_task_is_a_result(server: str) -> None:
    async with AgentClient(server) as agent:
        result = await agent.send("hello")
    assert result.state == TaskState.completed
    assert result.text == "echo hello"
    assert result.task_id
    assert result.context_id
    assert not result.needs_input
    assert result.question is None


async def test_a_failed_task_raises_its_code_with_every_data_field(server: str) -> None:
    async with AgentClient(server) as agent:
        with pytest.raises(RemoteRateLimitedError) as caught:
            await agent.send("quota")
        following = await agent.send("again")
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.RATE_LIMITED,
        "classifier_quota_exceeded",
        True,
    )
    assert error.retry_after_ms == 60_000
    assert error.agent == "test-agent"
    assert error.task_id
    assert error.context_id
    assert error.http_status is None
    assert error.jsonrpc_code is None
    assert error.data is not None
    assert error.data.error_source == "llm:classifier"
    assert (error.data.domain, error.data.domain_code) == ("subject-management", "DOC_005")
    assert error.data.error_message == "quota used up"
    assert error.raw_data is not None
    assert error.raw_data["errorCode"] == "RATE_LIMITED"
    assert error.cause_hops == [
        {
            "agent": "test-agent",
            "taskId": error.task_id,
            "errorCode": "RATE_LIMITED",
            "errorReason": "classifier_quota_exceeded",
            "errorSource": "llm:classifier",
        }
    ]
    assert server.removeprefix("http://") not in str(error)
    assert following.text == "echo again"


async def test_a_jsonrpc_error_with_data_is_classified_from_its_data(server: str) -> None:
    async with AgentClient(server) as agent:
        with pytest.raises(RemoteNotFoundError) as caught:
            await agent.get("no-such-task")
        following = await agent.send("still there?")
    error = caught.value
    assert error.jsonrpc_code == -32001
    assert error.data is not None
    assert error.data.error_code is ErrorCode.NOT_FOUND
    assert error.reason == error.data.error_reason
    assert error.task_id == "no-such-task"
    assert following.text == "echo still there?"


async def test_input_required_is_a_result_and_resume_completes_it(server: str) -> None:
    async with AgentClient(server) as agent:
        paused = await agent.send("ask")
        assert paused.needs_input
        assert paused.state == TaskState.input_required
        assert paused.question == "What is your birthday?"
        done = await agent.resume(paused, "1990-01-01")
        got = await agent.get(paused.task_id or "")
    assert (done.task_id, done.context_id) == (paused.task_id, paused.context_id)
    assert done.state == TaskState.completed
    assert done.text == "born on 1990-01-01"
    assert got.state == TaskState.completed


async def test_a_remote_failure_raised_in_an_agent_answers_its_caller_the_same(
    server: str,
) -> None:
    async def forwarder(ctx: AgentContext) -> str:
        async with AgentClient(server) as downstream:
            return (await downstream.send(ctx.text)).text

    async with (
        running_server(create_app(forwarder, make_card())) as url,
        a2a_client(url) as caller,
    ):
        task = await send(caller, message("quota"))
        following = await send(caller, message("fine"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "RATE_LIMITED",
        "classifier_quota_exceeded",
        True,
    )
    assert data["retryAfterMs"] == 60_000
    shown = json.dumps(task.model_dump(mode="json"))
    assert "127.0.0.1" not in shown
    assert following.status.state == TaskState.completed


@pytest.mark.reason("component_invoke_error")
async def test_an_unavailable_downstream_stays_unavailable_and_retriable(server: str) -> None:
    async with AgentClient(server) as agent:
        with pytest.raises(RemoteUnavailableError) as caught:
            await agent.send("down")
        assert (await agent.send("next")).text == "echo next"
    assert caught.value.retriable is True
    assert caught.value.reason == "component_invoke_error"
    assert isinstance(caught.value, RemoteAgentError)
