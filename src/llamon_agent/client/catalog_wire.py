"""The Agent Catalog's HTTP API in JSON: one model per body, shared by the service (which
writes them) and ``CatalogClient`` (which reads them).

What the caller sees (camelCase on the wire, snake_case in Python; a reader keeps fields
it does not know, so an older client reads a newer catalog):

* ``CatalogEntry``: one published version: ``name``, ``version``, ``status``
  (``active``/``deprecated``/``deleted``), ``isLatest``, ``owner`` (the publisher's label),
  ``publishedAt`` (ISO 8601, UTC), ``change`` (``initial``/``patch``/``minor``/``major``
  against the version before it), ``cardUrl``, ``warnings`` (lint findings: ``rule``,
  ``severity``, ``path``, ``message``), ``health`` and the ``card`` itself (the A2A
  AgentCard JSON as published). ``entry.agent_card()`` validates the card as a2a-sdk's
  ``AgentCard``.
* ``CatalogHealth``: ``state`` (``unknown``/``healthy``/``unhealthy``), ``checkedAt``,
  ``lastSeen`` (ISO 8601), ``errorCode``/``errorReason`` of the last failed probe,
  ``failures`` in a row.
* ``SearchPage``: ``{"agents": [CatalogEntry...], "metadata": {"nextCursor", "count"}}``
  (``GET /v0/agents``); ``VersionList``: ``{"name", "versions": [...]}``
  (``GET /v0/agents/{name}/versions``); ``PublishRequest`` (``{"card": {...}}`` or
  ``{"url": "http://agent/"}``, optional ``name``; any other field is refused);
  ``PublishResult``: ``{"entry", "change", "warnings", "created"}``; ``StatusChange``:
  ``{"status": "deprecated"}``.
* Errors are ``{"error": {...}}`` holding the SDK's error data (``errorCode``,
  ``errorReason``, ``errorMessage``, ``retriable``, ...), plus ``findings`` for a card
  that failed lint.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final, Literal

from a2a.types import AgentCard
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "NAME_PATTERN",
    "CatalogEntry",
    "CatalogHealth",
    "LintFinding",
    "PublishRequest",
    "PublishResult",
    "SearchMetadata",
    "SearchPage",
    "StatusChange",
    "VersionList",
]

NAME_PATTERN: Final = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*(?:/[a-z0-9]+(?:-[a-z0-9]+)*)?$")
"""A catalog name: lowercase words joined by ``-``, optionally ``namespace/name``."""


class _Wire(BaseModel):
    """camelCase on the wire; unknown fields kept (a newer catalog's are not lost)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="allow",
        frozen=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready body (camelCase keys)."""
        return self.model_dump(mode="json", by_alias=True)


class LintFinding(_Wire):
    """One lint finding of a card (the rules of ``llamon card lint``)."""

    rule: str
    severity: str
    path: str
    message: str


class CatalogHealth(_Wire):
    """What the catalog's probes last found of one version."""

    state: Literal["unknown", "healthy", "unhealthy"] = "unknown"
    checked_at: datetime | None = None
    last_seen: datetime | None = None
    error_code: str | None = None
    error_reason: str | None = None
    failures: int = 0


class CatalogEntry(_Wire):
    """One published version of one agent (see the module docstring)."""

    name: str
    version: str
    status: Literal["active", "deprecated", "deleted"]
    is_latest: bool = False
    owner: str = ""
    published_at: datetime
    change: Literal["initial", "patch", "minor", "major"] = "initial"
    card_url: str | None = None
    warnings: list[LintFinding] = Field(default_factory=list)
    health: CatalogHealth = Field(default_factory=CatalogHealth)
    card: dict[str, Any]

    def agent_card(self) -> AgentCard:
        """The published card as a2a-sdk's ``AgentCard``."""
        return AgentCard.model_validate(self.card)


class SearchMetadata(_Wire):
    """Paging of a search: the cursor of the next page (``None`` on the last) and the
    number of entries on this page."""

    next_cursor: str | None = None
    count: int = 0


class SearchPage(_Wire):
    """``GET /v0/agents``: one page of entries."""

    agents: list[CatalogEntry]
    metadata: SearchMetadata = Field(default_factory=SearchMetadata)


class VersionList(_Wire):
    """``GET /v0/agents/{name}/versions``: the versions a caller may see, newest first."""

    name: str
    versions: list[CatalogEntry]


class PublishRequest(BaseModel):
    """``POST /v0/publish``: a card, or the base URL of an agent whose card the catalog
    fetches; ``name`` defaults to the card's name in lowercase words joined by ``-``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    card: dict[str, Any] | None = None
    url: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> PublishRequest:
        if (self.card is None) == (self.url is None):
            raise ValueError("give exactly one of 'card' (the card JSON) or 'url'")
        return self


class PublishResult(_Wire):
    """``POST /v0/publish``: the stored version, the change it made, its lint warnings,
    and ``created`` (``False`` when the same card was already published as that version)."""

    entry: CatalogEntry
    change: Literal["initial", "patch", "minor", "major"]
    warnings: list[LintFinding] = Field(default_factory=list)
    created: bool = True


class StatusChange(BaseModel):
    """``POST /v0/agents/{name}/versions/{version}/status``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["active", "deprecated", "deleted"]
