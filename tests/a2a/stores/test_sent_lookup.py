"""Each store kind finds the tasks a message started (``llamon.sent``): SQLite through an
index (and an older file gets the column and index on first open), memory by a dict,
llamon's PostgreSQL store through an index, a2a-sdk's by a JSON path query; a store that
cannot answers ``[]`` through the guard."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore
from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.sent import SentKey, SentMessages, check_window
from llamon_agent.a2a.stores import Stores, normalize_postgres_dsn, open_stores
from llamon_agent.a2a.stores.guard import guard_task_store
from llamon_agent.a2a.stores.postgres import PostgresTaskStore
from llamon_agent.a2a.stores.sent_lookup import (
    POSTGRES_SENT_INDEX,
    SENT_METADATA_KEY,
    postgres_sent_index,
    sent_finder,
    sent_message_id,
)
from llamon_agent.a2a.stores.sqlite import SQLITE_SCHEMA_VERSION, SQLiteTaskStore
from llamon_agent.core.settings import IDEMPOTENCY_WINDOW_ENV, idempotency_window_setting
from tests._support.stores import postgres_schema


def _task(task_id: str, message_id: str | None, owner: str | None = None) -> Task:
    metadata: dict[str, object] = {}
    if message_id is not None:
        metadata[SENT_METADATA_KEY] = {"messageId": message_id, "contextId": "", "at": 100.0}
    if owner is not None:
        metadata["llamon.owner"] = owner
    return Task(
        id=task_id,
        context_id=f"ctx-{task_id}",
        status=TaskStatus(state=TaskState.completed),
        metadata=metadata or None,
    )


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as plain:
        return list(plain.execute(sql).fetchall())


async def test_every_store_kind_finds_the_tasks_a_message_started(stores: Stores) -> None:
    finder = sent_finder(stores.task_store)
    assert finder is not None
    await stores.task_store.save(_task("t-1", "m-1"))
    await stores.task_store.save(_task("t-2", "m-1", owner="someone"))
    await stores.task_store.save(_task("t-3", "m-2"))
    await stores.task_store.save(_task("t-4", None))
    found = sorted(task.id for task in await finder("m-1"))
    assert found == ["t-1", "t-2"]
    assert [task.id for task in await finder("m-2")] == ["t-3"]
    assert await finder("m-unknown") == []


async def test_a_deleted_task_is_no_longer_found(stores: Stores) -> None:
    finder = sent_finder(stores.task_store)
    assert finder is not None
    await stores.task_store.save(_task("t-gone", "m-gone"))
    await stores.task_store.delete("t-gone")
    assert await finder("m-gone") == []


async def test_the_sqlite_lookup_uses_its_index(tmp_path: Path) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    try:
        assert isinstance(stores.task_store, SQLiteTaskStore)
        await stores.task_store.save(_task("t-1", "m-1"))
    finally:
        await stores.close()
    plan = _rows(
        tmp_path / "tasks.db",
        "EXPLAIN QUERY PLAN SELECT task FROM llamon_tasks WHERE message_id = 'm-1' LIMIT 100",
    )
    assert "llamon_tasks_message" in " ".join(str(row) for row in plan)


async def test_a_version_2_file_gets_the_message_column_filled_from_the_stamps(
    tmp_path: Path,
) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    await stores.task_store.save(_task("t-old", "m-old"))
    await stores.close()
    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # as llamon with schema 2 left it
        plain.execute("DROP INDEX llamon_tasks_message")
        plain.execute("ALTER TABLE llamon_tasks DROP COLUMN message_id")
        plain.execute("PRAGMA user_version = 2")

    reopened = await open_stores("sqlite", home=tmp_path)
    try:
        assert isinstance(reopened.task_store, SQLiteTaskStore)
        assert [task.id for task in await reopened.task_store.tasks_sent_as("m-old")] == ["t-old"]
    finally:
        await reopened.close()
    assert _rows(tmp_path / "tasks.db", "PRAGMA user_version") == [(SQLITE_SCHEMA_VERSION,)]
    assert SQLITE_SCHEMA_VERSION == 5  # 4 added the failure table, 5 the event table
    indexes = _rows(tmp_path / "tasks.db", "SELECT name FROM sqlite_master WHERE type = 'index'")
    assert ("llamon_tasks_message",) in indexes


async def test_a_store_that_cannot_look_up_answers_no_tasks_through_the_guard() -> None:
    store = InMemoryTaskStore()
    await store.save(_task("t-1", "m-1"))
    assert sent_finder(store) is None
    assert await guard_task_store(store).tasks_sent_as("m-1") == []


def test_a_tasks_message_id_is_read_from_its_stamp() -> None:
    assert sent_message_id(_task("t", "m")) == "m"
    assert sent_message_id(_task("t", None)) is None
    odd = _task("t", None).model_copy(update={"metadata": {SENT_METADATA_KEY: "m"}})
    assert sent_message_id(odd) is None


async def test_the_window_is_counted_from_acceptance(tmp_path: Path) -> None:
    now = [1000.0]
    memory = guard_task_store(InMemoryTaskStore())
    sent = SentMessages(memory, 10.0, clock=lambda: now[0])
    key = SentKey("", "", "m-1")
    sent.remember(key, "t-1", sent.stamp(key))
    now[0] += 10.0
    assert await sent.earlier(key) == "t-1"
    now[0] += 0.001
    assert await sent.earlier(key) is None
    assert await sent.earlier(SentKey("someone", "", "m-1")) is None


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, "60"])
def test_a_bad_window_is_refused_naming_it(bad: object) -> None:
    with pytest.raises(ValueError, match="idempotency_window"):
        check_window(bad)  # type: ignore[arg-type]


def test_the_window_variable_is_read_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IDEMPOTENCY_WINDOW_ENV, raising=False)
    assert idempotency_window_setting() is None
    monkeypatch.setenv(IDEMPOTENCY_WINDOW_ENV, " 3600 ")
    assert idempotency_window_setting() == 3600.0
    monkeypatch.setenv(IDEMPOTENCY_WINDOW_ENV, "0")
    assert idempotency_window_setting() == 0.0
    for bad in ("soon", "-5", "nan"):
        monkeypatch.setenv(IDEMPOTENCY_WINDOW_ENV, bad)
        with pytest.raises(ValueError, match=IDEMPOTENCY_WINDOW_ENV):
            idempotency_window_setting()


async def test_the_postgres_lookup_uses_its_index() -> None:
    async with postgres_schema() as dsn:
        stores = await open_stores("postgres", dsn=dsn)
        try:
            store = stores.task_store
            assert isinstance(store, PostgresTaskStore)
            assert stores.postgres is not None
            await store.save(_task("t-pg", "m-pg"))
            finder = sent_finder(store)
            assert finder is not None
            assert [task.id for task in await finder("m-pg")] == ["t-pg"]
            pool = stores.postgres.pool
            async with pool.acquire() as connection, connection.transaction():
                await connection.execute("SET LOCAL enable_seqscan = off")
                plan = await connection.fetch(
                    "EXPLAIN SELECT body FROM llamon_tasks WHERE message_id = 'm-pg'"
                )
            assert "llamon_tasks_message" in " ".join(str(row[0]) for row in plan)
        finally:
            await stores.close()


async def test_a2a_sdks_own_postgres_store_is_found_by_its_expression_index() -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    async with postgres_schema() as dsn:
        engine = create_async_engine(normalize_postgres_dsn(dsn))
        try:
            store = DatabaseTaskStore(engine)
            await store.initialize()
            async with engine.begin() as connection:
                await connection.execute(text(postgres_sent_index("tasks")))
            await store.save(_task("t-pg", "m-pg"))
            finder = sent_finder(store)
            assert finder is not None
            assert [task.id for task in await finder("m-pg")] == ["t-pg"]
            async with engine.connect() as connection:
                await connection.execute(text("SET enable_seqscan = off"))
                plan = await connection.execute(
                    text(
                        "EXPLAIN SELECT id FROM tasks"
                        " WHERE (tasks.metadata #>> '{llamon.sent,messageId}') = 'm-pg'"
                    )
                )
                lines = " ".join(str(row[0]) for row in plan)
            assert POSTGRES_SENT_INDEX in lines
        finally:
            await engine.dispose()
