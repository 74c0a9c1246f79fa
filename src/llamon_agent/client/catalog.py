"""``CatalogClient``: search the Agent Catalog, resolve an agent by name and version range,
publish a card, change a version's status.

::

    async with CatalogClient("http://catalog:8700", auth="lcat_...") as catalog:
        card = await catalog.resolve("orders", "^2.1")   # the highest 2.x >= 2.1 (an AgentCard)
        page = await catalog.search(skill="refund")      # a SearchPage of CatalogEntry

``url`` defaults to ``LLAMON_CATALOG_URL``; ``auth`` to ``LLAMON_CATALOG_KEY`` sent as a
bearer key (a ``str`` is a bearer key; ``ApiKey`` goes in ``X-API-Key``).

Resolution (``resolve_entry`` / ``resolve``): ``"latest"`` asks for the catalog's latest
version; an exact version (``"2.1.0"``) for that version; a range (``"^2.1"``, ``"~1.2"``,
``">=2 <3"``, see ``llamon_agent.core.semver``) lists the versions in it and takes the
highest active one, else the highest deprecated one (deleted versions never).

The catalog is not a single point of failure: every successful resolution is kept (in
memory and under ``<LLAMON_HOME>/catalog-cache/``, see ``client.catalog_cache``). When the
catalog cannot be reached or does not answer in time, ``resolve_entry`` answers with the
newest kept resolution of the same catalog, key, name and range if it is younger than
``cache_max_age`` seconds (``LLAMON_CATALOG_CACHE_MAX_AGE``, default 24 h; ``0``: never),
and logs one WARNING naming ``name@range`` and the entry's age. An older one is not used:
the original error is raised, its message saying a cached resolution exists but is older
than the bound. A ``RegistryNotFoundError`` or ``RegistryUnauthorizedError`` never falls
back: the catalog answered no.

Failures: see ``llamon_agent.client.catalog_errors``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar
from urllib.parse import quote

import httpx
from a2a.types import AgentCard
from pydantic import BaseModel, ValidationError

from llamon_agent.client.auth import ApiKey, Bearer, Credential
from llamon_agent.client.catalog_cache import ResolutionCache, cache_key
from llamon_agent.client.catalog_errors import (
    CatalogRequestError,
    catalog_error_from_exception,
    catalog_error_from_response,
)
from llamon_agent.client.catalog_wire import (
    NAME_PATTERN,
    CatalogEntry,
    PublishRequest,
    PublishResult,
    SearchPage,
    StatusChange,
    VersionList,
)
from llamon_agent.core.semver import (
    InvalidVersionError,
    InvalidVersionRangeError,
    Version,
    VersionRange,
)
from llamon_agent.core.settings import (
    CATALOG_URL_ENV,
    catalog_cache_max_age_setting,
    catalog_key_setting,
    catalog_url_setting,
    home_directory,
)
from llamon_agent.exceptions import (
    ConfigValidationError,
    RegistryNotFoundError,
    RegistryTimeoutError,
    RegistryUnavailableError,
)

__all__ = [
    "CATALOG_SCHEME",
    "DEFAULT_CACHE_MAX_AGE",
    "CatalogClient",
    "CatalogEntry",
    "PublishResult",
    "SearchPage",
    "parse_catalog_url",
]

logger = logging.getLogger("llamon_agent.client.catalog")

DEFAULT_CACHE_MAX_AGE: Final = 86_400.0
"""Seconds a cached resolution may stand in for an unreachable catalog (24 h)."""
CATALOG_SCHEME: Final = "catalog://"
"""``AgentClient("catalog://orders@^2")``: an agent found through the catalog."""

"""A catalog name: lowercase words joined by ``-``, optionally ``namespace/name``."""
_STATUSES: Final = ("active", "deprecated", "deleted")

M = TypeVar("M", bound=BaseModel)
_Wanted = Literal["latest"] | Version | VersionRange


def _check_name(name: str, *, where: str = "") -> None:
    """``CatalogRequestError`` (``invalid_agent_name``) unless ``name`` is a catalog name."""
    if isinstance(name, str) and NAME_PATTERN.match(name):
        return
    hint = ""
    if isinstance(name, str) and NAME_PATTERN.match(name.lower()):
        hint = f"; use {name.lower()!r}"
    raise CatalogRequestError(
        f"{where}{name!r} is not an agent name of the catalog: lowercase words joined by '-', "
        f"optionally namespace/name{hint}",
        error_reason="invalid_agent_name",
    )


def _wanted(name: str, version: str) -> _Wanted:
    """What ``version`` asks for; ``CatalogRequestError`` (``invalid_version``) when it is
    neither ``latest``, a version nor a range."""
    text = version.strip()
    if text in ("", "latest"):
        return "latest"
    try:
        return Version.parse(text)
    except InvalidVersionError:
        pass
    try:
        return VersionRange.parse(text)
    except InvalidVersionRangeError as exc:
        raise CatalogRequestError(
            f"agent {name!r}: {exc}", error_reason="invalid_version"
        ) from None


def parse_catalog_url(url: str) -> tuple[str, str]:
    """``"catalog://orders@^2"`` -> ``("orders", "^2")``; ``catalog://orders`` asks for
    ``latest``, ``catalog://acme/orders@~1.2`` names a namespaced agent. A malformed one
    raises ``ConfigValidationError`` (``CatalogRequestError``) naming it."""
    if not url.startswith(CATALOG_SCHEME):
        raise CatalogRequestError(
            f"{url!r} is not a catalog URL: write catalog://NAME or catalog://NAME@RANGE",
            error_reason="invalid_catalog_request",
        )
    name, _, version = url.removeprefix(CATALOG_SCHEME).partition("@")
    where = f"{url!r}: "
    _check_name(name, where=where)
    if "@" in url and not version.strip():
        raise CatalogRequestError(
            f"{where}nothing after '@': give a version or range (e.g. @^2, @2.1.0)",
            error_reason="invalid_version",
        )
    try:
        _wanted(name, version)
    except CatalogRequestError as exc:
        raise CatalogRequestError(f"{where}{exc.message}", error_reason="invalid_version") from None
    return name, version.strip() or "latest"


def _credential(auth: Credential | str | None) -> Credential | None:
    if isinstance(auth, str):
        return Bearer(auth)
    if auth is None:
        key = catalog_key_setting()
        return Bearer(key) if key else None
    return auth


def _credential_hash(credential: Credential | None) -> str:
    if credential is None:
        return ""
    secret = credential.key if isinstance(credential, ApiKey) else credential.token
    kind = "apikey" if isinstance(credential, ApiKey) else "bearer"
    return hashlib.sha256(f"{kind}:{secret}".encode()).hexdigest()


class CatalogClient:
    """A client of one Agent Catalog (see the module docstring).

    ``url``: the catalog's base URL (default ``LLAMON_CATALOG_URL``). ``auth``: the key
    (``str`` or ``Bearer``: ``Authorization: Bearer``; ``ApiKey``: ``X-API-Key``; default
    ``LLAMON_CATALOG_KEY``). ``timeout``: seconds per request. ``cache_dir``: where
    resolutions are kept on disk (``None``: ``<LLAMON_HOME>/catalog-cache/``; ``False``:
    memory only). ``cache_max_age``: seconds a kept resolution may be used while the
    catalog is unreachable (``None``: ``LLAMON_CATALOG_CACHE_MAX_AGE``, else 24 h; ``0``:
    never). ``httpx_client``: your own pooled client (``aclose`` leaves it open).
    ``clock``: wall-clock seconds, for the cache's ages. Raises ``ConfigValidationError``
    when no URL is given or set.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        auth: Credential | str | None = None,
        timeout: float = 10.0,
        cache_dir: Path | Literal[False] | None = None,
        cache_max_age: float | None = None,
        httpx_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        url = url or catalog_url_setting()
        if not url:
            raise ConfigValidationError(
                f"no Agent Catalog URL: pass CatalogClient(url) or set {CATALOG_URL_ENV}"
            )
        if not url.startswith(("http://", "https://")):
            raise ConfigValidationError("the Agent Catalog URL must start with http:// or https://")
        self.url = url.rstrip("/")
        self.auth = _credential(auth)
        self.timeout = timeout
        if cache_max_age is None:
            try:
                cache_max_age = catalog_cache_max_age_setting()
            except ValueError as exc:
                raise ConfigValidationError(str(exc)) from None
        self.cache_max_age = DEFAULT_CACHE_MAX_AGE if cache_max_age is None else cache_max_age
        if cache_dir is None:
            cache_dir = home_directory() / "catalog-cache"
        self._cache = ResolutionCache(cache_dir or None, clock=clock)
        self._clock = clock
        self._owns_http = httpx_client is None
        self._http = httpx_client or httpx.AsyncClient(timeout=timeout)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled HTTP client (unless it was lent through ``httpx_client``)."""
        if self._owns_http:
            await self._http.aclose()

    # -- reading ------------------------------------------------------------------------

    async def search(
        self,
        *,
        search: str | None = None,
        skill: str | None = None,
        tag: str | None = None,
        input_mode: str | None = None,
        output_mode: str | None = None,
        status: Literal["active", "deprecated", "any"] | None = None,
        include_unhealthy: bool = False,
        all_versions: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> SearchPage:
        """One page of the agents the key may see (``GET /v0/agents``): the latest version
        of each unless ``all_versions``, healthy or unknown unless ``include_unhealthy``;
        ``page.metadata.next_cursor`` asks for the next page. ``limit`` is 1..100."""
        if not 1 <= limit <= 100:
            raise CatalogRequestError(
                f"search: limit must be 1..100, got {limit}", error_reason="invalid_catalog_request"
            )
        params: dict[str, str] = {"limit": str(limit)}
        given = {
            "search": search,
            "skill": skill,
            "tag": tag,
            "input_mode": input_mode,
            "output_mode": output_mode,
            "status": status,
            "cursor": cursor,
        }
        params.update({key: value for key, value in given.items() if value is not None})
        if include_unhealthy:
            params["health"] = "any"
        if all_versions:
            params["versions"] = "all"
        body = await self._request("GET", "/v0/agents", subject="search", params=params)
        return self._read(SearchPage, body, subject="search")

    async def versions(self, name: str, *, range: str | None = None) -> list[CatalogEntry]:
        """The versions of ``name`` the key may see, newest first (``range``: only those in
        it, e.g. ``^2.1``); ``RegistryNotFoundError`` for an agent it may not see."""
        _check_name(name)
        subject = f"agent {name!r}" + (f" ({range})" if range else "")
        params: dict[str, str] = {}
        if range is not None and range.strip():
            wanted = _wanted(name, range)
            params["range"] = range.strip() if not isinstance(wanted, str) else "*"
        body = await self._request(
            "GET", f"/v0/agents/{_path(name)}/versions", subject=subject, params=params
        )
        return list(self._read(VersionList, body, subject=subject).versions)

    async def resolve_entry(self, name: str, version: str = "latest") -> CatalogEntry:
        """The version of ``name`` that ``version`` asks for (``latest``, an exact version,
        or a range: the highest active match, else the highest deprecated one).

        Raises ``RegistryNotFoundError`` when there is none the key may see,
        ``RegistryUnauthorizedError`` for a refused key, ``CatalogRequestError`` for a bad
        name or range (before anything is sent). When the catalog is unreachable, answers
        from the cache within ``cache_max_age`` (see the module docstring), else raises
        ``RegistryUnavailableError`` / ``RegistryTimeoutError``."""
        _check_name(name)
        wanted = _wanted(name, version)
        text = version.strip() or "latest"
        key = cache_key(self.url, _credential_hash(self.auth), name, text)
        try:
            entry = await self._resolve(name, text, wanted)
        except (RegistryUnavailableError, RegistryTimeoutError) as exc:
            return self._from_cache(key, name, text, exc)
        self._cache.put(key, entry)
        return entry

    async def resolve(self, name: str, version: str = "latest") -> AgentCard:
        """The card of ``resolve_entry(name, version)`` as a2a-sdk's ``AgentCard`` (its
        ``url`` is where the agent is called)."""
        entry = await self.resolve_entry(name, version)
        try:
            return entry.agent_card()
        except ValidationError:
            raise RegistryUnavailableError(
                f"agent {name!r} ({version}): the catalog's card of {entry.version} is not a "
                "valid agent card"
            ) from None

    async def _resolve(self, name: str, text: str, wanted: _Wanted) -> CatalogEntry:
        subject = f"agent {name!r} ({text})"
        if isinstance(wanted, (str, Version)):
            which = "latest" if isinstance(wanted, str) else str(wanted)
            path = f"/v0/agents/{_path(name)}/versions/{quote(which, safe='')}"
            body = await self._request("GET", path, subject=subject)
            return self._read(CatalogEntry, body, subject=subject)
        path = f"/v0/agents/{_path(name)}/versions"
        body = await self._request("GET", path, subject=subject, params={"range": text})
        listed = self._read(VersionList, body, subject=subject).versions
        for status in ("active", "deprecated"):
            matching: dict[Version, CatalogEntry] = {}
            for entry in listed:
                try:
                    number = Version.parse(entry.version)
                except InvalidVersionError:
                    continue
                if entry.status == status and wanted.matches(number):
                    matching[number] = entry
            if matching:
                return matching[max(matching)]
        raise RegistryNotFoundError(
            f"{subject}: no active or deprecated version in the range",
            error_reason="version_not_found",
            http_status=200,
        )

    def _from_cache(
        self,
        key: str,
        name: str,
        text: str,
        error: RegistryUnavailableError | RegistryTimeoutError,
    ) -> CatalogEntry:
        if self.cache_max_age <= 0:
            raise error
        kept = self._cache.get(key, label=f"{name}@{text}")
        if kept is None:
            raise error
        age = max(0.0, self._clock() - kept.stored_at)
        if age > self.cache_max_age:
            raise type(error)(
                f"{error.message}; a cached resolution of {name}@{text} exists but is "
                f"{age:.0f} s old, older than the bound of {self.cache_max_age:g} s",
                error_reason=error.error_reason,
                http_status=error.http_status,
            ) from error
        logger.warning(
            "the catalog is unreachable; using the cached resolution of %s@%s (version %s, "
            "cached %.0f s ago)",
            name,
            text,
            kept.entry.version,
            age,
        )
        return kept.entry

    # -- writing ------------------------------------------------------------------------

    async def publish(
        self,
        card: AgentCard | Mapping[str, Any] | None = None,
        *,
        url: str | None = None,
        name: str | None = None,
    ) -> PublishResult:
        """Publish ``card`` (an ``AgentCard`` or its JSON), or have the catalog fetch the
        card of the agent at ``url``, as ``name`` (default: the card's name in lowercase
        words joined by ``-``). ``result.created`` is False when the same card was already
        published as that version. A refusal raises ``CatalogRequestError`` (an invalid
        card with its ``findings``, ``version_exists``, ``version_understates_change``,
        ``card_too_large`` ...) or ``RegistryUnauthorizedError`` (``name_not_owned``)."""
        if name is not None:
            _check_name(name)
        if isinstance(card, AgentCard):
            body: dict[str, Any] | None = card.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        else:
            body = None if card is None else dict(card)
        try:
            request = PublishRequest(card=body, url=url, name=name)
        except ValidationError:
            raise CatalogRequestError(
                "publish: give exactly one of a card or the url of an agent",
                error_reason="invalid_catalog_request",
            ) from None
        subject = "publish" + (f" of {name!r}" if name else "")
        answer = await self._request(
            "POST",
            "/v0/publish",
            subject=subject,
            json=request.model_dump(mode="json", exclude_none=True),
        )
        return self._read(PublishResult, answer, subject=subject)

    async def set_status(
        self, name: str, version: str, status: Literal["active", "deprecated", "deleted"]
    ) -> CatalogEntry:
        """Change one version's status (the owning publisher's key, or an admin's): the
        entry as changed. ``deleted`` is final (``CatalogRequestError``
        ``invalid_status_change`` after it)."""
        _check_name(name)
        subject = f"agent {name!r} ({version})"
        if status not in _STATUSES:
            raise CatalogRequestError(
                f"{subject}: status must be one of {', '.join(_STATUSES)}, got {status!r}",
                error_reason="invalid_status_change",
            )
        try:
            Version.parse(version)
        except InvalidVersionError as exc:
            raise CatalogRequestError(f"{subject}: {exc}", error_reason="invalid_version") from None
        path = f"/v0/agents/{_path(name)}/versions/{quote(version, safe='')}/status"
        body = await self._request(
            "POST", path, subject=subject, json=StatusChange(status=status).model_dump()
        )
        return self._read(CatalogEntry, body, subject=subject)

    # -- one request --------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        if isinstance(self.auth, ApiKey):
            return {"X-API-Key": self.auth.key}
        if isinstance(self.auth, Bearer):
            return {"Authorization": f"Bearer {self.auth.token}"}
        return {}

    async def _request(
        self,
        method: str,
        path: str,
        *,
        subject: str,
        params: Mapping[str, str] | None = None,
        json: Any = None,
    ) -> Any:
        """One request; the decoded JSON of a 2xx answer, else the mapped exception. A
        ``Bearer`` with a ``refresh`` callback is refreshed once after a 401."""
        refreshed = False
        while True:
            try:
                response = await self._http.request(
                    method,
                    self.url + path,
                    params=params,
                    json=json,
                    headers=self._headers(),
                    timeout=self.timeout,
                )
            except httpx.HTTPError as exc:
                raise catalog_error_from_exception(exc, subject=subject) from exc
            if response.status_code == 401 and not refreshed and self.auth is not None:
                refreshed = True
                if await self.auth.refresh():
                    continue
            if not 200 <= response.status_code < 300:
                raise catalog_error_from_response(response, subject=subject)
            try:
                return response.json()
            except ValueError:
                raise RegistryUnavailableError(
                    f"{subject}: the catalog's answer is not JSON", http_status=response.status_code
                ) from None

    @staticmethod
    def _read(model: type[M], body: Any, *, subject: str) -> M:
        try:
            return model.model_validate(body)
        except ValidationError:
            raise RegistryUnavailableError(
                f"{subject}: the catalog's answer is not a {model.__name__}"
            ) from None


def _path(name: str) -> str:
    """``name`` in a URL path (``namespace/name`` keeps its ``/``)."""
    return quote(name, safe="/")
