"""A repeated ``message/send`` answers the task it started, over real HTTP on 127.0.0.1.

The same caller's ``messageId`` in the same context within the idempotency window is one
send: the agent runs once and every repeat (``message/send`` or ``message/stream``, raw
JSON-RPC or a2a-sdk's client) answers the same task -- on every store kind, and across a
server restart on SQLite. Another caller's same ``messageId`` is its own send and never
sees the first task; a new message continuing a task runs, a retried one is a repeat;
past the window (an injected clock) the message runs again. After each, the next request
is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.tasks import TaskStore
from a2a.types import AgentCard, TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.sent import DEFAULT_WINDOW, SentKey, SentMessages
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores, open_stores
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import a2a_client, running_server, send, user_message
from tests._support.jsonrpc import post, post_stream, request, text_message
from tests._support.serve import llamon_serve, rpc

KEY_A = "alice-key-7c1e3a5f9b2d4e60"
KEY_B = "bob-key-2d8a6f0c4e1b9735"
NOT_FOUND = -32001


@dataclass
class Served:
    url: str
    sent: SentMessages
    runs: list[str]
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)


def _card(auth: AuthSpec | None = None) -> AgentCard:
    return build_agent_card(
        name="idempotency-test-agent",
        description="Answers test questions for the llamon-agent idempotent-send suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=auth,
    )


def _counting_agent(
    runs: list[str], gate: asyncio.Event, started: asyncio.Event
) -> Callable[..., Any]:
    async def agent(ctx: AgentContext) -> str | HITLInterrupt:
        runs.append(ctx.text)
        if ctx.resumed:
            return f"resumed {ctx.text}"
        if ctx.text == "ask":
            return HITLInterrupt(payload={"question": "which one?"})
        if ctx.text == "wait":
            started.set()
            await gate.wait()
        return f"echo {ctx.text}"

    return agent


@asynccontextmanager
async def serve(
    task_store: TaskStore | None = None,
    *,
    auth: bool = False,
    runs: list[str] | None = None,
    window: float | None = None,
) -> AsyncIterator[Served]:
    runs = [] if runs is None else runs
    gate, started = asyncio.Event(), asyncio.Event()
    card = _card(AuthSpec.api_key() if auth else None)
    config = AuthConfig.from_card(card, principals={"alice": KEY_A, "bob": KEY_B}) if auth else None
    app = create_app(
        _counting_agent(runs, gate, started),
        card,
        auth=config,
        task_store=task_store,
        idempotency_window=window,
    )
    async with running_server(app) as url:
        served = Served(url, app.state.llamon_sent_messages, runs, gate, started)
        try:
            yield served
        finally:
            gate.set()


def _send(message: dict[str, Any], *, blocking: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message}
    if not blocking:
        params["configuration"] = {"blocking": False}
    return request("message/send", params)


async def _task(http: httpx.AsyncClient, url: str, message: dict[str, Any]) -> dict[str, Any]:
    reply = await post(http, url, _send(message))
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


async def _next_request_is_answered(http: httpx.AsyncClient, served: Served) -> None:
    before = len(served.runs)
    task = await _task(http, served.url, text_message("next"))
    assert task["status"]["state"] == TaskState.completed.value
    assert len(served.runs) == before + 1


async def test_the_same_message_twice_runs_the_agent_once(stores: Stores) -> None:
    async with serve(stores.task_store) as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("once")
        first = await _task(http, served.url, message)
        again = await _task(http, served.url, message)
        assert served.runs == ["once"]
        assert again["id"] == first["id"]
        assert again["contextId"] == first["contextId"]
        assert again["status"]["state"] == TaskState.completed.value
        assert again["artifacts"] == first["artifacts"]
        await _next_request_is_answered(http, served)


async def test_a_repeat_in_a_named_context_is_the_same_send(stores: Stores) -> None:
    async with serve(stores.task_store) as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("in context", contextId="ctx-idem-1")
        first = await _task(http, served.url, message)
        again = await _task(http, served.url, message)
        elsewhere = await _task(http, served.url, {**message, "contextId": "ctx-idem-2"})
        assert again["id"] == first["id"]
        assert elsewhere["id"] != first["id"]
        assert served.runs == ["in context", "in context"]
        await _next_request_is_answered(http, served)


async def test_a_repeated_stream_answers_the_task_without_running_again(stores: Stores) -> None:
    async with serve(stores.task_store) as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("streamed")
        first = await _task(http, served.url, message)
        events = await post_stream(
            http, served.url, request("message/stream", {"message": message})
        )
        assert served.runs == ["streamed"]
        results = [event["result"] for event in events]
        assert [result["kind"] for result in results] == ["task"]
        assert results[0]["id"] == first["id"]
        assert results[0]["status"]["state"] == TaskState.completed.value
        await _next_request_is_answered(http, served)


async def test_a_repeat_of_a_running_send_waits_for_its_end_when_blocking(
    stores: Stores,
) -> None:
    async with serve(stores.task_store) as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("wait")
        reply = await post(http, served.url, _send(message, blocking=False))
        first = reply["result"]
        assert first["status"]["state"] != TaskState.completed.value
        now = await post(http, served.url, _send(message, blocking=False))
        assert now["result"]["id"] == first["id"]
        repeat = asyncio.create_task(_task(http, served.url, message))
        served.gate.set()
        again = await asyncio.wait_for(repeat, 10)
        assert again["id"] == first["id"]
        assert again["status"]["state"] == TaskState.completed.value
        assert served.runs == ["wait"]
        await _next_request_is_answered(http, served)


async def test_a_repeated_stream_of_a_running_send_follows_it_to_its_end() -> None:
    async with serve() as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("wait")
        first = (await post(http, served.url, _send(message, blocking=False)))["result"]
        body = request("message/stream", {"message": message})
        following = asyncio.create_task(post_stream(http, served.url, body))
        await asyncio.wait_for(served.started.wait(), 10)
        served.gate.set()
        events = await asyncio.wait_for(following, 10)
        results = [event["result"] for event in events]
        assert results[0]["id"] == first["id"]
        last = results[-1]
        state = last["status"]["state"]
        assert state == TaskState.completed.value, results
        assert served.runs == ["wait"]
        await _next_request_is_answered(http, served)


async def test_simultaneous_repeats_of_one_send_run_the_agent_once(stores: Stores) -> None:
    limits = httpx.Limits(max_connections=8)
    async with (
        serve(stores.task_store) as served,
        httpx.AsyncClient(timeout=10, limits=limits) as http,
    ):
        message = text_message("wait")
        replies = [
            asyncio.create_task(post(http, served.url, _send(message, blocking=False)))
            for _ in range(6)
        ]
        answers = await asyncio.wait_for(asyncio.gather(*replies), 10)
        ids = {answer["result"]["id"] for answer in answers}
        assert len(ids) == 1, answers
        await asyncio.wait_for(served.started.wait(), 10)
        served.gate.set()
        (task_id,) = ids
        done = await _task(http, served.url, message)
        assert done["id"] == task_id
        assert done["status"]["state"] == TaskState.completed.value
        assert served.runs == ["wait"]
        await _next_request_is_answered(http, served)


async def test_a_repeat_waiting_for_a_send_that_stored_no_task_runs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with serve() as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("retried after a failed start")
        key = SentKey(owner="", context_id="", message_id=message["messageId"])
        mine, starting = served.sent.claim(key)  # another request is starting this send...
        assert mine
        waiting = asyncio.Event()
        claim = served.sent.claim

        def observed(seen: SentKey) -> tuple[bool, asyncio.Future[str | None]]:
            taken, future = claim(seen)
            if not taken:
                waiting.set()
            return taken, future

        monkeypatch.setattr(served.sent, "claim", observed)
        repeat = asyncio.create_task(_task(http, served.url, message))
        await asyncio.wait_for(waiting.wait(), 10)
        served.sent.release(key, starting)  # ...and fails before its task is stored
        task = await asyncio.wait_for(repeat, 10)
        assert task["status"]["state"] == TaskState.completed.value
        assert served.runs == ["retried after a failed start"]
        await _next_request_is_answered(http, served)


async def test_another_callers_same_message_id_is_its_own_send(stores: Stores) -> None:
    async with (
        serve(stores.task_store, auth=True) as served,
        httpx.AsyncClient(timeout=10, headers={"X-API-Key": KEY_A}) as alice,
        httpx.AsyncClient(timeout=10, headers={"X-API-Key": KEY_B}) as bob,
    ):
        message = text_message("mine")
        first = await _task(alice, served.url, message)
        theirs = await _task(bob, served.url, message)
        assert theirs["id"] != first["id"]
        assert theirs["contextId"] != first["contextId"]
        assert served.runs == ["mine", "mine"]
        peek = await post(bob, served.url, request("tasks/get", {"id": first["id"]}))
        assert peek["error"]["code"] == NOT_FOUND
        assert (await _task(alice, served.url, message))["id"] == first["id"]
        assert (await _task(bob, served.url, message))["id"] == theirs["id"]
        assert served.runs == ["mine", "mine"]
        await _next_request_is_answered(alice, served)
        await _next_request_is_answered(bob, served)


async def test_each_new_message_continuing_a_task_runs(stores: Stores) -> None:
    async with serve(stores.task_store) as served, httpx.AsyncClient(timeout=10) as http:
        asked = await _task(http, served.url, text_message("ask"))
        assert asked["status"]["state"] == TaskState.input_required.value
        answer = text_message("this one", taskId=asked["id"], contextId=asked["contextId"])
        resumed = await _task(http, served.url, answer)
        assert resumed["id"] == asked["id"]
        assert resumed["status"]["state"] == TaskState.completed.value
        assert served.runs == ["ask", "this one"]
        await _next_request_is_answered(http, served)


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
async def test_a_retried_answer_to_a_question_is_a_repeat(stores: Stores, method: str) -> None:
    async with serve(stores.task_store) as served, httpx.AsyncClient(timeout=10) as http:
        asked = await _task(http, served.url, text_message("ask"))
        answer = text_message("this one", taskId=asked["id"], contextId=asked["contextId"])
        resumed = await _task(http, served.url, answer)
        if method == "message/send":
            again = await _task(http, served.url, answer)
        else:
            events = await post_stream(http, served.url, request(method, {"message": answer}))
            (event,) = events
            again = event["result"]
        assert again["id"] == asked["id"]
        assert again["status"]["state"] == TaskState.completed.value
        assert again["artifacts"] == resumed["artifacts"]
        assert served.runs == ["ask", "this one"]
        await _next_request_is_answered(http, served)


async def test_past_the_window_the_message_runs_again(stores: Stores) -> None:
    now = [1_000_000.0]
    async with serve(stores.task_store, window=60.0) as served, httpx.AsyncClient() as http:
        served.sent.clock = lambda: now[0]
        message = text_message("timed")
        first = await _task(http, served.url, message)
        now[0] += 60.0
        assert (await _task(http, served.url, message))["id"] == first["id"]
        now[0] += 0.5
        later = await _task(http, served.url, message)
        assert later["id"] != first["id"]
        assert served.runs == ["timed", "timed"]
        await _next_request_is_answered(http, served)


async def test_a_window_of_zero_runs_every_send() -> None:
    async with serve(window=0) as served, httpx.AsyncClient(timeout=10) as http:
        message = text_message("always")
        first = await _task(http, served.url, message)
        assert (await _task(http, served.url, message))["id"] != first["id"]
        assert served.runs == ["always", "always"]


async def test_the_default_window_is_a_day() -> None:
    async with serve() as served:
        assert served.sent.window == DEFAULT_WINDOW == 24 * 3600


async def test_a_restarted_server_on_sqlite_still_answers_the_repeat(tmp_path: Path) -> None:
    runs: list[str] = []
    message = text_message("durable")
    stores = await open_stores("sqlite", home=tmp_path)
    try:
        async with serve(stores.task_store, runs=runs) as served, httpx.AsyncClient() as http:
            first = await _task(http, served.url, message)
    finally:
        await stores.close()

    stores = await open_stores("sqlite", home=tmp_path)  # a new server: nothing in memory
    try:
        async with serve(stores.task_store, runs=runs) as served, httpx.AsyncClient() as http:
            again = await _task(http, served.url, message)
            assert again["id"] == first["id"]
            assert again["status"]["state"] == TaskState.completed.value
            assert runs == ["durable"]
            await _next_request_is_answered(http, served)
    finally:
        await stores.close()


async def test_a_restarted_server_on_sqlite_keeps_callers_apart(tmp_path: Path) -> None:
    runs: list[str] = []
    message = text_message("whose")
    stores = await open_stores("sqlite", home=tmp_path)
    try:
        async with (
            serve(stores.task_store, auth=True, runs=runs) as served,
            httpx.AsyncClient(headers={"X-API-Key": KEY_A}) as alice,
        ):
            first = await _task(alice, served.url, message)
    finally:
        await stores.close()

    stores = await open_stores("sqlite", home=tmp_path)
    try:
        async with (
            serve(stores.task_store, auth=True, runs=runs) as served,
            httpx.AsyncClient(timeout=10, headers={"X-API-Key": KEY_B}) as bob,
            httpx.AsyncClient(timeout=10, headers={"X-API-Key": KEY_A}) as alice,
        ):
            theirs = await _task(bob, served.url, message)
            assert theirs["id"] != first["id"]
            assert (await _task(alice, served.url, message))["id"] == first["id"]
            assert runs == ["whose", "whose"]
            await _next_request_is_answered(bob, served)
    finally:
        await stores.close()


@pytest.mark.parametrize("streaming", [False, True])
async def test_a2a_sdks_client_sending_twice_gets_one_task(stores: Stores, streaming: bool) -> None:
    async with (
        serve(stores.task_store) as served,
        a2a_client(served.url, streaming=streaming) as client,
    ):
        message = user_message("sdk")
        first = await send(client, message)
        again = await send(client, message)
        assert again.id == first.id
        assert again.status.state == TaskState.completed
        assert served.runs == ["sdk"]
        after = await send(client, user_message("next"))
        assert after.status.state == TaskState.completed
        assert served.runs == ["sdk", "next"]


async def test_a_restarted_llamon_serve_process_answers_the_repeat(tmp_path: Path) -> None:
    """``llamon serve`` on SQLite, stopped and started again: the repeat answers the first
    task as it was (a second run would be a new task, or a longer history)."""
    params = {"message": text_message("hello")}
    async with httpx.AsyncClient(timeout=10) as http:
        async with llamon_serve(tmp_path) as (_, url):
            first = (await rpc(http, url, "message/send", params))["result"]
        assert first["status"]["state"] == TaskState.completed.value
        async with llamon_serve(tmp_path) as (_, url):
            again = (await rpc(http, url, "message/send", params))["result"]
            assert again == first
            fresh = {"message": text_message("hello")}
            other = (await rpc(http, url, "message/send", fresh))["result"]
            assert other["id"] != first["id"]
            assert other["status"]["state"] == TaskState.completed.value
