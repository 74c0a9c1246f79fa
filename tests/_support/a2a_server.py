"""Real servers on 127.0.0.1 and a2a-sdk's own client, for end-to-end tests."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    DataPart,
    Message,
    Part,
    Role,
    Task,
    TextPart,
)
from starlette.applications import Starlette

from llamon_agent.a2a.handler import LlamonRequestHandler


def make_card(
    url: str = "http://127.0.0.1:1/", *, streaming: bool = True, push: bool = False
) -> AgentCard:
    return AgentCard(
        name="test-agent",
        description="Answers test questions for the llamon-agent end-to-end suite.",
        url=url,
        version="1.0.0",
        protocol_version="0.3.0",
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=push),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="answer",
                name="Answer",
                description="Answers one test question.",
                tags=["test"],
            )
        ],
    )


@asynccontextmanager
async def running_server(app: Starlette, *, port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a loopback port (a free one, or ``port``: the same
    address again after a stop); yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()
        await _background_settled(app)


async def _background_settled(app: Starlette) -> None:
    """End what a stopped server still runs in the background, so a test's event loop
    never closes on it (a task destroyed while pending is an unraisable warning in
    whichever later test the collector runs).

    A llamon server cancels its runs and background readers at its shutdown; a stream's
    reader that a2a-sdk polls every half second may outlive that by a poll, so it is
    awaited (at most 5 s). A plain a2a-sdk ``DefaultRequestHandler`` has no shutdown of
    its own: what it still runs (agent runs, a non-blocking send's reader) is cancelled
    here, then awaited the same way."""
    pending: list[asyncio.Task[Any]] = []
    for handler in _request_handlers(app):
        running = [
            *getattr(handler, "_background_tasks", ()),
            *getattr(handler, "_running_agents", {}).values(),
        ]
        for task in running:
            if not task.done():
                if not isinstance(handler, LlamonRequestHandler):
                    task.cancel()
                pending.append(task)
    if pending:
        await asyncio.wait(pending, timeout=5)


def _request_handlers(app: Starlette) -> list[DefaultRequestHandler]:
    """The request handlers serving ``app``: a llamon app's (in its state) and any a2a-sdk
    JSON-RPC route's (the route's endpoint is a method of the a2a-sdk application)."""
    found: list[DefaultRequestHandler] = []
    llamon = getattr(getattr(app, "state", None), "llamon_request_handler", None)
    if isinstance(llamon, DefaultRequestHandler):
        found.append(llamon)
    for route in getattr(app, "routes", ()):
        owner = getattr(getattr(route, "endpoint", None), "__self__", None)
        jsonrpc = getattr(owner, "handler", None)
        handler = getattr(jsonrpc, "request_handler", None)
        if isinstance(handler, DefaultRequestHandler) and handler not in found:
            found.append(handler)
    return found


@asynccontextmanager
async def a2a_client(base_url: str, *, streaming: bool = False) -> AsyncIterator[Client]:
    """a2a-sdk's client for the agent at ``base_url`` (card fetched from the server)."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        card_json = (await http.get(f"{base_url}/.well-known/agent-card.json")).json()
        card = AgentCard.model_validate(card_json).model_copy(update={"url": base_url + "/"})
        client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
        yield client


def user_message(
    text: str | None = "hello",
    *,
    data: dict[str, Any] | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
    parts: Sequence[Part] | None = None,
) -> Message:
    if parts is None:
        parts = []
        if text is not None:
            parts.append(Part(root=TextPart(text=text)))
        if data is not None:
            parts.append(Part(root=DataPart(data=data)))
    return Message(
        role=Role.user,
        parts=list(parts),
        message_id=str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
    )


async def send(client: Client, message: Message) -> Task:
    """message/send; the final Task."""
    events = [event async for event in client.send_message(message)]
    first = events[-1]
    assert isinstance(first, tuple), first
    return first[0]


async def stream(client: Client, message: Message) -> list[Any]:
    """message/stream; every (task, update) event in order, copied as it arrived.

    (a2a-sdk's client aggregates artifact chunks into the objects it has yielded.)
    """
    events: list[Any] = []
    async for event in client.send_message(message):
        if isinstance(event, tuple):
            task, update = event
            events.append(
                (task.model_copy(deep=True), update.model_copy(deep=True) if update else None)
            )
        else:
            events.append(event.model_copy(deep=True))
    return events


def error_data(task: Task) -> dict[str, Any]:
    """The DataPart of a failed task's status message."""
    assert task.status.message is not None
    datas = [p.root.data for p in task.status.message.parts if isinstance(p.root, DataPart)]
    assert len(datas) == 1, task.status.message
    return datas[0]


def texts(task: Task) -> list[str]:
    return [
        p.root.text
        for artifact in task.artifacts or []
        for p in artifact.parts
        if isinstance(p.root, TextPart)
    ]


_SRC_DIR = str(Path(__file__).resolve().parents[2] / "src")


async def in_another_process(home: Path, *lines: str) -> str:
    """Run ``lines`` in a new Python process with ``stores`` open on the SQLite store under
    ``home`` (``Task``, ``TaskState``, ``TaskStatus`` imported); returns its stdout."""
    body = "".join(f"    {line}\n" for line in lines)
    script = (
        "import asyncio, pathlib, sys\n"
        "from a2a.types import Task, TaskState, TaskStatus\n"
        "from llamon_agent.a2a.stores import open_stores\n"
        "async def main():\n"
        "    stores = await open_stores('sqlite', home=pathlib.Path(sys.argv[1]))\n"
        f"{body}"
        "    await stores.close()\n"
        "asyncio.run(main())\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        str(home),
        env={**os.environ, "PYTHONPATH": _SRC_DIR},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()
