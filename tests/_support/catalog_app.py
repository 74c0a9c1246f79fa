"""A catalog service on a real store and a real uvicorn server, keys of every role, cards
that pass lint, and a tiny agent that serves a card at its well-known path."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from llamon_agent.catalog.access import hash_key, new_key
from llamon_agent.catalog.app import create_catalog_app
from llamon_agent.catalog.records import CatalogKey, Role
from llamon_agent.catalog.store import CatalogStore
from tests._support.a2a_server import running_server
from tests._support.catalog_stores import open_test_catalog

__all__ = ["KEYS", "Catalog", "agent_card", "card_server", "served_catalog", "skill"]

KEYS: dict[str, tuple[Role, tuple[str, ...]]] = {
    "admin": ("admin", ()),
    "orders-team": ("publisher", ("orders", "orders-*", "shop/*")),
    "rival-team": ("publisher", ("orders", "rival")),
    "billing-team": ("publisher", ("billing*",)),
    "shop": ("caller", ("orders", "shop/*")),
    "outsider": ("caller", ("weather",)),
}
"""Every key the served catalog knows: label -> (role, patterns)."""


def skill(skill_id: str, **fields: Any) -> dict[str, Any]:
    """A skill that passes lint."""
    return {
        "id": skill_id,
        "name": f"{skill_id.title()} orders",
        "description": f"Does the {skill_id} step for one order by its number.",
        "tags": ["orders"],
        "examples": [f"{skill_id} order 42"],
        **fields,
    }


def agent_card(
    name: str = "Orders",
    version: str = "1.0.0",
    *skills: dict[str, Any],
    url: str = "http://127.0.0.1:1/",
    **fields: Any,
) -> dict[str, Any]:
    """A card that passes lint (one warning: ``auth_not_declared``)."""
    return {
        "name": name,
        "description": "Looks up orders by number and reports their shipping state.",
        "url": url,
        "version": version,
        "protocolVersion": "0.3.0",
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": list(skills) or [skill("search")],
        **fields,
    }


@dataclass
class Catalog:
    """A served catalog: its base URL, its store, one client, and a key per label."""

    url: str
    store: CatalogStore
    http: httpx.AsyncClient
    keys: dict[str, str] = field(default_factory=dict)

    def auth(self, label: str | None) -> dict[str, str]:
        """The header carrying ``label``'s key (none for ``None``)."""
        return {} if label is None else {"Authorization": f"Bearer {self.keys[label]}"}

    async def get(self, path: str, label: str | None = "admin", **params: str) -> httpx.Response:
        return await self.http.get(self.url + path, params=params, headers=self.auth(label))

    async def post(self, path: str, body: Any, label: str | None = "admin") -> httpx.Response:
        return await self.http.post(self.url + path, json=body, headers=self.auth(label))

    async def publish(
        self, card: dict[str, Any], label: str = "orders-team", **extra: Any
    ) -> httpx.Response:
        return await self.post("/v0/publish", {"card": card, **extra}, label)


@asynccontextmanager
async def served_catalog(
    tmp_path: Path, engine: str = "sqlite", **options: Any
) -> AsyncIterator[Catalog]:
    """A catalog service on a fresh store of ``engine``, served on 127.0.0.1, with the
    keys of ``KEYS``; ``options`` go to ``create_catalog_app``."""
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_test_catalog(engine, tmp_path))
        keys: dict[str, str] = {}
        for label, (role, patterns) in KEYS.items():
            keys[label] = new_key()
            await store.add_key(CatalogKey(hash_key(keys[label]), role, label, patterns))
        url = await stack.enter_async_context(running_server(create_catalog_app(store, **options)))
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        yield Catalog(url, store, http, keys)


@dataclass
class CardAgent:
    """What the card server serves: ``routes`` maps a path to (status, body bytes)."""

    routes: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    hang: asyncio.Event = field(default_factory=asyncio.Event)
    requested: list[str] = field(default_factory=list)


@asynccontextmanager
async def card_server(card: dict[str, Any] | None = None) -> AsyncIterator[tuple[str, CardAgent]]:
    """A plain HTTP server on 127.0.0.1 that answers ``agent.routes`` (by default the card
    at ``/.well-known/agent-card.json``); a path answered with status 0 waits until
    ``agent.hang`` is set. Yields its base URL and the ``CardAgent``."""
    agent = CardAgent()

    async def answer(request: Request) -> Response:
        agent.requested.append(request.url.path)
        status, body = agent.routes.get(request.url.path, (404, b'{"error": "not here"}'))
        if status == 0:
            await agent.hang.wait()
            status = 200
        return Response(body, status_code=status, media_type="application/json")

    app = Starlette(routes=[Route("/{path:path}", answer)])
    async with running_server(app) as url:
        if card is not None:
            served = copy.deepcopy(card)
            served["url"] = url + "/"
            agent.routes["/.well-known/agent-card.json"] = (200, json.dumps(served).encode())
        try:
            yield url, agent
        finally:
            agent.hang.set()
