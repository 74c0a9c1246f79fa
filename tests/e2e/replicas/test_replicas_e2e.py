"""Three ``llamon serve`` replicas on one PostgreSQL store (a schema of its own), behind a
real nginx balancing round-robin (``tests/_support/replicas.py``), over real HTTP on
127.0.0.1.

What works across replicas today: blocking sends through nginx land on every replica
(nginx's access log and the task's ``llamon.worker`` stamp say which) with the right
answer; ``tasks/get`` of a task on any replica returns the same stored task; a send retried
with the same ``messageId`` on another replica answers the first task; a SIGKILLed replica
costs the client nothing: nginx's connection to it is refused, nginx passes the request to
the next replica and the client gets that replica's ``200`` answer.

These replicas have no Redis: live tasks across replicas (resubscribe, cancel, an answer
to input-required, outages mid-stream) are pinned with ``--redis-url`` in
``test_replicas_live_e2e.py``.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests._support.replicas import TAG_HEADER, Fleet, replicas
from tests._support.serve import message_json, rpc
from tests._support.stores import postgres_schema

REPLICAS = 3


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    """Three replicas of the demo agent behind nginx, on a fresh PostgreSQL schema."""
    async with postgres_schema() as dsn, replicas(REPLICAS, database_url=dsn) as running:
        yield running


async def _send(http: httpx.AsyncClient, url: str, text: str, tag: str) -> dict[str, Any]:
    """A blocking ``message/send`` of ``text`` tagged ``tag`` in the access log; the task."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": message_json(text)},
    }
    response = await http.post(url, json=body, headers={TAG_HEADER: tag})
    assert response.status_code == 200
    task: dict[str, Any] = response.json()["result"]
    return task


def _answer(task: dict[str, Any]) -> str:
    assert task["status"]["state"] == "completed"
    [artifact] = task["artifacts"]
    [part] = artifact["parts"]
    text: str = part["text"]
    return text


async def test_blocking_sends_through_nginx_land_on_every_replica_with_the_right_answer(
    fleet: Fleet,
) -> None:
    tags = [f"send-{i}" for i in range(2 * REPLICAS)]
    async with httpx.AsyncClient(timeout=30) as http:
        tasks = {tag: await _send(http, fleet.url, f"hello {tag}", tag) for tag in tags}
    logged = await fleet.logged(tags)
    for tag, task in tasks.items():
        assert _answer(task) == f"Hello! You said: hello {tag}"
        line = logged[tag]
        assert (line.status, line.upstream_status, len(line.upstreams)) == (200, "200", 1)
        # the task was run (and stamped) by the replica nginx says answered
        assert task["metadata"]["llamon.worker"] == fleet.by_address(line.answered_by).worker_id
    # round-robin: each replica answered exactly two of the six
    answered = Counter(logged[tag].answered_by for tag in tags)
    assert answered == {replica.address: 2 for replica in fleet.replicas}


async def test_tasks_get_on_any_replica_returns_the_same_stored_task(fleet: Fleet) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        sent = await _send(http, fleet.url, "where am I?", "get-me")
        assert _answer(sent) == "Hello! You said: where am I?"
        for replica in fleet.replicas:
            got = await rpc(http, replica.url, "tasks/get", {"id": sent["id"]})
            assert got == {"id": 1, "jsonrpc": "2.0", "result": sent}
        missing = await rpc(http, fleet.replicas[0].url, "tasks/get", {"id": str(uuid.uuid4())})
        assert missing["error"]["code"] == -32001
        # the next request is answered
        after = await _send(http, fleet.url, "still there?", "after-missing")
        assert _answer(after) == "Hello! You said: still there?"


async def test_a_send_retried_on_another_replica_answers_the_first_task(fleet: Fleet) -> None:
    message = message_json("say it once")
    first, second, third = fleet.replicas
    async with httpx.AsyncClient(timeout=30) as http:
        original = (await rpc(http, first.url, "message/send", {"message": message}))["result"]
        assert _answer(original) == "Hello! You said: say it once"
        assert original["metadata"]["llamon.worker"] == first.worker_id
        for replica in (second, third, first):
            again = await rpc(http, replica.url, "message/send", {"message": message})
            assert again["result"] == original  # the same task, not a second run
        # a new messageId with the same text is a new send, answered by the replica it reached
        fresh = (
            await rpc(http, second.url, "message/send", {"message": message_json("say it once")})
        )["result"]
        assert fresh["id"] != original["id"]
        assert _answer(fresh) == "Hello! You said: say it once"
        assert fresh["metadata"]["llamon.worker"] == second.worker_id


async def test_a_killed_replica_costs_the_client_nothing_nginx_passes_to_the_others(
    fleet: Fleet,
) -> None:
    warm = [f"warm-{i}" for i in range(REPLICAS)]
    after = [f"after-kill-{i}" for i in range(2 * REPLICAS)]
    async with httpx.AsyncClient(timeout=30) as http:
        for tag in warm:  # every replica holds a kept-alive connection from nginx
            assert _answer(await _send(http, fleet.url, tag, tag)) == f"Hello! You said: {tag}"
        dead = fleet.replicas[1]
        await fleet.kill(dead.index)
        assert dead.process.returncode == -signal.SIGKILL
        answers = [await _send(http, fleet.url, tag, tag) for tag in after]
    for tag, task in zip(after, answers, strict=True):
        assert _answer(task) == f"Hello! You said: {tag}"
    logged = await fleet.logged(after)
    lines = [logged[tag] for tag in after]
    alive = {r.address for r in fleet.replicas} - {dead.address}
    assert all(line.status == 200 for line in lines)
    assert {line.answered_by for line in lines} == alive
    # exactly one request tried the dead replica (refused: nginx logs it as 502) and was
    # passed on; then nginx skips it (max_fails=1) and no request tries it again
    tried_dead = [line for line in lines if dead.address in line.upstreams]
    assert len(tried_dead) == 1
    [retried] = tried_dead
    assert retried.upstreams[0] == dead.address
    assert retried.upstream_status == "502, 200"
    assert all(len(line.upstreams) == 1 for line in lines if line is not retried)


async def test_leaving_the_fleet_leaves_nothing_running() -> None:
    async with postgres_schema() as dsn, replicas(2, database_url=dsn) as running:
        processes = [r.process for r in running.replicas] + [running.nginx]
        async with httpx.AsyncClient(timeout=30) as http:
            task = await _send(http, running.url, "bye", "bye")
        assert _answer(task) == "Hello! You said: bye"
    assert [p.returncode is not None for p in processes] == [True, True, True]
    for process in processes:  # nor any child in their process groups (nginx's worker)
        with pytest.raises(ProcessLookupError):
            os.killpg(process.pid, 0)
