"""Fetching an agent's card from its well-known path, with a cache.

``/.well-known/agent-card.json`` is tried first, then the legacy ``/.well-known/agent.json``
(when the first answers 404). A fetched card is kept for the response's
``Cache-Control: max-age`` (``no-store`` / ``no-cache``: not kept), else for
``DEFAULT_CARD_TTL`` seconds, shared by every ``AgentClient`` of the process.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Final

import httpx
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PREV_AGENT_CARD_WELL_KNOWN_PATH

from llamon_agent.client.errors import (
    RemoteAgentError,
    RemoteUnavailableError,
    remote_error_from_exception,
)

__all__ = [
    "CARD_PATHS",
    "DEFAULT_CARD_TTL",
    "clear_card_cache",
    "fetch_card",
]

CARD_PATHS: Final = (AGENT_CARD_WELL_KNOWN_PATH, PREV_AGENT_CARD_WELL_KNOWN_PATH)
"""Where a card is looked for, in order (a2a-sdk's well-known paths, new then legacy)."""
DEFAULT_CARD_TTL: Final = 300.0
"""Seconds a card is kept when its response sets no ``max-age``."""

_MAX_AGE: Final = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?", re.IGNORECASE)
_NO_STORE: Final = re.compile(r"(?:^|,)\s*(no-store|no-cache)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Cached:
    card: AgentCard
    expires: float


_cache: dict[str, _Cached] = {}


def clear_card_cache() -> None:
    """Forget every cached card (the next call fetches again)."""
    _cache.clear()


def _ttl(response: httpx.Response, default: float) -> float:
    header = response.headers.get("cache-control", "")
    if _NO_STORE.search(header):
        return 0.0
    found = _MAX_AGE.search(header)
    return float(found.group(1)) if found else default


async def fetch_card(
    http: httpx.AsyncClient, base_url: str, *, ttl: float = DEFAULT_CARD_TTL
) -> AgentCard:
    """The card of the agent at ``base_url``, from the cache while it is fresh.

    Raises the ``RemoteAgentError`` family when no card can be read (HTTP error,
    connection refused, not an agent card); the message never names the address.
    """
    base = base_url.rstrip("/")
    now = time.monotonic()
    cached = _cache.get(base)
    if cached is not None and cached.expires > now:
        return cached.card
    try:
        response = await http.get(base + CARD_PATHS[0])
        if response.status_code == 404:  # an older server: the legacy path
            response = await http.get(base + CARD_PATHS[1])
        response.raise_for_status()
        card = AgentCard.model_validate(response.json())
    except RemoteAgentError:
        raise
    except ValueError as exc:  # not JSON, or not an agent card (ValidationError)
        raise RemoteUnavailableError(
            "the called agent's card is not a valid agent card",
            reason="a2a_invalid_response",
        ) from exc
    except Exception as exc:
        raise remote_error_from_exception(exc) from exc
    seconds = _ttl(response, ttl)
    if seconds > 0:
        _cache[base] = _Cached(card, now + seconds)
    return card
