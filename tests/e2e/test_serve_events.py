"""``llamon serve --events-jsonl FILE``: a real server process writes its runner events."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from tests._support.serve import llamon_serve, rpc


async def test_serve_writes_each_tasks_events_as_json_lines(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    options = ("--store", "memory", "--events-jsonl", str(log))
    async with llamon_serve(tmp_path, *options) as (_, url), httpx.AsyncClient(timeout=10) as http:
        message = {
            "kind": "message",
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "text", "text": "hello"}],
        }
        reply = await rpc(http, url, "message/send", {"message": message})
        task = reply["result"]
        async with http.stream("GET", f"{url.rstrip('/')}/tasks/{task['id']}/events") as sse:
            assert sse.status_code == 200
            streamed = [
                json.loads(line.removeprefix("data:"))
                async for line in sse.aiter_lines()
                if line.startswith("data:")
            ]
        # the next request is still answered
        again = await rpc(http, url, "tasks/get", {"id": task["id"]})
        assert again["result"]["status"]["state"] == task["status"]["state"]
    # the server has stopped: every line it wrote is in the file
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    types = [row["type"] for row in rows if row["task_id"] == task["id"]]
    assert types[:2] == ["task.submitted", "task.working"]
    assert types[-1] == f"task.{task['status']['state']}"
    assert [e["type"] for e in streamed] == types
