"""Real transports on 127.0.0.1: streamable HTTP (in this loop and in a subprocess) and
stdio. Servers are stopped, killed and restarted under the loader."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp.client.stdio import StdioServerParameters
from mcp.server import MCPServer

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.exceptions import ComponentInvokeError, ComponentLoadError
from llamon_agent.mcp import MCPLoadError, MCPTool, MCPToolLoader, MCPToolUnavailableError
from tests.mcp.conftest import ROOT, free_port, serving, subprocess_http_server
from tests.mcp.servers import WAITING_LINE, Probe, build_test_server

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def unavailable(name: str) -> str:
    return f"Upstream tool '{name}' temporarily unavailable. Retry may succeed."


def by_name(tools: list[MCPTool]) -> dict[str, MCPTool]:
    return {tool.name: tool for tool in tools}


def stdio_params() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tests.mcp.servers"], cwd=str(ROOT)
    )


async def test_lists_tools_over_streamable_http(server: MCPServer, probe: Probe) -> None:
    async with serving(server) as http, MCPToolLoader(http.url).session() as tools:
        assert "get_book" in by_name(tools)
        missing = await by_name(tools)["echo"].call({})
        failed = await by_name(tools)["get_book"].call({"title": "Nothing"})
        crashed = await by_name(tools)["explode"].call({"title": "x"})
        ok = await by_name(tools)["get_book"].call({"title": "Dune"})
    assert missing.text == "Missing required argument: text"
    assert probe.calls == []
    assert failed.text.startswith("Error executing tool get_book: No book titled 'Nothing'")
    assert crashed.text == "Error executing tool explode"
    assert ok.structured["author"] == "Frank Herbert"


async def test_connection_refused_at_load_is_a_classified_load_error() -> None:
    loader = MCPToolLoader(f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(MCPLoadError) as raised:
        await loader.to_tools()
    exc = raised.value
    assert isinstance(exc, ComponentLoadError)
    assert isinstance(exc.__cause__, BaseExceptionGroup)
    assert exc.__cause__.subgroup(httpx2.ConnectError) is not None
    found = classify_exception(exc)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )
    await loader.aclose()


async def test_a_stopped_http_server_twice_observed_then_escalated(server: MCPServer) -> None:
    async with serving(server) as http, MCPToolLoader(http.url).session() as tools:
        get_book = by_name(tools)["get_book"]
        assert not (await get_book.call({"title": "Dune"})).is_error
        await http.stop()  # the port is closed now: reconnects are refused
        first = await get_book.call({"title": "Dune"})
        second = await get_book.call({"title": "Dune"})
        with pytest.raises(MCPToolUnavailableError) as raised:
            await get_book.call({"title": "Dune"})
    assert (first.text, first.is_error) == (unavailable("get_book"), True)
    assert (second.text, second.is_error) == (unavailable("get_book"), True)
    found = classify_exception(raised.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )


@pytest.mark.reason("upstream_tool_unavailable", "network_error")
async def test_server_killed_mid_call_twice_observed_then_escalated() -> None:
    async with subprocess_http_server() as child, MCPToolLoader(child.url).session() as tools:
        waiting = child.expect(WAITING_LINE)
        pending = asyncio.create_task(by_name(tools)["wait_for_release"].call({}))
        await asyncio.wait_for(waiting, timeout=30)  # the call reached the tool
        await child.kill()
        first = await asyncio.wait_for(pending, timeout=30)
        get_book = by_name(tools)["get_book"]
        second = await get_book.call({"title": "Dune"})
        third = await get_book.call({"title": "Dune"})
        with pytest.raises(ComponentInvokeError) as raised:
            await get_book.call({"title": "Dune"})
    # the pending call's connection closed under it: observation #1 of its tool
    assert (first.text, first.is_error, first.reason) == (
        unavailable("wait_for_release"),
        True,
        "upstream_tool_unavailable",
    )
    # then reconnects are refused: get_book's #1 and #2 are observations, #3 escalates
    assert second.text == third.text == unavailable("get_book")
    assert tools[0].budget.snapshot() == {"wait_for_release": 1, "get_book": 3}
    exc = raised.value
    assert isinstance(exc, MCPToolUnavailableError)
    assert exc.__cause__ is not None
    found = classify_exception(exc)
    assert (found.code, found.retriable) == (ErrorCode.UPSTREAM_UNAVAILABLE, True)
    assert found.reason == "network_error"


async def test_the_example_server_runs_over_http() -> None:
    script = str(ROOT / "examples" / "bookshop_mcp_server.py")
    async with (
        subprocess_http_server(script) as child,
        MCPToolLoader(child.url).session() as tools,
    ):
        assert [t.name for t in tools] == ["search_books", "get_book", "order_book"]
        out = await by_name(tools)["order_book"].call({"title": "Dune", "quantity": 99})
    assert out.text == (
        "Error executing tool order_book: Only 3 copies of 'Dune' in stock; "
        "order fewer or pick another book."
    )


async def test_a_restarted_http_server_is_found_again_by_reconnecting() -> None:
    """mcp 2.3.0, session-based (legacy) HTTP: after a restart the server answers -32600
    'Session not found'; the loader reconnects once and the call succeeds."""
    port = free_port()

    async def start() -> tuple[uvicorn.Server, asyncio.Task[None], socket.socket]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        app = build_test_server().streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
        http = uvicorn.Server(config)
        return http, asyncio.create_task(http.serve(sockets=[sock])), sock

    async def stop(http: uvicorn.Server, task: asyncio.Task[None], sock: socket.socket) -> None:
        http.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()

    running = await start()
    loader = MCPToolLoader(f"http://127.0.0.1:{port}/mcp", client_options={"mode": "legacy"})
    bus = EventBus()
    seen: list[RunnerEvent] = []
    bus.subscribe(seen.append)
    try:
        async with loader.session() as tools:
            pid = by_name(tools)["pid"]
            assert not (await pid.call({})).is_error
            await stop(*running)
            running = await start()
            with event_scope(bus, task_id="t-1"):
                out = await pid.call({})
            assert (out.is_error, pid.budget.snapshot()) == (False, {})
    finally:
        await stop(*running)
    assert await bus.flush()
    assert [(e.type, e.tool, dict(e.trace_metadata)) for e in seen] == [
        ("mcp.reconnect", "pid", {"failure_reason": "session_lost", "retryable": True}),
        ("mcp.call", "pid", {"outcome": "ok"}),
    ]


@pytest.mark.reason("http_error")
async def test_an_http_error_status_is_a_transport_failure(server: MCPServer) -> None:
    """mcp 2.3.0 turns an HTTP error status without a JSON-RPC body (a proxy's 503) into
    MCPError -32603 'Server returned an error response'; we count it as unavailable."""
    app = server.streamable_http_app(host="127.0.0.1")
    broken = asyncio.Event()

    async def proxy(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and broken.is_set():
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"upstream down"})
            return
        await app(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    http = uvicorn.Server(
        uvicorn.Config(proxy, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    task = asyncio.create_task(http.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        async with MCPToolLoader(url).session() as tools:
            get_book = by_name(tools)["get_book"]
            broken.set()
            assert (await get_book.call({"title": "Dune"})).text == unavailable("get_book")
            assert (await get_book.call({"title": "Dune"})).text == unavailable("get_book")
            with pytest.raises(MCPToolUnavailableError) as raised:
                await get_book.call({"title": "Dune"})
        found = classify_exception(raised.value)
        assert (found.code, found.reason, found.retriable) == (
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "http_error",
            True,
        )
        with pytest.raises(MCPLoadError) as load:  # the same at load time
            await MCPToolLoader(url).to_tools()
        assert classify_exception(load.value).as_tuple() == (
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "http_error",
            True,
        )
    finally:
        http.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


async def test_lists_tools_over_stdio_from_a_command_list() -> None:
    script = str(ROOT / "examples" / "bookshop_mcp_server.py")
    loader = MCPToolLoader([sys.executable, script])
    assert loader.label == f"{os.path.basename(sys.executable)} bookshop_mcp_server.py"
    async with loader.session() as tools:
        assert [t.name for t in tools] == ["search_books", "get_book", "order_book"]
        out = await by_name(tools)["get_book"].call({"title": "Dune"})
    assert out.structured["title"] == "Dune"


async def test_a_killed_stdio_server_is_observed_then_respawned() -> None:
    async with MCPToolLoader(stdio_params()).session() as tools:
        pid = by_name(tools)["pid"]
        first_pid = int((await pid.call({})).text)
        os.kill(first_pid, signal.SIGKILL)
        lost = await pid.call({})
        again = await pid.call({})  # "Retry may succeed": a new process answers
    assert (lost.text, lost.is_error) == (unavailable("pid"), True)
    assert not again.is_error
    assert int(again.text) != first_pid
    assert pid.budget.snapshot() == {"pid": 1}


async def test_a_stdio_command_that_does_not_exist_is_a_load_error(tmp_path: Any) -> None:
    loader = MCPToolLoader([str(tmp_path / "no-such-server")], connect_timeout_seconds=10)
    with pytest.raises(MCPLoadError) as raised:
        await loader.to_tools()
    found = classify_exception(raised.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "mcp_load_failed",
        False,
    )
    assert str(tmp_path) not in str(raised.value)


async def test_a_connect_timeout_is_an_upstream_timeout() -> None:
    # A listening socket nobody accepts on: the handshake never answers.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        loader = MCPToolLoader(url, connect_timeout_seconds=0.2)
        with pytest.raises(MCPLoadError) as raised:
            await loader.to_tools()
    assert classify_exception(raised.value).as_tuple() == (
        ErrorCode.UPSTREAM_TIMEOUT,
        "timeout",
        True,
    )
