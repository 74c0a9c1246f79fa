"""``python -m llamon_agent serve`` in a real subprocess, and raw JSON-RPC to it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from llamon_agent.demo import demo_agent_path

READY_TIMEOUT = 30.0


@asynccontextmanager
async def llamon_serve(
    home: Path, *options: str, worker_id: str | None = "crash-test", target: str | None = None
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``python -m llamon_agent serve`` of the demo agent (or ``target``, ``module:agent``,
    with its default card) on a free port with ``LLAMON_HOME=home``; ``options`` are more
    CLI options (default ``--store sqlite``); ``worker_id`` is ``LLAMON_WORKER_ID`` (None:
    unset, the default id of the host)."""
    path = demo_agent_path()
    agent = (target,) if target else ("--card", f"{path}:card", f"{path}:agent")
    env = {**os.environ, "LLAMON_HOME": str(home)}
    env.pop("LLAMON_WORKER_ID", None)
    if worker_id is not None:
        env["LLAMON_WORKER_ID"] = worker_id
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llamon_agent",
        "serve",
        "--port",
        "0",
        *(options or ("--store", "sqlite")),
        *agent,
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


async def rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One JSON-RPC call; the decoded response."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post(url, json=body)
    reply: dict[str, Any] = response.json()
    return reply


CLI_TIMEOUT = 60.0
"""Seconds a ``llamon`` command of a test may take."""

_STORE_AND_GUIDE_ENV = ("LLAMON_DATABASE_URL", "LLAMON_TRIAGE_GUIDE")


async def llamon_cli(*args: str) -> tuple[int, str, str]:
    """``python -m llamon_agent ARGS`` in a process of its own (200 columns, without this
    process's ``LLAMON_DATABASE_URL`` or ``LLAMON_TRIAGE_GUIDE``): exit status, stdout,
    stderr."""
    env = {k: v for k, v in os.environ.items() if k not in _STORE_AND_GUIDE_ENV}
    env["COLUMNS"] = "200"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llamon_agent",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def message_json(text: str) -> dict[str, Any]:
    """A user's text message as a ``message/send`` request's ``message`` (JSON)."""
    return {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
    }


async def send_text(http: httpx.AsyncClient, url: str, text: str) -> dict[str, Any]:
    """``message/send`` of a user's ``text``; the JSON-RPC result (the task, as JSON)."""
    result: dict[str, Any] = (
        await rpc(http, url, "message/send", {"message": message_json(text)})
    )["result"]
    return result
