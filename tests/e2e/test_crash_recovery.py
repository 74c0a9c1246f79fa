"""A server process killed mid-task and restarted on the same SQLite file reports the task
failed / worker_lost (a real subprocess, SIGKILL, a real restart)."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests._support.serve import READY_TIMEOUT, llamon_serve, rpc


async def _wait_for_working(http: httpx.AsyncClient, url: str, task_id: str) -> None:
    """Poll tasks/get (no sleeps: each poll is a real round trip) until the task works."""
    async with asyncio.timeout(READY_TIMEOUT):
        while (await rpc(http, url, "tasks/get", {"id": task_id}))["result"]["status"][
            "state"
        ] != "working":
            pass


def _start_hanging_task() -> dict[str, Any]:
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


@pytest.mark.reason("worker_lost")
async def test_killed_worker_task_ends_failed_worker_lost(tmp_path: Path) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        async with llamon_serve(tmp_path) as (process, url):
            started = await rpc(http, url, "message/send", _start_hanging_task())
            task_id = started["result"]["id"]
            assert started["result"]["status"]["state"] in {"submitted", "working"}
            await _wait_for_working(http, url, task_id)
            process.kill()
            await process.wait()
        async with llamon_serve(tmp_path) as (_, url):
            got = await rpc(http, url, "tasks/get", {"id": task_id})
    task = got["result"]
    assert task["status"]["state"] == "failed"
    data = next(p["data"] for p in task["status"]["message"]["parts"] if p["kind"] == "data")
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "worker_lost",
        True,
    )


@pytest.mark.reason("worker_shutdown")
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
async def test_graceful_stop_ends_running_tasks(tmp_path: Path, signal_name: str) -> None:
    """A stopped server ends its running tasks failed / worker_shutdown, not working."""
    async with httpx.AsyncClient(timeout=10) as http:
        async with llamon_serve(tmp_path) as (process, url):
            task_id = (await rpc(http, url, "message/send", _start_hanging_task()))["result"]["id"]
            await _wait_for_working(http, url, task_id)
            process.send_signal(getattr(signal, signal_name))
            await asyncio.wait_for(process.wait(), 20)
        async with llamon_serve(tmp_path) as (_, url):
            state = (await rpc(http, url, "tasks/get", {"id": task_id}))["result"]["status"]
    assert state["state"] == "failed"
    data = next(p["data"] for p in state["message"]["parts"] if p["kind"] == "data")
    assert (data["errorReason"], data["retriable"]) == ("worker_shutdown", True)
