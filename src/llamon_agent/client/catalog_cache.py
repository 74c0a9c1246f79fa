"""The last good resolution of each catalog lookup, in memory and on disk.

The catalog must not become a single point of failure: ``CatalogClient.resolve_entry``
keeps every successful resolution here and, when the catalog cannot be reached, answers
from it within a bound of age. What is kept and where:

* One entry per ``(catalog URL, credential, name, version or range)``. The key is a
  SHA-256 of the four (the credential itself only as its own SHA-256), so a file's name
  reveals nothing, and a client with another key never reads a resolution made with this
  one.
* On disk: ``<dir>/<key>.json`` (the directory 0700, each file 0600, written to a
  temporary file then renamed, so a reader never sees half a file). A file holds the
  entry as the catalog sent it and the time it was stored; neither the catalog's address
  nor any credential.
* A file that cannot be read (corrupt, truncated, another program's) is ignored and
  logged once at WARNING; it never fails a call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from llamon_agent.client.catalog_wire import CatalogEntry

__all__ = ["CachedResolution", "ResolutionCache", "cache_key"]

logger = logging.getLogger("llamon_agent.client.catalog")

_FORMAT: Final = 1
"""The version of the file layout; a file of another one is ignored."""


def cache_key(catalog_url: str, credential_hash: str, name: str, wanted: str) -> str:
    """The opaque key (hex SHA-256) of one resolution."""
    parts = [catalog_url.rstrip("/"), credential_hash, name, wanted]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CachedResolution:
    """One kept resolution: the entry and when it was stored (the client's clock)."""

    entry: CatalogEntry
    stored_at: float


class ResolutionCache:
    """Resolutions by key, in memory and (unless ``directory`` is None) on disk."""

    def __init__(self, directory: Path | None, *, clock: Callable[[], float]) -> None:
        self.directory = directory
        self._clock = clock
        self._memory: dict[str, CachedResolution] = {}
        self._reported: set[str] = set()

    def put(self, key: str, entry: CatalogEntry) -> None:
        """Keep ``entry`` as the newest resolution of ``key``. A disk that cannot be
        written is logged at WARNING and the entry is kept in memory only."""
        kept = CachedResolution(entry, self._clock())
        self._memory[key] = kept
        if self.directory is None:
            return
        body = {"format": _FORMAT, "storedAt": kept.stored_at, "entry": entry.to_wire()}
        try:
            _write(self.directory / f"{key}.json", json.dumps(body, separators=(",", ":")))
        except OSError as exc:
            logger.warning(
                "catalog cache: a resolution could not be written to disk (%s); it is kept "
                "in memory only",
                exc.strerror or type(exc).__name__,
            )

    def get(self, key: str, *, label: str = "") -> CachedResolution | None:
        """The newest resolution kept for ``key`` (memory or disk), or None. A file that
        cannot be read is logged once, as the cached resolution of ``label``
        (``name@range``; the file's name is a hash and tells an operator nothing)."""
        found = [
            kept for kept in (self._memory.get(key), self._read(key, label)) if kept is not None
        ]
        return max(found, key=lambda kept: kept.stored_at) if found else None

    def _read(self, key: str, label: str) -> CachedResolution | None:
        if self.directory is None:
            return None
        path = self.directory / f"{key}.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self._report(path, label, type(exc).__name__)
            return None
        try:
            body = json.loads(text)
            if body.get("format") != _FORMAT:
                raise ValueError("unknown format")
            stored_at = float(body["storedAt"])
            entry = CatalogEntry.model_validate(body["entry"])
        except ValidationError:
            self._report(path, label, "not a catalog entry")
            return None
        except (ValueError, TypeError, KeyError, AttributeError):
            self._report(path, label, "not a cache file")
            return None
        return CachedResolution(entry, stored_at)

    def _report(self, path: Path, label: str, why: str) -> None:
        if path.name in self._reported:
            return
        self._reported.add(path.name)
        logger.warning(
            "catalog cache: ignored the unreadable cached resolution of %s (%s)",
            label or "an agent",
            why,
        )


def _write(path: Path, text: str) -> None:
    """``text`` into ``path`` (0600) through a temporary file in its directory (0700)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
