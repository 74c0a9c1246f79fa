"""The Agent Catalog's HTTP service: ``create_catalog_app(store)`` is a Starlette app.

What a client sees (bodies are ``client.catalog_wire`` models; every failure is
``{"error": <error data>}`` with the status of ``catalog.errors``):

* ``GET /healthz`` -> ``{"status": "ok"}`` and ``GET /openapi.json`` (OpenAPI 3.1 of
  every route) need no key. Every ``/v0`` route needs one (``Authorization: Bearer`` or
  ``X-API-Key``): no key or an unknown one is 401 ``catalog_key_required``. With
  ``open_read=True`` a ``GET`` without a key sees every name (and a ``GET`` with a known
  key too).
* ``GET /v0/agents`` searches (``search``, ``skill``, ``tag``, ``input_mode``,
  ``output_mode``, ``status=active|deprecated|any``, ``health=any``,
  ``versions=latest|all``, ``limit=1..100``, ``cursor``); any other parameter, a value
  outside those, or a cursor the catalog did not give is ``invalid_catalog_request``
  naming the parameter.
* ``GET /v0/agents/{name}/versions[?range=^2.1]`` lists the versions newest first
  (deleted ones for an admin only); ``GET /v0/agents/{name}/versions/{version|latest}``
  is one version. A name the key may not see is answered exactly as a name that does not
  exist: 404 ``agent_not_found``.
* ``POST /v0/publish`` (``catalog.publish``): 201 with ``PublishResult``, 200 with
  ``created: false`` when the identical card is published again as that version.
* ``POST /v0/agents/{name}/versions/{version}/status`` ``{"status": ...}``: the owner
  publisher or an admin; ``deleted`` is final (``invalid_status_change``).
* Bodies are read up to ``max_card_bytes`` and no further (``card_too_large``); a body
  that is not JSON is ``invalid_catalog_request``.
* A database that does not answer is 503 ``database_unavailable`` (``Retry-After``);
  anything unexpected is 500 with an incident id, its text only in the server log.

The app starts ``prober`` (the health prober) on startup and stops it on shutdown, closes
the HTTP client it made for fetching cards, and closes ``store`` only when
``close_store=True``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Final, Protocol

import httpx
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamon_agent.a2a.body import parse_body, read_body
from llamon_agent.a2a.protocol import RequestLimits
from llamon_agent.catalog.access import ANONYMOUS, Caller, authenticate, key_from_headers
from llamon_agent.catalog.entries import entry_for
from llamon_agent.catalog.errors import CatalogRefusal, error_response, exception_response
from llamon_agent.catalog.names import check_name
from llamon_agent.catalog.openapi import openapi_document
from llamon_agent.catalog.publish import (
    DEFAULT_FETCH_TIMEOUT,
    parse_publish_request,
    publish,
)
from llamon_agent.catalog.records import STATUSES, AgentVersion, CatalogQuery, Status
from llamon_agent.catalog.store import CatalogStore
from llamon_agent.client.catalog_wire import (
    PublishResult,
    SearchMetadata,
    SearchPage,
    VersionList,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.semver import (
    InvalidVersionError,
    InvalidVersionRangeError,
    Version,
    VersionRange,
)

__all__ = ["DEFAULT_MAX_CARD_BYTES", "HealthProber", "create_catalog_app"]

logger = logging.getLogger("llamon_agent.catalog")

DEFAULT_MAX_CARD_BYTES: Final = 256 * 1024
_SEARCH_PARAMS: Final = (
    "search",
    "skill",
    "tag",
    "input_mode",
    "output_mode",
    "status",
    "health",
    "versions",
    "limit",
    "cursor",
)
_STATUS_FILTERS: Final[Mapping[str, tuple[Status, ...]]] = {
    "active": ("active",),
    "deprecated": ("deprecated",),
    "any": ("active", "deprecated"),
}
_STATUS_BODY_FIELDS: Final = ("status",)


def _json(body: BaseModel, *, status_code: int = 200) -> Response:
    """``body`` as JSON (camelCase), serialized by pydantic straight to bytes."""
    return Response(
        body.model_dump_json(by_alias=True), status_code=status_code, media_type="application/json"
    )


class HealthProber(Protocol):
    """What the app starts on startup and stops on shutdown (``catalog.health``)."""

    async def start(self) -> None:
        """Begin probing in the background."""
        ...

    async def stop(self) -> None:
        """Stop probing and wait for the probes in flight."""
        ...


def _bad_request(message: str) -> CatalogRefusal:
    return CatalogRefusal("invalid_catalog_request", message)


def _no_agent(name: str) -> CatalogRefusal:
    """The same answer for a name that does not exist and one the key may not see."""
    return CatalogRefusal("agent_not_found", f"no agent named {name!r}")


def _query(request: Request, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query parameters (empty ones left out); unknown or repeated ones refused."""
    params: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise _bad_request(f"unknown query parameter {key!r} (this route takes: {known})")
        if key in params:
            raise _bad_request(f"query parameter {key!r} is given more than once")
        if value != "":
            params[key] = value
    return params


def _choice(params: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str | None:
    value = params.get(name)
    if value is not None and value not in choices:
        raise _bad_request(
            f"query parameter {name!r} must be one of {', '.join(choices)}, not {value!r}"
        )
    return value


def _limit(params: Mapping[str, str]) -> int:
    text = params.get("limit", "50")
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise _bad_request(
            f"query parameter 'limit' must be a whole number from 1 to 100, not {text!r}"
        )
    return int(text)


def _lower(value: str | None) -> str | None:
    return value.lower() if value is not None else None


class _Catalog:
    """The handlers, sharing the store, the options and the card-fetching client."""

    def __init__(
        self,
        store: CatalogStore,
        *,
        open_read: bool,
        max_card_bytes: int,
        http: httpx.AsyncClient | None,
        fetch_timeout: float,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.open_read = open_read
        self.limits = RequestLimits(max_body_bytes=max_card_bytes)
        self.max_card_bytes = max_card_bytes
        self.fetch_timeout = fetch_timeout
        self.clock = clock
        self._http = http
        self.owns_http = http is None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.fetch_timeout, max_redirects=5)
        return self._http

    async def aclose(self) -> None:
        if self.owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    # ------------------------------------------------------------------ requests

    async def caller(self, request: Request) -> Caller:
        """Who is asking; ``catalog_key_required`` for no key or an unknown one."""
        key = key_from_headers(request.headers)
        reading = self.open_read and request.method == "GET"
        if key is None and reading:
            return ANONYMOUS
        caller = await authenticate(self.store, key)
        if caller is None:
            problem = "no catalog key was sent" if key is None else "the catalog key is not known"
            raise CatalogRefusal(
                "catalog_key_required",
                f"{problem}: send it in an Authorization header as a Bearer token, or in "
                "an X-API-Key header",
            )
        if reading and not caller.is_admin:
            return Caller(caller.role, caller.label, ("*",))
        return caller

    async def body(self, request: Request) -> object:
        """The parsed JSON body, read up to the size limit."""
        body = await read_body(request, self.limits)
        if body is None:
            raise CatalogRefusal(
                "card_too_large",
                f"the request body is larger than the catalog accepts (at most "
                f"{self.max_card_bytes} bytes)",
            )
        document, refusal = parse_body(body, self.limits)
        if refusal is not None:
            error = refusal[1].error
            raise _bad_request((error.message if error is not None else None) or "not JSON")
        return document

    async def visible_versions(self, caller: Caller, name: str) -> list[AgentVersion]:
        """The versions of ``name`` the caller may see (deleted ones for an admin only);
        ``agent_not_found`` when there are none, or the caller may not see the name."""
        check_name(name)
        if not caller.may_see(name):
            raise _no_agent(name)
        versions = await self.store.versions_of(name)
        if not caller.is_admin:
            versions = [item for item in versions if item.status != "deleted"]
        if not versions:
            raise _no_agent(name)
        return versions

    # ------------------------------------------------------------------ routes

    async def search(self, request: Request) -> Response:
        caller = await self.caller(request)
        params = _query(request, _SEARCH_PARAMS)
        status = _choice(params, "status", tuple(_STATUS_FILTERS)) or "active"
        statuses = _STATUS_FILTERS[status]
        if status == "any" and caller.is_admin:
            statuses = (*statuses, "deleted")
        health = _choice(params, "health", ("any",))
        versions = _choice(params, "versions", ("latest", "all")) or "latest"
        cursor = params.get("cursor")
        query = CatalogQuery(
            search=params.get("search"),
            skill=params.get("skill"),
            tag=_lower(params.get("tag")),
            input_mode=_lower(params.get("input_mode")),
            output_mode=_lower(params.get("output_mode")),
            statuses=statuses,
            include_unhealthy=health == "any",
            latest_only=versions == "latest",
            visible=caller.visible,
            limit=_limit(params),
            cursor=cursor,
        )
        try:
            page = await self.store.search(query)
        except ValueError:
            if cursor is None:
                raise
            raise _bad_request(
                "query parameter 'cursor' is not a cursor this catalog gave: search again "
                "without it"
            ) from None
        body = SearchPage(
            agents=[entry_for(row) for row in page.rows],
            metadata=SearchMetadata(next_cursor=page.next_cursor, count=len(page.rows)),
        )
        return _json(body)

    async def versions(self, request: Request) -> Response:
        caller = await self.caller(request)
        params = _query(request, ("range",))
        name = request.path_params["name"]
        wanted: VersionRange | None = None
        if "range" in params:
            try:
                wanted = VersionRange.parse(params["range"])
            except InvalidVersionRangeError as exc:
                raise CatalogRefusal("invalid_version", f"query parameter 'range': {exc}") from None
        versions = await self.visible_versions(caller, name)
        if wanted is not None:
            versions = [item for item in versions if wanted.matches(Version.parse(item.version))]
            if not versions:
                raise CatalogRefusal(
                    "version_not_found", f"{name!r} has no version in the range {wanted.text!r}"
                )
        body = VersionList(name=name, versions=[entry_for(item) for item in versions])
        return _json(body)

    async def version(self, request: Request) -> Response:
        caller = await self.caller(request)
        _query(request, ())
        name, text = request.path_params["name"], request.path_params["version"]
        wanted = None if text == "latest" else _parse_version(text)
        versions = await self.visible_versions(caller, name)
        if wanted is None:
            found = next((item for item in versions if item.is_latest), None)
            if found is None:
                raise CatalogRefusal(
                    "version_not_found",
                    f"{name!r} has no active version to be its latest: ask for a version",
                )
        else:
            found = _find(versions, wanted)
            if found is None:
                raise CatalogRefusal("version_not_found", f"{name!r} has no version {text}")
        return _json(entry_for(found))

    async def publish(self, request: Request) -> Response:
        caller = await self.caller(request)
        _query(request, ())
        outcome = await publish(
            self.store,
            caller,
            parse_publish_request(await self.body(request)),
            http=self.http,
            max_card_bytes=self.max_card_bytes,
            fetch_timeout=self.fetch_timeout,
            clock=self.clock,
        )
        stored = outcome.version
        entry = entry_for(stored)
        result = PublishResult(
            entry=entry, change=stored.change, warnings=entry.warnings, created=outcome.created
        )
        return _json(result, status_code=201 if outcome.created else 200)

    async def set_status(self, request: Request) -> Response:
        caller = await self.caller(request)
        _query(request, ())
        name, text = request.path_params["name"], request.path_params["version"]
        wanted = _parse_version(text)
        status = _status_change(await self.body(request))
        await self.visible_versions(caller, name)
        if not caller.may_publish(name, await self.store.owner_of(name)):
            raise CatalogRefusal(
                "name_not_owned",
                f"only the publisher that owns {name!r} (or an admin) may change its versions",
            )
        found = _find(await self.store.versions_of(name), wanted)
        if found is None:
            raise CatalogRefusal("version_not_found", f"{name!r} has no version {text}")
        if found.status == status:
            return _json(entry_for(found))
        if found.status == "deleted":
            raise CatalogRefusal(
                "invalid_status_change",
                f"{name!r} {found.version} is deleted, and a deleted version stays deleted: "
                "publish a new version instead",
            )
        changed = await self.store.set_status(name, found.version, status)
        if changed is None:  # deleted from the database meanwhile
            raise CatalogRefusal("version_not_found", f"{name!r} has no version {text}")
        return _json(entry_for(changed))


def _parse_version(text: str) -> Version:
    try:
        return Version.parse(text)
    except InvalidVersionError as exc:
        raise CatalogRefusal("invalid_version", str(exc)) from None


def _find(versions: list[AgentVersion], wanted: Version) -> AgentVersion | None:
    """The version with ``wanted``'s text, else one of equal precedence."""
    exact = next((item for item in versions if item.version == str(wanted)), None)
    if exact is not None:
        return exact
    return next((item for item in versions if Version.parse(item.version) == wanted), None)


def _status_change(document: object) -> Status:
    if not isinstance(document, dict):
        raise _bad_request('the body must be a JSON object: {"status": "deprecated"}')
    unknown = sorted(str(key) for key in document if key not in _STATUS_BODY_FIELDS)
    if unknown:
        raise _bad_request(
            f"unknown field(s) {', '.join(map(repr, unknown))}: a status change has only 'status'"
        )
    status = document.get("status")
    for allowed in STATUSES:
        if status == allowed:
            return allowed
    raise _bad_request(f"'status' must be one of active, deprecated, deleted, not {status!r}")


Handler = Callable[[Request], Awaitable[Response]]


def _answering(handler: Handler) -> Handler:
    """``handler`` with every failure answered as JSON (see ``catalog.errors``)."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except CatalogRefusal as refusal:
            response = error_response(refusal)
            if refusal.reason == "card_too_large":
                response.headers["connection"] = "close"  # the rest of the body is never read
            return response
        except ClientDisconnect:  # nobody is left to answer
            return Response(status_code=400)
        except Exception as exc:
            found = classify_exception(exc)
            if found.mapped:
                logger.warning(
                    "catalog %s %s failed: %s (%s)",
                    request.method,
                    request.url.path,
                    found.reason,
                    type(exc).__name__,
                )
            return exception_response(exc)

    return endpoint


async def _healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    method = request.method
    message = (
        f"{method} is not allowed on {request.url.path}"
        if status == 405
        else f"there is no route {request.url.path} (see /openapi.json)"
    )
    response = error_response(_bad_request(message))
    response.status_code = status
    if isinstance(exc, HTTPException) and exc.headers:
        response.headers.update(exc.headers)
    return response


def create_catalog_app(
    store: CatalogStore,
    *,
    open_read: bool = False,
    max_card_bytes: int = DEFAULT_MAX_CARD_BYTES,
    prober: HealthProber | None = None,
    http: httpx.AsyncClient | None = None,
    close_store: bool = False,
    fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The catalog service over ``store`` (see the module docstring).

    ``http`` fetches cards published by URL (default: a client the app makes and closes);
    ``fetch_timeout`` bounds one fetch in all; ``clock`` stamps ``publishedAt``.
    """
    if isinstance(max_card_bytes, bool) or max_card_bytes < 1:
        raise ValueError(
            f"max_card_bytes must be a positive number of bytes, not {max_card_bytes!r}"
        )
    catalog = _Catalog(
        store,
        open_read=open_read,
        max_card_bytes=max_card_bytes,
        http=http,
        fetch_timeout=fetch_timeout,
        clock=clock,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if prober is not None:
            await prober.start()
        try:
            yield
        finally:
            try:
                if prober is not None:
                    await prober.stop()
            finally:
                await catalog.aclose()
                if close_store:
                    await store.close()

    agent = "/v0/agents/{name:path}/versions"
    routes = [
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        Route("/v0/agents", _answering(catalog.search), methods=["GET"]),
        Route("/v0/publish", _answering(catalog.publish), methods=["POST"]),
        Route(agent + "/{version}/status", _answering(catalog.set_status), methods=["POST"]),
        Route(agent + "/{version}", _answering(catalog.version), methods=["GET"]),
        Route(agent, _answering(catalog.versions), methods=["GET"]),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error}
    )
    app.state.catalog_store = store
    return app
