"""PostgreSQL stopped under a running server, then started again: the server keeps serving.

The test runs its own PostgreSQL (initdb into a temporary directory, its own free port)
so it can stop and start it; the shared test server is never touched. While the database
is down, requests get a classified, retriable ``database_unavailable``; once it is back
they are served, and a task whose end could not be written during the outage ends
``failed`` in the database.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from tests._support.a2a_server import make_card
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

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_TIMEOUT = 60.0


@dataclass
class OwnPostgres:
    """A PostgreSQL cluster of this test alone, run as the ``postgres`` user."""

    data: Path
    port: int

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    async def _pg(self, program: str, *args: str) -> None:
        process = await asyncio.create_subprocess_exec(
            "runuser",
            "-u",
            "postgres",
            "--",
            str(PG_BIN / program),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(process.communicate(), PG_TIMEOUT)
        assert process.returncode == 0, f"{program} failed: {out.decode(errors='replace')}"

    async def start(self) -> None:
        options = f"-p {self.port} -k {self.data.parent} -c listen_addresses=127.0.0.1"
        log = str(self.data.parent / "postgres.log")
        await self._pg("pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    async def stop(self) -> None:
        await self._pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def own_postgres() -> AsyncIterator[OwnPostgres]:
    if not (PG_BIN / "initdb").exists() or shutil.which("runuser") is None:
        pytest.skip(f"needs PostgreSQL binaries in {PG_BIN} and runuser")
    root = Path(tempfile.mkdtemp(prefix="llamon-pg-"))
    shutil.chown(root, "postgres", "postgres")
    pg = OwnPostgres(root / "data", _free_port())
    try:
        await pg._pg("initdb", "-D", str(pg.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        await pg.start()
        yield pg
    finally:
        if (pg.data / "postmaster.pid").exists():
            await pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def _error(answers: list[dict[str, Any]]) -> dict[str, Any]:
    error: dict[str, Any] = answers[-1]["error"]
    return error


@pytest.mark.reason("database_unavailable")
async def test_postgres_down_then_back_the_server_keeps_serving_and_ends_the_task() -> None:
    async with own_postgres() as pg:
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
    async with own_postgres() as pg:
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
