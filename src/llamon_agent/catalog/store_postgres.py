"""The catalog in PostgreSQL: the ``llamon_catalog_*`` tables, next to the task store's.

What the caller sees:

* ``await open_postgres_catalog("postgresql://user@host/db")`` connects with SQLAlchemy's
  async engine and asyncpg (the ``llamon-agent[postgres]`` extra; ``ImportError`` naming
  it when absent), creates the tables if missing and returns the store. Several replicas
  may start at once: the schema work runs under a transaction-scoped advisory lock.
* The schema version is the row of ``llamon_catalog_schema``: a database written by a
  newer llamon is refused with ``ValueError``, one line naming both versions (never the
  server's address).
* Every method answers as ``CatalogStore`` says, with the same SQL as SQLite
  (``catalog.store_sql``); each write is one transaction. A server that does not answer
  raises ``sqlalchemy.exc.DBAPIError`` (or ``OSError``), for the service to classify.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

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

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["CATALOG_SCHEMA_TABLE", "PostgresCatalogStore", "open_postgres_catalog"]

CATALOG_SCHEMA_TABLE: Final = "llamon_catalog_schema"
_SCHEMA_LOCK: Final = 0x6C6C_6361_7461  # any fixed number: serializes concurrent starters


async def _prepare(connection: AsyncConnection) -> None:
    """Check the schema version and create the tables (in ``connection``'s transaction)."""
    from sqlalchemy import text

    await connection.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _SCHEMA_LOCK})
    await connection.execute(
        text(f"CREATE TABLE IF NOT EXISTS {CATALOG_SCHEMA_TABLE} (version INTEGER NOT NULL)")
    )
    found = (
        await connection.execute(text(f"SELECT MAX(version) FROM {CATALOG_SCHEMA_TABLE}"))  # noqa: S608
    ).scalar()
    if found is not None and found > sql.CATALOG_SCHEMA_VERSION:
        raise ValueError(sql.newer_schema_message("the PostgreSQL catalog", found))
    for statement in sql.schema("postgresql"):
        await connection.execute(text(statement))
    await connection.execute(text(f"DELETE FROM {CATALOG_SCHEMA_TABLE}"))  # noqa: S608
    await connection.execute(
        text(f"INSERT INTO {CATALOG_SCHEMA_TABLE} (version) VALUES (:version)"),  # noqa: S608
        {"version": sql.CATALOG_SCHEMA_VERSION},
    )


async def open_postgres_catalog(url: str) -> CatalogStore:
    """The catalog store in the PostgreSQL database of ``url`` (``postgresql://`` or
    ``postgres://``), its tables created if missing. ``ValueError`` for a URL that is not
    PostgreSQL's or a database written by a newer llamon."""
    from sqlalchemy.ext.asyncio import create_async_engine

    from llamon_agent.a2a.stores.open import normalize_postgres_dsn

    # pre-ping: a pooled connection cut by a server restart is replaced, not reused
    engine = create_async_engine(normalize_postgres_dsn(url), pool_pre_ping=True)
    try:
        async with engine.begin() as connection:
            await _prepare(connection)
    except BaseException:
        await engine.dispose()
        raise
    return PostgresCatalogStore(engine)


class PostgresCatalogStore:
    """``CatalogStore`` on an async SQLAlchemy engine (see the module docstring)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._closed = False

    async def _fetch(self, statement: str, params: dict[str, Any]) -> list[Sequence[Any]]:
        from sqlalchemy import text

        async with self.engine.connect() as connection:
            result = await connection.execute(text(statement), params)
            return [tuple(row) for row in result.all()]

    async def owner_of(self, name: str) -> str | None:
        """The label of the publisher that first published ``name``, or ``None``."""
        rows = await self._fetch(sql.SELECT_OWNER, {"name": name})
        return str(rows[0][0]) if rows else None

    async def add_version(
        self, version: AgentVersion, *, owned_by: str | None = None
    ) -> AgentVersion:
        """Store ``version`` in one transaction (see ``CatalogStore.add_version``)."""
        from sqlalchemy import text

        params = sql.version_params(version)
        terms = sql.term_params(version)
        key = {"name": version.name, "version": version.version}
        agent = {"name": version.name, "owner": version.owner, "created_at": version.published_at}
        async with self.engine.begin() as connection:
            await connection.execute(text(sql.INSERT_AGENT), agent)
            owner = (await connection.execute(text(sql.LOCK_AGENT), key)).scalar_one()
            if owned_by is not None and owner != owned_by:
                raise NameOwned(version.name, owner)
            if (await connection.execute(text(sql.INSERT_VERSION), params)).rowcount == 0:
                raise VersionTaken(f"{version.name} {version.version} is already published")
            if terms:
                await connection.execute(text(sql.ADD_TERM), terms)
            await connection.execute(text(sql.RECOMPUTE_LATEST), key)
            row = (await connection.execute(text(sql.SELECT_VERSION), key)).one()
        return sql.version_of(tuple(row))

    async def get_version(self, name: str, version: str) -> AgentVersion | None:
        """One version, whatever its status, or ``None``."""
        rows = await self._fetch(sql.SELECT_VERSION, {"name": name, "version": version})
        return sql.version_of(rows[0]) if rows else None

    async def versions_of(self, name: str) -> list[AgentVersion]:
        """Every version of ``name`` (deleted ones included), newest first."""
        return [
            sql.version_of(row) for row in await self._fetch(sql.SELECT_VERSIONS_OF, {"name": name})
        ]

    async def set_status(self, name: str, version: str, status: Status) -> AgentVersion | None:
        """Change one version's status and recompute the latest; ``None`` if absent."""
        from sqlalchemy import text

        key = {"name": name, "version": version}
        async with self.engine.begin() as connection:
            await connection.execute(text(sql.LOCK_AGENT), key)  # writers of one agent take turns
            changed = await connection.execute(text(sql.SET_STATUS), {**key, "status": status})
            if changed.rowcount == 0:
                return None
            await connection.execute(text(sql.RECOMPUTE_LATEST), key)
            row = (await connection.execute(text(sql.SELECT_VERSION), key)).one()
        return sql.version_of(tuple(row))

    async def search(self, query: CatalogQuery) -> CatalogPage:
        """One page of ``query`` (see ``CatalogStore.search``)."""
        return sql.page_of(await self._fetch(*sql.search_statement(query)), query)

    async def due_for_probe(self, now: float, limit: int) -> list[AgentVersion]:
        """Up to ``limit`` active versions due for a probe, the most overdue first."""
        rows = await self._fetch(sql.DUE_FOR_PROBE, {"now": now, "limit": limit})
        return [sql.version_of(row) for row in rows]

    async def record_health(self, name: str, version: str, health: Health) -> None:
        """Store what a probe found (a deleted version is left alone)."""
        from sqlalchemy import text

        params = {"name": name, "version": version, **sql.health_params(health)}
        async with self.engine.begin() as connection:
            await connection.execute(text(sql.RECORD_HEALTH), params)

    async def add_key(self, key: CatalogKey) -> None:
        """Store ``key``, replacing one with the same hash."""
        from sqlalchemy import text

        async with self.engine.begin() as connection:
            await connection.execute(text(sql.UPSERT_KEY), sql.key_params(key))

    async def get_key(self, key_hash: str) -> CatalogKey | None:
        """The key with that hash, or ``None``."""
        rows = await self._fetch(sql.SELECT_KEY, {"key_hash": key_hash})
        return sql.key_of(rows[0]) if rows else None

    async def list_keys(self) -> list[CatalogKey]:
        """Every key, oldest first."""
        return [sql.key_of(row) for row in await self._fetch(sql.LIST_KEYS, {})]

    async def delete_keys(self, label: str) -> int:
        """Remove every key with ``label``; returns how many."""
        from sqlalchemy import text

        async with self.engine.begin() as connection:
            result = await connection.execute(text(sql.DELETE_KEYS), {"label": label})
            return max(int(result.rowcount), 0)

    async def close(self) -> None:
        """Close the engine's connections (safe to call twice)."""
        if self._closed:
            return
        self._closed = True
        await self.engine.dispose()
