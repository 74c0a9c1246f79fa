"""Load an Agent Card from a file or a URL.

``load_agent_card(source)`` reads a file or fetches a URL (for a base URL,
``/.well-known/agent-card.json`` then the older ``/.well-known/agent.json``) and returns
the JSON object; every failure is a ``CardLoadError`` naming the source.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PREV_AGENT_CARD_WELL_KNOWN_PATH

__all__ = [
    "CardLoadError",
    "load_agent_card",
]


class CardLoadError(ValueError):
    """An agent card could not be read, fetched or parsed; ``source`` says from where."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"cannot load agent card from {source!r}: {reason}")
        self.source = source
        self.reason = reason


def _card_urls(source: str) -> list[str]:
    """The URLs to try: ``source`` itself if it names a ``.json`` file, else well-known paths
    under it and, when it has a path of its own, under its origin."""
    parts = urlsplit(source)
    if parts.path.endswith(".json"):
        return [source]
    bases = [source.rstrip("/")]
    if parts.path.strip("/"):
        bases.append(urlunsplit((parts.scheme, parts.netloc, "", "", "")))
    well_known = (AGENT_CARD_WELL_KNOWN_PATH, PREV_AGENT_CARD_WELL_KNOWN_PATH)
    return list(dict.fromkeys(base + path for base in bases for path in well_known))


def _json_object(text: str, source: str, where: str = "") -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardLoadError(source, f"{where}invalid JSON: {exc}") from exc
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise CardLoadError(source, f"{where}expected a JSON object, got {kind}")
    return value


def _load_file(source: str) -> dict[str, Any]:
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CardLoadError(source, f"cannot read file: {exc}") from exc
    return _json_object(text, source)


def _fetch(source: str, timeout: float) -> dict[str, Any]:
    attempts: list[str] = []
    with httpx.Client(timeout=timeout, follow_redirects=True) as client:
        for url in _card_urls(source):
            try:
                response = client.get(url, headers={"Accept": "application/json"})
            except httpx.HTTPError as exc:
                raise CardLoadError(source, f"GET {url} failed: {exc!r}") from exc
            if response.is_success:
                return _json_object(response.text, source, f"GET {url}: ")
            attempts.append(f"GET {url} -> HTTP {response.status_code}")
    raise CardLoadError(source, "no agent card found (" + "; ".join(attempts) + ")")


def load_agent_card(source: str, *, timeout: float = 5.0) -> dict[str, Any]:
    """The agent card JSON object at ``source``: a file path or an http(s) URL.

    A URL ending in ``.json`` is fetched as is; any other URL is a base under which
    ``/.well-known/agent-card.json`` and then ``/.well-known/agent.json`` are tried (and
    again under the URL's origin if it has a path, such as the card's own ``url``).
    Unreadable files, network failures, HTTP errors and bad JSON raise ``CardLoadError``.
    """
    if urlsplit(source).scheme in ("http", "https"):
        return _fetch(source, timeout)
    return _load_file(source)
