"""A replica SIGKILLed mid-task: two ``llamon serve --redis-url`` replicas on one PostgreSQL
store (a schema of its own) and the shared Redis (a key prefix is not configurable on the
command line, so the workers' keys are the real ``llamon:worker:replica-N``, and the test
removes them afterwards), behind a real nginx (``tests/_support/replicas.py``), with short
heartbeats (0.2 s, lease 1 s) through their settings.

The task running on the killed replica is answered ``failed`` / ``UPSTREAM_UNAVAILABLE`` /
``worker_lost`` (retriable) by ``tasks/get`` through nginx within lease + beat + slack of
the kill, to a plain a2a-sdk client as well, and the next send is answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types import DataPart, TaskQueryParams, TaskState, TextPart
from redis.asyncio import Redis

from llamon_agent.core.settings import HEARTBEAT_ENV, WORKER_LEASE_ENV
from tests._support.a2a_server import a2a_client
from tests._support.redis_server import SHARED_REDIS_URL
from tests._support.relay_replicas import SSE
from tests._support.replicas import Fleet, replicas
from tests._support.serve import message_json, rpc
from tests._support.stores import postgres_schema

BEAT = 0.2
LEASE = 1.0
SLACK = 2.0
"""Seconds beyond lease + beat for the sweep and the polling, on two shared cores."""
AGENT = "tests._support.hanging_agent:agent"
WAIT = 30.0


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    """Two replicas of the hanging agent behind nginx, beating every 0.2 s in Redis."""
    env = {HEARTBEAT_ENV: str(BEAT), WORKER_LEASE_ENV: str(LEASE)}
    try:
        async with (
            postgres_schema() as dsn,
            replicas(
                2, database_url=dsn, redis_url=SHARED_REDIS_URL, agent=AGENT, env=env
            ) as running,
        ):
            yield running
    finally:
        admin = Redis.from_url(SHARED_REDIS_URL, decode_responses=True)
        workers = [f"replica-{i}" for i in range(2)]
        await admin.delete(*(f"llamon:worker:{worker}" for worker in workers))
        await admin.srem("llamon:workers", *workers)
        await admin.aclose()


async def _get(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    reply = await rpc(http, url, "tasks/get", {"id": task_id})
    task: dict[str, Any] = reply["result"]
    return task


async def _until_state(
    http: httpx.AsyncClient, url: str, task_id: str, state: str, within: float
) -> dict[str, Any]:
    """The task once ``tasks/get`` answers it in ``state``; ``TimeoutError`` past ``within``."""
    deadline = time.monotonic() + within
    while True:
        task = await _get(http, url, task_id)
        if task["status"]["state"] == state:
            return task
        if time.monotonic() > deadline:
            raise TimeoutError(f"task still {task['status']['state']} after {within} s")
        await asyncio.sleep(0.05)


@pytest.mark.reason("worker_lost")
async def test_a_killed_replicas_task_is_failed_worker_lost_within_lease_and_beat(
    fleet: Fleet,
) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        params = {"message": message_json("hang"), "configuration": {"blocking": False}}
        started = (await rpc(http, fleet.url, "message/send", params))["result"]
        task_id = started["id"]
        running = await _until_state(http, fleet.url, task_id, "working", WAIT)
        owner = running["metadata"]["llamon.worker"]
        victim = next(r for r in fleet.replicas if r.worker_id == owner)

        await fleet.kill(victim.index)
        killed = time.monotonic()
        failed = await _until_state(http, fleet.url, task_id, "failed", WAIT)
        elapsed = time.monotonic() - killed

        assert elapsed <= LEASE + BEAT + SLACK, elapsed
        message = failed["status"]["message"]
        text, data = (part for part in message["parts"])
        assert text == {
            "kind": "text",
            "text": "The worker running this task stopped before it finished.",
        }
        assert data["kind"] == "data"
        assert data["data"]["errorCode"] == "UPSTREAM_UNAVAILABLE"
        assert data["data"]["errorReason"] == "worker_lost"
        assert data["data"]["retriable"] is True
        assert failed["metadata"]["llamon.worker"] == owner  # still names its worker

        # the next send is answered, by the replica still alive
        after = await rpc(http, fleet.url, "message/send", {"message": message_json("after")})
        assert after["result"]["status"]["state"] == "completed"
        assert after["result"]["artifacts"][0]["parts"][0]["text"] == "answered after"
        assert after["result"]["metadata"]["llamon.worker"] != owner

    # a plain a2a-sdk client reads the same failed task
    async with a2a_client(fleet.url.rstrip("/")) as client:
        fetched = await client.get_task(TaskQueryParams(id=task_id))
    assert fetched.status.state is TaskState.failed
    assert fetched.status.message is not None
    sdk_text, sdk_data = (part.root for part in fetched.status.message.parts)
    assert isinstance(sdk_text, TextPart)
    assert isinstance(sdk_data, DataPart)
    assert sdk_text.text == "The worker running this task stopped before it finished."
    assert (sdk_data.data["errorCode"], sdk_data.data["errorReason"]) == (
        "UPSTREAM_UNAVAILABLE",
        "worker_lost",
    )


@pytest.mark.reason("worker_lost")
async def test_a_stream_following_a_killed_replicas_task_ends_with_worker_lost(
    fleet: Fleet,
) -> None:
    """A ``tasks/resubscribe`` on the surviving replica follows the run through the relay;
    the runner dies without a final event, and the follower's stream still ends: with the
    ``failed`` / ``worker_lost`` end the sweeper stored, as its one final event."""
    async with httpx.AsyncClient(timeout=WAIT) as http:
        params = {"message": message_json("hang"), "configuration": {"blocking": False}}
        started = (await rpc(http, fleet.url, "message/send", params))["result"]
        task_id = started["id"]
        running = await _until_state(http, fleet.url, task_id, "working", WAIT)
        owner = running["metadata"]["llamon.worker"]
        victim = next(r for r in fleet.replicas if r.worker_id == owner)
        survivor = next(r for r in fleet.replicas if r.worker_id != owner)

        body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": task_id}}
        follower = SSE(http, survivor.url, body)
        await fleet.kill(victim.index)  # the sweep needs a lease: the follower is on by then

        await follower.until(lambda replies: bool(replies) and _final(replies[-1]), WAIT)
        await asyncio.wait_for(follower.task, WAIT)  # and the stream is closed

        end = follower.results[-1]
        assert end["kind"] == "status-update"
        assert end["status"]["state"] == "failed"
        data = end["status"]["message"]["parts"][1]["data"]
        assert (data["errorCode"], data["errorReason"]) == ("UPSTREAM_UNAVAILABLE", "worker_lost")
        assert all(not _final(reply) for reply in follower.replies[:-1])

        after = await rpc(http, survivor.url, "message/send", {"message": message_json("after")})
        assert after["result"]["status"]["state"] == "completed"


def _final(reply: dict[str, Any]) -> bool:
    result = reply.get("result", {})
    return isinstance(result, dict) and result.get("final") is True
