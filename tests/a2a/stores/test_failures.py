"""The failure store on every kind (memory, SQLite, PostgreSQL): rows kept as recorded,
one row by its id, queries by each column and time range, pages, grouped counts,
retention by age and count, a failed write that never raises, and a schema-3 SQLite file
brought up to version 4."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.stores import FailureRetention, Stores, open_stores
from llamon_agent.a2a.stores.failures import (
    MAX_FAILURE_ID,
    FailureCount,
    FailureQuery,
    FailureStore,
    MemoryFailureStore,
    StoredFailure,
)
from llamon_agent.a2a.stores.sqlite import SQLITE_SCHEMA_VERSION
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from tests._support.stores import postgres_schema

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def failure(
    task: str,
    reason: str = "timeout",
    *,
    minutes_ago: float = 0,
    tool: str | None = None,
    agent: str = "billing",
    node: str | None = None,
) -> StoredFailure:
    record = FailureRecord.of(reason, tool=tool, evidence={"incident_id": "0123456789ab"})
    row = StoredFailure.of(record, task_id=task, context_id=f"ctx-{task}", agent=agent, node=node)
    return replace(row, time=NOW - timedelta(minutes=minutes_ago))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store_kinds(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    kind = request.param
    retention = FailureRetention(max_age=None, max_rows=None)
    if kind == "postgres":
        async with postgres_schema() as dsn:
            stores = await open_stores("postgres", dsn=dsn, failure_retention=retention)
            try:
                yield stores
            finally:
                await stores.close()
        return
    stores = await open_stores(kind, home=tmp_path, failure_retention=retention)
    try:
        yield stores
    finally:
        await stores.close()


def _failures(stores: Stores) -> FailureStore:
    assert stores.failures is not None
    return stores.failures


async def _fill(store: FailureStore) -> None:
    store.record(failure("t1", "timeout", minutes_ago=50, tool="search"))
    store.record(failure("t2", "database_unavailable", minutes_ago=40, tool="search"))
    store.record(failure("t3", "timeout", minutes_ago=30, tool="lookup", node="fetch"))
    store.record(failure("t4", "invalid_arguments", minutes_ago=20, agent="shipping"))
    store.record(failure("t5", "timeout", minutes_ago=10, tool="search"))
    await store.flush()


async def test_a_row_comes_back_as_it_was_recorded(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    cause = {"hops": [{"agent": "b", "errorCode": "UPSTREAM_TIMEOUT"}]}
    record = FailureRecord.of("timeout", tool="search", evidence={"cause": cause})
    stored = replace(
        StoredFailure.of(record, task_id="t1", context_id="c1", agent="billing"), time=NOW
    )
    store.record(stored)
    await store.flush()
    page = await store.query()
    assert [replace(row, id=None) for row in page.rows] == [stored]
    assert page.next_cursor is None
    assert page.rows[0].to_dict()["errorCode"] == record.error_code.value


async def test_queries_filter_by_each_column_newest_first(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)

    async def tasks(**filters: object) -> list[str]:
        page = await store.query(FailureQuery(**filters))  # type: ignore[arg-type]
        return [row.task_id for row in page.rows]

    assert await tasks() == ["t5", "t4", "t3", "t2", "t1"]
    assert await tasks(reason="timeout") == ["t5", "t3", "t1"]
    assert await tasks(code="upstream_unavailable") == ["t2"]
    assert await tasks(code=ErrorCode.INVALID_INPUT) == ["t4"]
    assert await tasks(tool="search") == ["t5", "t2", "t1"]
    assert await tasks(agent="shipping") == ["t4"]
    assert await tasks(node="fetch") == ["t3"]
    assert await tasks(stage="execute", reason="timeout") == ["t5", "t3", "t1"]
    assert await tasks(task_id="t2") == ["t2"]
    assert await tasks(since=NOW - timedelta(minutes=35)) == ["t5", "t4", "t3"]
    assert await tasks(until=NOW - timedelta(minutes=30)) == ["t2", "t1"]
    assert await tasks(reason="nothing_like_it") == []


async def test_pages_follow_the_cursor_to_the_end(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await store.query(FailureQuery(limit=2, cursor=cursor))
        seen += [row.task_id for row in page.rows]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert (seen, pages) == (["t5", "t4", "t3", "t2", "t1"], 3)


async def test_get_reads_one_failure_by_its_id(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    rows = (await store.query()).rows
    ids = [row.id for row in rows]
    assert all(isinstance(row_id, int) for row_id in ids)
    assert len(set(ids)) == 5
    for row in rows:
        assert row.id is not None
        assert await store.get(row.id) == row
    unknown = max(row.id or 0 for row in rows) + 1
    assert await store.get(unknown) is None
    # never an id: below 1, past 64 bits, a bool, text that looks like SQL
    for never in (0, -1, MAX_FAILURE_ID + 1, 2**80, True):
        assert await store.get(never) is None, never
    assert await store.get("1 OR 1=1") is None  # type: ignore[arg-type]
    # the store still answers, and a pruned row is gone
    oldest, newest = rows[-1], rows[0]
    assert oldest.id is not None
    assert newest.id is not None
    store.retention = FailureRetention(max_age=None, max_rows=4)
    assert await store.prune(now=NOW.timestamp()) == 1
    assert await store.get(oldest.id) is None
    assert await store.get(newest.id) == newest


async def test_to_dict_gives_the_id_first_once_stored(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    row = failure("t1", tool="search")
    assert "id" not in row.to_dict()
    store.record(row)
    await store.flush()
    (stored,) = (await store.query()).rows
    line = stored.to_dict()
    assert list(line)[:3] == ["id", "time", "taskId"]
    assert line["id"] == stored.id
    assert {key: value for key, value in line.items() if key != "id"} == row.to_dict()


async def test_group_by_counts_largest_first(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    assert await store.group_by("reason") == [
        FailureCount("timeout", 3),
        FailureCount("database_unavailable", 1),
        FailureCount("invalid_arguments", 1),
    ]
    assert await store.group_by("error_code", FailureQuery(tool="search")) == [
        FailureCount("UPSTREAM_TIMEOUT", 2),
        FailureCount("UPSTREAM_UNAVAILABLE", 1),
    ]
    assert await store.group_by("tool") == [
        FailureCount("search", 3),
        FailureCount("lookup", 1),
        FailureCount(None, 1),
    ]
    with pytest.raises(ValueError, match="group by 'colour': use one of reason, error_code"):
        await store.group_by("colour")


async def test_retention_drops_old_rows_then_the_surplus(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    store.retention = FailureRetention(max_age=45 * 60, max_rows=3)
    removed = await store.prune(now=NOW.timestamp())
    assert removed == 2
    page = await store.query()
    assert [row.task_id for row in page.rows] == ["t5", "t4", "t3"]


def test_bad_queries_name_the_field() -> None:
    with pytest.raises(ValueError, match="code: unknown errorCode 'NOPE'"):
        FailureQuery(code="NOPE")
    with pytest.raises(ValueError, match="limit must be 1 to 1000"):
        FailureQuery(limit=0)
    with pytest.raises(ValueError, match="cursor: 'x' is not a cursor"):
        FailureQuery(cursor="x")
    with pytest.raises(ValueError, match="max_rows must be >= 1"):
        FailureRetention(max_rows=0)


def test_retention_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert FailureRetention.from_settings() == FailureRetention(30 * 24 * 3600.0, 100_000)
    monkeypatch.setenv("LLAMON_FAILURES_MAX_AGE", "3600")
    monkeypatch.setenv("LLAMON_FAILURES_MAX_ROWS", "50")
    assert FailureRetention.from_settings() == FailureRetention(3600.0, 50)
    monkeypatch.setenv("LLAMON_FAILURES_MAX_ROWS", "many")
    with pytest.raises(ValueError, match="LLAMON_FAILURES_MAX_ROWS must be a whole number"):
        FailureRetention.from_settings()


async def test_the_memory_store_keeps_at_most_max_rows() -> None:
    store = MemoryFailureStore(FailureRetention(max_age=None, max_rows=2))
    await _fill(store)
    assert [row.task_id for row in (await store.query()).rows] == ["t5", "t4"]


async def test_the_memory_store_keeps_a_recorded_failure_at_once() -> None:
    store = MemoryFailureStore()
    store.record(failure("t1"))
    store.record(failure("t2"))
    rows = (await store.query()).rows  # no flush: nothing was left to write
    assert [(row.task_id, row.id) for row in rows] == [("t2", 2), ("t1", 1)]
    assert store.dropped == 0


async def test_a_failed_memory_append_is_logged_and_counted_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken_clock() -> float:
        raise RuntimeError("no clock")

    store = MemoryFailureStore(clock=broken_clock)
    with caplog.at_level(logging.WARNING, "llamon_agent.a2a.stores.failures"):
        store.record(failure("t9"))
    assert store.dropped == 1
    assert [r.getMessage() for r in caplog.records] == [
        "failure of task t9 not stored: RuntimeError"
    ]


async def test_a_failed_write_is_logged_and_counted_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    store = _failures(stores)
    await stores.close()  # every write now fails
    with caplog.at_level(logging.WARNING, "llamon_agent.a2a.stores.failures"):
        store.record(failure("t9"))
        await store.flush()
    assert store.dropped == 1
    assert [r.getMessage() for r in caplog.records] == [
        "failure of task t9 not stored: RuntimeError"
    ]


async def test_a_schema_3_file_gains_the_failure_table_and_keeps_its_tasks(
    tmp_path: Path,
) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.completed))
    await stores.task_store.save(task)
    await stores.close()
    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # as llamon before the failure store
        plain.execute("DROP TABLE llamon_failures")
        plain.execute("PRAGMA user_version = 3")

    stores = await open_stores("sqlite", home=tmp_path)
    try:
        assert await stores.task_store.get("t1") == task
        _failures(stores).record(failure("t2"))
        await _failures(stores).flush()
        assert [row.task_id for row in (await _failures(stores).query()).rows] == ["t2"]
    finally:
        await stores.close()
    with sqlite3.connect(tmp_path / "tasks.db") as plain:
        assert plain.execute("PRAGMA user_version").fetchall() == [(SQLITE_SCHEMA_VERSION,)]
        indexes = plain.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'llamon_failures' AND type = 'index'"
        ).fetchall()
    assert SQLITE_SCHEMA_VERSION == 5
    assert sorted(name for (name,) in indexes) == [
        "llamon_failures_agent",
        "llamon_failures_error_code",
        "llamon_failures_node",
        "llamon_failures_reason",
        "llamon_failures_stage",
        "llamon_failures_task",
        "llamon_failures_time",
        "llamon_failures_tool",
    ]


async def test_recent_tasks_of_a_database_store_newest_first_by_state(
    store_kinds: Stores,
) -> None:
    from llamon_agent.a2a.stores.failures_tasks import error_data_of, recent_tasks

    if store_kinds.kind == "memory":
        with pytest.raises(ValueError, match="keeps its tasks in the serving process"):
            await recent_tasks(store_kinds)
        return
    for task_id, state in (("a1", TaskState.completed), ("a2", TaskState.failed)):
        status = TaskStatus(state=state)
        await store_kinds.task_store.save(Task(id=task_id, context_id="c", status=status))
    assert [t.id for t in await recent_tasks(store_kinds, state="failed")] == ["a2"]
    assert sorted(t.id for t in await recent_tasks(store_kinds)) == ["a1", "a2"]
    assert error_data_of((await recent_tasks(store_kinds, state="failed"))[0]) is None
    with pytest.raises(ValueError, match="state 'lost': use one of"):
        await recent_tasks(store_kinds, state="lost")


async def test_a_task_a_crash_left_working_is_a_stored_worker_lost_failure(
    store_kinds: Stores,
) -> None:
    from llamon_agent.a2a.stores import WORKER_METADATA_KEY, reconcile_orphaned_tasks

    if store_kinds.kind == "memory":
        return  # its tasks died with the process
    working = Task(
        id="w1",
        context_id="c1",
        status=TaskStatus(state=TaskState.working),
        metadata={WORKER_METADATA_KEY: "crashed"},
    )
    await store_kinds.task_store.save(working)
    assert await reconcile_orphaned_tasks(store_kinds, worker="crashed") == ["w1"]
    await _failures(store_kinds).flush()
    rows = (await _failures(store_kinds).query()).rows
    assert [(r.task_id, r.context_id, r.error_code, r.reason, r.retryable) for r in rows] == [
        ("w1", "c1", "UPSTREAM_UNAVAILABLE", "worker_lost", True)
    ]
