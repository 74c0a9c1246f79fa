"""Console session cookies: a signed, expiring token naming no one and holding no credential.

``SessionKeys(secret).issue(caller, now)`` is the cookie value for ``caller``: an expiry
time, a keyed digest of the caller's name and an HMAC-SHA256 signature of both.
``caller_of(value, candidates, now)`` is the candidate the value was issued to, or
``None`` for a value that is expired, altered, signed with another key, or issued to a
caller no longer among ``candidates``. Comparisons run in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Final

__all__ = ["COOKIE_NAME", "SessionKeys"]

COOKIE_NAME: Final = "llamon_console"
_VERSION: Final = "v1"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class SessionKeys:
    """Issues and checks session cookie values with ``secret`` (random when ``None``)."""

    def __init__(self, secret: bytes | None = None) -> None:
        seed = secret or secrets.token_bytes(32)
        self._key = hashlib.sha256(b"llamon-console:" + seed).digest()

    def _tag(self, caller: str) -> str:
        return _b64(hmac.new(self._key, b"caller:" + caller.encode(), hashlib.sha256).digest()[:16])

    def _signature(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())

    def issue(self, caller: str, now: float, lifetime: float) -> str:
        """The cookie value for ``caller``, valid until ``now + lifetime``."""
        payload = f"{_VERSION}.{int(now + lifetime)}.{self._tag(caller)}"
        return f"{payload}.{self._signature(payload)}"

    def caller_of(self, value: str | None, candidates: Iterable[str], now: float) -> str | None:
        """The candidate ``value`` was issued to, if it is genuine and unexpired."""
        if not value or len(value) > 256:
            return None
        payload, _, signature = value.rpartition(".")
        version, _, rest = payload.partition(".")
        expiry, _, tag = rest.partition(".")
        if version != _VERSION or not expiry.isdigit() or not tag:
            return None
        if not hmac.compare_digest(signature.encode(), self._signature(payload).encode()):
            return None
        if int(expiry) <= now:
            return None
        found: str | None = None
        for candidate in candidates:
            if hmac.compare_digest(tag.encode(), self._tag(candidate).encode()):
                found = candidate
        return found
