"""``live_tasks``: the tasks still running (submitted, working), newest first, on every
store kind (memory, SQLite, PostgreSQL); ended and paused tasks are left out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.stores import Stores
from llamon_agent.a2a.stores.failures_tasks import live_tasks
from tests.a2a.stores.test_failures import store_kinds

__all__ = ["store_kinds"]  # the fixture, shared with test_failures

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _task(task_id: str, state: TaskState, minute: int) -> Task:
    moment = (START + timedelta(minutes=minute)).isoformat()
    return Task(
        id=task_id,
        context_id=f"ctx-{task_id}",
        status=TaskStatus(state=state, timestamp=moment),
    )


async def test_only_running_tasks_newest_first(store_kinds: Stores) -> None:
    store = store_kinds.task_store
    for task in (
        _task("old-working", TaskState.working, 1),
        _task("done", TaskState.completed, 2),
        _task("new-submitted", TaskState.submitted, 3),
        _task("failed", TaskState.failed, 4),
        _task("asking", TaskState.input_required, 5),
        _task("newest-working", TaskState.working, 6),
    ):
        await store.save(task)
    found = await live_tasks(store)
    assert [task.id for task in found] == ["newest-working", "new-submitted", "old-working"]
    assert [task.id for task in await live_tasks(store, limit=1)] == ["newest-working"]
    await store.save(_task("newest-working", TaskState.completed, 7))
    assert [task.id for task in await live_tasks(store)] == ["new-submitted", "old-working"]
