"""The catalog in one SQLite file (the embedded default): ``<home>/catalog.db``.

What the caller sees:

* ``await open_sqlite_catalog(None, home=...)`` opens (creating if needed)
  ``<home>/catalog.db`` (``home`` defaults to ``LLAMON_HOME``, else ``~/.llamon``);
  ``open_sqlite_catalog("sqlite:///path/to/file.db")`` opens that file instead. Writes are
  committed together in batches, on the event loop while the file is free, else on a
  writer thread; reads run on a reader thread (``a2a.stores.sqlite_db.SQLiteDatabase``).
  Nothing waits for a lock on the event loop.
* The schema version is ``PRAGMA user_version`` (``CATALOG_SQLITE_SCHEMA_VERSION``): a
  file written by a newer llamon is refused with ``ValueError``, one line naming the file
  and both versions; an older file is brought up to date.
* Every method answers as ``CatalogStore`` says (the SQL is ``catalog.store_sql``'s, the
  same as PostgreSQL's); ``close()`` commits queued writes and is safe to call twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from llamon_agent.a2a.stores.sqlite_db import SQLiteDatabase, rollback
from llamon_agent.catalog import store_sql as sql
from llamon_agent.catalog.records import (
    AgentVersion,
    CatalogKey,
    CatalogPage,
    CatalogQuery,
    Health,
    Status,
)
from llamon_agent.catalog.store import CatalogStore, NameOwned, VersionTaken
from llamon_agent.core.settings import llamon_home

__all__ = [
    "CATALOG_SQLITE_FILE",
    "CATALOG_SQLITE_SCHEMA_VERSION",
    "SQLiteCatalogStore",
    "catalog_path",
    "open_sqlite_catalog",
]

CATALOG_SQLITE_SCHEMA_VERSION: Final = sql.CATALOG_SCHEMA_VERSION
"""``PRAGMA user_version`` of a catalog file this module wrote (1: the first tables)."""

CATALOG_SQLITE_FILE: Final = "catalog.db"


def catalog_path(database_url: str | None, home: Path | None) -> Path:
    """The file a ``sqlite:///path`` URL names, or ``catalog.db`` under ``home``."""
    if database_url is None or database_url in ("sqlite:", "sqlite://", "sqlite:///"):
        directory = llamon_home() if home is None else home
        directory.mkdir(parents=True, exist_ok=True)
        return directory / CATALOG_SQLITE_FILE
    prefix = "sqlite:///"
    if not database_url.startswith(prefix) or database_url[len(prefix) :] == ":memory:":
        raise ValueError(
            f"the catalog's SQLite URL must be sqlite:///path/to/file.db, got {database_url!r}"
        )
    path = Path(database_url[len(prefix) :]).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _prepare(connection: sqlite3.Connection, path: Path) -> None:
    """Check the schema version and create the tables, in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = connection.execute("PRAGMA user_version").fetchone()[0]
        if found > CATALOG_SQLITE_SCHEMA_VERSION:
            raise ValueError(sql.newer_schema_message(str(path), found))
        for statement in sql.schema("sqlite"):
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {CATALOG_SQLITE_SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        rollback(connection)
        raise


async def open_sqlite_catalog(
    database_url: str | None = None, *, home: Path | None = None
) -> CatalogStore:
    """The catalog store in ``catalog.db`` under ``home`` (or the file of a
    ``sqlite:///path`` URL). ``ValueError`` for a file written by a newer llamon or a URL
    that names no file; ``sqlite3.Error`` naming the file if it is not a database."""
    path = catalog_path(database_url, home)
    return SQLiteCatalogStore(await SQLiteDatabase.open(path, prepare=_prepare))


def _add_version(
    version: AgentVersion, owned_by: str | None
) -> Callable[[sqlite3.Connection], Any]:
    """The writer job of ``add_version``: agent, ownership check, version, terms, latest."""
    params = sql.version_params(version)
    terms = sql.term_params(version)
    key = {"name": version.name, "version": version.version}

    def run(connection: sqlite3.Connection) -> Any:
        agent = {"name": version.name, "owner": version.owner, "created_at": version.published_at}
        connection.execute(sql.INSERT_AGENT, agent)
        if owned_by is not None:
            (owner,) = connection.execute(sql.SELECT_OWNER, key).fetchone()
            if owner != owned_by:
                raise NameOwned(version.name, owner)
        if connection.execute(sql.INSERT_VERSION, params).rowcount == 0:
            raise VersionTaken(f"{version.name} {version.version} is already published")
        connection.executemany(sql.ADD_TERM, terms)
        connection.execute(sql.RECOMPUTE_LATEST, key)
        return connection.execute(sql.SELECT_VERSION, key).fetchone()

    return run


class SQLiteCatalogStore:
    """``CatalogStore`` on one ``SQLiteDatabase`` (see the module docstring)."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self.database = database

    async def owner_of(self, name: str) -> str | None:
        """The label of the publisher that first published ``name``, or ``None``."""
        params = {"name": name}
        row = await self.database.read(lambda c: c.execute(sql.SELECT_OWNER, params).fetchone())
        return None if row is None else str(row[0])

    async def add_version(
        self, version: AgentVersion, *, owned_by: str | None = None
    ) -> AgentVersion:
        """Store ``version`` (see ``CatalogStore.add_version``); returns once committed."""
        row = await self.database.write_returning(_add_version(version, owned_by))
        return sql.version_of(row)

    async def get_version(self, name: str, version: str) -> AgentVersion | None:
        """One version, whatever its status, or ``None``."""
        params = {"name": name, "version": version}
        row = await self.database.read(lambda c: c.execute(sql.SELECT_VERSION, params).fetchone())
        return None if row is None else sql.version_of(row)

    async def versions_of(self, name: str) -> list[AgentVersion]:
        """Every version of ``name`` (deleted ones included), newest first."""
        params = {"name": name}
        rows = await self.database.read(
            lambda c: c.execute(sql.SELECT_VERSIONS_OF, params).fetchall()
        )
        return [sql.version_of(row) for row in rows]

    async def set_status(self, name: str, version: str, status: Status) -> AgentVersion | None:
        """Change one version's status and recompute the latest; ``None`` if absent."""
        key = {"name": name, "version": version}

        def run(connection: sqlite3.Connection) -> Any:
            changed = connection.execute(sql.SET_STATUS, {**key, "status": status}).rowcount
            if changed == 0:
                return None
            connection.execute(sql.RECOMPUTE_LATEST, key)
            return connection.execute(sql.SELECT_VERSION, key).fetchone()

        row = await self.database.write_returning(run)
        return None if row is None else sql.version_of(row)

    async def search(self, query: CatalogQuery) -> CatalogPage:
        """One page of ``query`` (see ``CatalogStore.search``)."""
        statement, params = sql.search_statement(query)
        rows = await self.database.read(lambda c: c.execute(statement, params).fetchall())
        return sql.page_of(rows, query)

    async def due_for_probe(self, now: float, limit: int) -> list[AgentVersion]:
        """Up to ``limit`` active versions due for a probe, the most overdue first."""
        params = {"now": now, "limit": limit}
        rows = await self.database.read(lambda c: c.execute(sql.DUE_FOR_PROBE, params).fetchall())
        return [sql.version_of(row) for row in rows]

    async def record_health(self, name: str, version: str, health: Health) -> None:
        """Store what a probe found (a deleted version is left alone)."""
        params = {"name": name, "version": version, **sql.health_params(health)}
        await self.database.write((sql.RECORD_HEALTH, params))

    async def add_key(self, key: CatalogKey) -> None:
        """Store ``key``, replacing one with the same hash."""
        await self.database.write((sql.UPSERT_KEY, sql.key_params(key)))

    async def get_key(self, key_hash: str) -> CatalogKey | None:
        """The key with that hash, or ``None``."""
        params = {"key_hash": key_hash}
        row = await self.database.read(lambda c: c.execute(sql.SELECT_KEY, params).fetchone())
        return None if row is None else sql.key_of(row)

    async def list_keys(self) -> list[CatalogKey]:
        """Every key, oldest first."""
        rows = await self.database.read(lambda c: c.execute(sql.LIST_KEYS).fetchall())
        return [sql.key_of(row) for row in rows]

    async def delete_keys(self, label: str) -> int:
        """Remove every key with ``label``; returns how many."""
        params = {"label": label}
        return await self.database.write_returning(
            lambda c: int(c.execute(sql.DELETE_KEYS, params).rowcount)
        )

    async def close(self) -> None:
        """Commit queued writes and close the file (safe to call twice)."""
        await self.database.close()
