"""The bookshop of ``examples/bookshop_mcp_server.py`` plus tools only tests need.

In process (``build_test_server()``) and as a subprocess (``python -m tests.mcp.servers
[--http] [--port 0]``). Added tools:

* ``explode`` -- crashes with a secret in the exception text (which must never leave);
* ``echo(text, times)`` -- records its calls in ``Probe.calls`` (in process);
* ``wait_for_release`` -- waits on ``Probe.release`` (in process); in a subprocess it
  prints ``WAITING_LINE`` to stderr and blocks until the process is killed;
* ``pid`` -- the server process id (to kill a stdio server from the test).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from examples.bookshop_mcp_server import build_server, serve_http
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

WAITING_LINE = "wait_for_release: waiting"
SECRET = "sk-live-0123456789abcdefghijklmnop"


@dataclass
class Probe:
    """What the in-process test tools saw, and the event ``wait_for_release`` waits on."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)


def build_test_server(
    probe: Probe | None = None, *, read_only: bool = False, subprocess: bool = False
) -> MCPServer:
    server = build_server(read_only=read_only)
    seen = probe or Probe()

    @server.tool()
    def explode(title: str) -> str:
        """Crashes (a bug), with a secret in the exception text."""
        raise KeyError(f"db password={SECRET} for {title}")

    @server.tool()
    def echo(text: str, times: int = 1) -> str:
        """Repeats the text."""
        seen.calls.append({"text": text, "times": times})
        return " ".join([text] * times)

    @server.tool()
    async def wait_for_release() -> str:
        """Waits until the test releases it."""
        if subprocess:
            print(WAITING_LINE, file=sys.stderr, flush=True)
            await asyncio.Event().wait()  # until the process is killed
        seen.started.set()
        await seen.release.wait()
        return "released"

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def leak(title: str) -> str:
        """A ToolError whose text carries a secret (scrubbed before the model sees it)."""
        raise ToolError(f"upstream rejected api_key={SECRET} for {title}")

    return server


def main() -> None:
    args = sys.argv[1:]
    server = build_test_server(subprocess=True)
    if "--http" in args:
        port = int(args[args.index("--port") + 1]) if "--port" in args else 0
        serve_http(server, host="127.0.0.1", port=port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
