"""Optional caller authentication: an API key header or a bearer token.

What the card declares is what the server enforces. A call without valid credentials
gets HTTP 401 and a JSON-RPC error (code -32040) whose ``error.data`` is
``ProtocolErrorData`` with ``errorCode: AUTH_REQUIRED`` -- never a task. The agent card
paths stay public so callers can discover how to authenticate. Credentials are compared
in constant time and never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import make_protocol_error_data

__all__ = ["UNAUTHENTICATED_JSONRPC_CODE", "AuthConfig", "AuthMiddleware"]

UNAUTHENTICATED_JSONRPC_CODE: Final = -32040
"""The JSON-RPC code of an unauthenticated call (server-defined range; data says AUTH_REQUIRED)."""

PUBLIC_PATHS: Final = frozenset(
    {"/.well-known/agent-card.json", "/.well-known/agent.json", "/healthz"}
)


@dataclass(frozen=True)
class AuthConfig:
    """Which credentials the server accepts.

    ``scheme="api_key"`` reads ``header`` (default ``X-API-Key``); ``scheme="bearer"``
    reads ``Authorization: Bearer <token>``. ``secrets`` are the accepted values.
    """

    scheme: Literal["api_key", "bearer"]
    secrets: frozenset[str] = field(repr=False)
    header: str = "X-API-Key"

    @classmethod
    def api_key(cls, *keys: str, header: str = "X-API-Key") -> AuthConfig:
        """Accept any of ``keys`` in ``header``."""
        return cls("api_key", _non_empty(keys), header)

    @classmethod
    def bearer(cls, *tokens: str) -> AuthConfig:
        """Accept any of ``tokens`` as ``Authorization: Bearer <token>``."""
        return cls("bearer", _non_empty(tokens), "Authorization")

    def credential(self, request: Request) -> str | None:
        """The credential the request presents, or None."""
        value = request.headers.get(self.header)
        if value is None:
            return None
        if self.scheme == "bearer":
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
        return value.strip() or None

    def accepts(self, credential: str | None) -> bool:
        """True if ``credential`` matches one of the secrets (constant time)."""
        if credential is None:
            return False
        given = credential.encode()
        return any(hmac.compare_digest(given, secret.encode()) for secret in self.secrets)


def _non_empty(values: Iterable[str]) -> frozenset[str]:
    secrets = frozenset(v for v in values if v)
    if not secrets:
        raise ValueError("AuthConfig needs at least one non-empty key or token")
    return secrets


def unauthenticated_response(config: AuthConfig, presented: bool) -> JSONResponse:
    """HTTP 401 with a JSON-RPC error carrying ProtocolErrorData (AUTH_REQUIRED)."""
    reason = "invalid_credentials" if presented else "credentials_required"
    what = "API key" if config.scheme == "api_key" else "bearer token"
    message = (
        f"The {what} is not valid."
        if presented
        else f"This agent requires a {what} in the {config.header!r} header."
    )
    data = make_protocol_error_data(ErrorCode.AUTH_REQUIRED, reason, message)
    headers = {"WWW-Authenticate": "Bearer"} if config.scheme == "bearer" else {}
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": UNAUTHENTICATED_JSONRPC_CODE, "message": message, "data": data.to_wire()},
    }
    return JSONResponse(body, status_code=401, headers=headers)


class AuthMiddleware:
    """ASGI middleware enforcing ``config`` on every path except the public card paths."""

    def __init__(self, app: ASGIApp, config: AuthConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authenticated HTTP requests on; answer 401 otherwise."""
        if scope["type"] != "http" or scope.get("path") in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        credential = self.config.credential(request)
        if self.config.accepts(credential):
            await self.app(scope, receive, send)
            return
        response: Response = unauthenticated_response(self.config, credential is not None)
        await response(scope, receive, send)
