"""Who is asking the catalog, and what they may see and publish.

What the caller sees:

* ``new_key()`` makes an API key: ``lcat_`` and 43 URL-safe characters (256 random bits).
  The catalog stores only ``hash_key(key)`` (SHA-256, hex), so a key is shown once, when
  it is made, and never again; a lookup is by hash, so no key is ever compared as text.
* A request carries its key as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``
  (``key_from_headers``). ``authenticate`` answers the ``Caller`` of a known key, or
  ``None`` for no key or one the catalog does not know.
* ``Caller``: the key's ``role``, ``label`` and name ``patterns`` (globs where ``*`` is
  any run of characters, ``/`` included, and ``?`` one character; nothing else is
  special). An ``admin`` sees and changes every name. A ``publisher`` sees the names its
  patterns match and may publish them unless another publisher owns them (the first
  publisher of a name owns it). A ``caller`` sees and resolves the names its patterns
  match and publishes nothing.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from llamon_agent.catalog.records import CatalogKey, Role
from llamon_agent.catalog.store import CatalogStore

__all__ = [
    "ANONYMOUS",
    "KEY_PREFIX",
    "Caller",
    "authenticate",
    "hash_key",
    "key_from_headers",
    "new_key",
    "pattern_matches",
    "pattern_problem",
]

KEY_PREFIX: Final = "lcat_"
_PATTERN_CHARS: Final = re.compile(r"^[a-z0-9*?/-]+$")


def new_key() -> str:
    """A new API key: ``lcat_`` + ``secrets.token_urlsafe(32)``."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The stored form of ``key``: its SHA-256 as 64 hex digits."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    body = "".join(
        ".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern
    )
    return re.compile(body, re.DOTALL)


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether the glob ``pattern`` (``*`` and ``?`` only) matches the whole ``name``."""
    return _compiled(pattern).fullmatch(name) is not None


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` can match no catalog name (``None`` if it is usable): names are
    lowercase, so a pattern is lowercase letters, digits, ``-``, ``/``, ``*`` and ``?``."""
    if not pattern:
        return "a name pattern is empty"
    if not _PATTERN_CHARS.fullmatch(pattern):
        return (
            f"{pattern!r} is not a name pattern: use lowercase letters, digits, '-', '/' "
            "and the wildcards '*' and '?'"
        )
    return None


@dataclass(frozen=True, slots=True)
class Caller:
    """The key behind a request (see the module docstring)."""

    role: Role
    label: str
    patterns: tuple[str, ...] = ()

    @property
    def is_admin(self) -> bool:
        """Whether the key is an admin's."""
        return self.role == "admin"

    @property
    def visible(self) -> tuple[str, ...] | None:
        """The patterns of the names this caller sees; ``None``: every name."""
        if self.is_admin or "*" in self.patterns:
            return None
        return self.patterns

    def may_see(self, name: str) -> bool:
        """Whether this caller may see (and resolve) ``name``."""
        visible = self.visible
        return visible is None or any(pattern_matches(p, name) for p in visible)

    def may_publish(self, name: str, owner: str | None) -> bool:
        """Whether this caller may publish ``name`` (or change its versions' status), which
        ``owner`` owns (``None``: nobody yet)."""
        if self.is_admin:
            return True
        if self.role != "publisher" or not any(pattern_matches(p, name) for p in self.patterns):
            return False
        return owner is None or owner == self.label

    @classmethod
    def from_key(cls, key: CatalogKey) -> Caller:
        """The caller of a stored key."""
        return cls(key.role, key.label, tuple(key.patterns))


ANONYMOUS: Final = Caller("caller", "anonymous", ("*",))
"""Who a keyless read is, on a catalog opened for reading (``open_read=True``)."""

_BEARER: Final = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.IGNORECASE)


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: ``Authorization: Bearer <key>``, else ``X-API-Key``;
    ``None`` when it carries none."""
    authorization = headers.get("authorization")
    if authorization is not None:
        match = _BEARER.match(authorization)
        if match is not None:
            return match.group(1)
    key = headers.get("x-api-key")
    if key is not None and key.strip():
        return key.strip()
    return None


async def authenticate(store: CatalogStore, key: str | None) -> Caller | None:
    """The ``Caller`` of ``key``, or ``None`` for no key or an unknown one."""
    if not key:
        return None
    stored = await store.get_key(hash_key(key))
    return Caller.from_key(stored) if stored is not None else None
