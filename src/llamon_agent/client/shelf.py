"""``ArtifactShelf``: where a caller keeps large artifacts for the next agent to fetch.

``chain(...)`` passes an artifact part above its size threshold *by reference*: the bytes
go on the shelf and the next agent receives a ``FilePart`` whose URI points at them. The
shelf is a small Starlette app (or routes to mount in your own app) that the caller runs
where the called agents can reach it::

    shelf = ArtifactShelf()
    app = Starlette(routes=[Mount("/artifacts", app=shelf.app())])
    # once served: shelf.base_url = "http://caller.example:9000/artifacts"

What the next agent sees: ``GET <uri>`` answers the stored bytes with their media type
(``Cache-Control: no-store``); an unknown, expired or removed entry answers 404, the
same as a URI that never existed. Each URI ends in 256 random bits, so it cannot be
guessed. The shelf is bounded: at most ``max_entries`` entries and ``max_bytes`` bytes in
all; an entry lives ``ttl`` seconds at most, and ``chain`` removes its entries as soon as
the step that reads them has answered (and in any case when the chain ends).

``put`` refuses what does not fit: ``ArtifactTooLargeError`` (``INVALID_INPUT``) for an
artifact larger than the whole shelf, ``ShelfFullError`` (``RATE_LIMITED``, retriable)
when the shelf is at its bounds after expired entries are dropped. Neither message nor
any log line names the shelf's address or an entry's key.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import LlamonError

__all__ = [
    "DEFAULT_SHELF_MAX_BYTES",
    "DEFAULT_SHELF_MAX_ENTRIES",
    "DEFAULT_SHELF_TTL",
    "ArtifactShelf",
    "ArtifactTooLargeError",
    "ShelfFullError",
]

DEFAULT_SHELF_MAX_BYTES: Final = 64 * 1024 * 1024
"""Bytes a shelf holds in all (64 MiB), unless told otherwise."""
DEFAULT_SHELF_MAX_ENTRIES: Final = 256
"""Entries a shelf holds at once, unless told otherwise."""
DEFAULT_SHELF_TTL: Final = 300.0
"""Seconds an entry lives at most (five minutes), unless told otherwise."""


def _not_found() -> Response:
    return Response(status_code=404, headers={"Cache-Control": "no-store"})


class ShelfFullError(LlamonError, code=ErrorCode.RATE_LIMITED, retriable=True):
    """The artifact shelf is at its bounds (entries or bytes), after dropping expired
    entries; nothing was stored. ``RATE_LIMITED``, retriable once other chains end."""


class ArtifactTooLargeError(LlamonError, ValueError, code=ErrorCode.INVALID_INPUT):
    """An artifact is larger than the whole shelf (``max_bytes``); nothing was stored.
    ``INVALID_INPUT``, not retriable; also a ``ValueError``."""


@dataclass(frozen=True, slots=True)
class _Entry:
    body: bytes
    media_type: str
    expires: float


class ArtifactShelf:
    """Stored artifacts, each served at an unguessable URL under ``base_url``.

    ``base_url`` is the address the called agents reach the shelf at (the app's own, or
    where it is mounted); set it when the server is up if it is not known before.
    ``clock`` (default ``time.monotonic``) is read for expiry.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        max_bytes: int = DEFAULT_SHELF_MAX_BYTES,
        max_entries: int = DEFAULT_SHELF_MAX_ENTRIES,
        ttl: float = DEFAULT_SHELF_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        """Entries held now (expired ones included until the next ``put`` or read)."""
        return len(self._entries)

    @property
    def size(self) -> int:
        """Bytes held now."""
        return sum(len(entry.body) for entry in self._entries.values())

    def put(self, body: bytes, media_type: str) -> str:
        """Store ``body``; the URL it is served at (``base_url`` + a random key).

        Raises ``ArtifactTooLargeError`` when ``body`` is larger than ``max_bytes``,
        ``ShelfFullError`` when it does not fit beside the entries held, and
        ``RuntimeError`` when ``base_url`` is not set.
        """
        if self.base_url is None:
            raise RuntimeError("set the shelf's base_url (where it is served) before put()")
        if len(body) > self.max_bytes:
            raise ArtifactTooLargeError(
                f"an artifact of {len(body)} bytes is larger than the shelf "
                f"({self.max_bytes} bytes)"
            )
        self._drop_expired()
        if len(self._entries) >= self.max_entries or self.size + len(body) > self.max_bytes:
            raise ShelfFullError(
                f"the artifact shelf is full ({len(self._entries)} of {self.max_entries} "
                f"entries, {self.size} of {self.max_bytes} bytes); "
                f"an artifact of {len(body)} bytes does not fit"
            )
        key = secrets.token_urlsafe(32)
        self._entries[key] = _Entry(body, media_type, self._clock() + self.ttl)
        return f"{self.base_url.rstrip('/')}/{key}"

    def remove(self, url: str) -> None:
        """Forget the entry served at ``url`` (no error if it is already gone)."""
        self._entries.pop(url.rsplit("/", 1)[-1], None)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def _drop_expired(self) -> None:
        now = self._clock()
        for key in [k for k, entry in self._entries.items() if entry.expires <= now]:
            del self._entries[key]

    async def _serve(self, request: Request) -> Response:
        key = request.path_params["key"]
        entry = self._entries.get(key)
        if entry is None:
            return _not_found()
        if entry.expires <= self._clock():
            del self._entries[key]
            return _not_found()
        return Response(
            entry.body, media_type=entry.media_type, headers={"Cache-Control": "no-store"}
        )

    @property
    def routes(self) -> list[Route]:
        """The shelf's one route (``GET /{key}``), to add to your own app's routes."""
        return [Route("/{key}", self._serve, methods=["GET"])]

    def app(self) -> Starlette:
        """A Starlette app serving the shelf at its root (run it, or ``Mount`` it)."""
        return Starlette(routes=self.routes)
