"""Two llamon apps on one PostgreSQL task store and one Redis: ``tasks/cancel`` sent to
B, which runs nothing of a task A runs, cancels A's run through Redis and answers the
run's real end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from tests._support.a2a_server import running_server
from tests._support.jsonrpc import assert_error, post, request, text_message
from tests._support.redis_server import SHARED_REDIS_URL, private_redis, unique_prefix
from tests._support.relay_replicas import SSE, handler_of, relay_of, two_replicas

WAIT = 10.0


class Hanging:
    """Streams ``c0``, then waits for ``go`` (noting a cancellation), then ``c1``."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        return "unused"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        yield "c0 "
        self.started.set()
        try:
            await self.go.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield "c1 "


KEY_ALICE = "alice-key-7c1e3a9f5b2d4e60"
KEY_BOB = "bob-key-2f8a6d0c4e1b9357"


def _auth_card() -> AgentCard:
    return build_agent_card(
        name="relay-cancel-test-agent",
        description="Answers test questions for the llamon-agent relay cancel suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=AuthSpec.api_key(),
    )


def _auth(card: AgentCard) -> AuthConfig | None:
    return AuthConfig.from_card(card, principals={"alice": KEY_ALICE, "bob": KEY_BOB})


async def _start_on_a(http: httpx.AsyncClient, url_a: str, agent: Hanging) -> tuple[SSE, str]:
    """A ``message/stream`` on A, once its agent is hanging and its ``working`` state is
    stored (A streams an event after storing it); the stream and its task id."""
    run = SSE(http, url_a, request("message/stream", {"message": text_message("go")}))
    await asyncio.wait_for(agent.started.wait(), WAIT)
    await run.until(lambda replies: any(_working(reply) for reply in replies), WAIT)
    first = run.results[0]
    task_id = str(first.get("taskId") or first["id"])
    return run, task_id


def _working(reply: dict[str, Any]) -> bool:
    status = reply.get("result", {}).get("status") or {}
    return bool(status.get("state") == "working")


async def _state(http: httpx.AsyncClient, url: str, task_id: str) -> str:
    got = await post(http, url, request("tasks/get", {"id": task_id}, "get"))
    return str(got["result"]["status"]["state"])


async def test_cancel_on_b_cancels_the_run_on_a_and_answers_canceled() -> None:
    agent = Hanging()
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            run, task_id = await _start_on_a(http, url_a, agent)
            await asyncio.wait_for(relay_of(app_a).listening.wait(), WAIT)
            answer = await post(http, url_b, request("tasks/cancel", {"id": task_id}, "c-1"))
            assert answer["result"]["id"] == task_id
            assert answer["result"]["status"]["state"] == "canceled"
            await asyncio.wait_for(agent.cancelled.wait(), WAIT)  # A's agent was cancelled
            await asyncio.wait_for(run.task, WAIT)  # A's stream ended: its end is stored
            assert run.results[-1]["kind"] == "status-update"
            assert run.results[-1]["final"] is True
            assert run.results[-1]["status"]["state"] == "canceled"
            assert await _state(http, url_a, task_id) == "canceled"
            assert await _state(http, url_b, task_id) == "canceled"
            # cancelling it again is the ended task's answer, on either replica
            again = await post(http, url_b, request("tasks/cancel", {"id": task_id}, "c-2"))
            assert again["error"]["code"] == -32002
            assert again["error"]["message"].endswith("current state: canceled")
        finally:
            agent.go.set()


async def test_a_run_that_completes_before_the_cancel_reaches_it_is_not_cancelable() -> None:
    agent = Hanging()
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        channel = unique_prefix() + "cancel"
        try:
            relay_of(app_b).cancel_channel = channel  # A never hears this cancel
            run, task_id = await _start_on_a(http, url_a, agent)
            following = asyncio.Event()
            follow = relay_of(app_b).follow

            def spy(*args: object, **kwargs: object) -> AsyncIterator[object]:
                following.set()
                return follow(*args, **kwargs)  # type: ignore[arg-type]

            relay_of(app_b).follow = spy  # type: ignore[method-assign,assignment]
            cancel = asyncio.create_task(
                post(http, url_b, request("tasks/cancel", {"id": task_id}, "c-1"))
            )
            await asyncio.wait_for(following.wait(), WAIT)  # B waits for the run's end
            agent.go.set()  # ... which is completed
            answer = await asyncio.wait_for(cancel, WAIT)
            assert answer["error"]["code"] == -32002, answer
            assert answer["error"]["data"]["errorCode"] == "INVALID_INPUT"
            assert answer["error"]["message"].endswith("current state: completed")
            await asyncio.wait_for(run.task, WAIT)
            assert run.results[-1]["status"]["state"] == "completed"
            assert not agent.cancelled.is_set()
            assert await _state(http, url_a, task_id) == "completed"
            assert await _state(http, url_b, task_id) == "completed"
        finally:
            agent.go.set()


@pytest.mark.reason("cancel_unconfirmed")
async def test_a_cancel_whose_run_end_never_arrives_is_cancel_unconfirmed() -> None:
    agent = Hanging()
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            relay_of(app_b).cancel_channel = unique_prefix() + "cancel"  # nobody hears it
            handler_of(app_b).remote_cancel_wait = 0.2
            run, task_id = await _start_on_a(http, url_a, agent)
            answer = await post(http, url_b, request("tasks/cancel", {"id": task_id}, "c-1"))
            data = assert_error(answer, -32603, "cancel_unconfirmed")
            assert data.error_code == "UPSTREAM_TIMEOUT"
            assert data.retriable is True
            assert "redis" not in answer["error"]["message"].lower()
            assert not agent.cancelled.is_set()
            assert await _state(http, url_b, task_id) == "working"  # nothing stored on B
            agent.go.set()
            await asyncio.wait_for(run.task, WAIT)
            assert run.results[-1]["status"]["state"] == "completed"
        finally:
            agent.go.set()


async def test_another_callers_cancel_on_b_is_task_not_found_and_requests_nothing() -> None:
    agent = Hanging()
    card = _auth_card()
    async with (
        two_replicas(agent, SHARED_REDIS_URL, card=card, auth=_auth(card)) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT, headers={"X-API-Key": KEY_ALICE}) as alice,
        httpx.AsyncClient(timeout=WAIT, headers={"X-API-Key": KEY_BOB}) as bob,
    ):
        try:
            asked: list[str] = []
            request_cancel = relay_of(app_b).request_cancel

            async def spy(task_id: str) -> int:
                asked.append(task_id)
                return await request_cancel(task_id)

            relay_of(app_b).request_cancel = spy  # type: ignore[method-assign]
            run, task_id = await _start_on_a(alice, url_a, agent)
            await asyncio.wait_for(relay_of(app_a).listening.wait(), WAIT)
            refused = await post(bob, url_b, request("tasks/cancel", {"id": task_id}, "c-1"))
            assert refused["error"]["code"] == -32001, refused
            assert asked == []  # nothing was requested of A
            assert not agent.cancelled.is_set()
            assert await _state(alice, url_b, task_id) == "working"
            answer = await post(alice, url_b, request("tasks/cancel", {"id": task_id}, "c-2"))
            assert answer["result"]["status"]["state"] == "canceled"
            assert asked == [task_id]
            await asyncio.wait_for(agent.cancelled.wait(), WAIT)
            await asyncio.wait_for(run.task, WAIT)
            assert await _state(alice, url_a, task_id) == "canceled"
        finally:
            agent.go.set()


async def test_cancel_of_an_unknown_task_on_b_is_task_not_found() -> None:
    agent = Hanging()
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (_app_a, app_b),
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        answer = await post(http, url_b, request("tasks/cancel", {"id": "no-such-task"}, "c-1"))
        assert answer["error"]["code"] == -32001


class _Collect(logging.Handler):
    """Collects the records starting with ``prefix``; ``arrived`` once ``count`` did."""

    def __init__(self, prefix: str, count: int) -> None:
        super().__init__(logging.WARNING)
        self.prefix = prefix
        self.count = count
        self.messages: list[str] = []
        self.arrived = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(self.prefix):
            self.messages.append(message)
            if len(self.messages) >= self.count:
                self.arrived.set()


@pytest.mark.reason("event_relay_unavailable")
async def test_redis_down_the_cancel_on_b_is_classified_and_the_next_request_answered() -> None:
    agent = Hanging()
    collect = _Collect("cancel requests:", 2)  # one per replica's listener
    logger = logging.getLogger("llamon_agent.a2a")
    logger.addHandler(collect)
    try:
        async with (
            private_redis() as redis,
            two_replicas(agent, redis.url) as (app_a, app_b),
            running_server(app_a) as url_a,
            running_server(app_b) as url_b,
            httpx.AsyncClient(timeout=WAIT) as http,
        ):
            try:
                run, task_id = await _start_on_a(http, url_a, agent)
                await asyncio.wait_for(relay_of(app_a).listening.wait(), WAIT)
                await asyncio.wait_for(relay_of(app_b).listening.wait(), WAIT)
                await redis.stop()
                answer = await post(http, url_b, request("tasks/cancel", {"id": task_id}, "c-1"))
                data = assert_error(answer, -32603, "event_relay_unavailable")
                assert data.error_code == "UPSTREAM_UNAVAILABLE"
                assert data.retriable is True
                assert await _state(http, url_b, task_id) == "working"  # the next request
                await asyncio.wait_for(collect.arrived.wait(), WAIT)
                agent.go.set()
                await asyncio.wait_for(run.task, WAIT)
                assert run.results[-1]["status"]["state"] == "completed"
                assert not agent.cancelled.is_set()
                assert await _state(http, url_b, task_id) == "completed"
                assert len(collect.messages) == 2, collect.messages  # once per listener
                assert all(str(redis.port) not in message for message in collect.messages)
            finally:
                agent.go.set()
    finally:
        logger.removeHandler(collect)


async def test_without_a_relay_the_cancel_on_b_stores_canceled_and_a_runs_on() -> None:
    agent = Hanging()
    async with (
        two_replicas(agent, None) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            assert app_b.state.llamon_event_relay is None
            run, task_id = await _start_on_a(http, url_a, agent)
            answer = await post(http, url_b, request("tasks/cancel", {"id": task_id}, "c-1"))
            assert answer["result"]["status"]["state"] == "canceled"
            assert await _state(http, url_b, task_id) == "canceled"
            agent.go.set()
            await asyncio.wait_for(run.task, WAIT)
            assert not agent.cancelled.is_set()  # A's run was never stopped
        finally:
            agent.go.set()
