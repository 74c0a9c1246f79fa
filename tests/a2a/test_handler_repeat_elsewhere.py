"""A repeated send or stream reaching a replica that does not run its task: with a relay,
it is answered as on the replica running it. Two in-process apps on one PostgreSQL store
and one Redis (a key prefix of their own): A runs the task, B gets the repeat."""

from __future__ import annotations

import asyncio
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


class Gated:
    """Streams (and answers) ``c0``, waits for ``go``, then ``c1`` and ``c2``; counts runs."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.runs = 0
        self.task_id = ""

    async def invoke(self, ctx: AgentContext) -> str:
        self.runs += 1
        self.task_id = ctx.task_id
        self.started.set()
        await self.go.wait()
        return f"done {ctx.text}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        self.runs += 1
        yield "c0 "
        self.started.set()
        await self.go.wait()
        yield "c1 "
        yield "c2 "


async def _stored(
    http: httpx.AsyncClient, url: str, task_id: str, states: tuple[str, ...] = ("working",)
) -> None:
    """Wait until ``url`` finds ``task_id`` in one of ``states`` (a run's task is stored
    just after it starts, ``submitted`` first)."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        got = await post(http, url, request("tasks/get", {"id": task_id}, "wait"))
        if got.get("result", {}).get("status", {}).get("state") in states:
            return
        assert asyncio.get_running_loop().time() < deadline, got
        await asyncio.sleep(0.01)


def _task_id(result: dict[str, Any]) -> str:
    return str(result.get("taskId") or result["id"])


def _texts(results: list[dict[str, Any]]) -> list[str]:
    return [
        part["text"]
        for result in results
        if result["kind"] == "artifact-update"
        for part in result["artifact"]["parts"]
    ]


async def test_a_repeated_blocking_send_on_b_waits_for_the_run_on_a_and_answers_its_end() -> None:
    agent = Gated()
    message = text_message("once")
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            first = asyncio.create_task(
                post(http, url_a, request("message/send", {"message": message}, "s-1"))
            )
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await _stored(http, url_b, agent.task_id, ("submitted", "working"))
            following = follow_called(relay_of(app_b))
            again = asyncio.create_task(
                post(http, url_b, request("message/send", {"message": message}, "s-2"))
            )
            await asyncio.wait_for(following.wait(), WAIT)  # B follows A's run ...
            assert not again.done()  # ... and has not answered the stored ``working``
            agent.go.set()
            original, repeated = await asyncio.wait_for(asyncio.gather(first, again), WAIT)
            task = original["result"]
            assert task["status"]["state"] == "completed"
            assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "done once"}]
            assert repeated == {"id": "s-2", "jsonrpc": "2.0", "result": task}
            assert agent.runs == 1  # answered, not run again
            # the next request is answered: a new send on B runs there
            agent.started.clear()
            fresh = await post(
                http, url_b, request("message/send", {"message": text_message("next")}, "s-3")
            )
            assert fresh["result"]["status"]["state"] == "completed"
            assert fresh["result"]["artifacts"][0]["parts"][0]["text"] == "done next"
        finally:
            agent.go.set()


async def test_a_repeated_stream_on_b_follows_the_run_on_a_to_its_final_event() -> None:
    agent = Gated()
    message = text_message("go")
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            run = SSE(http, url_a, request("message/stream", {"message": message}, "m-1"))
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await asyncio.wait_for(run.arrived.wait(), WAIT)
            task_id = _task_id(run.results[0])
            await _stored(http, url_b, task_id)
            await relay_of(app_a).flush()  # what A published so far is in Redis
            following = follow_called(relay_of(app_b))
            again = SSE(http, url_b, request("message/stream", {"message": message}, "m-2"))
            await asyncio.wait_for(following.wait(), WAIT)
            agent.go.set()
            await asyncio.wait_for(asyncio.gather(run.task, again.task), WAIT)

            head, *events = again.results
            assert head["kind"] == "task"  # the task as stored, still running ...
            assert (head["id"], head["status"]["state"]) == (task_id, "working")
            # ... then every later event of A's run, in order, once, ending with its end
            c0 = _texts(run.results).index("c0 ")
            later = [r for r in run.results if r["kind"] == "artifact-update"][c0 + 1 :]
            assert [e for e in events if e["kind"] == "artifact-update"] == later
            assert _texts(events) == ["c1 ", "c2 ", "c0 ", "c1 ", "c2 "]
            assert events[-1] == run.results[-1]
            assert events[-1]["final"] is True
            assert events[-1]["status"]["state"] == "completed"
            assert agent.runs == 1
            # the next request is answered: B has the task completed
            got = await post(http, url_b, request("tasks/get", {"id": task_id}, "g-1"))
            assert got["result"]["status"]["state"] == "completed"
            # and a repeat now answers the ended task alone
            ended = SSE(http, url_b, request("message/stream", {"message": message}, "m-3"))
            await asyncio.wait_for(ended.task, WAIT)
            assert [(r["kind"], r["status"]["state"]) for r in ended.results] == [
                ("task", "completed")
            ]
        finally:
            agent.go.set()


async def test_a_repeated_non_blocking_send_on_b_answers_the_running_task_at_once() -> None:
    agent = Gated()
    message = text_message("now")
    async with (
        two_replicas(agent, SHARED_REDIS_URL) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            first = asyncio.create_task(
                post(http, url_a, request("message/send", {"message": message}, "s-1"))
            )
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await _stored(http, url_b, agent.task_id, ("submitted", "working"))
            got = await post(http, url_b, request("tasks/get", {"id": agent.task_id}, "g-1"))
            params = {"message": message, "configuration": {"blocking": False}}
            again = await post(http, url_b, request("message/send", params, "s-2"))
            assert again["result"] == got["result"]  # the running task, as stored now
            agent.go.set()
            original = await asyncio.wait_for(first, WAIT)
            assert original["result"]["id"] == again["result"]["id"]
            assert original["result"]["status"]["state"] == "completed"
            assert agent.runs == 1
        finally:
            agent.go.set()


@pytest.mark.reason("event_relay_unavailable")
async def test_redis_down_a_repeated_stream_on_b_ends_classified_and_the_run_completes() -> None:
    agent = Gated()
    message = text_message("go")
    async with (
        private_redis() as redis,
        two_replicas(agent, redis.url) as (app_a, app_b),
        running_server(app_a) as url_a,
        running_server(app_b) as url_b,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            run = SSE(http, url_a, request("message/stream", {"message": message}, "m-1"))
            await asyncio.wait_for(agent.started.wait(), WAIT)
            await asyncio.wait_for(run.arrived.wait(), WAIT)
            task_id = _task_id(run.results[0])
            await _stored(http, url_b, task_id)
            await redis.stop()
            again = SSE(http, url_b, request("message/stream", {"message": message}, "m-2"))
            await asyncio.wait_for(again.task, WAIT)  # never hangs
            head, error = again.replies
            assert (head["result"]["kind"], head["result"]["status"]["state"]) == (
                "task",
                "working",
            )
            data = assert_error(error, -32603, "event_relay_unavailable")
            assert data.error_code == "UPSTREAM_UNAVAILABLE"
            assert data.retriable is True
            assert str(redis.port) not in str(error)
            agent.go.set()
            await asyncio.wait_for(run.task, WAIT)
            assert run.results[-1]["status"]["state"] == "completed"
            # the next request is answered: the repeat, blocking, now answers the end
            repeated = await post(http, url_b, request("message/send", {"message": message}))
            assert repeated["result"]["id"] == task_id
            assert repeated["result"]["status"]["state"] == "completed"
        finally:
            agent.go.set()
