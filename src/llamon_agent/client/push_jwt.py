"""Checking the JWT an A2A server may sign a push notification with.

The JWT travels in ``Authorization: Bearer``; it must verify with the receiver's key (a
key, a JWK, a JWKS, or a JWKS URL; chosen by the JWT's ``kid``) under an allowed
algorithm, carry an ``iat`` no older than ``max_age`` seconds and not in the future (30 s
of clock skew allowed), and a ``request_body_sha256`` claim equal to the SHA-256 (hex) of
the body as sent (or of its compact JSON). Verification uses PyJWT (the ``jwt`` extra),
imported when a verifier is made. ``SignatureRefused.name`` says which answer to give:
``push_signature_required`` (no bearer JWT) or ``push_signature_invalid``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx

from llamon_agent._extras import requires_extra

__all__ = ["DEFAULT_JWT_ALGORITHMS", "JwtVerifier", "SignatureRefused"]

logger = logging.getLogger("llamon_agent.client.push")

DEFAULT_JWT_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
"""Asymmetric algorithms only: a signed notification never verifies with a shared secret
unless you name an HMAC algorithm yourself."""

_JWKS_REFRESH_SECONDS: Final = 60.0
_CLOCK_SKEW_SECONDS: Final = 30.0


class SignatureRefused(Exception):
    """The notification's JWT is missing (``push_signature_required``) or not valid
    (``push_signature_invalid``); ``name`` is that answer's name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class JwtVerifier:
    """Checks ``Authorization: Bearer <JWT>``: signature, ``iat``, ``request_body_sha256``."""

    def __init__(
        self,
        key: Any,
        jwks_url: str | None,
        algorithms: tuple[str, ...] = DEFAULT_JWT_ALGORITHMS,
        *,
        max_age: float = 300.0,
    ) -> None:
        with requires_extra("jwt", "verifying signed push notifications"):
            import jwt  # noqa: F401 - fail at construction, not on the first POST
        if not algorithms:
            raise ValueError("jwt_algorithms must name at least one algorithm")
        if any(name.lower() == "none" for name in algorithms):
            raise ValueError("jwt_algorithms may not name 'none': it would accept unsigned JWTs")
        self._algorithms = algorithms
        self._max_age = max_age
        self._static = _keys(key) if key is not None else {}
        self._jwks_url = jwks_url
        self._fetched: dict[str | None, Any] = {}
        self._fetched_at: float | None = None
        self._fetching = asyncio.Lock()

    async def verify(self, header: str | None, body: bytes, *, now: float) -> None:
        """Return when ``header`` (the ``Authorization`` value) holds a valid JWT for
        ``body`` at time ``now``; else raise ``SignatureRefused``."""
        import jwt

        scheme, _, token = (header or "").strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise SignatureRefused("push_signature_required")
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = await self._key(kid if isinstance(kid, str) else None)
            if key is None:
                raise SignatureRefused("push_signature_invalid")
            claims = jwt.decode(
                token,
                key,
                algorithms=list(self._algorithms),
                options={"require": ["iat"], "verify_iat": False, "verify_aud": False},
            )
        except jwt.PyJWTError:
            raise SignatureRefused("push_signature_invalid") from None
        issued = claims.get("iat")
        if (
            not isinstance(issued, int | float)
            or isinstance(issued, bool)
            or issued > now + _CLOCK_SKEW_SECONDS
            or now - issued > self._max_age
        ):
            raise SignatureRefused("push_signature_invalid")
        expected = claims.get("request_body_sha256")
        if not isinstance(expected, str) or not _body_matches(expected, body):
            raise SignatureRefused("push_signature_invalid")

    async def _key(self, kid: str | None) -> Any:
        found = _pick(self._static, kid)
        if found is not None or self._jwks_url is None:
            return found
        found = _pick(self._fetched, kid)
        if found is not None:
            return found
        async with self._fetching:
            now = time.monotonic()
            if self._fetched_at is None or now - self._fetched_at >= _JWKS_REFRESH_SECONDS:
                self._fetched_at = now
                try:
                    async with httpx.AsyncClient(timeout=5.0) as http:
                        response = await http.get(self._jwks_url, follow_redirects=False)
                        response.raise_for_status()
                        self._fetched = _keys(response.json())
                except Exception as exc:  # no key: the POST is refused, 401
                    logger.warning(
                        "push signing keys could not be read from the JWKS URL: %s",
                        type(exc).__name__,
                    )
        return _pick(self._fetched, kid)


def _keys(key: Any) -> dict[str | None, Any]:
    """A key, a JWK mapping or a JWKS mapping (``{"keys": [...]}``) -> keys by ``kid``."""
    from jwt import PyJWK, PyJWKSet

    if isinstance(key, Mapping) and "keys" in key:
        return {jwk.key_id: jwk for jwk in PyJWKSet.from_dict(dict(key)).keys}
    if isinstance(key, Mapping):
        jwk = PyJWK.from_dict(dict(key))
        return {jwk.key_id: jwk}
    return {None: key}


def _pick(keys: Mapping[str | None, Any], kid: str | None) -> Any:
    if kid is not None and kid in keys:
        return keys[kid]
    if len(keys) == 1:
        ((only_kid, only),) = keys.items()
        if kid is None or only_kid is None:
            return only
    return None


def _body_matches(expected: str, body: bytes) -> bool:
    """The claim is the SHA-256 (hex) of the body as sent, or of its compact JSON."""
    candidates = [hashlib.sha256(body).hexdigest()]
    try:
        compact = json.dumps(json.loads(body), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        pass
    else:
        candidates.append(hashlib.sha256(compact.encode()).hexdigest())
    return any(hmac.compare_digest(expected.lower(), c) for c in candidates)
