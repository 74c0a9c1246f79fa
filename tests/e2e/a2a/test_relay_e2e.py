"""Two llamon apps on one PostgreSQL task store and one Redis: a task streaming on A is
followed with ``tasks/resubscribe`` sent to B, which runs nothing of it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from llamon_agent.a2a.agent import AgentContext
from tests._support.a2a_server import running_server
from tests._support.jsonrpc import assert_error, post, request, text_message
from tests._support.redis_server import SHARED_REDIS_URL, private_redis
from tests._support.relay_replicas import SSE, follow_called, relay_of, two_replicas

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


def _c0_index(results: list[dict[str, Any]]) -> int:
    texts = [
        [part.get("text") for part in result.get("artifact", {}).get("parts", [])]
        for result in results
    ]
    return texts.index(["c0 "])


async def test_resubscribe_on_another_replica_streams_every_later_event_in_order() -> None:
    agent = GatedStream()
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            run = SSE(http, url_a, request("message/stream", {"message": text_message("go")}))
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await asyncio.wait_for(run.arrived.wait(), WAIT)
            task_id = run.results[0].get("taskId") or run.results[0]["id"]
            await relay_of(app_a).flush()  # what A published so far is in Redis
            attached = follow_called(relay_of(app_b))
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
            await relay_of(app_a).flush()
            got = await post(http, url_b, request("tasks/get", {"id": task_id}, "r-3"))
            assert got["result"]["status"]["state"] == "completed"
            warnings = [
                r.getMessage() for r in caplog.records if r.getMessage().startswith("event relay:")
            ]
            assert len(warnings) == 1, warnings
            assert str(redis.port) not in warnings[0]
        finally:
            agent.go.set()
