"""The catalog's OpenAPI 3.1 description (``GET /openapi.json``).

``openapi_document()`` builds it from the wire models' JSON schemas
(``client.catalog_wire``, the error data of ``core.error_data``) and ``ROUTES``, the table
of every route the service answers; a test checks the two never drift apart.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Final, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from llamon_agent.client.catalog_wire import (
    CatalogEntry,
    LintFinding,
    PublishRequest,
    PublishResult,
    SearchPage,
    StatusChange,
    VersionList,
)
from llamon_agent.core.error_data import ProtocolErrorData

__all__ = ["ROUTES", "Param", "Route", "openapi_document"]

_REF: Final = "#/components/schemas/{model}"


@dataclass(frozen=True, slots=True)
class Param:
    """One path or query parameter."""

    name: str
    where: Literal["path", "query"]
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})


@dataclass(frozen=True, slots=True)
class Route:
    """One operation: method, path (OpenAPI template), what it takes and answers."""

    method: Literal["get", "post"]
    path: str
    operation_id: str
    summary: str
    ok: tuple[int, type[BaseModel] | None]
    errors: tuple[int, ...] = ()
    params: tuple[Param, ...] = ()
    body: type[BaseModel] | None = None
    public: bool = False


_NAME = Param("name", "path", "The agent's catalog name (namespace/name allowed).")
_VERSION = Param("version", "path", "A SemVer version.")
_ENUM = "enum"

ROUTES: Final[tuple[Route, ...]] = (
    Route(
        "get",
        "/v0/agents",
        "searchAgents",
        "Search the agents the key may see; one page, ordered by name then newest first.",
        (200, SearchPage),
        (400, 401, 503),
        (
            Param("search", "query", "Substring of the name, description or a skill."),
            Param("skill", "query", "A skill id."),
            Param("tag", "query", "A skill tag."),
            Param("input_mode", "query", "A media type some skill accepts."),
            Param("output_mode", "query", "A media type some skill produces."),
            Param(
                "status",
                "query",
                "Which statuses (default active).",
                {"type": "string", _ENUM: ["active", "deprecated", "any"]},
            ),
            Param(
                "health",
                "query",
                "'any' keeps unhealthy versions (left out by default).",
                {"type": "string", _ENUM: ["any"]},
            ),
            Param(
                "versions",
                "query",
                "'latest' (default): one entry per agent; 'all': every version.",
                {"type": "string", _ENUM: ["latest", "all"]},
            ),
            Param(
                "limit",
                "query",
                "Entries per page (default 50).",
                {"type": "integer", "minimum": 1, "maximum": 100},
            ),
            Param("cursor", "query", "metadata.nextCursor of the previous page."),
        ),
    ),
    Route(
        "get",
        "/v0/agents/{name}/versions",
        "listVersions",
        "The agent's versions the key may see, newest first (deleted ones for an admin only).",
        (200, VersionList),
        (400, 401, 404, 503),
        (_NAME, Param("range", "query", "A SemVer range (^2.1, ~2.1, >=2 <3, 2.x).")),
    ),
    Route(
        "get",
        "/v0/agents/{name}/versions/{version}",
        "getVersion",
        "One version, or 'latest' (the highest active release).",
        (200, CatalogEntry),
        (400, 401, 404, 503),
        (_NAME, Param("version", "path", "A SemVer version, or 'latest'.")),
    ),
    Route(
        "post",
        "/v0/publish",
        "publish",
        "Publish a card (as JSON, or fetched from the agent's well-known path).",
        (201, PublishResult),
        (400, 401, 403, 409, 413, 502, 503),
        body=PublishRequest,
    ),
    Route(
        "post",
        "/v0/agents/{name}/versions/{version}/status",
        "setStatus",
        "Change a version's status (active, deprecated, deleted; deleted is final).",
        (200, CatalogEntry),
        (400, 401, 403, 404, 413, 503),
        (_NAME, _VERSION),
        body=StatusChange,
    ),
    Route("get", "/healthz", "healthz", "Whether the service answers.", (200, None), public=True),
    Route("get", "/openapi.json", "openapi", "This description.", (200, None), public=True),
)
"""Every route of the catalog service."""

_ERROR_TEXT: Final = {
    400: "The request is malformed (see error.errorReason).",
    401: "No key, or a key the catalog does not know (catalog_key_required).",
    403: "The key may not publish or change this name (name_not_owned).",
    404: "No agent or version of that name the key may see.",
    409: "The version number is taken or understates the change.",
    413: "The body or the fetched card is larger than the catalog accepts (card_too_large).",
    502: "The agent's card could not be fetched (card_fetch_failed).",
    503: "The catalog's database does not answer (database_unavailable); retry later.",
}


def _schemas() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (SearchPage, "serialization"),
        (VersionList, "serialization"),
        (CatalogEntry, "serialization"),
        (PublishResult, "serialization"),
        (LintFinding, "serialization"),
        (ProtocolErrorData, "serialization"),
        (PublishRequest, "validation"),
        (StatusChange, "validation"),
    ]
    _, top = models_json_schema(models, ref_template=_REF)
    schemas: dict[str, Any] = dict(top.get("$defs", {}))
    schemas["ErrorBody"] = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {"$ref": _REF.format(model="ProtocolErrorData")},
            "findings": {"type": "array", "items": {"$ref": _REF.format(model="LintFinding")}},
        },
    }
    return schemas


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _operation(route: Route) -> dict[str, Any]:
    status, model = route.ok
    ok_schema = {"$ref": _REF.format(model=model.__name__)} if model else {"type": "object"}
    responses: dict[str, Any] = {str(status): {"description": "OK", "content": _json(ok_schema)}}
    for code in route.errors:
        responses[str(code)] = {
            "description": _ERROR_TEXT[code],
            "content": _json({"$ref": _REF.format(model="ErrorBody")}),
        }
    if not route.public:
        responses.setdefault(
            "500",
            {
                "description": "An internal error; errorMessage names the incident id.",
                "content": _json({"$ref": _REF.format(model="ErrorBody")}),
            },
        )
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "responses": responses,
    }
    if route.params:
        operation["parameters"] = [
            {
                "name": param.name,
                "in": param.where,
                "required": param.where == "path",
                "description": param.description,
                "schema": param.schema,
            }
            for param in route.params
        ]
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": _json({"$ref": _REF.format(model=route.body.__name__)}),
        }
    if route.public:
        operation["security"] = []
    return operation


@cache
def _document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "llamon Agent Catalog",
            "version": "0",
            "description": (
                "Agents publish versioned A2A cards; callers search them by skill and "
                'resolve them by SemVer range. Errors are {"error": <error data>}.'
            ),
        },
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "security": [{"bearer": []}, {"apiKey": []}],
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every route (a fresh copy each call)."""
    return copy.deepcopy(_document())
