"""Contexts belong to their caller durably: after a restart, and once forgotten in memory.

Alice creates a task in a context she names; on a new server over the same SQLite file or
PostgreSQL schema (a restart), or on the memory store once the server's memory of recent
contexts has forgotten it, bob's ``message/send`` and ``message/stream`` naming that
context (without a task id) get exactly the answer an unknown task gets (JSON-RPC
-32001); alice continues her context, and bob is answered afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from llamon_agent.a2a import ownership
from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores, open_stores
from tests._support.a2a_server import running_server
from tests._support.jsonrpc import assert_jsonrpc_reply, post, post_stream, request, text_message
from tests._support.stores import postgres_schema

KEY_A = "alice-key-7b3e9d1f5a2c4e68"
KEY_B = "bob-key-2f8c4a6e0d9b1735"
NOT_FOUND = -32001

OpenStores = Callable[[], AbstractAsyncContextManager[Stores]]


async def _echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


@asynccontextmanager
async def serve(stores: Stores) -> AsyncIterator[str]:
    """A fresh app (auth on: alice and bob) over ``stores``; yields its URL."""
    card = build_agent_card(
        name="context-ownership-agent",
        description="Answers test questions for the context ownership suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=AuthSpec.api_key(),
    )
    config = AuthConfig.from_card(card, principals={"alice": KEY_A, "bob": KEY_B})
    app = create_app(
        _echo,
        card,
        auth=config,
        task_store=stores.task_store,
        push_config_store=stores.push_config_store,
    )
    async with running_server(app) as url:
        yield url


async def _call(http: httpx.AsyncClient, url: str, method: str, params: Any) -> dict[str, Any]:
    reply = await post(http, url, request(method, params, "same-id"))
    assert_jsonrpc_reply(reply, "same-id")
    return reply


async def _send(http: httpx.AsyncClient, url: str, text: str, context_id: str) -> dict[str, Any]:
    params = {"message": text_message(text, contextId=context_id)}
    reply = await _call(http, url, "message/send", params)
    assert "result" in reply, reply
    task: dict[str, Any] = reply["result"]
    assert (task["contextId"], task["status"]["state"]) == (context_id, "completed"), task
    return task


async def _assert_context_refused(bob: httpx.AsyncClient, url: str, context_id: str) -> None:
    unknown = await _call(bob, url, "tasks/get", {"id": str(uuid.uuid4())})
    for method in ("message/send", "message/stream"):
        params = {"message": text_message("join", contextId=context_id)}
        if method == "message/send":
            refused = await _call(bob, url, method, params)
        else:
            events = await post_stream(bob, url, request(method, params, "same-id"))
            assert len(events) == 1, events
            refused = events[0]
        assert refused["error"]["code"] == NOT_FOUND, refused
        assert refused["error"] == unknown["error"]


async def _assert_still_served(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, url: str, context_id: str
) -> None:
    again = await _send(alice, url, "again", context_id)
    mine = await _call(alice, url, "tasks/get", {"id": again["id"]})
    assert mine["result"]["status"]["state"] == "completed"
    fresh = await _send(bob, url, "mine", str(uuid.uuid4()))  # the next request: answered
    assert fresh["status"]["state"] == "completed"


@asynccontextmanager
async def _caller(key: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers={"X-API-Key": key}, timeout=10.0) as http:
        yield http


async def _restart_keeps_context_owner(open_again: OpenStores) -> None:
    context_id = str(uuid.uuid4())
    async with _caller(KEY_A) as alice, _caller(KEY_B) as bob:
        async with open_again() as stores, serve(stores) as url:
            await _send(alice, url, "hi", context_id)
        async with open_again() as stores, serve(stores) as url:  # a restart: nothing in memory
            await _assert_context_refused(bob, url, context_id)
            await _assert_still_served(alice, bob, url, context_id)


async def test_sqlite_context_owner_survives_a_restart(tmp_path: Path) -> None:
    @asynccontextmanager
    async def open_again() -> AsyncIterator[Stores]:
        stores = await open_stores("sqlite", home=tmp_path)
        try:
            yield stores
        finally:
            await stores.close()

    await _restart_keeps_context_owner(open_again)


async def test_postgres_context_owner_survives_a_restart() -> None:
    async with postgres_schema() as dsn:

        @asynccontextmanager
        async def open_again() -> AsyncIterator[Stores]:
            stores = await open_stores("postgres", dsn=dsn)
            try:
                yield stores
            finally:
                await stores.close()

        await _restart_keeps_context_owner(open_again)


async def test_memory_context_owner_outlives_the_context_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ownership, "CONTEXT_MEMORY", 1)
    context_id = str(uuid.uuid4())
    async with AsyncExitStack() as stack:
        stores = await open_stores("memory")
        url = await stack.enter_async_context(serve(stores))
        alice = await stack.enter_async_context(_caller(KEY_A))
        bob = await stack.enter_async_context(_caller(KEY_B))
        await _send(alice, url, "hi", context_id)
        await _send(alice, url, "other", str(uuid.uuid4()))  # C is forgotten now
        await _assert_context_refused(bob, url, context_id)
        await _assert_still_served(alice, bob, url, context_id)
