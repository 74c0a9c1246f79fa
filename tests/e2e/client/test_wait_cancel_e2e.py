"""``AgentClient.wait`` (polling with backoff under a deadline), ``cancel``, and what a
cancelled caller does to the remote task: against real llamon servers and a plain a2a-sdk
server on 127.0.0.1. Waits between polls are recorded, never slept."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Part, Task, TaskState, TaskStatus, TextPart
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import Response

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    IDEMPOTENT_SEND_EXTENSION,
    AgentClient,
    RemoteNotFoundError,
    RemoteRateLimitedError,
    RemoteTaskNotCancelableError,
    RemoteTimeoutError,
    clear_card_cache,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server
from tests._support.retry_clock import Recorded

WAIT = 10.0
"""Seconds a test waits for an event before it fails."""


class Gate:
    """A llamon agent: ``ask`` pauses (the answer ``wait`` runs on, any other is the city),
    ``quota`` fails once released, anything else runs until ``release`` is set
    (``started`` says it runs; ``cancelled`` that it was cancelled)."""

    def __init__(self) -> None:
        self.task_ids: list[str] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, ctx: AgentContext) -> str | HITLInterrupt:
        if ctx.text == "ask" and not ctx.resumed:
            return HITLInterrupt(payload={"question": "Which city?"})
        if ctx.resumed and ctx.text != "wait":
            return f"city {ctx.text}"
        self.task_ids.append(ctx.task_id)
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        if ctx.text == "quota":
            raise_application_error(
                ErrorCode.RATE_LIMITED,
                "quota_exceeded",
                message="quota used up",
                retriable=True,
                retryAfterMs=900,
            )
        return f"done {ctx.text}"


class Methods(BaseHTTPMiddleware):
    """Writes down each JSON-RPC method the server is sent."""

    def __init__(self, app: Any, seen: list[str]) -> None:
        super().__init__(app)
        self.seen = seen

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.method == "POST":
            body = await request.json()
            self.seen.append(str(body.get("method")))
        return await call_next(request)


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def llamon(gate: Gate) -> AsyncIterator[str]:
    async with running_server(create_app(gate, make_card())) as url:
        yield url


# -- wait ---------------------------------------------------------------------------------


async def test_wait_polls_with_backoff_until_the_task_ends(gate: Gate, llamon: str) -> None:
    async def release_on_second_wait(number: int) -> None:
        if number == 2:
            gate.release.set()

    time = Recorded(on_sleep=release_on_second_wait)
    async with AgentClient(llamon, clock=time.clock()) as client:
        accepted = await client.send("scan", blocking=False)
        assert accepted.state in (TaskState.submitted, TaskState.working)
        assert accepted.task_id is not None
        result = await client.wait(accepted.task_id)
        following = await client.send("again")
    assert (result.state, result.text, result.task_id) == (
        TaskState.completed,
        "done scan",
        accepted.task_id,
    )
    ceilings = [0.5, 1.0, 2.0, 4.0, 8.0]
    assert time.waits == (ceilings + [8.0] * len(time.waits))[: len(time.waits)]
    assert len(time.waits) >= 2
    assert following.text == "done again"


@pytest.mark.reason("remote_wait_deadline_exceeded")
async def test_wait_gives_up_at_its_deadline(gate: Gate, llamon: str) -> None:
    time = Recorded()
    async with AgentClient(llamon, clock=time.clock()) as client:
        accepted = await client.send("scan", blocking=False)
        assert accepted.task_id is not None
        with pytest.raises(RemoteTimeoutError) as caught:
            await client.wait(accepted.task_id, deadline=5.0)
        gate.release.set()
        finished = await client.wait(accepted.task_id)
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.UPSTREAM_TIMEOUT,
        "remote_wait_deadline_exceeded",
        True,
    )
    assert error.task_id == accepted.task_id
    assert str(error) == (
        f"agent 'test-agent': task {accepted.task_id} was still working "
        "when the wait's deadline of 5 s passed"
    )
    assert time.waits[:4] == [0.5, 1.0, 2.0, 1.5]  # the last one cut to the deadline
    assert time.now >= 5.0
    assert finished.text == "done scan"


async def test_wait_stops_at_a_question(llamon: str) -> None:
    async with AgentClient(llamon, clock=Recorded().clock()) as client:
        accepted = await client.send("ask", blocking=False)
        assert accepted.task_id is not None
        paused = await client.wait(accepted.task_id)
        answered = await client.resume(paused, "Paris")
    assert paused.state is TaskState.input_required
    assert (paused.needs_input, paused.question) == (True, "Which city?")
    assert (answered.state, answered.text) == (TaskState.completed, "city Paris")


async def test_wait_raises_a_failed_task_like_send(gate: Gate, llamon: str) -> None:
    async def release(_: int) -> None:
        gate.release.set()

    async with AgentClient(llamon, clock=Recorded(on_sleep=release).clock()) as client:
        accepted = await client.send("quota", blocking=False)
        assert accepted.task_id is not None
        with pytest.raises(RemoteRateLimitedError) as caught:
            await client.wait(accepted.task_id)
        following = await client.send("again")
    assert (caught.value.reason, caught.value.retry_after_ms) == ("quota_exceeded", 900)
    assert caught.value.task_id == accepted.task_id
    assert following.text == "done again"


async def test_wait_for_an_unknown_task_is_not_found(llamon: str) -> None:
    async with AgentClient(llamon, clock=Recorded().clock()) as client:
        with pytest.raises(RemoteNotFoundError):
            await client.wait("no-such-task")
        following = await client.send("ask")
    assert following.needs_input


# -- cancel ------------------------------------------------------------------------------


@pytest.mark.reason("remote_task_not_cancelable")
async def test_cancel_ends_a_running_task_and_refuses_an_ended_one(gate: Gate, llamon: str) -> None:
    async with AgentClient(llamon) as client:
        accepted = await client.send("scan", blocking=False)
        assert accepted.task_id is not None
        await asyncio.wait_for(gate.started.wait(), WAIT)
        cancelled = await client.cancel(accepted.task_id)
        with pytest.raises(RemoteTaskNotCancelableError) as caught:
            await client.cancel(accepted.task_id)
        read = await client.get(accepted.task_id)
        following = await client.send("ask")
    assert cancelled.state is read.state is TaskState.canceled
    await asyncio.wait_for(gate.cancelled.wait(), WAIT)
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.INVALID_INPUT,
        "remote_task_not_cancelable",
        False,
    )
    assert (error.jsonrpc_code, error.task_id) == (-32002, accepted.task_id)
    assert following.needs_input


async def test_a_llamon_card_declares_idempotent_sends(llamon: str) -> None:
    async with AgentClient(llamon) as client:
        card = await client.card()
    (extension,) = card.capabilities.extensions or []
    assert extension.uri == IDEMPOTENT_SEND_EXTENSION
    assert extension.params == {"windowSeconds": 86400.0}


async def _cancel_when_started(call: asyncio.Task[Any], started: asyncio.Event) -> None:
    await asyncio.wait_for(started.wait(), WAIT)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


async def test_a_cancelled_caller_cancels_the_new_task_it_sent(
    gate: Gate, llamon: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with AgentClient(llamon) as client:
        with caplog.at_level(logging.INFO, logger="llamon_agent.client"):
            call = asyncio.create_task(client.send("scan"))
            await _cancel_when_started(call, gate.started)
        (task_id,) = gate.task_ids
        read = await client.get(task_id)
        following = await client.send("ask")
    assert read.state is TaskState.canceled
    await asyncio.wait_for(gate.cancelled.wait(), WAIT)
    lines = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.client"]
    assert lines == [f"caller cancelled; cancelled the remote task {task_id}"]
    assert following.needs_input


async def test_a_cancelled_wait_cancels_the_task(gate: Gate, llamon: str) -> None:
    async with AgentClient(llamon) as client:
        accepted = await client.send("scan", blocking=False)
        assert accepted.task_id is not None
        await asyncio.wait_for(gate.started.wait(), WAIT)
        call = asyncio.create_task(client.wait(accepted.task_id))
        await asyncio.sleep(0)  # let the wait start polling
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        read = await client.get(accepted.task_id)
    assert read.state is TaskState.canceled


async def test_a_cancelled_resume_cancels_the_task(gate: Gate, llamon: str) -> None:
    async with AgentClient(llamon) as client:
        paused = await client.send("ask")
        call = asyncio.create_task(client.resume(paused, "wait"))
        await _cancel_when_started(call, gate.started)
        assert paused.task_id is not None
        read = await client.get(paused.task_id)
    assert read.state is TaskState.canceled


# -- a plain a2a-sdk server ------------------------------------------------------------------


class PlainGate(AgentExecutor):
    """A plain a2a-sdk agent that works until released, and can be cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = Task(
            id=str(context.task_id),
            context_id=str(context.context_id),
            status=TaskStatus(state=TaskState.working),
            history=[context.message],
        )
        await event_queue.enqueue_event(task)
        self.started.set()
        await self.release.wait()
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([Part(root=TextPart(text="plain done"))], name="response")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel()


def _plain_app(executor: PlainGate, seen: list[str]) -> Starlette:
    handler = DefaultRequestHandler(executor, InMemoryTaskStore())
    app = A2AStarletteApplication(make_card(streaming=False), handler).build()
    app.add_middleware(Methods, seen=seen)
    return app


async def test_a_plain_server_is_not_sent_the_message_again_to_cancel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    executor, seen = PlainGate(), list[str]()
    async with running_server(_plain_app(executor, seen)) as url:
        card = make_card(url + "/", streaming=False)
        async with AgentClient(card) as client:
            with caplog.at_level(logging.INFO, logger="llamon_agent.client"):
                call = asyncio.create_task(client.send("scan"))
                await _cancel_when_started(call, executor.started)
            executor.release.set()
            following = await client.send("again")
    assert seen == ["message/send", "message/send"]  # no repeat, no tasks/cancel
    lines = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.client"]
    assert lines == [
        "caller cancelled; the remote task could not be cancelled: its id is not known yet "
        "and the agent does not declare idempotent sends"
    ]
    assert following.text == "plain done"


async def test_a_plain_servers_task_is_cancelled_when_its_wait_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    executor, seen = PlainGate(), list[str]()
    async with running_server(_plain_app(executor, seen)) as url:
        card = make_card(url + "/", streaming=False)
        async with AgentClient(card, clock=Recorded().clock()) as client:
            accepted = await client.send("scan", blocking=False)
            assert accepted.task_id is not None
            await asyncio.wait_for(executor.started.wait(), WAIT)
            with caplog.at_level(logging.INFO, logger="llamon_agent.client"):
                call = asyncio.create_task(client.wait(accepted.task_id))
                await asyncio.sleep(0)
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
            read = await client.get(accepted.task_id)
    assert read.state is TaskState.canceled
    assert "tasks/cancel" in seen
    lines = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.client"]
    assert lines == [f"caller cancelled; cancelled the remote task {accepted.task_id}"]
