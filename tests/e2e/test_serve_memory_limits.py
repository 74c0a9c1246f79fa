"""``llamon serve --store memory --max-finished N``: a real server process forgets the
oldest finished task past N, and tasks/get on it answers TaskNotFound / NOT_FOUND."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx

from tests._support.serve import llamon_serve, rpc


def _message(text: str) -> dict[str, Any]:
    return {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            "messageId": str(uuid.uuid4()),
            "kind": "message",
        }
    }


async def test_an_evicted_task_is_not_found(tmp_path: Path) -> None:
    options = ("--store", "memory", "--max-finished", "2", "--max-finished-age", "600")
    async with httpx.AsyncClient(timeout=10) as http, llamon_serve(tmp_path, *options) as (_, url):
        ids = []
        for text in ("first", "second", "third"):
            answer = await rpc(http, url, "message/send", _message(text))
            assert answer["result"]["status"]["state"] == "completed"
            ids.append(answer["result"]["id"])
        evicted = await rpc(http, url, "tasks/get", {"id": ids[0]})
        kept = await rpc(http, url, "tasks/get", {"id": ids[2]})

    assert evicted["error"]["code"] == -32001
    assert evicted["error"]["data"]["errorCode"] == "NOT_FOUND"
    assert kept["result"]["status"]["state"] == "completed"
