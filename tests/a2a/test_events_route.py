"""TaskEventLog: what a late listener gets, what is kept, and a listener that falls behind."""

from __future__ import annotations

import asyncio

import pytest

from llamon_agent.a2a import events_route
from llamon_agent.a2a.events_route import END_TYPES, TaskEventLog
from llamon_agent.core.events import RunnerEvent


def _event(task_id: str, type_: str) -> RunnerEvent:
    return RunnerEvent(type_, "a2a_serve", task_id=task_id)


async def _all(log: TaskEventLog, task_id: str, *, ended: bool = False) -> list[str]:
    return [e.type async for e in log.follow(task_id, ended=ended)]


def test_the_end_types_are_the_turns_ends() -> None:
    assert sorted(END_TYPES) == [
        "task.auth-required",
        "task.canceled",
        "task.completed",
        "task.failed",
        "task.input-required",
        "task.rejected",
    ]


async def test_a_late_listener_gets_the_kept_events_up_to_the_end() -> None:
    log = TaskEventLog()
    for type_ in ("task.submitted", "task.working", "task.completed"):
        log(_event("t1", type_))
    log(_event("t2", "task.submitted"))
    log(RunnerEvent("run.started", "tool_loop"))  # no task: not kept
    assert await _all(log, "t1") == ["task.submitted", "task.working", "task.completed"]
    assert [e.type for e in log.kept("t2")] == ["task.submitted"]


async def test_a_live_listener_ends_with_the_tasks_end() -> None:
    log = TaskEventLog()
    log(_event("t1", "task.submitted"))
    listening = asyncio.create_task(_all(log, "t1"))
    await asyncio.sleep(0)  # the listener attaches
    log(_event("t1", "task.working"))
    log(_event("t1", "task.input-required"))
    log(_event("t1", "task.working"))  # the next turn: not this listener's
    assert await asyncio.wait_for(listening, 5) == [
        "task.submitted",
        "task.working",
        "task.input-required",
    ]


async def test_a_task_stored_as_ended_without_kept_events_ends_at_once() -> None:
    log = TaskEventLog()
    assert await asyncio.wait_for(_all(log, "gone", ended=True), 5) == []


async def test_the_least_recent_tasks_and_the_oldest_events_go_first() -> None:
    log = TaskEventLog(per_task=2, tasks=2)
    for type_ in ("a", "b", "c"):
        log(_event("t1", f"x.{type_}"))
    log(_event("t2", "x.a"))
    log(_event("t3", "x.a"))
    assert log.kept("t1") == ()
    assert [e.type for e in log.kept("t2")] == ["x.a"]
    log2 = TaskEventLog(per_task=2)
    for type_ in ("a", "b", "c"):
        log2(_event("t1", f"x.{type_}"))
    assert [e.type for e in log2.kept("t1")] == ["x.b", "x.c"]


async def test_a_listener_that_falls_behind_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_route, "LISTENER_QUEUE", 2)
    log = TaskEventLog()
    log(_event("t1", "task.submitted"))
    stream = log.follow("t1")
    assert (await anext(stream)).type == "task.submitted"  # attached, now behind
    reading: asyncio.Future[RunnerEvent] = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    for _ in range(5):  # nobody reads: the third one overflows the listener's queue
        log(_event("t1", "step.started"))
    assert (await asyncio.wait_for(reading, 5)).type == "step.started"
    assert [e.type async for e in stream] == []  # ended: the later events are not its
    assert log.kept("t1")[-1].type == "step.started"  # the log itself kept them
