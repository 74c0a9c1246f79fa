"""The task event store on every kind (memory, SQLite, PostgreSQL): a task's events kept in
order, read back as published, at most ``limit``; written in batches from an ``EventBus``
subscriber that never holds up the emitter (a slow or failed write is counted, not
raised); retention by age and count; a schema-4 SQLite file brought up to version 5."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import EventRetention, Stores, open_stores
from llamon_agent.a2a.stores.sqlite import SQLITE_SCHEMA_VERSION
from llamon_agent.a2a.stores.task_events import (
    MAX_WAITING,
    MemoryTaskEventStore,
    TaskEventStore,
)
from llamon_agent.a2a.stores.task_events_sql import SQLiteTaskEventStore
from llamon_agent.core.events import EventBus, RunnerEvent
from tests._support.a2a_server import make_card, user_message
from tests._support.stores import postgres_schema

T0 = 1_790_000_000.0


def event(task: str | None, type_: str, at: float = T0, **fields: object) -> RunnerEvent:
    return RunnerEvent(type_, "a2a_serve", task_id=task, context_id="ctx-1", time=at, **fields)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    kind = request.param
    keep_all = EventRetention(max_age=None, max_rows=None)
    if kind == "postgres":
        async with postgres_schema() as dsn:
            opened = await open_stores("postgres", dsn=dsn, events_retention=keep_all)
            try:
                yield opened
            finally:
                await opened.close()
        return
    opened = await open_stores(kind, home=tmp_path, events_retention=keep_all)
    try:
        yield opened
    finally:
        await opened.close()


def _events(stores: Stores) -> TaskEventStore:
    assert stores.events is not None
    return stores.events


async def test_a_tasks_events_come_back_in_order_as_they_were_published(stores: Stores) -> None:
    store = _events(stores)
    failed = event(
        "t1",
        "task.failed",
        T0 + 3,
        tool="lookup",
        step_id="call-1",
        node="fetch",
        trace_metadata={
            "failure_reason": "tool_timeout",
            "error_code": "UPSTREAM_TIMEOUT",
            "retryable": True,
        },
        extra={"hop": 2},
    )
    await store.add([event("t1", "task.submitted"), event("t2", "task.submitted", T0 + 1)])
    await store.add([event("t1", "task.working", T0 + 2), event(None, "run.started"), failed])

    kept = await store.for_task("t1")
    assert [e.type for e in kept] == ["task.submitted", "task.working", "task.failed"]
    assert kept[-1] == failed
    assert [e.type for e in await store.for_task("t2")] == ["task.submitted"]
    assert await store.for_task("nobody") == []
    assert [e.type for e in await store.for_task("t1", limit=2)] == ["task.working", "task.failed"]


async def test_a_bus_subscriber_writes_each_burst_in_one_batch(stores: Stores) -> None:
    store = _events(stores)
    bus = EventBus()
    store.subscribe(bus)
    calls: list[int] = []
    add = store.add

    async def counted(events: object) -> None:
        calls.append(len(events))  # type: ignore[arg-type]
        await add(events)  # type: ignore[arg-type]

    store.add = counted  # type: ignore[method-assign]
    for number in range(50):
        bus.publish(event("t1", f"step.{number}", T0 + number))
    bus.publish(event(None, "run.started"))  # no task: not kept
    await bus.flush()
    await store.flush()

    assert calls == [50]
    assert [e.type for e in await store.for_task("t1")] == [f"step.{n}" for n in range(50)]
    assert (store.written, store.dropped) == (50, 0)


async def test_a_write_that_waits_never_holds_up_the_emitter_and_extra_events_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()

    class WaitingStore(MemoryTaskEventStore):  # a database that does not answer yet
        async def add(self, events: object) -> None:
            await release.wait()
            await super().add(events)  # type: ignore[arg-type]

    store = WaitingStore(per_task=MAX_WAITING * 3)
    bus = EventBus()
    subscription = store.subscribe(bus, maxsize=MAX_WAITING * 3)
    bus.publish(event("t1", "first"))
    await bus.flush()  # the first write is now in flight, waiting
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        for number in range(MAX_WAITING + 5):
            bus.publish(event("t1", f"e{number}"))
        await bus.flush()
    assert time.perf_counter() - started < 5.0
    assert (store.dropped, subscription.dropped) == (5, 0)
    assert "task events not stored: 10000 waiting (1 dropped)" in caplog.messages

    release.set()
    await store.flush()
    kept = await store.for_task("t1", limit=MAX_WAITING * 3)
    assert len(kept) == MAX_WAITING + 1
    assert (kept[0].type, kept[-1].type) == ("first", f"e{MAX_WAITING - 1}")


async def test_the_subscribers_own_queue_is_bounded_and_counts_what_it_drops() -> None:
    store = MemoryTaskEventStore()
    bus = EventBus()
    subscription = store.subscribe(bus, maxsize=3)
    for number in range(5):  # one turn of the loop: the queue holds 3
        bus.publish(event("t1", f"e{number}"))
    await bus.flush()
    await store.flush()
    assert subscription.dropped == 2
    assert [e.type for e in await store.for_task("t1")] == ["e0", "e1", "e2"]
    bus.publish(event("t1", "later"))  # the next events are still kept
    await bus.flush()
    await store.flush()
    assert [e.type for e in await store.for_task("t1")][-1] == "later"


async def test_a_failed_write_is_counted_and_logged_and_the_next_one_is_still_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    store = _events(stores)
    assert isinstance(store, SQLiteTaskEventStore)
    bus = EventBus()
    store.subscribe(bus)
    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # another process drops the table
        plain.execute("DROP TABLE llamon_task_events")
    with caplog.at_level(logging.WARNING):
        bus.publish(event("t1", "task.submitted"))
        bus.publish(event("t1", "task.working"))
        await bus.flush()
        await store.flush()
    assert store.dropped == 2
    assert "2 task event(s) not stored: OperationalError" in caplog.messages
    await stores.close()

    stores = await open_stores("sqlite", home=tmp_path)  # the table is made again on open
    try:
        store = _events(stores)
        store.subscribe(bus := EventBus())
        bus.publish(event("t1", "task.completed"))
        await bus.flush()
        await store.flush()
        assert [e.type for e in await store.for_task("t1")] == ["task.completed"]
        assert store.dropped == 0
    finally:
        await stores.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_events_past_the_retention_are_pruned_by_age_then_by_count(
    kind: str, tmp_path: Path
) -> None:
    async def check(stores: Stores) -> None:
        store = _events(stores)
        store.retention = EventRetention(max_age=3600.0, max_rows=3)
        await store.add([event("old", "task.submitted", T0 - 7200)])
        await store.add([event("t1", f"e{n}", T0 + n) for n in range(5)])
        assert await store.prune(now=T0 + 10) == 3  # one too old, then the two oldest
        assert await store.for_task("old") == []
        assert [e.type for e in await store.for_task("t1")] == ["e2", "e3", "e4"]

    if kind == "postgres":
        async with postgres_schema() as dsn:
            stores = await open_stores("postgres", dsn=dsn)
            try:
                await check(stores)
            finally:
                await stores.close()
        return
    stores = await open_stores("sqlite", home=tmp_path)
    try:
        await check(stores)
    finally:
        await stores.close()


def test_the_retention_defaults_and_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLAMON_EVENTS_MAX_AGE", raising=False)
    monkeypatch.delenv("LLAMON_EVENTS_MAX_ROWS", raising=False)
    assert EventRetention.from_settings() == EventRetention(7 * 24 * 3600.0, 1_000_000)
    monkeypatch.setenv("LLAMON_EVENTS_MAX_AGE", "3600")
    monkeypatch.setenv("LLAMON_EVENTS_MAX_ROWS", "50")
    assert EventRetention.from_settings() == EventRetention(3600.0, 50)
    monkeypatch.setenv("LLAMON_EVENTS_MAX_ROWS", "many")
    with pytest.raises(ValueError, match="LLAMON_EVENTS_MAX_ROWS must be a whole number >= 1"):
        EventRetention.from_settings()
    with pytest.raises(ValueError, match="max_age must be a number of seconds > 0"):
        EventRetention(max_age=0)


async def test_open_stores_prunes_kept_events_on_open(tmp_path: Path) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    await _events(stores).add([event("t1", f"e{n}", time.time()) for n in range(4)])
    await stores.close()
    stores = await open_stores(
        "sqlite", home=tmp_path, events_retention=EventRetention(max_age=None, max_rows=1)
    )
    try:
        assert [e.type for e in await _events(stores).for_task("t1")] == ["e3"]
    finally:
        await stores.close()


async def test_the_memory_store_keeps_the_last_events_of_the_last_tasks() -> None:
    store = MemoryTaskEventStore(per_task=2, tasks=2)
    await store.add([event("t1", "a"), event("t1", "b"), event("t1", "c"), event("t2", "a")])
    await store.add([event("t3", "a")])  # t1 is the least recently written: it goes
    assert await store.for_task("t1") == []
    assert [e.type for e in await store.for_task("t2")] == ["a"]
    assert [e.type for e in await store.for_task("t3")] == ["a"]
    assert await store.prune() == 0


async def test_a_schema_4_file_gains_the_event_table_and_keeps_its_tasks(tmp_path: Path) -> None:
    stores = await open_stores("sqlite", home=tmp_path)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.completed))
    await stores.task_store.save(task)
    await stores.close()
    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # as llamon before kept events
        plain.execute("DROP TABLE llamon_task_events")
        plain.execute("PRAGMA user_version = 4")

    stores = await open_stores("sqlite", home=tmp_path)
    try:
        assert await stores.task_store.get("t1") == task
        await _events(stores).add([event("t1", "task.completed")])
        assert [e.type for e in await _events(stores).for_task("t1")] == ["task.completed"]
    finally:
        await stores.close()
    with sqlite3.connect(tmp_path / "tasks.db") as plain:
        assert plain.execute("PRAGMA user_version").fetchall() == [(5,)]
        indexes = plain.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'llamon_task_events'"
            " AND type = 'index'"
        ).fetchall()
    assert SQLITE_SCHEMA_VERSION == 5
    assert sorted(name for (name,) in indexes) == [
        "llamon_task_events_task",
        "llamon_task_events_time",
    ]


async def test_create_app_with_an_event_store_and_no_bus_still_keeps_the_tasks_events() -> None:
    """``create_app(..., event_store=)`` alone makes the bus the store subscribes to."""

    async def answer(ctx: AgentContext) -> str:
        return "ok"

    kept = MemoryTaskEventStore()
    app = create_app(answer, make_card(), event_store=kept)

    def body(text: str) -> dict[str, object]:
        message = user_message(text).model_dump(mode="json", exclude_none=True)
        return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        answered = (await http.post("/", json=body("hi"))).json()
        again = (await http.post("/", json=body("again"))).json()
    task_id = answered["result"]["id"]
    await kept.flush()
    assert [event.type for event in await kept.for_task(task_id)] == [
        "task.submitted",
        "task.working",
        "task.completed",
    ]
    assert again["result"]["status"]["state"] == "completed"  # the next request is answered
