"""Credential providers: what ``AgentClient(auth=...)`` puts on each request.

The card's ``securitySchemes`` say where a credential goes: ``ApiKey`` uses the header
named by the card's apiKey scheme (``X-API-Key`` when the card declares none); ``Bearer``
sends ``Authorization: Bearer <token>`` and can fetch a new token through its ``refresh``
callback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from a2a.types import AgentCard, APIKeySecurityScheme, In

__all__ = ["ApiKey", "Bearer", "Credential", "api_key_header"]

DEFAULT_API_KEY_HEADER = "X-API-Key"


def api_key_header(card: AgentCard) -> str:
    """The header of the card's first apiKey scheme sent in a header, else ``X-API-Key``."""
    for scheme in (card.security_schemes or {}).values():
        root = scheme.root
        if isinstance(root, APIKeySecurityScheme) and root.in_ == In.header:
            return root.name
    return DEFAULT_API_KEY_HEADER


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key, sent in the header the card's apiKey scheme names."""

    key: str = field(repr=False)

    async def headers(self, card: AgentCard) -> dict[str, str]:
        """The headers for one request to the agent of ``card``."""
        return {api_key_header(card): self.key}

    async def refresh(self) -> bool:
        """An API key cannot be refreshed: False."""
        return False


@dataclass(slots=True)
class Bearer:
    """A bearer token; ``refresh`` (an async callback returning a new token) renews it."""

    token: str = field(repr=False)
    refresh_token: Callable[[], Awaitable[str]] | None = field(default=None, repr=False)

    def __init__(self, token: str, *, refresh: Callable[[], Awaitable[str]] | None = None) -> None:
        self.token = token
        self.refresh_token = refresh

    async def headers(self, card: AgentCard) -> dict[str, str]:
        """``Authorization: Bearer <token>``."""
        return {"Authorization": f"Bearer {self.token}"}

    async def refresh(self) -> bool:
        """Fetch a new token through the callback; False when there is no callback."""
        if self.refresh_token is None:
            return False
        self.token = await self.refresh_token()
        return True


Credential = ApiKey | Bearer
"""What ``AgentClient(auth=...)`` accepts."""
