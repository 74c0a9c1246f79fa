"""What ``CatalogClient`` raises, and the one place where a catalog answer becomes it.

Every failure of a catalog call is one of these (``errorCode`` of each in brackets)::

    LlamonError
     ├── RegistryError
     │    ├── RegistryNotFoundError      404: no such agent or version [NOT_FOUND]
     │    ├── RegistryUnauthorizedError  401 / 403: no key, an unknown key, a name the key
     │    │                              does not own [AUTH_REQUIRED]
     │    ├── RegistryTimeoutError       no answer within the client's timeout
     │    │                              [UPSTREAM_TIMEOUT, retriable]
     │    └── RegistryUnavailableError   connection refused or reset, a 5xx, 429, an answer
     │                                   that is not the catalog's JSON [UPSTREAM_UNAVAILABLE,
     │                                   retriable]
     └── ConfigValidationError
          └── CatalogRequestError        400 / 409 / 413 and other refusals of the request,
                                         and a bad name, version or range refused before
                                         anything is sent [INVALID_INPUT]

Each carries what the catalog answered, when it answered: ``error_reason`` (its
``errorReason``, e.g. ``agent_not_found``, ``version_understates_change``) and
``http_status``; ``CatalogRequestError`` also the lint ``findings`` of a refused card and
reports the catalog's reason as its own (a failure record shows
``version_understates_change``, not a generic one). Messages name the agent and the
version or range asked for, with the catalog's own message; never the key, never the
catalog's address.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx

from llamon_agent.client.catalog_wire import LintFinding
from llamon_agent.core.codes import ErrorCode, ErrorRule
from llamon_agent.exceptions import (
    ConfigValidationError,
    RegistryError,
    RegistryNotFoundError,
    RegistryTimeoutError,
    RegistryUnauthorizedError,
    RegistryUnavailableError,
)

__all__ = [
    "CatalogRequestError",
    "catalog_error_from_exception",
    "catalog_error_from_response",
]

_REQUEST_REASON: Final = "invalid_catalog_request"
"""The reason of a refused request when the catalog named none."""


class CatalogRequestError(ConfigValidationError):
    """The catalog refused the request as it was made (400, 409, 413, ...), or the client
    refused it before sending (a malformed name, version or range). ``INVALID_INPUT``, not
    retriable; its ``errorReason`` is the catalog's (``error_reason``), e.g.
    ``invalid_card`` with the lint ``findings``, ``version_exists``,
    ``version_understates_change``, ``card_too_large``, ``invalid_version``."""

    def __init__(
        self,
        message: str,
        /,
        *,
        error_reason: str = _REQUEST_REASON,
        http_status: int | None = None,
        findings: Sequence[LintFinding] = (),
        **details: object,
    ) -> None:
        super().__init__(message, **details)
        self.error_reason = error_reason
        self.http_status = http_status
        self.findings: tuple[LintFinding, ...] = tuple(findings)

    @property
    def carried(self) -> ErrorRule:
        """``INVALID_INPUT`` with the catalog's reason."""
        return ErrorRule(ErrorCode.INVALID_INPUT, self.error_reason, False)


def _error_body(response: httpx.Response) -> tuple[dict[str, Any], list[LintFinding]]:
    """The ``error`` object of a catalog error body and its lint findings; empty when the
    body is not the catalog's (a proxy's HTML page, nothing at all)."""
    try:
        body = response.json()
    except ValueError:
        return {}, []
    if not isinstance(body, Mapping):
        return {}, []
    error = body.get("error")
    findings: list[LintFinding] = []
    for raw in body.get("findings") or ():
        try:
            findings.append(LintFinding.model_validate(raw))
        except ValueError:
            continue
    return (dict(error) if isinstance(error, Mapping) else {}), findings


def catalog_error_from_response(
    response: httpx.Response, *, subject: str
) -> RegistryError | CatalogRequestError:
    """The exception for a catalog answer that is not a success. ``subject`` says what was
    asked (``agent 'orders' (^2.1)``, ``publish``); it starts the message, followed by the
    catalog's own (already scrubbed) message."""
    status = response.status_code
    error, findings = _error_body(response)
    raw_reason = error.get("errorReason")
    reason = raw_reason if isinstance(raw_reason, str) and raw_reason else None
    said = error.get("errorMessage")
    text = said if isinstance(said, str) and said else f"the catalog answered HTTP {status}"
    message = f"{subject}: {text}"
    if status == 404:
        return RegistryNotFoundError(message, error_reason=reason, http_status=status)
    if status in (401, 403):
        return RegistryUnauthorizedError(message, error_reason=reason, http_status=status)
    if status == 429 or status >= 500:
        return RegistryUnavailableError(message, error_reason=reason, http_status=status)
    return CatalogRequestError(
        message,
        error_reason=reason or _REQUEST_REASON,
        http_status=status,
        findings=findings,
    )


def catalog_error_from_exception(exc: Exception, *, subject: str) -> RegistryError:
    """The exception for a catalog call that got no usable answer: a timeout
    (``RegistryTimeoutError``), or a refused / reset connection, a broken answer
    (``RegistryUnavailableError``). The message names what was asked and the kind of
    failure, never the address or the exception's own text."""
    if isinstance(exc, httpx.TimeoutException):
        return RegistryTimeoutError(f"{subject}: the catalog did not answer in time")
    if isinstance(exc, httpx.ConnectError):
        return RegistryUnavailableError(f"{subject}: the catalog could not be reached")
    if isinstance(exc, httpx.TransportError):
        return RegistryUnavailableError(f"{subject}: the connection to the catalog failed")
    return RegistryUnavailableError(f"{subject}: the catalog's answer could not be read")
