"""Where the Agent Catalog keeps its versions and keys: the ``CatalogStore`` contract.

What the caller sees:

* ``await open_catalog_store(database_url=None, home=None)`` opens the embedded SQLite file
  ``catalog.db`` under ``home`` (default ``LLAMON_HOME``, else ``~/.llamon``), or
  PostgreSQL for a ``postgresql://`` URL (the tables ``llamon_catalog_*`` next to the task
  store's). The schema is versioned (SQLite ``PRAGMA user_version``, a row of
  ``llamon_catalog_schema`` on PostgreSQL): a database written by a newer llamon is refused
  with a one-line error naming both versions; an older one is brought up to date.
* Every method below is the same on both engines (same SQL, same answers). A database
  that does not answer raises what the driver raises (``sqlite3.OperationalError``,
  ``sqlalchemy.exc.DBAPIError``); the service classifies it (``database_unavailable``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from llamon_agent.catalog.records import (
    AgentVersion,
    CatalogKey,
    CatalogPage,
    CatalogQuery,
    Health,
    Status,
)

__all__ = ["CatalogStore", "NameOwned", "VersionTaken", "open_catalog_store"]


class VersionTaken(Exception):
    """``add_version``: that ``(name, version)`` is already stored (any status)."""


class NameOwned(Exception):
    """``add_version(..., owned_by=label)``: the agent belongs to another publisher
    (``owner``), perhaps one that published it first a moment ago; nothing was stored."""

    def __init__(self, name: str, owner: str) -> None:
        super().__init__(f"{name!r} is owned by another publisher")
        self.name = name
        self.owner = owner


class CatalogStore(Protocol):
    """The catalog's storage (SQLite or PostgreSQL); see the module docstring."""

    async def owner_of(self, name: str) -> str | None:
        """The label of the publisher that first published ``name``, or ``None``."""
        ...

    async def add_version(
        self, version: AgentVersion, *, owned_by: str | None = None
    ) -> AgentVersion:
        """Store a new version (and the agent, owned by ``version.owner``, if new), index its
        card's skill terms, and recompute which version is the agent's latest; returns it as
        stored (``is_latest`` set). ``VersionTaken`` if that version exists. With
        ``owned_by``, ``NameOwned`` (nothing stored) unless the agent is new or owned by
        that label, checked in the same transaction: of two publishers racing for a new
        name, exactly one gets it."""
        ...

    async def get_version(self, name: str, version: str) -> AgentVersion | None:
        """One version, whatever its status, or ``None``."""
        ...

    async def versions_of(self, name: str) -> list[AgentVersion]:
        """Every version of ``name`` (deleted ones included), newest (SemVer) first."""
        ...

    async def set_status(self, name: str, version: str, status: Status) -> AgentVersion | None:
        """Change one version's status and recompute the latest; ``None`` if absent."""
        ...

    async def search(self, query: CatalogQuery) -> CatalogPage:
        """One page of the versions ``query`` selects (see ``CatalogQuery``), ordered by name
        then newest version first; ``ValueError`` naming the cursor for a cursor this store
        did not return."""
        ...

    async def due_for_probe(self, now: float, limit: int) -> list[AgentVersion]:
        """Up to ``limit`` active versions whose ``health.next_check`` is ``None`` or
        ``<= now``, the most overdue first."""
        ...

    async def record_health(self, name: str, version: str, health: Health) -> None:
        """Store what a probe found (a version deleted meanwhile is left alone)."""
        ...

    async def add_key(self, key: CatalogKey) -> None:
        """Store a key (its hash); replaces a key with the same hash."""
        ...

    async def get_key(self, key_hash: str) -> CatalogKey | None:
        """The key with that hash, or ``None``."""
        ...

    async def list_keys(self) -> list[CatalogKey]:
        """Every key, oldest first."""
        ...

    async def delete_keys(self, label: str) -> int:
        """Remove every key with ``label``; returns how many."""
        ...

    async def close(self) -> None:
        """Release the database (safe to call twice)."""
        ...


async def open_catalog_store(
    database_url: str | None = None, *, home: Path | None = None
) -> CatalogStore:
    """The catalog's store: SQLite under ``home`` by default, PostgreSQL for a
    ``postgresql://`` (or ``postgres://``) ``database_url``; ``ValueError`` naming any other
    scheme."""
    if database_url is None or database_url.startswith("sqlite"):
        from llamon_agent.catalog.store_sqlite import open_sqlite_catalog

        return await open_sqlite_catalog(database_url, home=home)
    if database_url.startswith(("postgresql", "postgres:")):
        from llamon_agent.catalog.store_postgres import open_postgres_catalog

        return await open_postgres_catalog(database_url)
    scheme = database_url.split(":", 1)[0]
    raise ValueError(
        f"--database-url: the catalog stores in SQLite or PostgreSQL, not {scheme!r} "
        "(postgresql://user@host/db, or leave it out for SQLite under LLAMON_HOME)"
    )
