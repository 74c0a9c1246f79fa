"""``task_locks``: one end per run, one run per task, and nothing kept once a task is free."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import TaskState

from llamon_agent.a2a.task_locks import TASK_BUSY_CODE, TaskClaims, task_busy
from llamon_agent.core.error_data import ProtocolErrorData


def test_the_first_end_wins_and_the_others_lose() -> None:
    claim = TaskClaims().begin("t", "c")
    assert claim.decide(TaskState.completed) is True
    assert claim.decide(TaskState.canceled) is False
    assert claim.ended_by == TaskState.completed


async def test_finish_frees_the_task_and_keeps_a_later_claim() -> None:
    claims = TaskClaims()
    first = claims.begin("t", "c")
    claims.finish(first)
    assert first.done.is_set()
    assert claims.running("t") is None
    second = claims.begin("t", "c")
    claims.finish(first)  # a late let-go of the old run does not free the new one
    assert claims.running("t") is second


async def test_the_per_task_lock_is_exclusive_and_forgotten_when_free() -> None:
    claims = TaskClaims()
    order: list[str] = []
    inside = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with claims.locked("t"):
            inside.set()
            await release.wait()
            order.append("holder")

    async def waiter() -> None:
        await inside.wait()
        async with claims.locked("t"):
            order.append("waiter")

    tasks = [asyncio.create_task(holder()), asyncio.create_task(waiter())]
    await asyncio.wait_for(inside.wait(), 5)
    release.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert order == ["holder", "waiter"]
    assert claims._locks == {}


@pytest.mark.reason("task_busy")
def test_task_busy_is_a_retriable_protocol_error() -> None:
    error = task_busy().error
    assert error is not None
    assert error.code == TASK_BUSY_CODE == -32041
    data = ProtocolErrorData.model_validate(error.data)
    assert (data.error_code, data.error_reason, data.retriable) == (
        "RATE_LIMITED",
        "task_busy",
        True,
    )
    assert error.message == data.error_message
