"""Two in-process llamon replicas on one PostgreSQL store and one Redis, for the relay
tests: ``async with two_replicas(agent, redis_url) as (app_a, app_b)`` gives apps A and B
(serve them with ``running_server``) on one fresh PostgreSQL schema, both relaying through
``redis_url`` under a key prefix and a cancel channel no other test uses (the prefix's
keys are deleted afterwards); ``redis_url=None``: no relay.

``SSE`` reads a streaming JSON-RPC request in the background; ``relay_of`` /
``handler_of`` are an app's relay and request handler; ``follow_called`` tells when a
relay's ``follow`` was called (the request knows where it reads from).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from a2a.types import AgentCard
from redis.exceptions import RedisError
from starlette.applications import Starlette

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.handler import LlamonRequestHandler
from llamon_agent.a2a.relay import EventRelay
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from tests._support.a2a_server import make_card
from tests._support.redis_server import delete_prefix, unique_prefix
from tests._support.stores import postgres_schema

__all__ = ["SSE", "follow_called", "handler_of", "relay_of", "two_replicas"]


@asynccontextmanager
async def two_replicas(
    agent: object,
    redis_url: str | None,
    *,
    card: AgentCard | None = None,
    auth: AuthConfig | None = None,
) -> AsyncIterator[list[Starlette]]:
    """Apps A and B serving ``agent`` (with ``card``, default ``make_card()``, and
    ``auth``) on one fresh PostgreSQL schema, relaying through ``redis_url`` under a
    prefix and cancel channel of their own; see the module docstring."""
    prefix = unique_prefix()
    async with postgres_schema() as dsn, AsyncExitStack() as stack:
        apps: list[Starlette] = []
        for _ in range(2):
            stores = await open_stores("postgres", dsn=dsn)
            stack.push_async_callback(stores.close)
            app = create_app(
                agent,
                card or make_card(),
                auth=auth,
                task_store=stores.task_store,
                redis_url=redis_url,
            )
            relay = app.state.llamon_event_relay
            if relay is not None:
                relay.prefix = prefix + "events:"
                relay.cancel_channel = prefix + "cancel"
            apps.append(app)
        try:
            yield apps
        finally:
            if redis_url is not None:
                with contextlib.suppress(RedisError, OSError):  # a private one may be down
                    await delete_prefix(prefix, redis_url)


class SSE:
    """A streaming JSON-RPC request read in the background; ``results`` as they arrive.

    ``headers`` go with the request; ``url`` is the server's base URL (``/`` is added to a
    URL not ending in one). ``until(predicate)`` waits until ``predicate(replies)`` holds.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        body: dict[str, Any],
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.replies: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self._changed = asyncio.Condition()
        self.ended = False
        target = url if url.endswith("/") else url + "/"
        self.task = asyncio.create_task(self._read(http, target, body, headers or {}))

    async def _read(
        self, http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> None:
        try:
            async with http.stream("POST", url, json=body, headers=headers) as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        self.replies.append(json.loads(line.removeprefix("data:").strip()))
                        self.arrived.set()
                        await self._notify()
        finally:
            self.ended = True
            await self._notify()  # the stream ended: a waiter learns it

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def until(
        self, predicate: Callable[[list[dict[str, Any]]], bool], within: float = 10.0
    ) -> None:
        """Wait (at most ``within`` seconds) until ``predicate(self.replies)`` holds;
        ``AssertionError`` when the stream ended first."""

        def holds() -> bool:
            return predicate(self.replies) or self.ended

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(holds), within)
        assert predicate(self.replies), f"the stream ended first: {self.replies}"

    @property
    def results(self) -> list[dict[str, Any]]:
        return [reply["result"] for reply in self.replies]


def relay_of(app: Starlette) -> EventRelay:
    """``app``'s event relay (it must have one)."""
    relay = app.state.llamon_event_relay
    assert isinstance(relay, EventRelay)
    return relay


def handler_of(app: Starlette) -> LlamonRequestHandler:
    """``app``'s request handler."""
    handler = app.state.llamon_request_handler
    assert isinstance(handler, LlamonRequestHandler)
    return handler


def follow_called(relay: EventRelay) -> asyncio.Event:
    """Set once ``relay.follow`` is called (the request knows where it reads from)."""
    called = asyncio.Event()
    follow: Callable[..., AsyncIterator[Any]] = relay.follow

    def spy(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        called.set()
        return follow(*args, **kwargs)

    relay.follow = spy  # type: ignore[method-assign]
    return called
