"""``GuardedTaskStore``: outages classified, terminal states the store refused kept and
written once it answers again."""

from __future__ import annotations

import asyncio

import pytest
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TextPart

from llamon_agent.a2a.stores.guard import GuardedTaskStore, TaskStoreUnavailableError
from llamon_agent.a2a.stores.memory import BoundedMemoryTaskStore
from llamon_agent.core.classify import classify_exception
from tests.a2a.test_wedge import FlakyStore


def _task(task_id: str, state: TaskState = TaskState.working) -> Task:
    return Task(id=task_id, context_id="ctx", status=TaskStatus(state=state))


def _failed() -> TaskStatus:
    message = Message(role=Role.agent, parts=[Part(root=TextPart(text="ended"))], message_id="m1")
    return TaskStatus(state=TaskState.failed, message=message)


@pytest.mark.reason("database_unavailable")
async def test_an_outage_is_task_store_unavailable_and_other_failures_pass_unchanged() -> None:
    inner = FlakyStore()
    guard = GuardedTaskStore(inner)
    inner.down = True
    with pytest.raises(TaskStoreUnavailableError) as outage:
        await guard.save(_task("t"))
    assert isinstance(outage.value.__cause__, ConnectionRefusedError)
    assert classify_exception(outage.value).as_tuple()[1:] == ("database_unavailable", True)
    inner.down = False
    encoding = UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
    inner.fail_next(encoding)
    with pytest.raises(UnicodeEncodeError) as raised:
        await guard.save(_task("t"))
    assert raised.value is encoding


async def test_a_refused_end_is_shown_then_written_once_the_store_answers() -> None:
    inner = FlakyStore()
    guard = GuardedTaskStore(inner)
    await guard.save(_task("t"))
    inner.down = True
    assert await guard.end_task("t", _failed()) is False
    assert guard.pending_ids == ["t"]
    inner.down = False
    shown = await guard.get("t")  # shown failed, and written on the way
    assert shown is not None
    assert shown.status.state == TaskState.failed
    assert guard.pending_ids == []
    stored = await InMemoryTaskStore.get(inner, "t")
    assert stored is not None
    assert stored.status.state == TaskState.failed
    assert stored.status.message is not None
    assert stored.status.message.context_id == "ctx"
    await guard.drain()


async def test_a_task_ended_meanwhile_or_never_stored_is_left_alone() -> None:
    inner = FlakyStore()
    guard = GuardedTaskStore(inner)
    await guard.save(_task("done", TaskState.canceled))
    inner.down = True
    await guard.end_task("done", _failed())
    await guard.end_task("unknown", _failed())
    inner.down = False
    assert await guard.flush() == []
    done = await guard.get("done")
    assert done is not None
    assert done.status.state == TaskState.canceled
    assert await guard.get("unknown") is None
    await guard.drain()


async def test_drain_reports_what_the_store_still_refuses() -> None:
    inner = FlakyStore()
    guard = GuardedTaskStore(inner)
    await guard.save(_task("t"))
    inner.down = True
    await guard.end_task("t", _failed())
    assert await guard.drain() == ["t"]


def _resumed(task_id: str, worker: str) -> Task:
    return Task(
        id=task_id,
        context_id="ctx",
        status=TaskStatus(state=TaskState.working),
        metadata={"llamon.worker": worker},
    )


async def test_claims_pass_through_to_a_store_that_decides_them_exactly_one_saves() -> None:
    inner = BoundedMemoryTaskStore()
    guard = GuardedTaskStore(inner)
    await guard.save(_task("t", TaskState.input_required))
    won = await asyncio.gather(
        guard.claim_paused(_resumed("t", "a"), TaskState.input_required),
        guard.claim_paused(_resumed("t", "b"), TaskState.input_required),
    )
    assert sorted(won) == [False, True]
    winner = _resumed("t", "a" if won[0] else "b")
    assert await inner.get("t") == winner


async def test_a_store_without_claims_is_read_then_saved_while_the_task_is_paused() -> None:
    inner = InMemoryTaskStore()  # a2a-sdk's: no claim_paused of its own
    guard = GuardedTaskStore(inner)
    await guard.save(_task("t", TaskState.auth_required))
    assert await guard.claim_paused(_resumed("t", "a"), TaskState.input_required) is False
    assert await inner.get("t") == _task("t", TaskState.auth_required)
    assert await guard.claim_paused(_resumed("t", "a"), TaskState.auth_required) is True
    assert await inner.get("t") == _resumed("t", "a")
    assert await guard.claim_paused(_resumed("t", "b"), TaskState.auth_required) is False
    assert await inner.get("t") == _resumed("t", "a")
    assert await guard.claim_paused(_resumed("unknown", "a"), TaskState.auth_required) is False
    assert await inner.get("unknown") is None


async def test_a_claim_on_a_task_whose_end_is_pending_writes_nothing() -> None:
    inner = FlakyStore()
    guard = GuardedTaskStore(inner)
    await guard.save(_task("t", TaskState.input_required))
    inner.down = True
    assert await guard.end_task("t", _failed()) is False
    inner.down = False
    assert await guard.claim_paused(_resumed("t", "a"), TaskState.input_required) is False
    assert await InMemoryTaskStore.get(inner, "t") == _task("t", TaskState.input_required)
    shown = await guard.get("t")  # the pending end, written on the way
    assert shown is not None
    assert shown.status.state == TaskState.failed
    await guard.drain()


@pytest.mark.reason("database_unavailable")
async def test_a_claim_during_an_outage_is_task_store_unavailable() -> None:
    inner = FlakyStore()
    guard = GuardedTaskStore(inner)
    await guard.save(_task("t", TaskState.input_required))
    inner.down = True
    with pytest.raises(TaskStoreUnavailableError) as outage:
        await guard.claim_paused(_resumed("t", "a"), TaskState.input_required)
    assert isinstance(outage.value.__cause__, ConnectionRefusedError)
    inner.down = False
    assert await InMemoryTaskStore.get(inner, "t") == _task("t", TaskState.input_required)
