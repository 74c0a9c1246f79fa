"""``llamon demo``: serve the example agent on the embedded default and show its answers.

The demo starts ``llamon_agent.examples.demo_agent`` on SQLite under ``LLAMON_HOME``, drives it
with a2a-sdk's own client over HTTP, and prints, for each scenario, the task state, the
``errorCode`` / ``errorReason`` a client would branch on, and the artifacts kept. It exits
non-zero if any answer is not the one llamon promises, so it doubles as a smoke test.
``run_demo(console=...)`` serves the web console too and, after the scenarios, keeps the
server running until ``console`` returns (``llamon demo --console``: until Ctrl-C).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import AgentCard, DataPart, Message, Part, Role, Task, TaskQueryParams, TextPart
from rich.console import Console
from rich.table import Table

from llamon_agent.a2a.console import ConsoleOptions
from llamon_agent.a2a.serve import ServeOptions, load_target, serve_agent
from llamon_agent.a2a.stores import StoreKind

__all__ = ["DemoResult", "KeepServing", "demo_agent_path", "print_results", "run_demo"]

KeepServing = Callable[[str, "list[DemoResult]", "asyncio.Future[None]"], Awaitable[None]]
"""``(base URL, the results, the server's end) -> wait``: the server (with the web
console) keeps running until it returns or the server stops."""


@dataclass(frozen=True)
class DemoResult:
    """One scenario's answer, as a client saw it."""

    scenario: str
    state: str
    error_code: str
    error_reason: str
    artifacts: str
    expected: bool


def demo_agent_path() -> Path:
    """The example agent's file, ``llamon_agent/examples/demo_agent.py`` (in the package)."""
    return Path(__file__).resolve().parent / "examples" / "demo_agent.py"


def _message(text: str, task: Task | None = None) -> Message:
    return Message(
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        message_id=str(uuid.uuid4()),
        task_id=task.id if task else None,
        context_id=task.context_id if task else None,
    )


def _describe(scenario: str, task: Task, expect: tuple[str, str | None]) -> DemoResult:
    data: dict[str, Any] = {}
    if task.status.message is not None:
        for part in task.status.message.parts:
            if isinstance(part.root, DataPart):
                data = part.root.data
    artifacts = ", ".join(a.name or a.artifact_id for a in task.artifacts or []) or "-"
    state = task.status.state.value
    code = str(data.get("errorCode", "-"))
    return DemoResult(
        scenario,
        state,
        code,
        str(data.get("errorReason", "-")),
        artifacts,
        expected=(state, expect[1] or "-") == (expect[0], code),
    )


async def _last_task(client: Client, message: Message) -> Task:
    last: Task | None = None
    async for event in client.send_message(message):
        if isinstance(event, tuple):
            last = event[0]
    if last is None:
        raise RuntimeError("the agent answered without a task")
    return last


async def _scenarios(base_url: str, card: AgentCard) -> list[DemoResult]:
    results: list[DemoResult] = []
    async with httpx.AsyncClient(timeout=30.0) as http:
        card = card.model_copy(update={"url": base_url})
        send = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        streamer = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)

        task = await _last_task(send, _message("hello"))
        results.append(_describe("success", task, ("completed", None)))

        task = await _last_task(send, _message("upstream"))
        results.append(
            _describe("application-level failure", task, ("failed", "UPSTREAM_UNAVAILABLE"))
        )

        try:
            await _last_task(send, _message("   "))
            results.append(DemoResult("protocol-level error", "?", "-", "-", "-", False))
        except A2AClientJSONRPCError as exc:
            data = exc.error.data if isinstance(exc.error.data, dict) else {}
            results.append(
                DemoResult(
                    "protocol-level error",
                    f"JSON-RPC {exc.error.code}",
                    str(data.get("errorCode")),
                    str(data.get("errorReason")),
                    "no task",
                    data.get("errorCode") == "INVALID_INPUT",
                )
            )

        task = await _last_task(send, _message("partial"))
        fetched = await send.get_task(TaskQueryParams(id=task.id))
        result = _describe(
            "failure keeping partial artifacts", fetched, ("failed", "UPSTREAM_UNAVAILABLE")
        )
        results.append(
            result if fetched.artifacts else DemoResult(**{**result.__dict__, "expected": False})
        )

        task = await _last_task(streamer, _message("stream"))
        fetched = await send.get_task(TaskQueryParams(id=task.id))
        results.append(
            _describe("stream failing midway", fetched, ("failed", "UPSTREAM_UNAVAILABLE"))
        )

        first = await _last_task(send, _message("birthday"))
        results.append(_describe("input-required", first, ("input-required", None)))
        second = await _last_task(send, _message("1990-01-01", first))
        results.append(_describe("  ... resumed with an answer", second, ("completed", None)))
    return results


async def run_demo(
    *, store: StoreKind | None = "sqlite", console: KeepServing | None = None
) -> list[DemoResult]:
    """Serve the demo agent on a free loopback port, run every scenario, stop the server.

    Failure records are logged on ``llamon_agent.failures``; the demo keeps it quiet.
    ``console``: serve the web console too, and after the scenarios await
    ``console(url, results, server_ended)`` before stopping.
    """
    logging.getLogger("llamon_agent.failures").setLevel(logging.ERROR)
    path = demo_agent_path()
    agent = load_target(f"{path}:agent")
    card: AgentCard = load_target(f"{path}:card")
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shutdown = asyncio.Event()
    server = asyncio.create_task(
        serve_agent(
            agent,
            card,
            ServeOptions(
                port=0, store=store, console=ConsoleOptions() if console is not None else None
            ),
            on_ready=ready.set_result,
            shutdown=shutdown,
        )
    )
    try:
        waiting: set[asyncio.Future[Any]] = {server, ready}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if server in done:
            server.result()  # raises why the server could not start
        results = await _scenarios(ready.result(), card)
        if console is not None:
            ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def server_ended(_: object) -> None:
                if not ended.done():
                    ended.set_result(None)

            server.add_done_callback(server_ended)
            await console(ready.result(), results, ended)
    finally:
        shutdown.set()
        await server
    return results


def print_results(results: list[DemoResult], console: Console | None = None) -> None:
    """The demo's table."""
    table = Table(title="llamon demo: what an A2A client receives")
    for column in (
        "scenario",
        "state",
        "errorCode",
        "errorReason",
        "artifacts kept",
        "as promised",
    ):
        table.add_column(column)
    for r in results:
        table.add_row(
            r.scenario,
            r.state,
            r.error_code,
            r.error_reason,
            r.artifacts,
            "yes" if r.expected else "[red]NO[/red]",
        )
    (console or Console(width=132)).print(table)
