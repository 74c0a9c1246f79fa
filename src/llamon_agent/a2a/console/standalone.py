"""``llamon console``: the web console alone, over the store a fleet of servers shares.

``await serve_console(stores, auth, sock)`` serves ``console_app`` on ``sock`` until
stopped (SIGINT/SIGTERM, or ``shutdown``), reading ``stores`` only: it never writes,
prunes or reconciles a task (open the stores with a retention of ``None``/``None`` so
opening them prunes nothing either). ``ValueError`` (``exposure_problem``) for a socket
not on loopback without ``auth``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import uvicorn

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.console import ConsoleOptions, ConsoleSources, console_app
from llamon_agent.a2a.console.exposure import exposure_problem
from llamon_agent.a2a.stores.open import Stores

__all__ = ["serve_console"]


async def serve_console(
    stores: Stores,
    auth: AuthConfig | None,
    sock: socket.socket,
    *,
    options: ConsoleOptions | None = None,
    on_ready: Callable[[str], None] | None = None,
    shutdown: asyncio.Event | None = None,
    log_level: str = "warning",
) -> None:
    """Serve the console over ``stores`` on ``sock`` until stopped; ``on_ready(url)`` once
    listening (the URL of ``/console``)."""
    host, port = sock.getsockname()[:2]
    problem = exposure_problem(str(host), auth)
    if problem is not None:
        raise ValueError(problem)
    if stores.failures is None:
        raise ValueError("the store has no failure store to read")
    events = stores.events.for_task if stores.events is not None else None
    sources = ConsoleSources(stores.task_store, stores.failures, events)
    app = console_app(sources, auth, options)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=5)
    )
    watcher: asyncio.Task[None] | None = None
    if shutdown is not None:

        async def stop() -> None:
            await shutdown.wait()
            server.should_exit = True

        watcher = asyncio.create_task(stop())
    if on_ready is not None:
        shown = f"[{host}]" if ":" in str(host) else host
        on_ready(f"http://{shown}:{port}/console")
    try:
        await server.serve(sockets=[sock])
    finally:
        if watcher is not None:
            watcher.cancel()
