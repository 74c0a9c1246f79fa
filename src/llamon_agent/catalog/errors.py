"""How the catalog service answers a failure: one table of reason -> HTTP status, one
function that builds every error response.

What a client receives for any refused or failed request: the HTTP status below and the
body ``{"error": <error data>}`` (``errorCode``, ``errorReason``, ``errorMessage``,
``retriable``, ... as ``core.error_data`` builds them; the message scrubbed, never naming
an address), plus a top-level ``findings`` list for ``invalid_card``:

=====  ======================================================================
400    ``invalid_catalog_request``, ``invalid_agent_name``, ``invalid_version``,
       ``invalid_card``, ``invalid_status_change``
401    ``catalog_key_required`` (with ``WWW-Authenticate: Bearer``)
403    ``name_not_owned``
404    ``agent_not_found``, ``version_not_found`` (a name the key may not see is
       answered exactly as one that does not exist)
409    ``version_exists``, ``version_understates_change``
413    ``card_too_large``
502    ``card_fetch_failed`` (retriable)
503    ``database_unavailable`` (retriable, ``Retry-After``)
500    anything else: ``INTERNAL_ERROR`` with an ``incidentId``; the exception's text
       stays in the server log (logged once, traceback scrubbed)
=====  ======================================================================

An exception a handler did not expect is classified by the SDK's one table
(``core.classify``): a database that does not answer (``sqlite3.OperationalError``, a
lost PostgreSQL connection) is ``database_unavailable``; anything unmapped is the 500.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from starlette.responses import JSONResponse

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import make_protocol_error_data
from llamon_agent.core.messages import public_message

__all__ = [
    "REASON_STATUS",
    "RETRY_AFTER_SECONDS",
    "CatalogRefusal",
    "error_response",
    "exception_response",
]

REASON_STATUS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "invalid_catalog_request": 400,
        "invalid_agent_name": 400,
        "invalid_version": 400,
        "invalid_card": 400,
        "invalid_status_change": 400,
        "catalog_key_required": 401,
        "name_not_owned": 403,
        "agent_not_found": 404,
        "version_not_found": 404,
        "version_exists": 409,
        "version_understates_change": 409,
        "card_too_large": 413,
        "card_fetch_failed": 502,
        "database_unavailable": 503,
    }
)
"""The HTTP status of every reason the catalog answers with (anything else: by code)."""

_CODE_STATUS: Final[Mapping[ErrorCode, int]] = MappingProxyType(
    {
        ErrorCode.INVALID_INPUT: 400,
        ErrorCode.AUTH_REQUIRED: 401,
        ErrorCode.NOT_FOUND: 404,
        ErrorCode.RATE_LIMITED: 429,
        ErrorCode.UPSTREAM_UNAVAILABLE: 503,
        ErrorCode.UPSTREAM_TIMEOUT: 504,
    }
)

RETRY_AFTER_SECONDS: Final = 1
"""``Retry-After`` (and ``retryAfterMs``) of a 503: the database may answer again soon."""


class CatalogRefusal(Exception):
    """A request the catalog refuses with a reason of its own (``REASON_STATUS``).

    ``message`` is what the client reads as ``errorMessage`` (scrubbed on the way out);
    ``findings`` are the lint findings of an ``invalid_card``.
    """

    def __init__(
        self, reason: str, message: str, *, findings: Sequence[Mapping[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.findings = tuple(dict(finding) for finding in findings)


def _status(reason: str, code: ErrorCode) -> int:
    return REASON_STATUS.get(reason) or _CODE_STATUS.get(code, 500)


def error_response(refusal: CatalogRefusal) -> JSONResponse:
    """The response for a refusal: its status, ``{"error": ...}`` and the headers it needs
    (``WWW-Authenticate`` on a 401)."""
    spec = reason_spec(refusal.reason)
    code = spec.error_code if spec is not None else ErrorCode.INVALID_INPUT
    retriable = spec.retryable if spec is not None else False
    data = make_protocol_error_data(code, refusal.reason, refusal.message, retriable=retriable)
    body: dict[str, object] = {"error": data.to_wire()}
    if refusal.findings:
        body["findings"] = list(refusal.findings)
    status = _status(refusal.reason, code)
    headers = {"WWW-Authenticate": 'Bearer realm="llamon-catalog"'} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def exception_response(exc: BaseException) -> JSONResponse:
    """The response for an exception a handler did not expect, classified by the one
    table: 503 ``database_unavailable`` with ``Retry-After`` for a database that does not
    answer, 500 with an incident id (its text and traceback only in the log) for anything
    unmapped."""
    if isinstance(exc, CatalogRefusal):
        return error_response(exc)
    found = classify_exception(exc)
    message = public_message(found)
    extras: dict[str, object] = {}
    if message.incident_id is not None:
        extras["incident_id"] = message.incident_id
    status = _status(found.reason, found.code) if found.mapped else 500
    headers: dict[str, str] | None = None
    if status == 503:
        retry_after_ms = found.retry_after_ms or RETRY_AFTER_SECONDS * 1000
        extras["retry_after_ms"] = retry_after_ms
        headers = {"Retry-After": str(max(1, -(-retry_after_ms // 1000)))}
    reason = found.reason if found.mapped else "uncaught_server_error"
    data = make_protocol_error_data(
        found.code, reason, message.text, retriable=found.retriable, **extras
    )
    return JSONResponse({"error": data.to_wire()}, status_code=status, headers=headers)
