"""Live tasks across three ``llamon serve`` replicas behind a real nginx, on PostgreSQL and
a private ``redis-server`` (``--redis-url``): whatever request reaches a replica that does
not run the task is answered as the runner would, and outages mid-stream end bounded.

The agent is ``tests._support.gated_agent`` (a run held open by a file gate). Which
replica runs a task is its ``llamon.worker`` stamp, read from a replica directly (a
direct request is not balanced by nginx). Steering: nginx balances round-robin, so the
test sends tagged ``GET /.well-known/agent-card.json`` through nginx until the access log
shows one answered by the runner; the next request through nginx then goes to another
replica, and the access log confirms it did (``answered_by``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCard, TaskIdParams
from redis.asyncio import Redis

from llamon_agent.a2a.relay import DEFAULT_CANCEL_CHANNEL
from tests._support.jsonrpc import assert_error, request, text_message
from tests._support.postgres_server import private_postgres
from tests._support.redis_server import PrivateRedis, private_redis
from tests._support.relay_replicas import SSE
from tests._support.replicas import TAG_HEADER, Fleet, Replica, nginx_path, replicas
from tests._support.stores import postgres_schema

pytestmark = pytest.mark.skipif(nginx_path() is None, reason="nginx is not installed")

REPLICAS = 3
AGENT = "tests._support.gated_agent:agent"
FLOW = "tests._support.birthday_flow:agent"
WAIT = 15.0
"""Seconds any one step may take."""


@pytest.fixture
async def redis() -> AsyncIterator[PrivateRedis]:
    """A private ``redis-server`` (a test may stop and start it)."""
    async with private_redis() as server:
        yield server


@pytest.fixture
async def fleet(redis: PrivateRedis) -> AsyncIterator[Fleet]:
    """Three replicas of the gated agent behind nginx, on a fresh PostgreSQL schema and
    the private Redis."""
    async with (
        postgres_schema() as dsn,
        replicas(REPLICAS, database_url=dsn, redis_url=redis.url, agent=AGENT) as running,
    ):
        yield running


def _texts(results: list[dict[str, Any]]) -> list[str]:
    return [
        part["text"]
        for result in results
        if result.get("kind") == "artifact-update"
        for part in result["artifact"]["parts"]
    ]


def _has_c0(replies: list[dict[str, Any]]) -> bool:
    return "c0 " in _texts([reply.get("result", {}) for reply in replies])


def _task_id(result: dict[str, Any]) -> str:
    return str(result.get("taskId") or result["id"])


def _stream(http: httpx.AsyncClient, fleet: Fleet, text: str, tag: str) -> SSE:
    """A ``message/stream`` of ``text`` through nginx, tagged ``tag``."""
    body = request("message/stream", {"message": text_message(text)}, tag)
    return SSE(http, fleet.url, body, headers={TAG_HEADER: tag})


async def _rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], tag: str
) -> dict[str, Any]:
    """One JSON-RPC call to ``url`` (nginx or a replica), tagged ``tag``; its reply."""
    response = await http.post(url, json=request(method, params, tag), headers={TAG_HEADER: tag})
    assert response.status_code == 200
    reply: dict[str, Any] = response.json()
    return reply


async def _runner(http: httpx.AsyncClient, fleet: Fleet, task_id: str) -> Replica:
    """The replica running ``task_id`` (its ``llamon.worker``), asked of a replica directly."""
    for replica in fleet.replicas:
        if replica.process.returncode is None:
            got = await _rpc(http, replica.url, "tasks/get", {"id": task_id}, "runner")
            worker = got["result"]["metadata"]["llamon.worker"]
            return next(r for r in fleet.replicas if r.worker_id == worker)
    raise AssertionError("no replica is running")


async def _steer_past(http: httpx.AsyncClient, fleet: Fleet, replica: Replica) -> None:
    """Send tagged card requests through nginx until one is answered by ``replica``: the
    next request through nginx goes to another one (round-robin)."""
    for attempt in range(2 * REPLICAS):
        tag = f"steer-{uuid.uuid4().hex[:8]}-{attempt}"
        response = await http.get(
            f"{fleet.url}.well-known/agent-card.json", headers={TAG_HEADER: tag}
        )
        assert response.status_code == 200
        if (await fleet.logged([tag]))[tag].answered_by == replica.address:
            return
    raise AssertionError(f"nginx never sent a request to {replica.address}")


async def _elsewhere(fleet: Fleet, tag: str, runner: Replica) -> None:
    """The request tagged ``tag`` was answered by a replica other than ``runner``."""
    line = (await fleet.logged([tag]))[tag]
    assert line.answered_by != runner.address, line
    assert line.answered_by in {r.address for r in fleet.replicas}


async def _until(check: Any, what: str) -> None:
    """Poll the async ``check()`` until it holds (at most ``WAIT`` seconds)."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"not within {WAIT} s: {what}"
        await asyncio.sleep(0.02)


async def _follower_blocked(redis: PrivateRedis) -> None:
    """Wait until a replica's relay follower is blocked in ``XREAD`` (it has attached)."""
    client = Redis.from_url(redis.url, decode_responses=True)

    async def blocked() -> bool:
        clients = await client.client_list()
        return any(c.get("cmd") == "xread" and "b" in c.get("flags", "") for c in clients)

    try:
        await _until(blocked, "a follower blocked in XREAD")
    finally:
        await client.aclose()


async def _cancel_listeners(redis: PrivateRedis, count: int) -> None:
    """Wait until ``count`` replicas listen for cancel requests."""
    client = Redis.from_url(redis.url, decode_responses=True)

    async def listening() -> bool:
        [(_, subscribers)] = await client.pubsub_numsub(DEFAULT_CANCEL_CHANNEL)
        return int(subscribers) >= count

    try:
        await _until(listening, f"{count} cancel listeners")
    finally:
        await client.aclose()


def _plain_client(http: httpx.AsyncClient, card_json: dict[str, Any], url: str) -> Any:
    """a2a-sdk's own streaming client, through nginx at ``url``."""
    card = AgentCard.model_validate(card_json).model_copy(update={"url": url})
    return ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)


def _wire(event: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = event.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


async def test_a_resubscribe_landing_elsewhere_gets_the_remaining_events_in_order(
    fleet: Fleet, redis: PrivateRedis, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    async with httpx.AsyncClient(timeout=WAIT) as http:
        run = _stream(http, fleet, f"gate {gate}", "stream")
        await run.until(_has_c0)
        task_id = _task_id(run.results[0])
        runner = await _runner(http, fleet, task_id)
        card_json = (await http.get(f"{runner.url}.well-known/agent-card.json")).json()
        await _steer_past(http, fleet, runner)
        # the resubscribe through nginx, read by a2a-sdk's own client
        async with httpx.AsyncClient(timeout=WAIT, headers={TAG_HEADER: "resubscribe"}) as tagged:
            client = _plain_client(tagged, card_json, fleet.url)
            events: list[Any] = []

            async def follow() -> None:
                async for _task, update in client.resubscribe(TaskIdParams(id=task_id)):
                    events.append(update)

            following = asyncio.create_task(follow())
            await _follower_blocked(redis)  # the other replica follows the relay
            gate.touch()
            await asyncio.wait_for(asyncio.gather(run.task, following), WAIT)
        await _elsewhere(fleet, "resubscribe", runner)
        assert (await fleet.logged(["stream"]))["stream"].answered_by == runner.address

        c0 = [r for r in run.results if r["kind"] == "artifact-update"].index(
            next(r for r in run.results if _texts([r]) == ["c0 "])
        )
        later = [r for r in run.results if r["kind"] == "artifact-update"][c0 + 1 :]
        got = [_wire(event) for event in events]
        # every later event, in order, once: the chunks, the whole artifact, the end
        assert [g for g in got if g["kind"] == "artifact-update"] == later
        assert _texts(got) == ["c1 ", "c2 ", "c0 ", "c1 ", "c2 "]
        assert got[-1] == run.results[-1]
        assert (got[-1]["kind"], got[-1]["final"], got[-1]["status"]["state"]) == (
            "status-update",
            True,
            "completed",
        )
        # the next request is answered (a get, through nginx)
        stored = await _rpc(http, fleet.url, "tasks/get", {"id": task_id}, "get-after")
        assert stored["result"]["status"]["state"] == "completed"


async def test_a_cancel_landing_elsewhere_ends_the_task_canceled(
    fleet: Fleet, redis: PrivateRedis, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        run = _stream(http, fleet, f"gate {tmp_path / 'never'}", "stream")
        await run.until(_has_c0)
        task_id = _task_id(run.results[0])
        runner = await _runner(http, fleet, task_id)
        await _cancel_listeners(redis, REPLICAS)
        await _steer_past(http, fleet, runner)
        answer = await _rpc(http, fleet.url, "tasks/cancel", {"id": task_id}, "cancel")
        await _elsewhere(fleet, "cancel", runner)
        assert (answer["result"]["id"], answer["result"]["status"]["state"]) == (
            task_id,
            "canceled",
        )
        await asyncio.wait_for(run.task, WAIT)  # the runner's stream ends canceled
        last = run.results[-1]
        assert (last["kind"], last["final"], last["status"]["state"]) == (
            "status-update",
            True,
            "canceled",
        )
        for replica in fleet.replicas:
            got = await _rpc(http, replica.url, "tasks/get", {"id": task_id}, "get")
            assert got["result"]["status"]["state"] == "canceled"
        again = await _rpc(http, fleet.url, "tasks/cancel", {"id": task_id}, "cancel-again")
        assert again["error"]["code"] == -32002
        assert again["error"]["message"].endswith("current state: canceled")
        # a task that completed is not cancelable, wherever the cancel lands
        done = await _rpc(
            http, fleet.url, "message/send", {"message": text_message("hello")}, "done"
        )
        assert done["result"]["status"]["state"] == "completed"
        done_runner = fleet.by_address((await fleet.logged(["done"]))["done"].answered_by)
        await _steer_past(http, fleet, done_runner)
        late = await _rpc(http, fleet.url, "tasks/cancel", {"id": done["result"]["id"]}, "late")
        await _elsewhere(fleet, "late", done_runner)
        assert late["error"]["code"] == -32002
        assert late["error"]["data"]["errorCode"] == "INVALID_INPUT"
        assert late["error"]["message"].endswith("current state: completed")


async def test_a_question_asked_on_one_replica_is_answered_on_another(fleet: Fleet) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        asked = await _rpc(
            http, fleet.url, "message/send", {"message": text_message("birthday")}, "ask"
        )
        task = asked["result"]
        assert task["status"]["state"] == "input-required"
        runner = fleet.by_address((await fleet.logged(["ask"]))["ask"].answered_by)
        assert task["metadata"]["llamon.worker"] == runner.worker_id
        await _steer_past(http, fleet, runner)
        answer = text_message("1990-01-01", taskId=task["id"], contextId=task["contextId"])
        answered = await _rpc(http, fleet.url, "message/send", {"message": answer}, "answer")
        await _elsewhere(fleet, "answer", runner)
        result = answered["result"]
        assert (result["id"], result["status"]["state"]) == (task["id"], "completed")
        assert result["artifacts"][-1]["parts"] == [
            {"kind": "text", "text": "Thanks! Your birthday is 1990-01-01."}
        ]
        # the next request is answered
        after = await _rpc(
            http, fleet.url, "message/send", {"message": text_message("next")}, "after"
        )
        assert after["result"]["artifacts"][0]["parts"][0]["text"] == "answered next"


@pytest.mark.reason("task_busy")
async def test_two_answers_racing_on_two_other_replicas_exactly_one_resumes_the_task(
    fleet: Fleet, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    async with httpx.AsyncClient(timeout=WAIT) as http:
        asked = await _rpc(
            http, fleet.url, "message/send", {"message": text_message("birthday")}, "ask"
        )
        task = asked["result"]
        assert task["status"]["state"] == "input-required"
        runner = fleet.by_address((await fleet.logged(["ask"]))["ask"].answered_by)
        others = [replica for replica in fleet.replicas if replica is not runner]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        answers = {
            asyncio.create_task(
                _rpc(
                    http,
                    replica.url,
                    "message/send",
                    {"message": text_message(f"gate {gate}", **ids)},
                    f"answer-{replica.index}",
                )
            ): replica
            for replica in others
        }
        # the resumed run holds until the gate opens: the loser cannot see it ended
        done, running = await asyncio.wait(
            answers, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED
        )
        [refused] = done
        [winner] = running
        assert_error(refused.result(), -32041, "task_busy")
        loser = answers[refused]
        during = await _rpc(http, loser.url, "tasks/get", {"id": task["id"]}, "during")
        assert during["result"]["status"]["state"] == "working"
        assert during["result"]["metadata"]["llamon.worker"] == answers[winner].worker_id
        gate.touch()
        result = (await asyncio.wait_for(winner, WAIT))["result"]
        assert (result["id"], result["status"]["state"]) == (task["id"], "completed")
        assert result["artifacts"][-1]["parts"] == [
            {"kind": "text", "text": f"Thanks! Your birthday is gate {gate}."}
        ]
        # the loser's replica answers the next request, and sees the winner's end
        ended = await _rpc(http, loser.url, "tasks/get", {"id": task["id"]}, "ended")
        assert ended["result"]["status"]["state"] == "completed"
        after = await _rpc(
            http, loser.url, "message/send", {"message": text_message("next")}, "after"
        )
        assert after["result"]["artifacts"][0]["parts"][0]["text"] == "answered next"


async def test_a_flow_paused_on_one_replica_resumes_from_its_checkpoint_on_another(
    redis: PrivateRedis,
) -> None:
    # ``--store postgres`` keeps a served flow's checkpoints in the same database
    async with (
        postgres_schema() as dsn,
        replicas(REPLICAS, database_url=dsn, redis_url=redis.url, agent=FLOW) as fleet,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        asked = await _rpc(http, fleet.url, "message/send", {"message": text_message("hi")}, "ask")
        task = asked["result"]
        assert task["status"]["state"] == "input-required"
        runner = fleet.by_address((await fleet.logged(["ask"]))["ask"].answered_by)
        await _steer_past(http, fleet, runner)
        answer = text_message("1990-01-01", taskId=task["id"], contextId=task["contextId"])
        answered = await _rpc(http, fleet.url, "message/send", {"message": answer}, "answer")
        await _elsewhere(fleet, "answer", runner)
        result = answered["result"]
        assert (result["id"], result["status"]["state"]) == (task["id"], "completed"), result
        # resumed from the checkpoint the runner wrote (a fresh run would ask again)
        [artifact] = result["artifacts"]
        assert artifact["parts"] == [{"kind": "text", "text": "born 1990-01-01"}]
        # the next request is answered: a new question
        again = await _rpc(
            http, fleet.url, "message/send", {"message": text_message("hi")}, "again"
        )
        assert again["result"]["status"]["state"] == "input-required"


async def test_a_runner_killed_mid_stream_ends_the_stream_and_the_next_send_is_answered(
    fleet: Fleet, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        run = _stream(http, fleet, f"gate {tmp_path / 'never'}", "doomed")
        await run.until(_has_c0)
        runner = await _runner(http, fleet, _task_id(run.results[0]))
        await fleet.kill(runner.index)
        done, _ = await asyncio.wait({run.task}, timeout=WAIT)
        assert done == {run.task}  # the client's stream ended (cut), nothing hangs
        assert not any(r.get("result", {}).get("final") for r in run.replies)
        tags = [f"after-{i}" for i in range(REPLICAS)]
        for tag in tags:
            reply = await _rpc(http, fleet.url, "message/send", {"message": text_message(tag)}, tag)
            assert reply["result"]["status"]["state"] == "completed"
            assert reply["result"]["artifacts"][0]["parts"][0]["text"] == f"answered {tag}"
        logged = await fleet.logged(tags)
        assert all(line.answered_by != runner.address for line in logged.values())


@pytest.mark.reason("event_relay_unavailable")
async def test_redis_restarted_mid_stream_a_follower_ends_bounded_and_the_next_stream_works(
    fleet: Fleet, redis: PrivateRedis, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    async with httpx.AsyncClient(timeout=WAIT) as http:
        run = _stream(http, fleet, f"gate {gate}", "stream")
        await run.until(_has_c0)
        task_id = _task_id(run.results[0])
        runner = await _runner(http, fleet, task_id)
        await _steer_past(http, fleet, runner)
        body = request("tasks/resubscribe", {"id": task_id}, "resubscribe")
        follow = SSE(http, fleet.url, body, headers={TAG_HEADER: "resubscribe"})
        await _follower_blocked(redis)
        await redis.stop()
        await redis.start()  # same port, empty: the task's stream is gone
        gate.touch()
        await asyncio.wait_for(asyncio.gather(run.task, follow.task), WAIT)  # never hangs
        await _elsewhere(fleet, "resubscribe", runner)
        assert run.results[-1]["status"]["state"] == "completed"  # the run itself went on
        last = follow.replies[-1]
        if "error" in last:  # the follower lost Redis: one classified error, the end
            data = assert_error(last, -32603, "event_relay_unavailable")
            assert (data.error_code, data.retriable) == ("UPSTREAM_UNAVAILABLE", True)
            assert str(redis.port) not in str(last)
            assert all("result" in reply for reply in follow.replies[:-1])
        else:  # it resumed: the end arrived
            assert (last["result"]["final"], last["result"]["status"]["state"]) == (
                True,
                "completed",
            )
        # after Redis is back, a next stream works and is relayed again: followed elsewhere
        # to its final event, no replica restarted
        gate = tmp_path / "gate-after"
        after = _stream(http, fleet, f"gate {gate}", "after")
        await after.until(_has_c0)
        task_id = _task_id(after.results[0])
        runner = await _runner(http, fleet, task_id)
        await _steer_past(http, fleet, runner)
        body = request("tasks/resubscribe", {"id": task_id}, "resubscribe-after")
        again = SSE(http, fleet.url, body, headers={TAG_HEADER: "resubscribe-after"})
        await _follower_blocked(redis)
        gate.touch()
        await asyncio.wait_for(asyncio.gather(after.task, again.task), WAIT)
        await _elsewhere(fleet, "resubscribe-after", runner)
        assert _texts(again.results) == ["c1 ", "c2 ", "c0 ", "c1 ", "c2 "]
        assert again.results[-1] == after.results[-1]
        end = after.results[-1]
        assert (end["final"], end["status"]["state"]) == (True, "completed")


@pytest.mark.reason("database_unavailable")
async def test_postgres_restarted_a_send_is_classified_meanwhile_and_served_after(
    redis: PrivateRedis,
) -> None:
    async with (
        private_postgres() as pg,
        replicas(REPLICAS, database_url=pg.dsn, redis_url=redis.url, agent=AGENT) as fleet,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        before = await _rpc(
            http, fleet.url, "message/send", {"message": text_message("before")}, "before"
        )
        assert before["result"]["status"]["state"] == "completed"
        await pg.stop()
        down = [f"down-{i}" for i in range(REPLICAS)]
        for tag in down:  # one on each replica
            response = await http.post(
                fleet.url,
                json=request("message/send", {"message": text_message(tag)}, tag),
                headers={TAG_HEADER: tag},
            )
            assert response.status_code == 200
            reply = response.json()
            data = assert_error(reply, -32603, "database_unavailable")
            assert (data.error_code, data.retriable) == ("UPSTREAM_UNAVAILABLE", True)
            assert str(pg.port) not in response.text
            assert "127.0.0.1" not in response.text
        logged = await fleet.logged(down)
        assert {line.answered_by for line in logged.values()} == {r.address for r in fleet.replicas}
        await pg.start()
        after = [f"after-{i}" for i in range(REPLICAS)]
        for tag in after:  # every replica serves again, none restarted
            reply = await _rpc(http, fleet.url, "message/send", {"message": text_message(tag)}, tag)
            assert reply["result"]["status"]["state"] == "completed", reply
        assert all(r.process.returncode is None for r in fleet.replicas)
        got = await _rpc(http, fleet.url, "tasks/get", {"id": before["result"]["id"]}, "get")
        assert got["result"]["status"]["state"] == "completed"
