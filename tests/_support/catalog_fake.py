"""A small real Agent Catalog stand-in (Starlette on 127.0.0.1) for the client's tests.

It answers the documented routes and bodies of the catalog's HTTP API from an in-memory
table, records every request it saw, and can be told to answer the next requests with a
given error status and reason (``fail``) or to hold them unanswered (``hold``), so each
error contract of ``CatalogClient`` is met against a real HTTP server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import make_protocol_error_data

KEY = "lcat_" + "k" * 43
"""The key the fake accepts (bearer or X-API-Key)."""

_CODES = {
    400: ErrorCode.INVALID_INPUT,
    401: ErrorCode.AUTH_REQUIRED,
    403: ErrorCode.AUTH_REQUIRED,
    404: ErrorCode.NOT_FOUND,
    409: ErrorCode.INVALID_INPUT,
    413: ErrorCode.INVALID_INPUT,
    502: ErrorCode.UPSTREAM_UNAVAILABLE,
    503: ErrorCode.UPSTREAM_UNAVAILABLE,
}


def card_json(name: str, version: str, url: str = "http://127.0.0.1:1/") -> dict[str, Any]:
    """A valid A2A card (one skill) of ``name`` at ``version``."""
    return {
        "name": name,
        "description": f"The {name} agent answers questions about {name}.",
        "url": url,
        "version": version,
        "protocolVersion": "0.3.0",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "answer", "name": "Answer", "description": "Answers.", "tags": ["t"]}],
    }


def entry_json(
    name: str, version: str, status: str = "active", url: str = "http://127.0.0.1:1/"
) -> dict[str, Any]:
    """A ``CatalogEntry`` body."""
    return {
        "name": name,
        "version": version,
        "status": status,
        "isLatest": False,
        "owner": "pub",
        "publishedAt": datetime(2026, 11, 1, tzinfo=UTC).isoformat(),
        "change": "initial",
        "cardUrl": None,
        "warnings": [],
        "health": {"state": "unknown"},
        "card": card_json(name.rsplit("/", 1)[-1], version, url),
    }


def error_response(status: int, reason: str, message: str, **top: Any) -> JSONResponse:
    """The catalog's error body for ``status``."""
    data = make_protocol_error_data(
        _CODES.get(status, ErrorCode.INTERNAL_ERROR), reason, message, retriable=status >= 500
    )
    return JSONResponse({"error": data.to_wire(), **top}, status_code=status)


@dataclass
class Seen:
    """One request the fake answered."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeCatalog:
    """The table of entries by name, the requests seen, and what to answer next."""

    entries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    failures: list[Response] = field(default_factory=list)
    held: asyncio.Event | None = None
    statuses: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, version: str, status: str = "active", url: str = "") -> None:
        """Publish ``name@version`` with ``status`` (its card's url ``url``)."""
        self.entries.setdefault(name, []).append(
            entry_json(name, version, status, url or "http://127.0.0.1:1/")
        )

    def fail(self, status: int, reason: str, message: str = "refused", **top: Any) -> None:
        """Answer the next request with this error."""
        self.failures.append(error_response(status, reason, message, **top))

    def answer(self, response: Response) -> None:
        """Answer the next request with ``response`` as it is."""
        self.failures.append(response)

    def hold(self) -> asyncio.Event:
        """Hold every request until the returned event is set."""
        self.held = asyncio.Event()
        return self.held

    def app(self) -> Starlette:
        """The Starlette app."""
        return Starlette(
            routes=[
                Route("/v0/agents", self._search),
                Route("/v0/publish", self._publish, methods=["POST"]),
                Route(
                    "/v0/agents/{name:path}/versions/{version}/status",
                    self._status,
                    methods=["POST"],
                ),
                Route("/v0/agents/{name:path}/versions/{version}", self._version),
                Route("/v0/agents/{name:path}/versions", self._versions),
            ]
        )

    async def _pre(self, request: Request) -> Response | None:
        body: Any = None
        if request.method == "POST":
            body = await request.json()
        self.seen.append(
            Seen(
                request.method,
                request.url.path,
                dict(request.query_params),
                {k.lower(): v for k, v in request.headers.items()},
                body,
            )
        )
        if self.held is not None:
            await self.held.wait()
        if self.failures:
            return self.failures.pop(0)
        given = request.headers.get("x-api-key") or request.headers.get(
            "authorization", ""
        ).removeprefix("Bearer ")
        if given != KEY:
            return error_response(401, "catalog_key_required", "send a catalog key")
        return None

    def _find(self, name: str) -> list[dict[str, Any]] | Response:
        found = self.entries.get(name)
        if not found:
            return error_response(404, "agent_not_found", f"no agent {name!r}")
        return found

    async def _search(self, request: Request) -> Response:
        refused = await self._pre(request)
        if refused is not None:
            return refused
        agents = [versions[-1] for versions in self.entries.values()]
        return JSONResponse({"agents": agents, "metadata": {"nextCursor": "c2", "count": 1}})

    async def _versions(self, request: Request) -> Response:
        refused = await self._pre(request)
        if refused is not None:
            return refused
        found = self._find(request.path_params["name"])
        if isinstance(found, Response):
            return found
        return JSONResponse({"name": request.path_params["name"], "versions": found[::-1]})

    async def _version(self, request: Request) -> Response:
        refused = await self._pre(request)
        if refused is not None:
            return refused
        found = self._find(request.path_params["name"])
        if isinstance(found, Response):
            return found
        version = request.path_params["version"]
        if version == "latest":
            return JSONResponse(found[-1])
        for entry in found:
            if entry["version"] == version:
                return JSONResponse(entry)
        return error_response(404, "version_not_found", f"no version {version}")

    async def _publish(self, request: Request) -> Response:
        refused = await self._pre(request)
        if refused is not None:
            return refused
        body = self.seen[-1].body
        card = body.get("card") or card_json("fetched", "1.0.0")
        name = body.get("name") or card["name"].lower().replace(" ", "-")
        entry = entry_json(name, card["version"])
        entry["card"] = card
        self.entries.setdefault(name, []).append(entry)
        result = {"entry": entry, "change": "initial", "warnings": [], "created": True}
        return JSONResponse(result, status_code=201)

    async def _status(self, request: Request) -> Response:
        refused = await self._pre(request)
        if refused is not None:
            return refused
        found = self._find(request.path_params["name"])
        if isinstance(found, Response):
            return found
        status = self.seen[-1].body["status"]
        for entry in found:
            if entry["version"] == request.path_params["version"]:
                entry["status"] = status
                self.statuses.append((request.path_params["name"], entry["version"], status))
                return JSONResponse(entry)
        return error_response(404, "version_not_found", "no such version")
