"""The web console: live tasks, failures over time, and one task's whole story, in a browser.

``create_app(agent, card, console=ConsoleOptions())`` (or ``llamon serve --console``) adds
it to a served agent at ``/console``; ``console_app(sources, auth)`` (``llamon console``)
serves it alone over a shared store, read-only. Pages are rendered on the server (Jinja2,
escaped) and refreshed with htmx, shipped in the package: nothing to build, no Node.

Sign-in uses the agent's own credentials (``access``); a console without credentials is
served on loopback only (``exposure``). See docs/operations.md, "The web console".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import BaseRoute, Route

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.console.access import ConsoleAccess
from llamon_agent.a2a.console.exposure import exposure_problem, is_loopback
from llamon_agent.a2a.console.options import CONSOLE_PATH, SESSION_SECONDS, ConsoleOptions
from llamon_agent.a2a.console.pages import SECURITY_HEADERS, console_routes
from llamon_agent.a2a.console.reading import ConsoleSources, EventReader, served_event_reader

__all__ = [
    "CONSOLE_PATH",
    "SECURITY_HEADERS",
    "SESSION_SECONDS",
    "ConsoleAccess",
    "ConsoleOptions",
    "ConsoleSources",
    "EventReader",
    "console_app",
    "console_routes_for",
    "exposure_problem",
    "is_loopback",
    "served_event_reader",
]


def console_routes_for(
    sources: ConsoleSources, auth: AuthConfig | None, options: ConsoleOptions | None = None
) -> list[BaseRoute]:
    """The console's routes over ``sources``, signing in with ``auth``'s credentials.

    ``ValueError`` when ``options.operators`` names a caller ``auth`` does not know."""
    options = options or ConsoleOptions()
    return console_routes(sources, ConsoleAccess(auth, options), options)


def console_app(
    sources: ConsoleSources,
    auth: AuthConfig | None,
    options: ConsoleOptions | None = None,
    *,
    on_shutdown: Callable[[], Any] | None = None,
) -> Starlette:
    """The console alone (``llamon console``): its routes, and ``/`` redirecting to it."""

    async def home(_: Any) -> RedirectResponse:
        return RedirectResponse(CONSOLE_PATH, status_code=303)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if on_shutdown is not None:
                result = on_shutdown()
                if hasattr(result, "__await__"):
                    await result

    routes = [Route("/", home, methods=["GET"]), *console_routes_for(sources, auth, options)]
    return Starlette(routes=routes, lifespan=lifespan)
