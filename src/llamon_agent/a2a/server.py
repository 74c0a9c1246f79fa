"""Serving an agent over A2A: the Starlette app, and ``serve`` for the command line.

``create_app(agent, card, ...)`` builds a2a-sdk's JSON-RPC application around
``CustomAgentExecutor`` and ``LlamonRequestHandler``; the card is served at
``/.well-known/agent-card.json`` and the older ``/.well-known/agent.json``. Every JSON-RPC
error the app itself produces (parse errors, unknown methods, bad params, unexpected
exceptions) carries ``ProtocolErrorData`` and a message that never repeats exception text.
Building an app installs log scrubbing (``core.logs``) for the libraries underneath.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.server.apps import A2AStarletteApplication
from a2a.server.tasks import (
    BasePushNotificationSender,
    PushNotificationConfigStore,
    TaskStore,
)
from a2a.types import A2AError, AgentCard, JSONRPCError
from a2a.utils.errors import ServerError
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from llamon_agent.a2a.auth import AuthConfig, AuthMiddleware
from llamon_agent.a2a.card import auth_spec_from_card
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.handler import LlamonRequestHandler
from llamon_agent.a2a.health import health_routes
from llamon_agent.a2a.protocol import RequestLimits, with_protocol_data
from llamon_agent.a2a.stores import memory_stores
from llamon_agent.core.logs import install_log_scrubbing

__all__ = ["LlamonA2AApplication", "create_app", "freeze_startup_heap"]

logger = logging.getLogger("llamon_agent.a2a")


class LlamonA2AApplication(A2AStarletteApplication):
    """a2a-sdk's Starlette JSON-RPC app whose own errors carry ProtocolErrorData."""

    def _generate_error_response(
        self, request_id: str | int | None, error: JSONRPCError | A2AError
    ) -> JSONResponse:
        inner = error.root if isinstance(error, A2AError) else error
        completed = with_protocol_data(ServerError(error=inner)).error or inner
        wrapped = completed if isinstance(completed, JSONRPCError) else A2AError(root=completed)
        return super()._generate_error_response(request_id, wrapped)


def _check_auth_matches_card(card: AgentCard, auth: AuthConfig | None) -> None:
    spec = auth_spec_from_card(card)
    if spec is None and auth is None:
        return
    if spec is None:
        raise ValueError(
            "auth is configured but the agent card declares no security scheme; build the "
            "card with auth=AuthSpec.api_key()/bearer() so callers know how to authenticate"
        )
    if auth is None:
        raise ValueError(
            f"the agent card requires {spec.kind} auth (header {spec.header!r}) but no "
            "AuthConfig was given; pass auth=AuthConfig.from_card(card, secret)"
        )
    if (auth.scheme, auth.header.lower()) != (spec.kind, spec.header.lower()):
        raise ValueError(
            f"auth checks {auth.scheme} in {auth.header!r} but the card declares "
            f"{spec.kind} in {spec.header!r}"
        )


def freeze_startup_heap() -> None:
    """Once per process: collect garbage, then move every object alive now (modules, the
    app, caches) to the collector's permanent generation. Later calls do nothing.

    Full collections otherwise walk that whole heap -- tens of milliseconds on a 2-core
    machine, landing on whichever request is running. Objects frozen here are never
    examined for cycles again; ones freed by reference counting are still freed.
    """
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


def create_app(
    agent: object,
    card: AgentCard,
    *,
    task_store: TaskStore | None = None,
    push_config_store: PushNotificationConfigStore | None = None,
    limits: RequestLimits | None = None,
    auth: AuthConfig | None = None,
    executor: CustomAgentExecutor | None = None,
    on_shutdown: Callable[[], Any] | None = None,
    gc_freeze: bool = True,
) -> Starlette:
    """The A2A Starlette app for ``agent`` (anything ``as_agent`` accepts) and its card.

    Stores default to the bounded in-memory ones here (``memory_stores()``: finished tasks
    evicted past 10 000 or an hour); ``serve`` opens the embedded SQLite default.
    ``limits.input_modes`` defaults to the card's ``defaultInputModes``. Push notifications
    are accepted and sent only when the card declares the capability. ``auth`` must match
    what the card declares (``AuthConfig.from_card(card, key)``): a card that asks for
    credentials is never served open, and a server that checks credentials says so in its
    card; a mismatch raises ``ValueError``. ``gc_freeze`` (default on): at startup, once
    per process, ``gc.collect(); gc.freeze()``, so the garbage collector's full passes
    under load walk only what requests create, not the startup heap (p99 at 16 concurrent
    sends on SQLite: ~95-130 ms -> ~35-45 ms, bench/README.md). ``GET /healthz`` and
    ``GET /readyz`` (200, or 503 when the task store does not answer) need no credentials
    (``a2a.health``).
    """
    install_log_scrubbing()
    defaults = memory_stores()  # used for whichever store is not given
    tasks = defaults.task_store if task_store is None else task_store
    limits = limits or RequestLimits(input_modes=tuple(card.default_input_modes) or None)
    executor = executor or CustomAgentExecutor(agent, limits=limits, task_store=tasks)
    push_enabled = bool(card.capabilities and card.capabilities.push_notifications)
    push_store: PushNotificationConfigStore | None = None
    if push_enabled:
        push_store = defaults.push_config_store if push_config_store is None else push_config_store
    _check_auth_matches_card(card, auth)
    push_client = httpx.AsyncClient(timeout=10.0) if push_store is not None else None
    handler = LlamonRequestHandler(
        executor,
        task_store=tasks,
        push_config_store=push_store,
        push_sender=BasePushNotificationSender(push_client, push_store)
        if push_client is not None and push_store is not None
        else None,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if gc_freeze:
            freeze_startup_heap()
        try:
            yield
        finally:
            ended = await executor.shutdown()
            if ended:
                logger.warning("server stopping: ended %d running task(s) failed", len(ended))
            if push_client is not None:
                await push_client.aclose()
            if on_shutdown is not None:
                result = on_shutdown()
                if hasattr(result, "__await__"):
                    await result

    app = LlamonA2AApplication(agent_card=card, http_handler=handler).build(lifespan=lifespan)
    app.router.routes.extend(health_routes(tasks))  # /healthz, /readyz: open, like the card
    if auth is not None:
        app.add_middleware(AuthMiddleware, config=auth)
    app.state.llamon_executor = executor
    app.state.llamon_task_store = tasks
    return app
