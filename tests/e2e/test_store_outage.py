"""PostgreSQL stopped under a running server, then started again: the server keeps serving.

The test runs its own PostgreSQL (``tests._support.postgres_server``: initdb into a
temporary directory, its own free port) so it can stop and start it; the shared test
server is never touched. While the database is down, requests get a classified,
retriable ``database_unavailable``; once it is back they are served, and a task whose
end could not be written during the outage ends ``failed`` in the database.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from tests._support.a2a_server import make_card
from tests._support.postgres_server import private_postgres
from tests.a2a.test_wedge import (
    DEADLINE,
    Agent,
    assert_served,
    failure_data,
    get_task,
    open_stream,
    rpc,
    serving,
    state_of,
)


def _error(answers: list[dict[str, Any]]) -> dict[str, Any]:
    error: dict[str, Any] = answers[-1]["error"]
    return error


@pytest.mark.reason("database_unavailable")
async def test_postgres_down_then_back_the_server_keeps_serving_and_ends_the_task() -> None:
    async with private_postgres() as pg:
        stores = await open_stores("postgres", dsn=pg.dsn)
        agent = Agent()
        try:
            app = create_app(agent, make_card(), task_store=stores.task_store)
            async with serving(app) as url:
                await assert_served(url)
                async with open_stream(url, "wait") as events:
                    first = await asyncio.wait_for(anext(events), DEADLINE)
                    task_id = first["result"]["id"]
                    await asyncio.wait_for(agent.started.wait(), DEADLINE)
                    await pg.stop()  # the database goes down while the agent runs
                    agent.release.set()
                    rest = [event async for event in events]
                failure = _error(rest)
                assert failure["code"] == -32603
                assert failure["data"]["errorReason"] == "database_unavailable"
                assert failure["data"]["retriable"] is True

                for method in ("message/send", "message/stream"):
                    data = _error(await rpc(url, method, "while down"))["data"]
                    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
                        "UPSTREAM_UNAVAILABLE",
                        "database_unavailable",
                        True,
                    ), data
                    assert str(pg.port) not in json.dumps(data)

                await pg.start()
                await assert_served(url)
                answer = await get_task(url, task_id)
                assert state_of(answer) == "failed", answer
                data = failure_data(answer["result"])
                assert (data["errorReason"], data["retriable"]) == ("database_unavailable", True)
            stored = await stores.task_store.get(task_id)  # in the database itself
            assert stored is not None
            assert stored.status.state.value == "failed"
        finally:
            await stores.close()


@pytest.mark.reason("database_unavailable")
async def test_requests_while_postgres_is_down_get_a_retriable_error_quickly() -> None:
    async with private_postgres() as pg:
        stores = await open_stores("postgres", dsn=pg.dsn)
        try:
            async with serving(
                create_app(Agent(), make_card(), task_store=stores.task_store)
            ) as url:
                await pg.stop()
                async with httpx.AsyncClient(timeout=DEADLINE) as http:
                    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
                    answer = (await http.post(url, json=body)).json()
                assert answer["error"]["data"]["errorReason"] == "database_unavailable"
                await pg.start()
                await assert_served(url)
        finally:
            await stores.close()
