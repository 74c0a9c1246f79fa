"""Publishing a card to the catalog: ``POST /v0/publish``, checked step by step.

What a publisher sees, in the order the checks run (each refusal is a ``CatalogRefusal``
the service answers with its status, see ``catalog.errors``):

1. The body is ``{"card": {...}}`` or ``{"url": "http://host:port/"}``, optionally with
   ``"name"``; anything else is ``invalid_catalog_request`` naming the field.
2. By URL, the catalog GETs ``{url}/.well-known/agent-card.json``, then the legacy
   ``{url}/.well-known/agent.json`` when the first is not there (a URL that already ends
   in one of them is fetched as is). Only ``http``/``https`` URLs without a user name or
   password. The read stops at ``max_card_bytes`` (``card_too_large``) and at
   ``fetch_timeout`` seconds in all; no answer, an error status or a body that is not a
   JSON object is ``card_fetch_failed`` (retriable).
3. The card's ``version`` must be SemVer (``invalid_version``); then the rules of
   ``llamon card lint``: any error refuses the card (``invalid_card``, the findings in
   ``findings``), warnings are stored with the version.
4. The name (``name``, checked before anything is fetched; else the slug of the card's
   name) must be a catalog name (``invalid_agent_name``), and the key must own it: a
   publisher whose patterns match it and that published it first, or an admin
   (``name_not_owned``; a caller key is refused before anything else). Of two publishers
   racing for a new name, exactly one gets it.
5. The version number is new: the identical card published again as the same version is
   answered ``created=False``; a different card (or a deleted version's number) is
   ``version_exists``.
6. The change against the version before it (``catalog.versioning``) must not be a
   bigger bump than the version number makes (``version_understates_change``).

The card is stored as its JSON (wire names, unset fields left out) with the URL it was
read from, or, for a card sent as JSON, the well-known card URL of its ``url``'s host.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
from a2a.types import AgentCard
from pydantic import ValidationError

from llamon_agent.a2a.card.lint import lint_agent_card
from llamon_agent.catalog.access import Caller
from llamon_agent.catalog.errors import CatalogRefusal
from llamon_agent.catalog.names import check_name, name_for_card
from llamon_agent.catalog.records import AgentVersion, ChangeKind
from llamon_agent.catalog.store import CatalogStore, NameOwned, VersionTaken
from llamon_agent.catalog.versioning import check_bump, classify_change, predecessor
from llamon_agent.client.catalog_wire import PublishRequest
from llamon_agent.core.semver import InvalidVersionError, Version

__all__ = [
    "CARD_PATH",
    "DEFAULT_FETCH_TIMEOUT",
    "LEGACY_CARD_PATH",
    "PublishOutcome",
    "card_url_of",
    "fetch_card",
    "parse_publish_request",
    "publish",
]

CARD_PATH: Final = "/.well-known/agent-card.json"
LEGACY_CARD_PATH: Final = "/.well-known/agent.json"
DEFAULT_FETCH_TIMEOUT: Final = 10.0
"""Seconds a card fetch may take in all (connect, redirects, the whole body)."""

_FIELDS: Final = ("card", "url", "name")


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """A publish that succeeded: the version as stored, and whether this request stored
    it (``False``: the identical card was already published as that version)."""

    version: AgentVersion
    created: bool


def _bad_request(message: str) -> CatalogRefusal:
    return CatalogRefusal("invalid_catalog_request", message)


def parse_publish_request(document: object) -> PublishRequest:
    """The publish request in a parsed JSON body; ``invalid_catalog_request`` naming
    what is wrong (not an object, unknown fields, a field of the wrong type)."""
    if not isinstance(document, dict):
        kind = "an array" if isinstance(document, list) else type(document).__name__
        raise _bad_request(
            f"the body must be a JSON object ({{'card': ...}} or {{'url': ...}}), not {kind}"
        )
    unknown = sorted(str(key) for key in document if key not in _FIELDS)
    if unknown:
        raise _bad_request(
            f"unknown field(s) {', '.join(map(repr, unknown))}: a publish request has "
            "'card' or 'url', and optionally 'name'"
        )
    if "card" in document and not isinstance(document["card"], dict):
        raise _bad_request("'card' must be a JSON object (the AgentCard)")
    for field in ("url", "name"):
        if field in document and not isinstance(document[field], str):
            raise _bad_request(f"{field!r} must be a string")
    try:
        return PublishRequest.model_validate(document)
    except ValidationError:
        raise _bad_request("give exactly one of 'card' (the card JSON) or 'url'") from None


def _fetch_targets(url: str) -> list[str]:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad_request("'url' must be an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise _bad_request("'url' must not carry a user name or password")
    if parts.query or parts.fragment:
        raise _bad_request("'url' must not carry a query or a fragment")
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    if path.endswith((CARD_PATH, LEGACY_CARD_PATH)):
        return [base + path]
    return [base + path + CARD_PATH, base + path + LEGACY_CARD_PATH]


def _fetch_failed(problem: str) -> CatalogRefusal:
    return CatalogRefusal(
        "card_fetch_failed", f"could not fetch the agent's card from {CARD_PATH}: {problem}"
    )


def _too_large(max_bytes: int, what: str) -> CatalogRefusal:
    return CatalogRefusal(
        "card_too_large", f"{what} is larger than the catalog accepts (at most {max_bytes} bytes)"
    )


async def _read_limited(response: httpx.Response, max_bytes: int) -> bytes:
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes, "the fetched card")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes, "the fetched card")
        chunks.append(chunk)
    return b"".join(chunks)


async def _fetch_one(http: httpx.AsyncClient, target: str, max_bytes: int) -> bytes | None:
    """The body at ``target``; ``None`` when it answers 404."""
    async with http.stream(
        "GET", target, headers={"Accept": "application/json"}, follow_redirects=True
    ) as response:
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise _fetch_failed(f"the agent answered HTTP {response.status_code}")
        return await _read_limited(response, max_bytes)


async def fetch_card(
    http: httpx.AsyncClient,
    url: str,
    *,
    max_bytes: int,
    fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
) -> tuple[dict[str, Any], str]:
    """The card an agent at ``url`` serves, and the URL it was read from (see the module
    docstring for the paths tried and the refusals)."""
    targets = _fetch_targets(url)
    try:
        async with asyncio.timeout(fetch_timeout):
            for target in targets:
                body = await _fetch_one(http, target, max_bytes)
                if body is not None:
                    return _card_document(body), target
    except TimeoutError:
        raise _fetch_failed(f"no complete answer within {fetch_timeout:g} s") from None
    except httpx.ConnectError:
        raise _fetch_failed("the agent did not accept the connection") from None
    except httpx.TooManyRedirects:
        raise _fetch_failed("too many redirects") from None
    except httpx.HTTPError as exc:
        raise _fetch_failed(f"the connection failed ({type(exc).__name__})") from None
    raise _fetch_failed(f"neither {CARD_PATH} nor {LEGACY_CARD_PATH} is there (HTTP 404)")


def _card_document(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _fetch_failed("the agent's answer is not JSON") from None
    if not isinstance(document, dict):
        raise _fetch_failed("the agent's answer is not a JSON object")
    return document


def card_url_of(card: Mapping[str, Any]) -> str | None:
    """The well-known card URL of the host in ``card["url"]`` (no user name or password),
    or ``None`` when the card has no absolute http(s) ``url``."""
    url = card.get("url")
    if not isinstance(url, str):
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{CARD_PATH}"


def _version_of(card: Mapping[str, Any]) -> Version | None:
    """The card's SemVer version; ``None`` when it has no string ``version`` (lint then
    names what is missing)."""
    text = card.get("version")
    if not isinstance(text, str):
        return None
    try:
        return Version.parse(text)
    except InvalidVersionError as exc:
        raise CatalogRefusal("invalid_version", f"the card's version: {exc}") from None


def _linted(card: dict[str, Any]) -> tuple[dict[str, Any], tuple[dict[str, str], ...]]:
    """The card as stored (validated, wire names, unset fields left out) and its lint
    warnings; ``invalid_card`` with the findings when a rule of severity error fails."""
    findings = lint_agent_card(card)
    errors = [finding for finding in findings if finding.severity == "error"]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise CatalogRefusal(
            "invalid_card",
            f"the card fails lint rule {first.rule} at {first.path}: {first.message}{more}",
            findings=[finding.to_dict() for finding in findings],
        )
    stored = AgentCard.model_validate(card).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return stored, tuple(finding.to_dict() for finding in findings)


async def _check_owner(store: CatalogStore, caller: Caller, name: str) -> None:
    if caller.role == "caller":
        raise CatalogRefusal("name_not_owned", "a caller key cannot publish: use a publisher key")
    owner = await store.owner_of(name)
    if caller.may_publish(name, owner):
        return
    if caller.may_see(name) and owner is not None:
        raise CatalogRefusal("name_not_owned", f"{name!r} is owned by another publisher")
    allowed = ", ".join(caller.patterns) or "none"
    raise CatalogRefusal(
        "name_not_owned", f"this key may not publish {name!r} (its names: {allowed})"
    )


def _same_version(existing: AgentVersion, card: dict[str, Any], version: Version) -> PublishOutcome:
    if existing.status == "deleted":
        raise CatalogRefusal(
            "version_exists",
            f"{existing.version} was published and deleted; a version number is never "
            "reused: publish a new version",
        )
    if existing.card == card and existing.version == str(version):
        return PublishOutcome(existing, created=False)
    raise CatalogRefusal(
        "version_exists",
        f"{existing.version} is already published with a different card: publish a new "
        "version number",
    )


async def publish(
    store: CatalogStore,
    caller: Caller,
    request: PublishRequest,
    *,
    http: httpx.AsyncClient,
    max_card_bytes: int,
    fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
    clock: Callable[[], float] = time.time,
) -> PublishOutcome:
    """Publish ``request`` as ``caller`` (see the module docstring for every check)."""
    if request.name is not None:
        check_name(request.name)
    if caller.role == "caller":
        raise CatalogRefusal("name_not_owned", "a caller key cannot publish: use a publisher key")
    if request.card is not None:
        raw, card_url = request.card, card_url_of(request.card)
    else:
        raw, card_url = await fetch_card(
            http, request.url or "", max_bytes=max_card_bytes, fetch_timeout=fetch_timeout
        )
    version = _version_of(raw)
    card, warnings = _linted(raw)
    if version is None:  # pragma: no cover - lint refuses a card without a version
        raise CatalogRefusal("invalid_version", "the card has no version")
    name = check_name(request.name) if request.name is not None else name_for_card(card)
    await _check_owner(store, caller, name)
    versions = await store.versions_of(name)
    parsed = {Version.parse(item.version): item for item in versions}
    if version in parsed:
        return _same_version(parsed[version], card, version)
    change: ChangeKind = "initial"
    previous = predecessor(parsed, version)
    if previous is not None:
        found = classify_change(parsed[previous].card, card)
        refusal = check_bump(previous, version, found)
        if refusal is not None:
            raise CatalogRefusal("version_understates_change", refusal)
        change = found.kind
    stored = AgentVersion(
        name=name,
        version=str(version),
        status="active",
        card=card,
        owner=caller.label,
        published_at=clock(),
        change=change,
        card_url=card_url,
        warnings=warnings,
    )
    owned_by = None if caller.is_admin else caller.label
    try:
        return PublishOutcome(await store.add_version(stored, owned_by=owned_by), created=True)
    except NameOwned:  # another publisher took the new name meanwhile
        raise CatalogRefusal("name_not_owned", f"{name!r} is owned by another publisher") from None
    except VersionTaken:  # published by a concurrent request meanwhile
        existing = await store.get_version(name, str(version))
        if existing is None:  # pragma: no cover - it was just there
            raise
        return _same_version(existing, card, version)
