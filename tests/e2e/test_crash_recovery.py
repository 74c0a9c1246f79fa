"""A server process killed mid-task and restarted on the same SQLite file reports the task
failed / worker_lost (a real subprocess, SIGKILL, a real restart)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from llamon_agent.demo import demo_agent_path

READY_TIMEOUT = 30.0


@asynccontextmanager
async def llamon_serve(home: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``python -m llamon_agent serve`` on a free port with ``LLAMON_HOME=home``."""
    path = demo_agent_path()
    env = {**os.environ, "LLAMON_HOME": str(home), "LLAMON_WORKER_ID": "crash-test"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llamon_agent",
        "serve",
        f"{path}:agent",
        "--card",
        f"{path}:card",
        "--port",
        "0",
        "--store",
        "sqlite",
        env=env,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert process.stderr is not None
    url = ""
    while not url:
        line = (await asyncio.wait_for(process.stderr.readline(), READY_TIMEOUT)).decode()
        assert line, "the server exited before it was ready"
        if line.startswith("llamon: serving"):
            url = line.split(" at ", 1)[1].split(" ", 1)[0]
    try:
        yield process, url
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 20)


async def _wait_for_working(http: httpx.AsyncClient, url: str, task_id: str) -> None:
    """Poll tasks/get (no sleeps: each poll is a real round trip) until the task works."""
    async with asyncio.timeout(READY_TIMEOUT):
        while (await _rpc(http, url, "tasks/get", {"id": task_id}))["result"]["status"][
            "state"
        ] != "working":
            pass


def _start_hanging_task() -> dict:
    """message/send params: the demo agent's ``hang`` command, non-blocking."""
    return {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": "hang"}],
            "messageId": str(uuid.uuid4()),
            "kind": "message",
        },
        "configuration": {"blocking": False},
    }


async def _rpc(http: httpx.AsyncClient, url: str, method: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post(url, json=body)
    return response.json()


async def test_killed_worker_task_ends_failed_worker_lost(tmp_path: Path) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        async with llamon_serve(tmp_path) as (process, url):
            started = await _rpc(http, url, "message/send", _start_hanging_task())
            task_id = started["result"]["id"]
            assert started["result"]["status"]["state"] in {"submitted", "working"}
            await _wait_for_working(http, url, task_id)
            process.kill()
            await process.wait()
        async with llamon_serve(tmp_path) as (_, url):
            got = await _rpc(http, url, "tasks/get", {"id": task_id})
    task = got["result"]
    assert task["status"]["state"] == "failed"
    data = next(p["data"] for p in task["status"]["message"]["parts"] if p["kind"] == "data")
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "worker_lost",
        True,
    )


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
async def test_graceful_stop_ends_running_tasks(tmp_path: Path, signal_name: str) -> None:
    """A stopped server ends its running tasks failed / worker_shutdown, not working."""
    async with httpx.AsyncClient(timeout=10) as http:
        async with llamon_serve(tmp_path) as (process, url):
            task_id = (await _rpc(http, url, "message/send", _start_hanging_task()))["result"]["id"]
            await _wait_for_working(http, url, task_id)
            process.send_signal(getattr(signal, signal_name))
            await asyncio.wait_for(process.wait(), 20)
        async with llamon_serve(tmp_path) as (_, url):
            state = (await _rpc(http, url, "tasks/get", {"id": task_id}))["result"]["status"]
    assert state["state"] == "failed"
    data = next(p["data"] for p in state["message"]["parts"] if p["kind"] == "data")
    assert (data["errorReason"], data["retriable"]) == ("worker_shutdown", True)
