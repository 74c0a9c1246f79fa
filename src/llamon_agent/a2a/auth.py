"""Optional caller authentication: an API key header or a bearer token.

What the card declares is what the server enforces. ``AuthConfig.from_card(card, *secrets)``
derives the scheme and header from the card's ``securitySchemes``/``security`` (via
``auth_spec_from_card``); it returns ``None`` only when the card requires no auth and
raises ``ValueError`` when the card requires auth but no secret is given, so a server
never silently runs open. ``AuthConfig.api_key(...)`` / ``AuthConfig.bearer(...)`` build a
config by hand.

A call without valid credentials gets HTTP 401 and a JSON-RPC error (code -32040, ``id``
null) whose ``error.data`` is ``ProtocolErrorData`` with ``errorCode: AUTH_REQUIRED`` and
``errorReason`` ``credentials_required`` (nothing presented) or ``invalid_credentials``
-- never a task. Bearer 401s carry ``WWW-Authenticate: Bearer`` (plus
``error="invalid_token"`` when a token was presented). The agent card paths stay public so
callers can discover how to authenticate, and so do the ``/healthz`` and ``/readyz`` probes
(they reveal nothing but up/ready); every other HTTP or WebSocket request is checked.
Credentials are compared in constant time and never logged or echoed back: neither the
presented value nor the accepted secrets appear in a log line, a response or ``repr``.

Who is calling: secrets given positionally all belong to one caller (several of them
let a key be rotated); ``principals={"billing": key1, "audit": [key2, key3]}`` names
several callers, each with its own secrets. An accepted request carries its caller in
Starlette's ``scope["user"]`` (``Caller``: ``display_name`` is the caller's name, empty
for the positional secrets), so a2a-sdk's ``ServerCallContext.user`` knows it and tasks
belong to the caller that created them (``llamon_agent.a2a.ownership``).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from a2a.types import AgentCard
from starlette.authentication import AuthCredentials, BaseUser
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from llamon_agent.a2a.card import auth_spec_from_card
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import make_protocol_error_data

__all__ = ["UNAUTHENTICATED_JSONRPC_CODE", "AuthConfig", "AuthMiddleware", "Caller"]

logger = logging.getLogger("llamon_agent.a2a")

UNAUTHENTICATED_JSONRPC_CODE: Final = -32040
"""The JSON-RPC code of an unauthenticated call (server-defined range; data says AUTH_REQUIRED)."""

PUBLIC_PATHS: Final = frozenset(
    {"/.well-known/agent-card.json", "/.well-known/agent.json", "/healthz", "/readyz"}
)
"""Paths served without credentials: the card (how to authenticate) and the probes."""

_DEFAULT_HEADERS: Final = {"api_key": "X-API-Key", "bearer": "Authorization"}
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_POLICY_VIOLATION: Final = 1008
"""WebSocket close code for a connection refused for want of credentials."""


@dataclass(frozen=True)
class AuthConfig:
    """Which credentials the server accepts.

    ``scheme="api_key"`` reads ``header`` (default ``X-API-Key``); ``scheme="bearer"``
    reads ``Authorization: Bearer <token>`` (its header must be ``Authorization``).
    ``secrets`` are the accepted values: any iterable of strings except a bare string;
    surrounding whitespace is stripped (HTTP header values cannot carry it) and at least
    one non-empty secret is required. Invalid arguments raise ``ValueError``/``TypeError``
    when the config is built, not when the first request arrives.

    ``secrets`` belong to one caller (the default one); ``principals`` maps the names of
    further callers to their secrets (a string or a collection of strings), e.g.
    ``{"billing": key1, "audit": [key2, key3]}``. Tasks belong to the caller that
    created them; a secret given to two callers raises ``ValueError``. A caller's name is
    never shown to anyone (tasks store a digest of it).
    """

    scheme: Literal["api_key", "bearer"]
    secrets: frozenset[str] = field(repr=False)
    header: str = ""
    """Empty means the scheme's default: ``X-API-Key`` or ``Authorization``."""
    principals: Mapping[str, str | Iterable[str]] = field(
        default_factory=dict, repr=False, compare=False
    )
    """Caller name -> that caller's secrets; the positional ``secrets`` are the default caller's."""
    _by_secret: tuple[tuple[bytes, str], ...] = field(
        default=(), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.scheme not in _DEFAULT_HEADERS:
            raise ValueError(
                f"AuthConfig scheme must be 'api_key' or 'bearer', not {self.scheme!r}"
            )
        named = _principals(self.principals)
        default = _non_empty(self.secrets, required=not named)
        by_secret: dict[str, str] = dict.fromkeys(default, "")
        for name, secrets in named.items():
            for secret in secrets:
                if secret in by_secret:
                    other = by_secret[secret] or "the default caller"
                    raise ValueError(
                        f"AuthConfig: caller {name!r} shares a secret with {other!r}; "
                        "each secret must belong to one caller"
                    )
                by_secret[secret] = name
        object.__setattr__(self, "secrets", frozenset(by_secret))
        object.__setattr__(self, "principals", named)
        pairs = tuple((secret.encode(), name) for secret, name in by_secret.items())
        object.__setattr__(self, "_by_secret", pairs)
        header = self.header.strip() or _DEFAULT_HEADERS[self.scheme]
        if not _HEADER_NAME.fullmatch(header):
            raise ValueError(f"AuthConfig header {header!r} is not a valid HTTP header name")
        if self.scheme == "bearer" and header.lower() != "authorization":
            raise ValueError("a bearer token is read from the 'Authorization' header only")
        object.__setattr__(self, "header", header)

    @classmethod
    def api_key(
        cls,
        *keys: str,
        header: str = "X-API-Key",
        principals: Mapping[str, str | Iterable[str]] | None = None,
    ) -> AuthConfig:
        """Accept any of ``keys`` (the default caller) or of ``principals``' keys in
        ``header``."""
        return cls("api_key", frozenset(keys), header, principals or {})

    @classmethod
    def bearer(
        cls, *tokens: str, principals: Mapping[str, str | Iterable[str]] | None = None
    ) -> AuthConfig:
        """Accept any of ``tokens`` (the default caller) or of ``principals``' tokens as
        ``Authorization: Bearer <token>``."""
        return cls("bearer", frozenset(tokens), "Authorization", principals or {})

    @classmethod
    def from_card(
        cls,
        card: AgentCard | Mapping[str, Any],
        *secrets: str,
        principals: Mapping[str, str | Iterable[str]] | None = None,
    ) -> AuthConfig | None:
        """Enforce what ``card`` declares, accepting any of ``secrets`` (the default
        caller) or of ``principals``' secrets (named callers).

        The scheme and header come from ``auth_spec_from_card(card)``. Returns ``None`` when
        the card requires no auth (secrets given anyway are ignored, with a warning that
        names no secret). Raises ``ValueError`` when the card requires auth but no
        non-empty secret is given, or when its requirement is not a header API key or
        bearer scheme (see ``auth_spec_from_card``).
        """
        spec = auth_spec_from_card(card)
        if spec is None:
            if secrets or principals:
                logger.warning(
                    "the agent card declares no auth; %d secret(s) given to "
                    "AuthConfig.from_card are ignored and the server accepts every caller",
                    len(secrets) + len(principals or {}),
                )
            return None
        if not principals and not any(isinstance(s, str) and s.strip() for s in secrets):
            what = "an API key" if spec.kind == "api_key" else "a bearer token"
            raise ValueError(
                f"the agent card requires {what} (scheme {spec.scheme_name!r}, header "
                f"{spec.header!r}) but no secret was given; refusing to serve without auth"
            )
        return cls(spec.kind, frozenset(secrets), spec.header, principals or {})

    def credential(self, request: HTTPConnection) -> str | None:
        """The credential the request presents, or None."""
        value = request.headers.get(self.header)
        if value is None:
            return None
        if self.scheme == "bearer":
            scheme, _, token = value.strip().partition(" ")
            return token.strip() if scheme.lower() == "bearer" and token.strip() else None
        return value.strip() or None

    def accepts(self, credential: str | None) -> bool:
        """True if ``credential`` matches one of the secrets (constant time)."""
        return self.principal(credential) is not None

    def principal(self, credential: str | None) -> str | None:
        """The name of the caller ``credential`` belongs to (``""`` for the default
        caller), or None when it matches no secret. Every secret is compared, in constant
        time."""
        if credential is None:
            return None
        given = credential.encode()
        found: str | None = None
        for secret, name in self._by_secret:
            if hmac.compare_digest(given, secret):
                found = name
        return found


def _principals(value: Mapping[str, str | Iterable[str]]) -> dict[str, frozenset[str]]:
    if not isinstance(value, Mapping):
        raise TypeError("AuthConfig principals must map caller names to their secrets")
    named: dict[str, frozenset[str]] = {}
    for name, secrets in value.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError("AuthConfig principals: every caller needs a non-empty name")
        one = frozenset({secrets}) if isinstance(secrets, str) else secrets
        named[name.strip()] = _non_empty(one, what=f"caller {name.strip()!r}")
    return named


def _non_empty(
    values: Iterable[str], *, required: bool = True, what: str = "AuthConfig"
) -> frozenset[str]:
    if isinstance(values, str | bytes):
        raise TypeError("AuthConfig secrets must be a collection of strings, not one string")
    secrets: set[str] = set()
    for value in values:
        if not isinstance(value, str):
            raise TypeError(f"AuthConfig secrets must be strings, got {type(value).__name__}")
        if value.strip():
            secrets.add(value.strip())
    if not secrets and required:
        raise ValueError(f"{what} needs at least one non-empty key or token")
    return frozenset(secrets)


class Caller(BaseUser):
    """The authenticated caller of a request, in Starlette's ``scope["user"]``.

    ``display_name`` is the caller's name from ``AuthConfig.principals`` (``""`` for the
    default caller); a2a-sdk passes it on as ``ServerCallContext.user.user_name``.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        """Always True: only accepted credentials make a ``Caller``."""
        return True

    @property
    def display_name(self) -> str:
        """The caller's name (``""`` for the default caller)."""
        return self._name

    @property
    def identity(self) -> str:
        """The caller's name, as ``display_name``."""
        return self._name

    def __repr__(self) -> str:
        return "Caller(<hidden>)"


def unauthenticated_response(config: AuthConfig, presented: bool) -> JSONResponse:
    """HTTP 401 with a JSON-RPC error carrying ProtocolErrorData (AUTH_REQUIRED).

    Nothing of the request is echoed back: the body depends only on ``config.scheme``,
    ``config.header`` and whether a credential was presented.
    """
    reason = "invalid_credentials" if presented else "credentials_required"
    what = "an API key" if config.scheme == "api_key" else "a bearer token"
    message = (
        f"The {what.partition(' ')[2]} is not valid."
        if presented
        else f"This agent requires {what} in the {config.header!r} header."
    )
    data = make_protocol_error_data(ErrorCode.AUTH_REQUIRED, reason, message)
    headers: dict[str, str] = {}
    if config.scheme == "bearer":
        headers["WWW-Authenticate"] = 'Bearer error="invalid_token"' if presented else "Bearer"
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": UNAUTHENTICATED_JSONRPC_CODE,
            "message": data.error_message,
            "data": data.to_wire(),
        },
    }
    return JSONResponse(body, status_code=401, headers=headers)


class AuthMiddleware:
    """ASGI middleware enforcing ``config`` on every path except ``PUBLIC_PATHS`` (the card
    and the health probes) and the paths under ``own_auth_prefixes``.

    The one rule for what it does not check: a path under a prefix in
    ``own_auth_prefixes`` (``/console`` when the web console is on) is passed on
    unchecked, because the routes there check the same credentials themselves (a
    session cookie or this header; ``llamon_agent.a2a.console.access``).
    HTTP requests without valid credentials get ``unauthenticated_response``; WebSocket
    connections are closed with code 1008 before they are accepted. Lifespan events pass.
    """

    def __init__(
        self, app: ASGIApp, config: AuthConfig, own_auth_prefixes: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self.config = config
        self.own_auth_prefixes = own_auth_prefixes

    def _unchecked(self, path: str) -> bool:
        if path in PUBLIC_PATHS:
            return True
        return any(path == p or path.startswith(p + "/") for p in self.own_auth_prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authenticated requests on; refuse the others."""
        if scope["type"] not in ("http", "websocket") or self._unchecked(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        credential = self.config.credential(HTTPConnection(scope))
        name = self.config.principal(credential)
        if name is not None:
            scope["user"] = Caller(name)
            scope["auth"] = AuthCredentials(["authenticated"])
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION, "reason": ""})
            return
        response = unauthenticated_response(self.config, credential is not None)
        await response(scope, receive, send)
