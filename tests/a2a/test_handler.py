"""Failures are answered when they happen, never at a2a-sdk's next 0.5 s poll.

a2a-sdk's event consumer notices an executor that raised only by re-checking every 0.5 s.
The ``no_poll`` fixture stretches that interval to an hour, so any answer that still
depended on it would hang and fail the test on its 10 s deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventConsumer, EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import InvalidParamsError, TaskState
from a2a.utils.errors import ServerError

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.server import create_app
from llamon_agent.exceptions import ComponentInvokeError

from .server_utils import a2a_client, error_data, make_card, running_server, send, stream
from .server_utils import user_message as message

DEADLINE = 10.0
LEAK = "password=hunter2"


@pytest.fixture(autouse=True)
def no_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    original = EventConsumer.__init__

    def patched(self: EventConsumer, queue: EventQueue) -> None:
        original(self, queue)
        self._timeout = 3600.0

    monkeypatch.setattr(EventConsumer, "__init__", patched)


class Agent:
    """Fails: on invoke, and on stream before or after its first chunk."""

    async def invoke(self, ctx: AgentContext) -> str:
        raise ComponentInvokeError("search backend down")

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        if ctx.text == "after-chunk":
            yield "partial"
        raise ComponentInvokeError("search backend down")


class BuggyExecutor(CustomAgentExecutor):
    """An executor with a bug: ``execute`` itself raises (``where`` says when)."""

    def __init__(self, where: str, error: Exception) -> None:
        super().__init__(Agent())
        self.where = where
        self.error = error

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if self.where == "after-task":
            assert context.task_id is not None
            assert context.context_id is not None
            await TaskUpdater(event_queue, context.task_id, context.context_id).submit()
        raise self.error


async def _serve(executor: CustomAgentExecutor | None = None) -> Any:
    return create_app(Agent(), make_card(), executor=executor)


async def test_an_agent_failure_on_send_is_answered_without_polling() -> None:
    async with running_server(await _serve()) as url, a2a_client(url) as client:
        task = await asyncio.wait_for(send(client, message("x")), DEADLINE)
    assert task.status.state is TaskState.failed
    assert error_data(task)["errorCode"] == "UPSTREAM_UNAVAILABLE"


@pytest.mark.parametrize("text", ["before-chunk", "after-chunk"])
async def test_an_agent_failure_on_stream_is_answered_without_polling(text: str) -> None:
    async with running_server(await _serve()) as url, a2a_client(url, streaming=True) as client:
        events = await asyncio.wait_for(stream(client, message(text)), DEADLINE)
    task, _ = events[-1]
    assert task.status.state is TaskState.failed
    assert error_data(task)["errorCode"] == "UPSTREAM_UNAVAILABLE"


@pytest.mark.parametrize("where", ["before-task", "after-task"])
async def test_an_executor_that_raises_ends_the_task_failed_at_once(where: str) -> None:
    executor = BuggyExecutor(where, RuntimeError(f"pool exhausted, {LEAK}"))
    async with running_server(await _serve(executor)) as url, a2a_client(url) as client:
        task = await asyncio.wait_for(send(client, message("x")), DEADLINE)
    assert task.status.state is TaskState.failed
    data = error_data(task)
    assert data["errorCode"] == "INTERNAL_ERROR"
    assert data["incidentId"]
    assert LEAK not in task.model_dump_json()


async def test_an_executor_that_raises_is_answered_at_once_on_stream() -> None:
    executor = BuggyExecutor("after-task", RuntimeError(LEAK))
    async with running_server(await _serve(executor)) as url, a2a_client(url, streaming=True) as c:
        events = await asyncio.wait_for(stream(c, message("x")), DEADLINE)
    task, _ = events[-1]
    assert task.status.state is TaskState.failed
    assert error_data(task)["errorCode"] == "INTERNAL_ERROR"


async def test_a_protocol_error_raised_by_the_executor_is_answered_at_once() -> None:
    executor = BuggyExecutor("after-task", ServerError(error=InvalidParamsError()))
    async with running_server(await _serve(executor)) as url, a2a_client(url) as client:
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await asyncio.wait_for(send(client, message("x")), DEADLINE)
    error = caught.value.error
    assert error.code == -32602
    assert isinstance(error.data, dict)
    assert error.data["errorCode"] == "INVALID_INPUT"
