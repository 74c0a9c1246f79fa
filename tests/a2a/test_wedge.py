"""A task store that fails while an agent runs ends that one task, never the server.

When a write of the task store fails, a2a-sdk's consumer of the task's events stops. The
failing request gets a classified JSON-RPC error; the events nobody will read again are
dropped, the agent is stopped, and the task's terminal state is written once the store
answers again. Every later request is served, and the server shuts down.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import make_card
from tests._support.a2a_server import user_message as message

pytestmark = pytest.mark.usefixtures("with_and_without_a_tracer_provider")

DEADLINE = 10.0
HOST_IN_ERROR = "db.internal.example:5432"


class FlakyStore(InMemoryTaskStore):
    """A real task store whose next write fails (``fail_next``), or every call while
    ``down`` (what asyncpg raises while PostgreSQL is stopped). Like a database, it keeps
    and answers copies: a2a-sdk's own keeps the caller's object, which the request handler
    goes on changing, so a refused write would show up in it all the same."""

    def __init__(self) -> None:
        super().__init__()
        self.next_error: BaseException | None = None
        self.down = False
        self.refused = asyncio.Event()

    def fail_next(self, error: BaseException) -> None:
        self.next_error = error

    def _check(self) -> None:
        if self.down:
            self.refused.set()
            raise ConnectionRefusedError(111, f"Connect call failed ('{HOST_IN_ERROR}')")
        error, self.next_error = self.next_error, None
        if error is not None:
            raise error

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        self._check()
        await super().save(task.model_copy(deep=True), context)

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        if self.down:
            self._check()
        task = await super().get(task_id, context)
        return None if task is None else task.model_copy(deep=True)


class Agent:
    """``wait``: runs until ``release`` is set (or it is cancelled); anything else: answers."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        if ctx.text == "wait":
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        return f"answer to {ctx.text}"


@asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free port; on exit the shutdown must finish in time."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serve = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(serve), DEADLINE)
        except TimeoutError:
            serve.cancel()
            pytest.fail("the server did not shut down")
        finally:
            sock.close()


def _body(method: str, text: str, **params: Any) -> dict[str, Any]:
    payload = message(text).model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": payload, **params}}


async def rpc(url: str, method: str, text: str, **params: Any) -> list[dict[str, Any]]:
    """The JSON-RPC answers to one call (every SSE event of a stream), within DEADLINE."""

    async def call() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            response = await http.post(url, json=_body(method, text, **params))
        if not response.headers["content-type"].startswith("text/event-stream"):
            return [response.json()]
        return [
            json.loads(line.removeprefix("data:"))
            for line in response.text.splitlines()
            if line.startswith("data:")
        ]

    return await asyncio.wait_for(call(), DEADLINE)


async def get_task(url: str, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}
    async with httpx.AsyncClient(timeout=DEADLINE) as http:
        answer: dict[str, Any] = (await http.post(url, json=body)).json()
    return answer


def state_of(answer: dict[str, Any]) -> str:
    return str(answer["result"]["status"]["state"])


async def assert_served(url: str) -> None:
    """The next message/send and message/stream are answered (completed)."""
    (sent,) = await rpc(url, "message/send", "next")
    assert state_of(sent) == "completed", sent
    streamed = await rpc(url, "message/stream", "next")
    assert state_of(streamed[-1]) == "completed", streamed


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            ConnectionRefusedError(111, f"Connect call failed ('{HOST_IN_ERROR}')"),
            ("UPSTREAM_UNAVAILABLE", "database_unavailable", True),
        ),
        (
            UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
            ("INTERNAL_ERROR", "unicode_encode_error", False),
        ),
    ],
    ids=["connection-refused", "encoding"],
)
async def test_a_failed_write_ends_that_task_and_the_server_keeps_serving(
    method: str, error: BaseException, expected: tuple[str, str, bool]
) -> None:
    store, agent = FlakyStore(), Agent()
    async with serving(create_app(agent, make_card(), task_store=store)) as url:
        store.fail_next(error)
        answers = await rpc(url, method, "wait")
        failure = answers[-1]["error"]
        assert failure["code"] == -32603
        data = failure["data"]
        assert (data["errorCode"], data["errorReason"], data["retriable"]) == expected
        assert HOST_IN_ERROR not in json.dumps(answers)
        # the agent of the failed task is stopped, not left running with nobody reading
        await asyncio.wait_for(agent.cancelled.wait(), DEADLINE)
        await assert_served(url)
        await assert_served(url)


def failure_data(task: dict[str, Any]) -> dict[str, Any]:
    parts = task["status"]["message"]["parts"]
    data: dict[str, Any] = next(part["data"] for part in parts if part["kind"] == "data")
    return data


@asynccontextmanager
async def open_stream(url: str, text: str) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """message/stream, read event by event as the server sends them."""
    async with (
        httpx.AsyncClient(timeout=DEADLINE) as http,
        http.stream("POST", url, json=_body("message/stream", text)) as response,
    ):

        async def events() -> AsyncIterator[dict[str, Any]]:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    yield json.loads(line.removeprefix("data:"))

        yield events()


async def test_a_task_whose_end_the_store_refused_ends_once_the_store_is_back() -> None:
    store, agent = FlakyStore(), Agent()
    async with serving(create_app(agent, make_card(), task_store=store)) as url:
        async with open_stream(url, "wait") as events:
            first = await asyncio.wait_for(anext(events), DEADLINE)
            task_id = first["result"]["id"]  # the caller knows the task: it was stored
            await asyncio.wait_for(agent.started.wait(), DEADLINE)
            store.down = True  # the outage starts while the agent runs
            agent.release.set()
            rest = [event async for event in events]
        failure = rest[-1]["error"]["data"]
        assert (failure["errorReason"], failure["retriable"]) == ("database_unavailable", True)
        down = await get_task(url, task_id)
        assert down["error"]["data"]["errorReason"] == "database_unavailable"

        store.down = False
        await assert_served(url)
        answer = await get_task(url, task_id)
        assert state_of(answer) == "failed"
        data = failure_data(answer["result"])
        assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
            "UPSTREAM_UNAVAILABLE",
            "database_unavailable",
            True,
        )
        stored = await InMemoryTaskStore.get(store, task_id)  # written, not only shown
        assert stored is not None
        assert stored.status.state == TaskState.failed


async def test_a_non_blocking_send_whose_later_write_fails_ends_failed() -> None:
    store, agent = FlakyStore(), Agent()
    async with serving(create_app(agent, make_card(), task_store=store)) as url:
        (started,) = await rpc(url, "message/send", "wait", configuration={"blocking": False})
        task_id = started["result"]["id"]
        await asyncio.wait_for(agent.started.wait(), DEADLINE)
        store.down = True  # the write of the agent's answer, read in the background, fails
        agent.release.set()
        await asyncio.wait_for(store.refused.wait(), DEADLINE)
        store.down = False
        async with asyncio.timeout(DEADLINE):  # each poll is a real round trip
            while state_of(answer := await get_task(url, task_id)) != "failed":
                pass
        data = failure_data(answer["result"])
        assert (data["errorReason"], data["retriable"]) == ("database_unavailable", True)
        await assert_served(url)


async def test_a_failed_write_leaves_the_other_running_tasks_alone() -> None:
    store, agent = FlakyStore(), Agent()
    async with serving(create_app(agent, make_card(), task_store=store)) as url:
        async with open_stream(url, "wait") as events:
            first = await asyncio.wait_for(anext(events), DEADLINE)
            running_id = first["result"]["id"]
            await asyncio.wait_for(agent.started.wait(), DEADLINE)
            store.fail_next(ConnectionRefusedError(111, "Connect call failed"))
            (refused,) = await rpc(url, "message/send", "other")
            assert refused["error"]["data"]["errorReason"] == "database_unavailable"
            agent.release.set()
            rest = [event async for event in events]
        assert rest[-1]["result"]["status"]["state"] == "completed", rest
        assert not agent.cancelled.is_set()
        assert state_of(await get_task(url, running_id)) == "completed"
