"""The embedded SQLite store: saves share commits and are durable when they return,
another process beside it, the partial index, schema versions, files that are not ours,
carrying over a2a-sdk's tables, push configs. (The threads and batching on their own:
``test_sqlite_db.py``.)

Every test runs on a real file under ``tmp_path``. The round trips and reconciliation that
every store kind must pass are in ``test_stores.py``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.server.tasks import DatabasePushNotificationConfigStore, DatabaseTaskStore
from a2a.types import (
    Artifact,
    Part,
    PushNotificationConfig,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from cryptography.fernet import Fernet
from sqlalchemy.ext.asyncio import create_async_engine

from llamon_agent.a2a.stores import (
    WORKER_METADATA_KEY,
    Stores,
    open_stores,
    reconcile_orphaned_tasks,
)
from llamon_agent.a2a.stores.sqlite import SQLITE_SCHEMA_VERSION, SQLiteTaskStore
from llamon_agent.a2a.stores.sqlite_db import SQLiteDatabase
from tests._support.a2a_server import in_another_process

WAIT = 10.0


def _task(task_id: str, state: TaskState = TaskState.completed, worker: str = "w") -> Task:
    return Task(
        id=task_id,
        context_id="ctx",
        status=TaskStatus(state=state),
        artifacts=[
            Artifact(artifact_id="a", parts=[Part(root=TextPart(text=f"report {task_id}"))])
        ],
        metadata={WORKER_METADATA_KEY: worker},
    )


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    opened = await open_stores("sqlite", home=tmp_path)
    yield opened
    await opened.close()


def _database(stores: Stores) -> SQLiteDatabase:
    assert stores.database is not None
    return stores.database


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as plain:
        return plain.execute(sql).fetchall()


# --- batching and durability ---------------------------------------------------------------


async def test_concurrent_saves_share_commits(stores: Stores) -> None:
    database = _database(stores)
    commits_before, writes_before = database.commits, database.writes
    tasks = [_task(f"t{i:03d}") for i in range(200)]

    await asyncio.wait_for(asyncio.gather(*(stores.task_store.save(t) for t in tasks)), WAIT)

    assert database.writes - writes_before == 200
    assert database.commits - commits_before < 200  # group commit: fewer commits than writes
    for task in tasks:
        assert await stores.task_store.get(task.id) == task


async def test_a_saved_task_is_in_the_file_when_save_returns(
    stores: Stores, tmp_path: Path
) -> None:
    await stores.task_store.save(_task("durable", TaskState.working))
    # another connection (as another process would) sees it at once: it is committed
    rows = _rows(tmp_path / "tasks.db", "SELECT id, state, worker FROM llamon_tasks")
    assert rows == [("durable", "working", "w")]


async def test_close_commits_the_writes_already_queued(tmp_path: Path) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    saves = [stores.task_store.save(_task(f"q{i}")) for i in range(50)]
    await asyncio.wait_for(asyncio.gather(*saves, stores.close()), WAIT)

    reopened = await open_stores("sqlite", home=tmp_path)
    try:
        assert [await reopened.task_store.get(f"q{i}") for i in range(50)] == [
            _task(f"q{i}") for i in range(50)
        ]
    finally:
        await reopened.close()


# --- other processes, reconciliation ------------------------------------------------------


async def test_another_process_writes_while_the_store_is_open(
    stores: Stores, tmp_path: Path
) -> None:
    await stores.task_store.save(_task("from-parent"))
    await in_another_process(
        tmp_path,
        "status = TaskStatus(state=TaskState.completed)",
        "await stores.task_store.save(Task(id='from-child', context_id='c', status=status))",
    )

    child_task = await stores.task_store.get("from-child")
    assert child_task is not None
    assert child_task.status.state is TaskState.completed
    await stores.task_store.save(_task("parent-again"))
    assert await stores.task_store.get("parent-again") == _task("parent-again")


async def test_unfinished_tasks_are_found_through_the_partial_index(
    stores: Stores, tmp_path: Path
) -> None:
    store = stores.task_store
    assert isinstance(store, SQLiteTaskStore)
    for i in range(30):
        await store.save(_task(f"done{i}"))
    await store.save(_task("mine", TaskState.working, worker="w"))
    await store.save(_task("theirs", TaskState.submitted, worker="x"))

    assert await store.unfinished_task_ids("w") == ["mine"]
    plan = _rows(
        tmp_path / "tasks.db",
        "EXPLAIN QUERY PLAN SELECT id FROM llamon_tasks WHERE state IN ('submitted', 'working')"
        " AND (worker = 'w' OR worker IS NULL) ORDER BY id",
    )
    assert "llamon_tasks_unfinished" in " ".join(str(row) for row in plan)


@pytest.mark.parametrize("paused", [TaskState.input_required, TaskState.auth_required])
async def test_of_two_claims_racing_from_two_stores_on_one_file_exactly_one_saves(
    stores: Stores, tmp_path: Path, paused: TaskState
) -> None:
    replica_a = stores.task_store
    other = await open_stores("sqlite", home=tmp_path)  # a second replica on the same file
    try:
        replica_b = other.task_store
        assert isinstance(replica_a, SQLiteTaskStore)
        assert isinstance(replica_b, SQLiteTaskStore)
        await replica_a.save(_task("t", paused, worker="asker"))
        by_a, by_b = _task("t", TaskState.working, "a"), _task("t", TaskState.working, "b")
        won = await asyncio.wait_for(
            asyncio.gather(
                replica_a.claim_paused(by_a, paused), replica_b.claim_paused(by_b, paused)
            ),
            WAIT,
        )
        assert sorted(won) == [False, True]
        winner = by_a if won[0] else by_b
        assert await replica_a.get("t") == winner
        assert await replica_b.get("t") == winner
        assert _rows(tmp_path / "tasks.db", "SELECT state, worker FROM llamon_tasks") == [
            ("working", winner.metadata["llamon.worker"] if winner.metadata else None)
        ]
    finally:
        await other.close()


@pytest.mark.parametrize("state", [TaskState.working, TaskState.auth_required, TaskState.failed])
async def test_a_claim_on_a_task_no_longer_input_required_writes_nothing(
    stores: Stores, tmp_path: Path, state: TaskState
) -> None:
    store = stores.task_store
    assert isinstance(store, SQLiteTaskStore)
    await store.save(_task("t", state, worker="asker"))
    query = "SELECT id, state, worker, updated_at, task FROM llamon_tasks"
    before = _rows(tmp_path / "tasks.db", query)
    claim = _task("t", TaskState.working, "a")
    assert await store.claim_paused(claim, TaskState.input_required) is False
    assert _rows(tmp_path / "tasks.db", query) == before
    unknown = _task("unknown", TaskState.working, "a")
    assert await store.claim_paused(unknown, TaskState.input_required) is False
    assert _rows(tmp_path / "tasks.db", query) == before


async def test_a_contexts_task_is_found_through_the_context_index(
    stores: Stores, tmp_path: Path
) -> None:
    store = stores.task_store
    assert isinstance(store, SQLiteTaskStore)
    await store.save(_task("in-ctx"))
    assert await store.task_in_context("ctx") == _task("in-ctx")
    assert await store.task_in_context("no-such-context") is None
    plan = _rows(
        tmp_path / "tasks.db",
        "EXPLAIN QUERY PLAN SELECT task FROM llamon_tasks WHERE context_id = 'ctx' LIMIT 1",
    )
    assert "llamon_tasks_context" in " ".join(str(row) for row in plan)


# --- the file: schema versions, foreign files, a2a-sdk's tables -----------------------------


async def test_a_new_file_records_its_schema_version(stores: Stores, tmp_path: Path) -> None:
    assert _rows(tmp_path / "tasks.db", "PRAGMA user_version") == [(SQLITE_SCHEMA_VERSION,)]


async def test_a_version_1_file_gets_the_context_index_and_keeps_its_tasks(
    tmp_path: Path,
) -> None:
    opened = await open_stores("sqlite", home=tmp_path)
    await opened.task_store.save(_task("old"))
    await opened.close()
    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # as llamon with schema 1 left it
        plain.execute("DROP INDEX llamon_tasks_context")
        plain.execute("PRAGMA user_version = 1")

    reopened = await open_stores("sqlite", home=tmp_path)
    try:
        store = reopened.task_store
        assert isinstance(store, SQLiteTaskStore)
        assert await store.task_in_context("ctx") == _task("old")
    finally:
        await reopened.close()
    assert _rows(tmp_path / "tasks.db", "PRAGMA user_version") == [(SQLITE_SCHEMA_VERSION,)]
    indexes = _rows(tmp_path / "tasks.db", "SELECT name FROM sqlite_master WHERE type = 'index'")
    assert ("llamon_tasks_context",) in indexes


async def test_a_file_from_a_newer_llamon_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "tasks.db") as plain:
        plain.execute(f"PRAGMA user_version = {SQLITE_SCHEMA_VERSION + 1}")
    with pytest.raises(ValueError, match="written by a newer llamon") as caught:
        await open_stores("sqlite", home=tmp_path)
    assert str(tmp_path / "tasks.db") in str(caught.value)


async def test_a_file_that_is_not_a_database_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "tasks.db").write_bytes(b"this is not sqlite " * 100)
    with pytest.raises(sqlite3.DatabaseError, match="not a database") as caught:
        await open_stores("sqlite", home=tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'tasks.db'}: ")


async def test_a_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    (tmp_path / "tasks.db").mkdir()  # a directory where the file should be
    with pytest.raises(sqlite3.OperationalError, match="unable to open") as caught:
        await open_stores("sqlite", home=tmp_path)
    assert str(tmp_path / "tasks.db") in str(caught.value)


async def test_tasks_and_push_configs_of_a2a_sdk_tables_are_carried_over(
    tmp_path: Path,
) -> None:
    key = Fernet.generate_key()
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}")
    old_tasks = DatabaseTaskStore(engine)
    old_push = DatabasePushNotificationConfigStore(engine, encryption_key=key)
    running = _task("was-running", TaskState.working, worker="w")
    done = _task("was-done")
    config = PushNotificationConfig(id="cfg", url="https://hooks.example/a2a", token="tok")
    await old_tasks.save(running)
    await old_tasks.save(done)
    await old_push.set_info("was-done", config)
    await engine.dispose()

    stores = await open_stores("sqlite", home=tmp_path, push_encryption_key=key)
    try:
        assert await stores.task_store.get("was-done") == done
        assert await stores.task_store.get("was-running") == running
        assert await stores.push_config_store.get_info("was-done") == [config]
        assert await reconcile_orphaned_tasks(stores, worker="w") == ["was-running"]
    finally:
        await stores.close()
    # the old tables are left as they were
    assert len(_rows(tmp_path / "tasks.db", "SELECT id FROM tasks")) == 2

    reopened = await open_stores("sqlite", home=tmp_path, push_encryption_key=key)
    try:  # carried over once: the reconciled state is not overwritten by the old row
        task = await reopened.task_store.get("was-running")
        assert task is not None
        assert task.status.state is TaskState.failed
    finally:
        await reopened.close()


# --- push configs ------------------------------------------------------------------------------


async def test_push_configs_keep_order_replace_by_id_and_delete_all(stores: Stores) -> None:
    push = stores.push_config_store
    first = PushNotificationConfig(id="one", url="https://hooks.example/1")
    second = PushNotificationConfig(id="two", url="https://hooks.example/2")
    unnamed = PushNotificationConfig(url="https://hooks.example/3")
    await push.set_info("t", first)
    await push.set_info("t", second)
    await push.set_info("t", unnamed)
    replaced = PushNotificationConfig(id="one", url="https://hooks.example/1b")
    await push.set_info("t", replaced)

    assert unnamed.id is None  # the caller's object is not changed
    assert await push.get_info("t") == [
        replaced,
        second,
        unnamed.model_copy(update={"id": "t"}),
    ]
    await push.delete_info("t", "two")
    assert [c.id for c in await push.get_info("t")] == ["one", "t"]
    await push.delete_info("t")
    assert await push.get_info("t") == []


async def test_a_push_config_under_another_key_is_skipped_without_its_url(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = await open_stores("sqlite", home=tmp_path, push_encryption_key=Fernet.generate_key())
    secret_url = "https://hooks.example/a2a?token=abc123"
    await writer.push_config_store.set_info("t", PushNotificationConfig(id="c", url=secret_url))
    await writer.close()

    reader = await open_stores("sqlite", home=tmp_path, push_encryption_key=Fernet.generate_key())
    try:
        with caplog.at_level(logging.ERROR, logger="llamon_agent.a2a.stores.push_rows"):
            assert await reader.push_config_store.get_info("t") == []
    finally:
        await reader.close()
    assert "push config 'c' of task 't' is unreadable" in caplog.text
    assert "hooks.example" not in caplog.text
