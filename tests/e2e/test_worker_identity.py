"""The worker identity a caller can read names no host: a real server process without
``LLAMON_WORKER_ID`` stamps an opaque id, and a restart on the same host still finds (and
ends ``worker_lost``) the task its killed predecessor left working."""

from __future__ import annotations

import re
import socket
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests._support.serve import llamon_serve, rpc
from tests.e2e.test_crash_recovery import _start_hanging_task, _wait_for_working


def _hello() -> dict[str, Any]:
    return {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": "hello"}],
            "messageId": str(uuid.uuid4()),
            "kind": "message",
        }
    }


async def test_tasks_carry_an_opaque_worker_id_and_reconciliation_still_works(
    tmp_path: Path,
) -> None:
    hostname = socket.gethostname()
    async with httpx.AsyncClient(timeout=10) as http:
        async with llamon_serve(tmp_path, worker_id=None) as (process, url):
            started = await rpc(http, url, "message/send", _start_hanging_task())
            task_id = started["result"]["id"]
            await _wait_for_working(http, url, task_id)
            got = (await rpc(http, url, "tasks/get", {"id": task_id}))["result"]
            stamp = got["metadata"]["llamon.worker"]
            assert re.fullmatch(r"w-[0-9a-f]{16}", stamp)
            assert hostname not in stamp
            assert hostname.lower() not in str(got).lower()
            process.kill()
            await process.wait()
        async with llamon_serve(tmp_path, worker_id=None) as (_, url):
            ended = (await rpc(http, url, "tasks/get", {"id": task_id}))["result"]
            following = (await rpc(http, url, "message/send", _hello()))["result"]
    assert ended["status"]["state"] == "failed"
    data = next(p["data"] for p in ended["status"]["message"]["parts"] if p["kind"] == "data")
    assert (data["errorReason"], data["retriable"]) == ("worker_lost", True)
    assert following["metadata"]["llamon.worker"] == stamp  # the same id after a restart
    assert following["status"]["state"] == "completed"
