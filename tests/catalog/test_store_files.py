"""Where the catalog keeps its data: the SQLite file and its schema version, a PostgreSQL
database's schema row, reopening, and the URLs ``open_catalog_store`` accepts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from llamon_agent.a2a.stores.open import normalize_postgres_dsn
from llamon_agent.catalog.records import AgentVersion, CatalogKey, CatalogQuery, Health
from llamon_agent.catalog.store import CatalogStore, open_catalog_store
from llamon_agent.catalog.store_sqlite import CATALOG_SQLITE_SCHEMA_VERSION
from tests._support.stores import postgres_schema

CARD = {
    "name": "Orders",
    "description": "Bestellungen ✓",
    "skills": [{"id": "lookup", "name": "Lookup", "tags": ["sales"]}],
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
}
KEY = CatalogKey("f" * 64, "caller", "shop", ("orders*",), created_at=1.0)


async def fill(store: CatalogStore) -> None:
    await store.add_version(AgentVersion("orders", "1.0.0", "active", CARD, "acme", 1.0))
    await store.add_version(AgentVersion("orders", "1.1.0", "active", CARD, "acme", 2.0))
    await store.set_status("orders", "1.1.0", "deprecated")
    await store.record_health("orders", "1.0.0", Health(state="healthy", last_seen=3.0))
    await store.add_key(KEY)


async def check_filled(store: CatalogStore) -> None:
    assert [(v.version, v.status, v.is_latest) for v in await store.versions_of("orders")] == [
        ("1.1.0", "deprecated", False),
        ("1.0.0", "active", True),
    ]
    (row,) = (await store.search(CatalogQuery(tag="sales", search="bestellungen ✓"))).rows
    assert (row.version, row.health) == ("1.0.0", Health(state="healthy", last_seen=3.0))
    assert await store.owner_of("orders") == "acme"
    assert await store.list_keys() == [KEY]


async def test_reopening_a_sqlite_file_keeps_everything(tmp_path: Path) -> None:
    store = await open_catalog_store(home=tmp_path)
    await fill(store)
    await store.close()
    assert (tmp_path / "catalog.db").is_file()
    reopened = await open_catalog_store(home=tmp_path)
    try:
        await check_filled(reopened)
    finally:
        await reopened.close()


async def test_a_sqlite_url_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "registry.db"
    store = await open_catalog_store(f"sqlite:///{path}")
    try:
        await fill(store)
    finally:
        await store.close()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (1,)
        assert connection.execute("SELECT COUNT(*) FROM llamon_catalog_versions").fetchone() == (2,)
    assert not (tmp_path / "catalog.db").exists()


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite:/relative.db"])
async def test_a_sqlite_url_without_a_file_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="must be sqlite") as info:
        await open_catalog_store(url)
    assert str(info.value) == (
        f"the catalog's SQLite URL must be sqlite:///path/to/file.db, got {url!r}"
    )


async def test_another_scheme_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="not 'mysql'"):
        await open_catalog_store("mysql://127.0.0.1/db")


async def test_a_sqlite_file_of_a_newer_llamon_is_refused_naming_both_versions(
    tmp_path: Path,
) -> None:
    path = tmp_path / "catalog.db"
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA user_version = {CATALOG_SQLITE_SCHEMA_VERSION + 1}")
    with pytest.raises(ValueError, match="newer llamon") as info:
        await open_catalog_store(home=tmp_path)
    assert str(info.value) == (
        f"{path} was written by a newer llamon (catalog schema version 2; this one reads up"
        " to 1): upgrade llamon-agent, or use another catalog database"
    )
    with sqlite3.connect(path) as connection:  # left as it was
        assert connection.execute("PRAGMA user_version").fetchone() == (2,)
        tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
        assert tables == []


async def test_a_file_that_is_not_a_database_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "catalog.db").write_bytes(b"not a database, just text " * 100)
    with pytest.raises(sqlite3.DatabaseError) as info:
        await open_catalog_store(home=tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'catalog.db'}: ")


async def test_a_closed_sqlite_store_says_so(tmp_path: Path) -> None:
    store = await open_catalog_store(home=tmp_path)
    await store.close()
    with pytest.raises(RuntimeError, match="is closed"):
        await store.owner_of("orders")


async def test_reopening_postgresql_keeps_everything() -> None:
    async with postgres_schema() as url:
        store = await open_catalog_store(url)
        await fill(store)
        await store.close()
        reopened = await open_catalog_store(url)
        try:
            await check_filled(reopened)
        finally:
            await reopened.close()


async def test_a_postgresql_database_of_a_newer_llamon_is_refused_naming_both_versions() -> None:
    async with postgres_schema() as url:
        store = await open_catalog_store(url)
        await store.close()
        engine = create_async_engine(normalize_postgres_dsn(url))
        try:
            async with engine.begin() as connection:
                await connection.execute(text("UPDATE llamon_catalog_schema SET version = 7"))
        finally:
            await engine.dispose()
        with pytest.raises(ValueError, match="newer llamon") as info:
            await open_catalog_store(url)
        assert str(info.value) == (
            "the PostgreSQL catalog was written by a newer llamon (catalog schema version 7;"
            " this one reads up to 1): upgrade llamon-agent, or use another catalog database"
        )
        assert "127.0.0.1" not in str(info.value)
