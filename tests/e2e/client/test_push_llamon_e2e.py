"""Push notifications from a real llamon server to a real ``push_receiver`` (both uvicorn
on 127.0.0.1, the server's policy letting loopback in): ``AgentClient.start`` registers,
``receiver.wait`` resolves on the pushed terminal state, forged POSTs are refused and
resolve nothing. Nothing sleeps: agents wait on events the test sets, with timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types import TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    AgentClient,
    CardMismatchError,
    PushReceiver,
    RemoteTimeoutError,
    RemoteUnavailableError,
    clear_card_cache,
    push_receiver,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server

LOOPBACK = PushPolicy(allow=["127.0.0.1/32"])
WAIT = 10.0


class Gated:
    """``hold`` waits for ``gate``; ``fail`` fails UPSTREAM_UNAVAILABLE; ``ask`` pauses;
    anything else is echoed."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self, ctx: AgentContext) -> str | HITLInterrupt:
        self.started.set()
        if ctx.text == "hold":
            await asyncio.wait_for(self.gate.wait(), WAIT)
            return "released"
        if ctx.text == "fail":
            raise_application_error(
                ErrorCode.UPSTREAM_UNAVAILABLE,
                "billing_db_down",
                message="The billing database is down.",
                retriable=True,
            )
        if ctx.text == "ask" or (ctx.resumed and ctx.text == "again"):
            return HITLInterrupt(payload={"question": "Which city?"})
        return f"{'city' if ctx.resumed else 'echo'} {ctx.text}"


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Gated, str, PushReceiver]]:
    clear_card_cache()
    agent = Gated()
    app = create_app(agent, make_card(push=True), push_policy=LOOPBACK)
    receiver = push_receiver(path="/a2a/push")
    async with running_server(app) as url, receiver.serve("127.0.0.1", 0):
        try:
            yield agent, url, receiver
        finally:
            agent.gate.set()


async def test_start_then_wait_gives_the_completed_result(
    setup: tuple[Gated, str, PushReceiver],
) -> None:
    _, url, receiver = setup
    async with AgentClient(url, timeout=WAIT) as agent:
        started = await agent.start("hello", push=receiver)
        assert started.task_id is not None
        assert started.state in (TaskState.submitted, TaskState.working, TaskState.completed)
        result = await receiver.wait(started.task_id, timeout=WAIT)
    assert (result.state, result.text, result.task_id) == (
        TaskState.completed,
        "echo hello",
        started.task_id,
    )
    assert result.context_id == started.context_id
    assert receiver.pending == 0  # the terminal state retired the registration


async def test_a_failed_task_raises_the_typed_error(
    setup: tuple[Gated, str, PushReceiver],
) -> None:
    _, url, receiver = setup
    async with AgentClient(url, timeout=WAIT) as agent:
        started = await agent.start("fail", push=receiver)
        assert started.task_id is not None
        with pytest.raises(RemoteUnavailableError) as caught:
            await receiver.wait(started.task_id, timeout=WAIT)
        error = caught.value
        assert (error.code, error.reason, error.retriable) == (
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "billing_db_down",
            True,
        )
        assert (error.task_id, error.agent) == (started.task_id, "test-agent")
        assert str(error) == "The billing database is down."
        # the next call is still answered
        again = await agent.start("after", push=receiver)
        assert again.task_id is not None
        assert (await receiver.wait(again.task_id, timeout=WAIT)).text == "echo after"


def _forged(task_id: str, context_id: str, state: str = "completed") -> dict[str, Any]:
    return {
        "kind": "task",
        "id": task_id,
        "contextId": context_id,
        "status": {"state": state},
        "artifacts": [
            {"artifactId": "a1", "parts": [{"kind": "text", "text": "forged"}]},
        ],
    }


@pytest.mark.reason("push_wait_timeout")
async def test_forged_notifications_are_refused_and_resolve_nothing(
    setup: tuple[Gated, str, PushReceiver],
) -> None:
    gated, url, receiver = setup
    assert receiver.url is not None
    async with AgentClient(url, timeout=WAIT) as agent, httpx.AsyncClient(timeout=WAIT) as http:
        started = await agent.start("hold", push=receiver)
        task_id, context_id = started.task_id, started.context_id
        assert task_id is not None
        assert context_id is not None
        await asyncio.wait_for(gated.started.wait(), WAIT)
        body = _forged(task_id, context_id)

        missing = await http.post(receiver.url, json=body)
        assert missing.status_code == 401
        assert missing.json() == {
            "error": "push_token_required",
            "message": "This webhook requires the X-A2A-Notification-Token header.",
        }
        wrong = await http.post(
            receiver.url, json=body, headers={"X-A2A-Notification-Token": "guessed"}
        )
        assert wrong.status_code == 401
        assert wrong.json() == {
            "error": "push_token_invalid",
            "message": "The notification token is not valid.",
        }
        # nothing was resolved: the wait times out, typed
        with pytest.raises(RemoteTimeoutError) as caught:
            await receiver.wait(task_id, timeout=0.05)
        assert (caught.value.code, caught.value.reason, caught.value.retriable) == (
            ErrorCode.UPSTREAM_TIMEOUT,
            "push_wait_timeout",
            True,
        )
        assert caught.value.task_id == task_id
        assert receiver.current(task_id) is None or (
            receiver.current(task_id).status.state  # type: ignore[union-attr]
            not in (TaskState.completed, TaskState.failed)
        )

        gated.gate.set()
        result = await receiver.wait(task_id, timeout=WAIT)
    assert (result.state, result.text) == (TaskState.completed, "released")


async def test_input_required_is_a_result_then_the_resumed_task_ends(
    setup: tuple[Gated, str, PushReceiver],
) -> None:
    _, url, receiver = setup
    async with AgentClient(url, timeout=WAIT) as agent:
        started = await agent.start("ask", push=receiver)
        assert started.task_id is not None
        paused = await receiver.wait(started.task_id, timeout=WAIT)
        assert (paused.state, paused.needs_input, paused.question) == (
            TaskState.input_required,
            True,
            "Which city?",
        )
        assert receiver.pending == 1  # a paused task keeps its registration
        answered = await agent.resume(paused, "Paris")
        assert answered.text == "city Paris"
        pushed = await receiver.wait(started.task_id, timeout=WAIT)
    assert (pushed.state, pushed.text) == (TaskState.completed, "city Paris")
    assert receiver.pending == 0


async def test_register_push_adds_a_receiver_to_a_running_task(
    setup: tuple[Gated, str, PushReceiver],
) -> None:
    gated, url, receiver = setup
    second = push_receiver()
    async with second.serve(), AgentClient(url, timeout=WAIT) as agent:
        started = await agent.start("hold", push=receiver)
        assert started.task_id is not None
        await agent.register_push(started.task_id, second)
        gated.gate.set()
        first = await receiver.wait(started.task_id, timeout=WAIT)
        other = await second.wait(started.task_id, timeout=WAIT)
    assert (first.text, other.text) == ("released", "released")
    assert (first.state, other.state) == (TaskState.completed, TaskState.completed)


async def test_an_agent_without_push_is_refused_before_anything_is_sent() -> None:
    clear_card_cache()
    calls: list[str] = []

    async def echo(ctx: AgentContext) -> str:
        calls.append(ctx.text)
        return ctx.text

    receiver = push_receiver("http://127.0.0.1:9/hook")
    async with (
        running_server(create_app(echo, make_card())) as url,
        AgentClient(url, timeout=WAIT) as agent,
    ):
        with pytest.raises(CardMismatchError) as caught:
            await agent.start("hi", push=receiver)
        assert str(caught.value) == (
            "agent 'test-agent' does not declare push notifications in its card "
            "(capabilities.pushNotifications)"
        )
        assert (await agent.send("next")).text == "next"
    assert calls == ["next"]
    assert receiver.pending == 0
