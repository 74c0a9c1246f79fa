"""``AgentClient`` against a plain a2a-sdk server (not llamon: no error data on the wire),
and against a small Starlette app for HTTP errors, refused connections and the card's
well-known paths (all real servers on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentSkill,
    FilePart,
    FileWithUri,
    Part,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.client import (
    AgentClient,
    CardMismatchError,
    RemoteAgentError,
    RemoteAuthRequiredError,
    RemoteInternalError,
    RemoteNotFoundError,
    RemoteRateLimitedError,
    RemoteTimeoutError,
    RemoteUnavailableError,
    RetryPolicy,
    clear_card_cache,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from tests._support.a2a_server import make_card, running_server


class PlainExecutor(AgentExecutor):
    """A plain a2a-sdk agent: ``fail`` fails with text only, ``ask`` pauses, else echoes."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        resumed = task is not None
        if task is None:
            assert context.message is not None
            task = Task(
                id=str(context.task_id),
                context_id=str(context.context_id),
                status=TaskStatus(state=TaskState.submitted),
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        if text == "fail":
            await updater.failed(updater.new_agent_message([Part(root=TextPart(text="down"))]))
            return
        if text == "ask" and not resumed:
            question = updater.new_agent_message([Part(root=TextPart(text="Which city?"))])
            await updater.requires_input(question, final=True)
            return
        answer = f"city {text}" if resumed else f"plain {text}"
        await updater.add_artifact([Part(root=TextPart(text=answer))], name="response")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@pytest.fixture
async def plain() -> AsyncIterator[str]:
    handler = DefaultRequestHandler(PlainExecutor(), InMemoryTaskStore())
    app = A2AStarletteApplication(make_card(streaming=False), handler).build()
    async with running_server(app) as url:
        yield url


async def test_a_plain_server_answers(plain: str) -> None:
    async with AgentClient(plain) as agent:
        result = await agent.send("hi")
    assert (result.state, result.text) == (TaskState.completed, "plain hi")


@pytest.mark.reason("remote_task_failed")
async def test_a_failed_task_without_data_is_classified_from_its_state(plain: str) -> None:
    async with AgentClient(plain) as agent:
        with pytest.raises(RemoteInternalError) as caught:
            await agent.send("fail")
        following = await agent.send("next")
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.INTERNAL_ERROR,
        "remote_task_failed",
        False,
    )
    assert error.data is None
    assert error.raw_data is None
    assert error.message == "down"
    assert error.task_id
    assert error.context_id
    assert following.text == "plain next"


@pytest.mark.reason("a2a_task_not_found")
async def test_a_jsonrpc_error_without_data_is_classified_from_its_code(plain: str) -> None:
    async with AgentClient(plain) as agent:
        with pytest.raises(RemoteNotFoundError) as caught:
            await agent.get("no-such-task")
        following = await agent.send("next")
    error = caught.value
    assert (error.jsonrpc_code, error.reason, error.data) == (-32001, "a2a_task_not_found", None)
    assert following.text == "plain next"


async def test_input_required_on_a_plain_server_resumes(plain: str) -> None:
    async with AgentClient(plain) as agent:
        paused = await agent.send("ask")
        assert (paused.needs_input, paused.question) == (True, "Which city?")
        done = await agent.resume(paused, "Seoul")
    assert (done.task_id, done.state, done.text) == (
        paused.task_id,
        TaskState.completed,
        "city Seoul",
    )


@dataclass
class Scripted:
    """A small Starlette agent: serves its card, answers POSTs from a script, counts both."""

    replies: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    card_paths: tuple[str, ...] = ("/.well-known/agent-card.json",)
    cache_control: str = "max-age=60"
    card_gets: int = 0
    posts: int = 0
    hang: asyncio.Event | None = None

    def app(self) -> Starlette:
        async def card(request: Request) -> Response:
            self.card_gets += 1
            if request.url.path not in self.card_paths:
                return JSONResponse({}, status_code=404)
            body = make_card(streaming=False).model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
            body["skills"].append(
                AgentSkill(
                    id="json-only",
                    name="JSON only",
                    description="Takes JSON.",
                    tags=["test"],
                    input_modes=["application/json"],
                ).model_dump(mode="json", by_alias=True, exclude_none=True)
            )
            return JSONResponse(body, headers={"Cache-Control": self.cache_control})

        async def rpc(request: Request) -> Response:
            self.posts += 1
            body = await request.json()
            if self.replies:
                status, headers = self.replies.pop(0)
                if status == 0 and self.hang is not None:
                    await self.hang.wait()
                    status = 200
                if status != 200:
                    return JSONResponse({"detail": "no"}, status_code=status, headers=headers)
            parts = [{"kind": "text", "text": "pong"}]
            answer = {"kind": "message", "messageId": "m-1", "role": "agent", "parts": parts}
            return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": answer})

        paths = ("/.well-known/agent-card.json", "/.well-known/agent.json")
        return Starlette(
            routes=[
                *(Route(p, card, methods=["GET"]) for p in paths),
                Route("/", rpc, methods=["POST"]),
            ]
        )


@pytest.mark.reason("http_5xx", "auth_failed", "http_not_found", "rate_limited")
@pytest.mark.parametrize(
    ("status", "headers", "kind", "reason", "retriable", "retry_after_ms"),
    [
        (503, {}, RemoteUnavailableError, "http_5xx", True, None),
        (401, {}, RemoteAuthRequiredError, "auth_failed", False, None),
        (404, {}, RemoteNotFoundError, "http_not_found", False, None),
        (429, {"Retry-After": "3"}, RemoteRateLimitedError, "rate_limited", True, 3000),
    ],
    ids=["503", "401", "404", "429"],
)
async def test_an_http_error_status_is_classified_by_status(
    status: int,
    headers: dict[str, str],
    kind: type[RemoteAgentError],
    reason: str,
    retriable: bool,
    retry_after_ms: int | None,
) -> None:
    scripted = Scripted(replies=[(status, headers)])
    once = RetryPolicy(max_attempts=1)  # classification only; retries: test_retry_e2e.py
    async with running_server(scripted.app()) as url, AgentClient(url, retry=once) as agent:
        with pytest.raises(kind) as caught:
            await agent.send("ping")
        following = await agent.send("ping again")
    error = caught.value
    assert isinstance(error, RemoteAgentError)
    assert (error.http_status, error.reason, error.retriable) == (status, reason, retriable)
    assert error.retry_after_ms == retry_after_ms
    assert error.data is None
    assert error.jsonrpc_code is None
    assert error.agent == "test-agent"
    assert url.removeprefix("http://") not in str(error)
    assert "127.0.0.1" not in str(error)
    assert following.text == "pong"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.reason("network_error")
async def test_a_refused_connection_is_unavailable_and_retriable() -> None:
    port = _closed_port()
    card = make_card(f"http://127.0.0.1:{port}/", streaming=False)
    async with AgentClient(card) as agent:
        with pytest.raises(RemoteUnavailableError) as caught:
            await agent.send("ping")
    error = caught.value
    assert (error.reason, error.retriable, error.http_status) == ("network_error", True, None)
    assert str(port) not in str(error)
    assert "127.0.0.1" not in str(error)
    async with AgentClient(f"http://127.0.0.1:{port}") as unreachable:
        with pytest.raises(RemoteUnavailableError):
            await unreachable.card()
    scripted = Scripted()
    async with running_server(scripted.app()) as url, AgentClient(url) as agent:
        assert (await agent.send("ping")).text == "pong"


@pytest.mark.reason("timeout")
async def test_an_answer_past_the_timeout_is_a_timeout_error() -> None:
    hang = asyncio.Event()
    scripted = Scripted(replies=[(0, {})], hang=hang)
    once = RetryPolicy(max_attempts=1)  # classification only; retries: test_retry_e2e.py
    async with (
        running_server(scripted.app()) as url,
        AgentClient(url, timeout=0.2, retry=once) as agent,
    ):
        with pytest.raises(RemoteTimeoutError) as caught:
            await agent.send("ping")
        hang.set()
        following = await agent.send("ping again")
    assert isinstance(caught.value, TimeoutError)
    assert (caught.value.reason, caught.value.retriable) == ("timeout", True)
    assert following.text == "pong"


async def test_the_card_is_fetched_once_while_fresh() -> None:
    scripted = Scripted()
    async with running_server(scripted.app()) as url:
        async with AgentClient(url) as first:
            await first.send("one")
            await first.send("two")
        async with AgentClient(url) as second:
            await second.send("three")
    assert scripted.card_gets == 1
    assert scripted.posts == 3


async def test_a_card_marked_no_store_is_fetched_again() -> None:
    scripted = Scripted(cache_control="no-store")
    async with running_server(scripted.app()) as url, AgentClient(url) as agent:
        await agent.send("one")
        await agent.send("two")
    assert scripted.card_gets == 2


async def test_the_legacy_card_path_is_the_fallback() -> None:
    scripted = Scripted(card_paths=("/.well-known/agent.json",))
    async with running_server(scripted.app()) as url, AgentClient(url) as agent:
        card = await agent.card()
        result = await agent.send("ping")
    assert card.name == "test-agent"
    assert scripted.card_gets == 2  # agent-card.json (404), then agent.json
    assert result.text == "pong"


@pytest.mark.reason("card_mismatch_error")
async def test_a_part_the_card_does_not_accept_is_refused_before_sending() -> None:
    scripted = Scripted()
    image = Part(
        root=FilePart(file=FileWithUri(uri="https://example.com/a.png", mime_type="image/png"))
    )
    async with running_server(scripted.app()) as url, AgentClient(url) as agent:
        with pytest.raises(CardMismatchError) as by_default:
            await agent.send([image])
        with pytest.raises(CardMismatchError) as by_skill:
            await agent.send("plain text", skill="json-only")
        with pytest.raises(CardMismatchError) as unknown:
            await agent.send("hi", skill="nope")
        assert scripted.posts == 0
        assert (await agent.send("ping")).text == "pong"
    assert isinstance(by_default.value, ValueError)
    assert classify_exception(by_default.value).code is ErrorCode.INVALID_INPUT
    text = str(by_default.value)
    assert "image/png" in text
    assert "text/plain, application/json" in text
    assert "text/plain" in str(by_skill.value)
    assert "skill 'json-only' input modes: application/json" in str(by_skill.value)
    assert "answer, json-only" in str(unknown.value)
