"""llamon's PostgreSQL store against a real server: each test in a fresh schema of its own
(``postgres_schema``), the outage test on a private server it can stop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from a2a.server.tasks import DatabasePushNotificationConfigStore, DatabaseTaskStore
from a2a.types import Artifact, Part, PushNotificationConfig, Task, TaskState, TaskStatus, TextPart
from cryptography.fernet import Fernet
from sqlalchemy.ext.asyncio import create_async_engine

from llamon_agent.a2a.stores import normalize_postgres_dsn, open_stores
from llamon_agent.a2a.stores.guard import TaskStoreUnavailableError, guard_task_store
from llamon_agent.a2a.stores.postgres import (
    POSTGRES_SCHEMA_VERSION,
    PostgresPushConfigStore,
    PostgresTaskStore,
    open_postgres_database,
)
from llamon_agent.a2a.stores.postgres_db import PostgresDatabase
from llamon_agent.a2a.stores.sent_lookup import SENT_METADATA_KEY
from llamon_agent.a2a.stores.workers import WORKER_METADATA_KEY
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from tests._support.postgres_server import private_postgres
from tests._support.stores import postgres_schema

DEADLINE = 30.0


def _task(
    task_id: str,
    state: TaskState = TaskState.working,
    *,
    context_id: str | None = None,
    worker: str | None = None,
    message_id: str | None = None,
    text: str | None = None,
) -> Task:
    metadata: dict[str, Any] = {}
    if worker is not None:
        metadata[WORKER_METADATA_KEY] = worker
    if message_id is not None:
        metadata[SENT_METADATA_KEY] = {"messageId": message_id, "contextId": "", "at": 1.0}
    artifacts = None
    if text is not None:
        artifacts = [Artifact(artifact_id="a", parts=[Part(root=TextPart(text=text))])]
    return Task(
        id=task_id,
        context_id=context_id or f"ctx-{task_id}",
        status=TaskStatus(state=state),
        metadata=metadata or None,
        artifacts=artifacts,
    )


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    async with postgres_schema() as fresh:
        yield fresh


@pytest.fixture
async def database(dsn: str) -> AsyncIterator[PostgresDatabase]:
    opened = await open_postgres_database(dsn)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_saved_task_reads_back_whole_and_is_gone_after_delete(
    database: PostgresDatabase,
) -> None:
    store = PostgresTaskStore(database)
    task = _task("t-1", worker="w-1", message_id="m-1", text="héllo")
    await store.save(task)
    assert await store.get("t-1") == task
    await store.save(task.model_copy(update={"status": TaskStatus(state=TaskState.completed)}))
    again = await store.get("t-1")
    assert again is not None
    assert again.status.state == TaskState.completed
    await store.delete("t-1")
    await store.delete("t-unknown")
    assert await store.get("t-1") is None


async def test_concurrent_saves_share_commits_and_all_survive_a_reopen(dsn: str) -> None:
    database = await open_postgres_database(dsn)
    store = PostgresTaskStore(database)
    await asyncio.gather(*(store.save(_task(f"t-{i:03}")) for i in range(300)))
    assert database.writes == 300
    assert database.commits < 300  # batched: fewer transactions than saves
    await database.close()
    reopened = await open_postgres_database(dsn)
    try:
        found = await asyncio.gather(
            *(PostgresTaskStore(reopened).get(f"t-{i:03}") for i in range(300))
        )
        assert [task.id if task else None for task in found] == [f"t-{i:03}" for i in range(300)]
    finally:
        await reopened.close()


async def test_close_commits_the_saves_still_queued(dsn: str) -> None:
    database = await open_postgres_database(dsn)
    store = PostgresTaskStore(database)
    pending = [asyncio.ensure_future(store.save(_task(f"q-{i}"))) for i in range(50)]
    await asyncio.sleep(0)  # the saves are queued, not yet committed
    await database.close()
    await asyncio.gather(*pending)
    with pytest.raises(RuntimeError, match="the PostgreSQL store is closed"):
        await store.get("q-0")
    reopened = await open_postgres_database(dsn)
    try:
        assert [await PostgresTaskStore(reopened).get(f"q-{i}") is not None for i in range(50)] == [
            True
        ] * 50
    finally:
        await reopened.close()


async def test_one_bad_row_fails_only_its_own_save(database: PostgresDatabase) -> None:
    store = PostgresTaskStore(database)
    bad = _task("bad\x00id")  # PostgreSQL text cannot hold NUL
    outcomes = await asyncio.gather(
        *(store.save(_task(f"ok-{i}")) for i in range(20)), store.save(bad), return_exceptions=True
    )
    assert outcomes[:20] == [None] * 20
    error = outcomes[20]
    assert isinstance(error, asyncpg.PostgresError)
    assert error.sqlstate == "22021"  # character not in repertoire
    assert classify_exception(error).code == ErrorCode.INTERNAL_ERROR
    assert [await store.get(f"ok-{i}") is not None for i in range(20)] == [True] * 20


async def test_lookups_by_context_message_and_unfinished_worker(
    database: PostgresDatabase,
) -> None:
    store = PostgresTaskStore(database)
    await store.save(_task("a", context_id="ctx", worker="w-1", message_id="m-1"))
    await store.save(_task("b", TaskState.submitted, worker="w-1", message_id="m-1"))
    await store.save(_task("c", worker="w-2"))
    await store.save(_task("d"))  # not stamped: any worker's
    await store.save(_task("e", TaskState.completed, worker="w-1"))
    await store.save(_task("f", TaskState.input_required, worker="w-1"))
    in_context = await store.task_in_context("ctx")
    assert in_context is not None
    assert in_context.id == "a"
    assert await store.task_in_context("ctx-none") is None
    assert sorted(task.id for task in await store.tasks_sent_as("m-1")) == ["a", "b"]
    assert await store.tasks_sent_as("m-none") == []
    assert await store.unfinished_task_ids("w-1") == ["a", "b", "d"]
    assert await store.unfinished_task_ids("w-2") == ["c", "d"]


async def test_reconciliation_reads_the_partial_index(database: PostgresDatabase) -> None:
    store = PostgresTaskStore(database)
    await store.save(_task("a", worker="w-1"))
    async with database.pool.acquire() as connection, connection.transaction():
        await connection.execute("SET LOCAL enable_seqscan = off")
        plan = await connection.fetch(
            "EXPLAIN SELECT id FROM llamon_tasks WHERE state IN ('submitted', 'working')"
            " AND (worker = 'w-1' OR worker IS NULL) ORDER BY id"
        )
    assert "llamon_tasks_unfinished" in " ".join(str(row[0]) for row in plan)


async def test_of_two_concurrent_claims_on_a_paused_task_exactly_one_wins(
    database: PostgresDatabase,
) -> None:
    store = PostgresTaskStore(database)
    await store.save(_task("p", TaskState.input_required))
    first = _task("p", worker="replica-1")
    second = _task("p", worker="replica-2")
    won = await asyncio.gather(
        store.claim_paused(first, TaskState.input_required),
        store.claim_paused(second, TaskState.input_required),
    )
    assert sorted(won) == [False, True]
    stored = await store.get("p")
    assert stored == (first if won[0] else second)
    assert await store.claim_paused(first, TaskState.input_required) is False
    assert await store.claim_paused(_task("nobody"), TaskState.input_required) is False


async def test_push_configs_are_encrypted_at_rest_and_read_back_in_order(
    database: PostgresDatabase,
) -> None:
    key = Fernet.generate_key()
    store = PostgresPushConfigStore(database, encryption_key=key)
    await store.set_info("t", PushNotificationConfig(id="c2", url="https://hooks.example/2"))
    await store.set_info("t", PushNotificationConfig(url="https://hooks.example/t", token="tok"))
    await store.set_info("t", PushNotificationConfig(id="c2", url="https://hooks.example/2b"))
    configs = await store.get_info("t")
    assert [(c.id, c.url) for c in configs] == [
        ("c2", "https://hooks.example/2b"),
        ("t", "https://hooks.example/t"),
    ]
    raw = await database.fetch_all("SELECT config FROM llamon_push_configs")
    assert all(b"hooks.example" not in bytes(row[0]) for row in raw)
    other_key = PostgresPushConfigStore(database, encryption_key=Fernet.generate_key())
    assert await other_key.get_info("t") == []
    await store.delete_info("t", "c2")
    assert [c.id for c in await store.get_info("t")] == ["t"]
    await store.delete_info("t")
    assert await store.get_info("t") == []


async def test_replicas_opening_at_once_create_schema_version_1_once(dsn: str) -> None:
    opened = await asyncio.gather(*(open_postgres_database(dsn) for _ in range(4)))
    try:
        rows = await opened[0].fetch_all("SELECT version FROM llamon_schema")
        assert [row[0] for row in rows] == [POSTGRES_SCHEMA_VERSION] == [1]
    finally:
        await asyncio.gather(*(database.close() for database in opened))


async def test_a_database_written_by_a_newer_llamon_is_refused(dsn: str) -> None:
    database = await open_postgres_database(dsn)
    await database.write("UPDATE llamon_schema SET version = $1", (POSTGRES_SCHEMA_VERSION + 1,))
    await database.close()
    with pytest.raises(ValueError, match="written by a newer llamon") as refused:
        await open_postgres_database(dsn)
    message = str(refused.value)
    assert "schema version 2; this one reads up to 1" in message
    assert "127.0.0.1" not in message
    assert "llamon_test_" not in message  # neither user nor password from the DSN


async def test_a2a_sdk_tables_are_carried_over_once(dsn: str) -> None:
    engine = create_async_engine(normalize_postgres_dsn(dsn))
    try:
        old_tasks = DatabaseTaskStore(engine)
        old_push = DatabasePushNotificationConfigStore(engine)
        await old_tasks.save(_task("old-1", worker="w-1", message_id="m-old", text="kept"))
        await old_tasks.save(_task("old-2", TaskState.completed, context_id="ctx-old"))
        await old_push.set_info("old-1", PushNotificationConfig(id="c", url="https://h.example/"))
    finally:
        await engine.dispose()
    database = await open_postgres_database(dsn)
    try:
        store = PostgresTaskStore(database)
        first = await store.get("old-1")
        assert first == _task("old-1", worker="w-1", message_id="m-old", text="kept")
        assert [task.id for task in await store.tasks_sent_as("m-old")] == ["old-1"]
        assert await store.unfinished_task_ids("w-1") == ["old-1"]
        in_context = await store.task_in_context("ctx-old")
        assert in_context is not None
        assert in_context.id == "old-2"
        configs = await PostgresPushConfigStore(database).get_info("old-1")
        assert [(c.id, c.url) for c in configs] == [("c", "https://h.example/")]
        await store.save(_task("old-1", TaskState.completed))  # moved on since
    finally:
        await database.close()
    reopened = await open_postgres_database(dsn)  # not carried again: the new state stays
    try:
        count = await reopened.fetch_value("SELECT count(*) FROM llamon_tasks")
        assert count == 2
        again = await PostgresTaskStore(reopened).get("old-1")
        assert again is not None
        assert again.status.state == TaskState.completed
    finally:
        await reopened.close()


@pytest.mark.reason("database_unavailable")
async def test_database_down_is_database_unavailable_and_the_next_request_after_works() -> None:
    async with private_postgres() as pg:
        stores = await open_stores("postgres", dsn=pg.dsn)
        try:
            store = guard_task_store(stores.task_store)
            await store.save(_task("before"))
            await pg.stop()
            for attempt in (store.save(_task("during")), store.get("before")):
                with pytest.raises(TaskStoreUnavailableError) as down:
                    await asyncio.wait_for(attempt, DEADLINE)
                answer = classify_exception(down.value)
                assert (answer.code, answer.reason, answer.retriable) == (
                    ErrorCode.UPSTREAM_UNAVAILABLE,
                    "database_unavailable",
                    True,
                )
                assert str(down.value) == "The task store is unavailable; send the request again."
            await pg.start()
            await asyncio.wait_for(store.save(_task("after")), DEADLINE)
            found = await asyncio.wait_for(store.get("before"), DEADLINE)
            assert found is not None
            assert found.id == "before"
            assert await store.get("after") is not None
        finally:
            await stores.close()
