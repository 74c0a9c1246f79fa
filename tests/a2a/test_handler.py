"""Failures are answered when they happen, never at a2a-sdk's next 0.5 s poll.

a2a-sdk's event consumer notices an executor that raised only by re-checking every 0.5 s.
The ``no_poll`` fixture stretches that interval to an hour, so any answer that still
depended on it would hang and fail the test on its 10 s deadline.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventConsumer, EventQueue
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import InvalidParamsError, Task, TaskState
from a2a.utils.errors import ServerError

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.server import create_app
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    stream,
)
from tests._support.a2a_server import user_message as message

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


# --- a request that fails outside the agent (the task store) ---------------------------------

PATH_IN_ERROR = "/srv/agents/secret-tenant/tasks.db"


class FailingStore(InMemoryTaskStore):
    """A task store whose writes or reads fail with ``error``."""

    def __init__(self, error: Exception, *, on: str) -> None:
        super().__init__()
        self.error = error
        self.on = on

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        if self.on == "save":
            raise self.error
        await super().save(task, context)

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        if self.on == "get":
            raise self.error
        return await super().get(task_id, context)


def _locked() -> sqlite3.OperationalError:
    return sqlite3.OperationalError(f"database is locked: {PATH_IN_ERROR}")


async def _raw_rpc(url: str, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON-RPC answers to one call: one object, or every SSE event of a stream."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        response = await http.post(url + "/", json=body)
    if not response.headers["content-type"].startswith("text/event-stream"):
        return [response.json()]
    return [
        json.loads(line.removeprefix("data:"))
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]


def _send_params() -> dict[str, Any]:
    return {"message": message("x").model_dump(mode="json", by_alias=True, exclude_none=True)}


@pytest.mark.reason("database_unavailable")
@pytest.mark.parametrize("method", ["message/send", "message/stream"])
async def test_a_locked_task_database_is_a_retriable_protocol_error(method: str) -> None:
    app = create_app(Agent(), make_card(), task_store=FailingStore(_locked(), on="save"))
    async with running_server(app) as url:
        answers = await _raw_rpc(url, method, _send_params())
    error = answers[-1]["error"]  # a stream ends with the error event, not a cut connection
    assert error["code"] == -32603
    assert error["data"]["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert error["data"]["errorReason"] == "database_unavailable"
    assert error["data"]["retriable"] is True
    assert PATH_IN_ERROR not in json.dumps(answers)


async def test_a_task_store_failing_on_tasks_get_is_a_protocol_error() -> None:
    app = create_app(Agent(), make_card(), task_store=FailingStore(_locked(), on="get"))
    async with running_server(app) as url:
        (answer,) = await _raw_rpc(url, "tasks/get", {"id": "some-task"})
    assert answer["error"]["data"]["errorReason"] == "database_unavailable"
    assert PATH_IN_ERROR not in json.dumps(answer)


async def test_an_unmapped_store_failure_gets_an_incident_id_and_no_text() -> None:
    store = FailingStore(RuntimeError(f"pool exhausted, {LEAK}"), on="save")
    app = create_app(Agent(), make_card(), task_store=store)
    async with running_server(app) as url:
        (answer,) = await _raw_rpc(url, "message/send", _send_params())
    data = answer["error"]["data"]
    assert (data["errorCode"], data["errorReason"]) == ("INTERNAL_ERROR", "runtime_error")
    assert data["incidentId"]
    assert LEAK not in json.dumps(answer)
