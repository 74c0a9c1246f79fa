"""Two llamon apps on one PostgreSQL task store and one Redis: a task streaming on A is
followed with ``tasks/resubscribe`` sent to B, which runs nothing of it."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.relay import EventRelay
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import assert_error, post, request, text_message
from tests._support.redis_server import SHARED_REDIS_URL, delete_prefix, private_redis
from tests._support.stores import postgres_schema

WAIT = 10.0


class GatedStream:
    """Streams ``c0``, then waits for ``go``, then ``c1`` and ``c2``."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        return "unused"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        yield "c0 "
        self.started.set()
        await self.go.wait()
        yield "c1 "
        yield "c2 "


@asynccontextmanager
async def two_replicas(agent: GatedStream, redis_url: str | None) -> AsyncIterator[list[Starlette]]:
    """Apps A and B on one fresh PostgreSQL schema, both relaying through ``redis_url``."""
    async with postgres_schema() as dsn, AsyncExitStack() as stack:
        apps: list[Starlette] = []
        for _ in range(2):
            stores = await open_stores("postgres", dsn=dsn)
            stack.push_async_callback(stores.close)
            app = create_app(agent, make_card(), task_store=stores.task_store, redis_url=redis_url)
            apps.append(app)
        yield apps


class SSE:
    """A streaming JSON-RPC request read in the background; ``results`` as they arrive."""

    def __init__(self, http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
        self.replies: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.task = asyncio.create_task(self._read(http, url, body))

    async def _read(self, http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> None:
        async with http.stream("POST", url + "/", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    self.replies.append(json.loads(line.removeprefix("data:").strip()))
                    self.arrived.set()

    @property
    def results(self) -> list[dict[str, Any]]:
        return [reply["result"] for reply in self.replies]


def _follow_called(relay: EventRelay) -> asyncio.Event:
    """Set once ``relay.follow`` is called (the resubscribe knows where it reads from)."""
    called = asyncio.Event()
    follow: Callable[..., AsyncIterator[Any]] = relay.follow

    def spy(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        called.set()
        return follow(*args, **kwargs)

    relay.follow = spy  # type: ignore[method-assign]
    return called


def _c0_index(results: list[dict[str, Any]]) -> int:
    texts = [
        [part.get("text") for part in result.get("artifact", {}).get("parts", [])]
        for result in results
    ]
    return texts.index(["c0 "])


def _relay(app: Starlette) -> EventRelay:
    relay = app.state.llamon_event_relay
    assert isinstance(relay, EventRelay)
    return relay


async def test_resubscribe_on_another_replica_streams_every_later_event_in_order() -> None:
    agent = GatedStream()
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        task_id = ""
        try:
            run = SSE(http, url_a, request("message/stream", {"message": text_message("go")}))
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await asyncio.wait_for(run.arrived.wait(), WAIT)
            task_id = run.results[0].get("taskId") or run.results[0]["id"]
            await _relay(app_a).flush()  # what A published so far is in Redis
            attached = _follow_called(_relay(app_b))
            follow = SSE(http, url_b, request("tasks/resubscribe", {"id": task_id}, "r-2"))
            await asyncio.wait_for(attached.wait(), WAIT)
            agent.go.set()
            await asyncio.wait_for(asyncio.gather(run.task, follow.task), WAIT)

            later = run.results[_c0_index(run.results) + 1 :]
            assert [r["kind"] for r in later][-1] == "status-update"
            assert later[-1]["final"] is True
            assert later[-1]["status"]["state"] == "completed"
            assert follow.results == later  # every later event, in order, once
            texts = [
                p["text"]
                for r in later
                if r["kind"] == "artifact-update"
                for p in r["artifact"]["parts"]
            ]
            assert texts == [
                "c1 ",
                "c2 ",
                "c0 ",
                "c1 ",
                "c2 ",
            ]  # the chunks, then the whole artifact
            got = await post(http, url_b, request("tasks/get", {"id": task_id}, "r-3"))
            assert got["result"]["status"]["state"] == "completed"
            # the task has ended: a resubscribe now is answered as without the relay
            again = SSE(http, url_b, request("tasks/resubscribe", {"id": task_id}, "r-4"))
            await asyncio.wait_for(again.task, WAIT)
            assert len(again.replies) == 1, again.replies
            assert_error(again.replies[0], -32602, "invalid_params")
        finally:
            agent.go.set()
            if task_id:
                await delete_prefix(f"llamon:events:{task_id}")


@pytest.mark.reason("event_relay_unavailable")
async def test_redis_down_ends_the_resubscribe_classified_and_the_task_still_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llamon_agent.a2a")
    agent = GatedStream()
    async with (
        private_redis() as redis,
        two_replicas(agent, redis.url) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            run = SSE(http, url_a, request("message/stream", {"message": text_message("go")}))
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await asyncio.wait_for(run.arrived.wait(), WAIT)
            task_id = run.results[0].get("taskId") or run.results[0]["id"]
            await redis.stop()
            follow = SSE(http, url_b, request("tasks/resubscribe", {"id": task_id}, "r-2"))
            await asyncio.wait_for(follow.task, WAIT)  # never hangs
            assert len(follow.replies) == 1, follow.replies
            data = assert_error(follow.replies[0], -32603, "event_relay_unavailable")
            assert data.error_code == "UPSTREAM_UNAVAILABLE"
            assert data.retriable is True
            agent.go.set()
            await asyncio.wait_for(run.task, WAIT)
            assert run.results[-1]["status"]["state"] == "completed"
            await _relay(app_a).flush()
            got = await post(http, url_b, request("tasks/get", {"id": task_id}, "r-3"))
            assert got["result"]["status"]["state"] == "completed"
            warnings = [
                r.getMessage() for r in caplog.records if r.getMessage().startswith("event relay:")
            ]
            assert len(warnings) == 1, warnings
            assert str(redis.port) not in warnings[0]
        finally:
            agent.go.set()
