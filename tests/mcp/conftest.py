"""Real MCP servers for the tests: in process, in this loop over HTTP, or a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from examples.bookshop_mcp_server import READY_LINE
from mcp.server import MCPServer

from tests.mcp.servers import Probe, build_test_server

ROOT = Path(__file__).resolve().parents[2]
STARTUP_LIMIT_S = 30.0


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def server(probe: Probe) -> MCPServer:
    return build_test_server(probe)


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class HttpServer:
    url: str
    server: uvicorn.Server
    task: asyncio.Task[None]
    sock: socket.socket

    async def stop(self) -> None:
        """Stop serving and close the listening socket (new connections are refused)."""
        if not self.task.done():
            self.server.should_exit = True
            await asyncio.wait_for(self.task, timeout=10)
        self.sock.close()


@contextlib.asynccontextmanager
async def serving(
    server: MCPServer, *, wrap: Callable[[Any], Any] | None = None, port: int = 0
) -> AsyncIterator[HttpServer]:
    """``server`` over streamable HTTP on 127.0.0.1 (a free port, or ``port``: the same
    URL again after a stop), served by uvicorn in this loop (its ASGI app passed through
    ``wrap`` first, when given)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    app = server.streamable_http_app(host="127.0.0.1")
    if wrap is not None:
        app = wrap(app)
    http = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    task = asyncio.create_task(http.serve(sockets=[sock]))
    running = HttpServer(f"http://127.0.0.1:{port}/mcp", http, task, sock)
    try:
        yield running
    finally:
        await running.stop()


@dataclass
class Subprocess:
    """A server subprocess whose stderr lines are watched (no sleeps: events)."""

    process: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    _waiters: list[tuple[str, asyncio.Future[str]]] = field(default_factory=list)
    url: str = ""

    async def pump(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.lines.append(line)
            for text, future in list(self._waiters):
                if text in line and not future.done():
                    future.set_result(line)
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(RuntimeError("server exited:\n" + "\n".join(self.lines)))

    def expect(self, text: str) -> asyncio.Future[str]:
        """A future for the next stderr line containing ``text`` (make it before acting)."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiters.append((text, future))
        return future

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


@contextlib.asynccontextmanager
async def subprocess_http_server(script: str | None = None) -> AsyncIterator[Subprocess]:
    """``python -m tests.mcp.servers --http --port 0`` (or ``python <script> ...``);
    yields once the server printed READY_LINE (its socket listens)."""
    target = [script] if script else ["-m", "tests.mcp.servers"]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *target,
        "--http",
        "--port",
        "0",
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    child = Subprocess(process)
    ready = child.expect(READY_LINE)
    pump = asyncio.create_task(child.pump())
    try:
        line = await asyncio.wait_for(ready, timeout=STARTUP_LIMIT_S)
        child.url = line.split(" on ", 1)[1].strip()
        yield child
    finally:
        await child.kill()
        await asyncio.wait_for(pump, timeout=10)
