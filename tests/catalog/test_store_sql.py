"""The catalog's shared SQL: the query plans SQLite picks for the searches the service runs
most, and the cursor's round trip."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from llamon_agent.catalog.records import CatalogQuery
from llamon_agent.catalog.store_sql import page_of, schema, search_statement


@pytest.fixture
def connection() -> Iterator[sqlite3.Connection]:
    with sqlite3.connect(":memory:") as opened:
        for statement in schema("sqlite"):
            opened.execute(statement)
        yield opened
    opened.close()


def plan(connection: sqlite3.Connection, query: CatalogQuery) -> list[str]:
    sql, params = search_statement(query)
    return [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", params)]


def test_the_default_search_walks_the_latest_index_in_order(
    connection: sqlite3.Connection,
) -> None:
    assert plan(connection, CatalogQuery()) == ["SCAN v USING INDEX llamon_catalog_versions_latest"]
    assert plan(connection, CatalogQuery(cursor=None, limit=7, include_unhealthy=True)) == [
        "SCAN v USING INDEX llamon_catalog_versions_latest"
    ]


def test_a_skill_search_reads_only_the_matching_terms(connection: sqlite3.Connection) -> None:
    steps = plan(connection, CatalogQuery(skill="search"))
    assert "SEARCH t USING PRIMARY KEY (kind=? AND value=?)" in steps
    assert not any(step.startswith("SCAN") for step in steps)


def test_a_cursor_resumes_after_the_last_row_it_names() -> None:
    key = "000000001.000000000.000000000~"
    row = ("orders", "1.0.0", "active", "{}", None, "acme", 1.0, "initial", "[]", 1,
           "unknown", None, None, None, None, 0, None, key)  # fmt: skip
    page = page_of([row, row], CatalogQuery(limit=1))
    assert page.next_cursor is not None
    assert set(page.next_cursor) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )
    _, params = search_statement(CatalogQuery(cursor=page.next_cursor))
    assert (params["c_name"], params["c_sort"], params["c_version"]) == ("orders", key, "1.0.0")
    assert page_of([row], CatalogQuery(limit=1)).next_cursor is None
