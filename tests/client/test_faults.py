"""``AgentClient`` under a fault plan: a downstream fault takes the place of the called
agent's answer, and the client's own handling (retries, the ``RemoteAgentError`` family,
a stream's recovery) is what the caller sees.

The called agent is a plain a2a-sdk server (not llamon) on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from a2a.types import TaskState

from llamon_agent.client import (
    AgentClient,
    ArtifactChunk,
    FinalEvent,
    RemoteInternalError,
    RemoteUnavailableError,
    RetryPolicy,
    StatusEvent,
    StreamEvent,
    clear_card_cache,
)
from llamon_agent.client.faults import FAILED_TASK_TEXT
from llamon_agent.core.faults import (
    DownstreamFailed,
    DownstreamStreamDrop,
    DownstreamUnavailable,
    FaultPlan,
    fault_scope,
)
from tests._support.a2a_server import running_server
from tests._support.plain_agent import PlainAgent, plain_app

TIMEOUT = 20.0
NO_WAIT = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)


class GatedAgent(PlainAgent):
    """A plain a2a-sdk agent: answers ``plain <text>`` at once, except for ``go``: it
    reports working, then waits for ``gate`` before answering ``all of it``."""

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.gate = asyncio.Event()

    async def _answer(self, text: str) -> str:
        if text == "go":
            await self.gate.wait()
            return "all of it"
        return f"plain {text}"


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@pytest.fixture
def agent() -> GatedAgent:
    return GatedAgent()


@pytest.fixture
async def url(agent: GatedAgent) -> AsyncIterator[str]:
    async with running_server(plain_app(agent)) as base:
        yield base


async def _answered_after(client: AgentClient) -> None:
    """The next call, outside the plan, is answered by the agent itself."""
    result = await asyncio.wait_for(client.send("again"), TIMEOUT)
    assert (result.state, result.text) == (TaskState.completed, "plain again")


@pytest.mark.reason("http_5xx")
async def test_unavailable_is_an_http_503_retried_by_the_policy(
    url: str, agent: GatedAgent
) -> None:
    plan = FaultPlan([DownstreamUnavailable(kind="downstream_unavailable", agent="test-agent")])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan), pytest.raises(RemoteUnavailableError) as caught:
            await asyncio.wait_for(client.send("hi"), TIMEOUT)
        error = caught.value
        assert (error.code.value, error.reason, error.retriable, error.http_status) == (
            "UPSTREAM_UNAVAILABLE",
            "http_5xx",
            True,
            503,
        )
        assert plan.fired == {"downstream_unavailable:test-agent": 3}  # every attempt
        assert url.removeprefix("http://") not in str(error)  # as for a real 503
        assert agent.runs == 0
        await _answered_after(client)


@pytest.mark.reason("remote_task_failed")
async def test_failed_answers_a_failed_task_as_a_plain_agent_would(
    url: str, agent: GatedAgent
) -> None:
    plan = FaultPlan([DownstreamFailed(kind="downstream_failed", agent=url)])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan), pytest.raises(RemoteInternalError) as caught:
            await asyncio.wait_for(client.send("hi"), TIMEOUT)
        error = caught.value
        assert (error.code.value, error.reason, error.retriable, str(error)) == (
            "INTERNAL_ERROR",
            "remote_task_failed",
            False,
            FAILED_TASK_TEXT,
        )
        assert error.task_id is not None
        assert plan.fired == {f"downstream_failed:{url}": 1}  # an answer: not retried
        assert agent.runs == 0
        await _answered_after(client)


async def test_a_fault_naming_another_agent_leaves_this_one_alone(url: str) -> None:
    plan = FaultPlan([DownstreamFailed(kind="downstream_failed", agent="someone-else")])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan):
            result = await asyncio.wait_for(client.send("hi"), TIMEOUT)
    assert result.text == "plain hi"
    assert plan.fired == {}


async def test_a_stream_drop_is_not_a_send_fault_and_is_not_counted(url: str) -> None:
    drop = DownstreamStreamDrop(kind="downstream_stream_drop", agent="test-agent")
    plan = FaultPlan([drop])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan):
            result = await asyncio.wait_for(client.send("hi"), TIMEOUT)
    assert result.text == "plain hi"
    assert plan.fired == {}


async def _streamed(client: AgentClient, agent: GatedAgent) -> list[StreamEvent]:
    got: list[StreamEvent] = []
    async for event in client.stream("go"):
        got.append(event)
        if isinstance(event, StatusEvent):
            agent.gate.set()  # the agent ends while the dropped stream is being recovered
    return got


async def test_stream_drop_is_recovered_and_the_task_read_to_its_end(
    url: str, agent: GatedAgent
) -> None:
    drop = DownstreamStreamDrop(kind="downstream_stream_drop", agent="test-agent", after_events=2)
    plan = FaultPlan([drop])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan):
            got = await asyncio.wait_for(_streamed(client, agent), TIMEOUT)
        # the two events before the drop (the task, then working), the rest recovered
        assert [(type(event), getattr(event, "state", None)) for event in got] == [
            (StatusEvent, TaskState.submitted),
            (StatusEvent, TaskState.working),
            (ArtifactChunk, None),
            (FinalEvent, None),
        ]
        final = got[-1]
        assert isinstance(final, FinalEvent)
        assert (final.result.state, final.result.text) == (TaskState.completed, "all of it")
        assert agent.runs == 1  # followed again, never sent again
        assert plan.fired == {"downstream_stream_drop:test-agent": 1}
        await _answered_after(client)


@pytest.mark.reason("remote_task_failed")
async def test_stream_failed_raises_after_the_stream_opened(url: str, agent: GatedAgent) -> None:
    plan = FaultPlan([DownstreamFailed(kind="downstream_failed", agent="test-agent")])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan), pytest.raises(RemoteInternalError) as caught:
            await asyncio.wait_for(_streamed(client, agent), TIMEOUT)
        assert (caught.value.reason, str(caught.value)) == ("remote_task_failed", FAILED_TASK_TEXT)
        assert agent.runs == 0
        await _answered_after(client)


async def test_stream_unavailable_is_retried_then_raised(url: str, agent: GatedAgent) -> None:
    plan = FaultPlan([DownstreamUnavailable(kind="downstream_unavailable", agent="test-agent")])
    async with AgentClient(url, retry=NO_WAIT) as client:
        with fault_scope(plan), pytest.raises(RemoteUnavailableError) as caught:
            await asyncio.wait_for(_streamed(client, agent), TIMEOUT)
        assert (caught.value.reason, caught.value.http_status) == ("http_5xx", 503)
        assert plan.fired == {"downstream_unavailable:test-agent": 3}
        assert agent.runs == 0
        await _answered_after(client)
