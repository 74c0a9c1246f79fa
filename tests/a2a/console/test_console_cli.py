"""``llamon serve --console`` and ``llamon console`` on the command line: an open console
off loopback refuses to start (exit 2, one line naming the fix), and ``llamon console``
serves a shared store's failures read-only."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from llamon_agent.a2a.stores import FailureRetention, open_stores
from llamon_agent.a2a.stores.failures import FailureQuery
from llamon_agent.cli import app
from llamon_agent.demo import demo_agent_path
from tests._support.a2a_server import user_message
from tests._support.serve import llamon_serve
from tests.a2a.stores.test_failures import failure

ANY = "0.0.0.0"  # noqa: S104 - the address an open console must refuse
runner = CliRunner()
AGENT = "llamon_agent.examples.demo_agent:agent"
FIX = (
    "the console has no credentials and would listen on 0.0.0.0, not on loopback; "
    "pass --api-key/--bearer-token (or LLAMON_API_KEY/LLAMON_BEARER_TOKEN), or --host 127.0.0.1."
)
NO_KEYS = {"LLAMON_API_KEY": "", "LLAMON_BEARER_TOKEN": ""}


@pytest.mark.parametrize(
    "arguments",
    [
        ["serve", AGENT, "--console", "--host", ANY, "--store", "memory"],
        ["console", "--host", ANY],
    ],
)
def test_an_open_console_off_loopback_refuses_to_start(arguments: list[str]) -> None:
    result = runner.invoke(app, arguments, env=NO_KEYS)
    assert result.exit_code == 2, result.output
    command = arguments[0]
    assert result.output.strip().splitlines() == [f"llamon {command}: {FIX}"]


async def test_llamon_console_serves_a_shared_store_read_only(tmp_path: Path) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    assert stores.failures is not None
    stores.failures.record(failure("task-old", "timeout", minutes_ago=60 * 24 * 365))
    stores.failures.record(failure("task-now", "rate_limited"))
    await stores.close()
    env = {**os.environ, "LLAMON_API_KEY": "console-cli-key", "LLAMON_HOME": str(tmp_path)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llamon_agent", "console", "--port", "0",
        env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = (await asyncio.wait_for(process.stderr.readline(), timeout=60)).decode()
        found = re.search(r"at (http://127\.0\.0\.1:\d+/console)$", line.strip())
        assert found, line
        assert line.startswith("llamon: the console of the sqlite store at "), line
        async with httpx.AsyncClient(timeout=10) as client:
            refused = await client.get(found.group(1), headers={"accept": "text/html"})
            assert refused.status_code == 303
            page = await client.get(
                found.group(1) + "/failures?since=30d", headers={"X-API-Key": "console-cli-key"}
            )
            assert page.status_code == 200
            assert 'data-task-id="task-now"' in page.text
            assert 'data-task-id="task-old"' not in page.text  # outside 30 days, yet kept
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=30)
    stores = await open_stores(
        "sqlite", home=tmp_path, failure_retention=FailureRetention(max_age=None, max_rows=None)
    )
    try:
        assert stores.failures is not None
        kept = await stores.failures.query(FailureQuery())
        assert sorted(row.task_id for row in kept.rows) == ["task-now", "task-old"]
    finally:
        await stores.close()


async def test_the_demo_with_the_console_keeps_serving_it_until_told() -> None:
    from llamon_agent.demo import DemoResult, run_demo

    seen: list[str] = []

    async def look(url: str, results: list[DemoResult], ended: asyncio.Future[None]) -> None:
        assert all(result.expected for result in results)
        assert not ended.done()
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            page = await client.get("/console/failures")
            seen.append(page.text)
            assert page.status_code == 200

    results = await run_demo(store="memory", console=look)
    assert len(results) == 7
    assert 'data-code="UPSTREAM_UNAVAILABLE"' in seen[0]


async def test_llamon_serve_console_serves_the_agent_and_its_console(tmp_path: Path) -> None:
    async with (
        llamon_serve(
            tmp_path,
            *("--store", "sqlite", "--console", "--api-key", "serve-key-3"),
            target=f"{demo_agent_path()}:agent",  # its default card declares the key
        ) as (_, url),
        httpx.AsyncClient(base_url=url.rstrip("/"), timeout=10) as client,
    ):
        assert (await client.get("/console", headers={"accept": "text/html"})).status_code == 303
        signed = await client.post("/console/login", data={"credential": "serve-key-3"})
        assert signed.status_code == 303
        page = await client.get("/console")
        assert page.status_code == 200
        assert "<h1>Live tasks</h1>" in page.text
        sent = await client.post(
            "/",
            headers={"X-API-Key": "serve-key-3"},
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "message/send",
                "params": {"message": user_message("quota").model_dump(mode="json")},
            },
        )
        task = sent.json()["result"]
        assert task["status"]["state"] == "failed"
        # the served task's events were kept in the store: its page lists them in order
        shown = await client.get(f"/console/tasks/{task['id']}")
        types = [t for t in ("task.submitted", "task.working", "task.failed") if t in shown.text]
        assert types == ["task.submitted", "task.working", "task.failed"]
        assert shown.text.index("task.working") < shown.text.index("task.failed")
        client.cookies.clear()
        refused = await client.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get"})
        assert refused.status_code == 401  # the agent still asks for its key
