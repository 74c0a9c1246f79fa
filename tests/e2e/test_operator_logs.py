"""What an operator sees of a real ``llamon serve`` process: one log line per failed task
(text by default, JSON with ``--log-format json``), and the ``/healthz`` / ``/readyz`` probes
(open even with API-key auth; ``/readyz`` 503 when the task store cannot be reached)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from tests._support.a2a_server import make_card, running_server
from tests._support.serve import READY_TIMEOUT, rpc

SECRET = "sk-proj-9fA7bC3dE5fG7hJ9kL1mN3pQ5rS7tU9v"
API_KEY = "op-key-4b8d2f"

AGENT_FILE = f'''
"""Fails on "boom" with an unexpected exception whose text holds a secret."""


async def agent(ctx):
    if ctx.text == "boom":
        raise RuntimeError("bank said no, api_key={SECRET}")
    return "ok"
'''


@asynccontextmanager
async def serve(
    tmp_path: Path, *options: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, list[str]]]:
    """``llamon serve`` (the console script) of a failing agent; yields its URL and the
    stderr lines read so far (the rest are appended when the server has stopped)."""
    (tmp_path / "failing_agent.py").write_text(AGENT_FILE)
    environ = {
        k: v for k, v in os.environ.items() if k not in ("LLAMON_DATABASE_URL", "LLAMON_API_KEY")
    }
    environ.update({"LLAMON_HOME": str(tmp_path), **(env or {})})
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("llamon")),
        *("serve", "failing_agent.py:agent", "--port", "0", *options),
        cwd=tmp_path,
        env=environ,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: list[str] = []
    url = ""
    async with asyncio.timeout(READY_TIMEOUT):
        while not url:
            line = (await process.stderr.readline()).decode()
            assert line, "".join(lines)
            lines.append(line)
            if line.startswith("llamon: serving"):
                url = line.split(" at ", 1)[1].split(" ", 1)[0].rstrip("/")
    try:
        yield url, lines
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            _, rest = await process.communicate()
        lines += rest.decode().splitlines(keepends=True)


def send_params(text: str) -> dict[str, object]:
    return {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            "messageId": str(uuid.uuid4()),
            "kind": "message",
        }
    }


def error_data(task: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = task["status"]["message"]["parts"]
    return next(p["data"] for p in parts if p["kind"] == "data")


async def test_a_failed_task_is_one_json_line_with_its_fields(tmp_path: Path) -> None:
    async with (
        httpx.AsyncClient(timeout=10) as http,
        serve(tmp_path, "--log-format", "json") as (url, lines),
    ):
        failed = (await rpc(http, url + "/", "message/send", send_params("boom")))["result"]
        after = (await rpc(http, url + "/", "message/send", send_params("hi")))["result"]
    assert failed["status"]["state"] == "failed"
    assert after["status"]["state"] == "completed"  # the next request is still answered
    data = error_data(failed)
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(records) == len([line for line in lines if line.strip()]) - 1  # + "serving"
    failures = [r for r in records if r["logger"] == "llamon_agent.failures"]
    assert len(failures) == 1
    (line,) = failures
    assert line["level"] == "INFO"
    assert line["time"].endswith("Z")
    assert line["taskId"] == failed["id"]
    assert (line["errorCode"], line["reason"], line["stage"]) == (
        "INTERNAL_ERROR",
        data["errorReason"],
        "service",
    )
    assert line["incidentId"] == data["incidentId"]
    assert line["incidentId"]
    assert SECRET not in "".join(lines)


async def test_the_default_is_a_text_line_per_failed_task_at_info(tmp_path: Path) -> None:
    async with httpx.AsyncClient(timeout=10) as http, serve(tmp_path) as (url, lines):
        failed = (await rpc(http, url + "/", "message/send", send_params("boom")))["result"]
        await rpc(http, url + "/", "message/send", send_params("hi"))
    failures = [line for line in lines if " INFO llamon_agent.failures: " in line]
    assert len(failures) == 1
    assert f"task {failed['id']} failed: INTERNAL_ERROR" in failures[0]
    assert error_data(failed)["incidentId"] in failures[0]
    assert not any("POST / HTTP" in line for line in lines)  # no access log unless asked
    assert SECRET not in "".join(lines)


async def test_warning_level_hides_failed_task_lines(tmp_path: Path) -> None:
    async with (
        httpx.AsyncClient(timeout=10) as http,
        serve(tmp_path, "--log-level", "warning") as (url, lines),
    ):
        await rpc(http, url + "/", "message/send", send_params("boom"))
    assert not any("llamon_agent.failures" in line for line in lines)


async def test_probes_answer_without_credentials_when_auth_is_on(tmp_path: Path) -> None:
    async with (
        httpx.AsyncClient(timeout=10) as http,
        serve(tmp_path, "--access-log", env={"LLAMON_API_KEY": API_KEY}) as (url, lines),
    ):
        health = await http.get(url + "/healthz")
        ready = await http.get(url + "/readyz")
        refused = await http.post(url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert refused.status_code == 401
    assert any('"GET /healthz HTTP/1.1" 200' in line for line in lines)


async def test_readyz_is_503_when_the_task_store_is_unreachable(tmp_path: Path) -> None:
    async def agent(ctx: object) -> str:
        return "ok"

    stores = await open_stores("sqlite", home=tmp_path)
    app = create_app(agent, make_card(), task_store=stores.task_store)
    async with running_server(app) as url, httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(url + "/readyz")).status_code == 200
        await stores.close()  # the database goes away under the running server
        ready = await http.get(url + "/readyz")
        health = await http.get(url + "/healthz")
    assert ready.status_code == 503
    assert ready.json() == {"status": "unavailable", "reason": "task_store_unreachable"}
    assert str(tmp_path) not in ready.text
    assert health.status_code == 200  # alive, only not ready
