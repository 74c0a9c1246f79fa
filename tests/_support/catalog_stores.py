"""Catalog stores for tests: a fresh one on SQLite or on a throwaway PostgreSQL schema.

``open_test_catalog(kind, tmp_path)`` is an async context manager yielding the store and
closing it (and dropping the PostgreSQL schema) afterwards; ``catalog_store`` is the
fixture running a test once per engine.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from llamon_agent.catalog.store import CatalogStore, open_catalog_store
from tests._support.stores import postgres_schema

__all__ = ["CATALOG_ENGINES", "catalog_store", "open_test_catalog"]

CATALOG_ENGINES = ("sqlite", "postgres")


@asynccontextmanager
async def open_test_catalog(kind: str, tmp_path: Path) -> AsyncIterator[CatalogStore]:
    """A fresh, empty catalog store of ``kind`` (``sqlite`` under ``tmp_path``, or
    ``postgres`` in a schema of its own)."""
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(postgres_schema()) if kind == "postgres" else None
        store = await open_catalog_store(url, home=tmp_path)
        stack.push_async_callback(store.close)
        yield store


@pytest.fixture(params=CATALOG_ENGINES)
async def catalog_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[CatalogStore]:
    """An empty catalog store; the test runs once on SQLite and once on PostgreSQL."""
    async with open_test_catalog(request.param, tmp_path) as store:
        yield store
