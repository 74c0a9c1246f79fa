"""The task event queues: a resubscriber that taps a run's queue after it closed."""

from __future__ import annotations

import asyncio

import pytest
from a2a.server.events import EventConsumer
from a2a.types import TaskState, TaskStatus, TaskStatusUpdateEvent

from llamon_agent.a2a.queues import LlamonQueueManager
from llamon_agent.core.telemetry import tracer_provider_set


def _status(state: TaskState, *, final: bool) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id="t-1", context_id="c-1", status=TaskStatus(state=state), final=final
    )


async def _read_all(queue_events: EventConsumer) -> list[object]:
    return [event async for event in queue_events.consume_all()]


async def test_a_tap_of_a_closed_queue_is_closed_and_its_reader_ends() -> None:
    manager = LlamonQueueManager()
    queue = await manager.create("t-1")
    await queue.close()  # the run's reader read its end; the queue is not released yet
    tapped = await manager.tap("t-1")
    assert tapped is not None
    assert tapped.is_closed()
    assert await asyncio.wait_for(_read_all(EventConsumer(tapped)), 5) == []


async def test_a_tap_of_an_open_queue_receives_its_own_copy_of_later_events() -> None:
    manager = LlamonQueueManager()
    queue = await manager.create("t-1")
    tapped = await manager.tap("t-1")
    assert tapped is not None
    assert not tapped.is_closed()
    event = _status(TaskState.completed, final=True)
    await queue.enqueue_event(event)
    read = await asyncio.wait_for(_read_all(EventConsumer(tapped)), 5)
    assert read == [event]
    assert read[0] is not event


async def test_a_run_queue_delivers_the_same_with_and_without_a_tracer_provider(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    for provider in (None, TracerProvider()):
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
        assert tracer_provider_set() is (provider is not None)
        manager = LlamonQueueManager()
        queue = await manager.create("t-1")
        working = _status(TaskState.working, final=False)
        done = _status(TaskState.completed, final=True)
        await queue.enqueue_event(working)
        await queue.enqueue_event(done)
        assert await asyncio.wait_for(_read_all(EventConsumer(queue)), 5) == [working, done]
        assert queue.is_closed()


async def test_a_graceful_close_waits_until_the_reader_has_read_every_event() -> None:
    manager = LlamonQueueManager()
    queue = await manager.create("t-1")
    working = _status(TaskState.working, final=False)
    await queue.enqueue_event(working)
    closing = asyncio.ensure_future(queue.close())
    await asyncio.sleep(0)
    assert queue.is_closed()
    assert not closing.done()  # the event is not read yet
    await queue.enqueue_event(_status(TaskState.completed, final=True))  # closed: dropped
    assert await queue.dequeue_event(no_wait=True) is working
    queue.task_done()
    await asyncio.wait_for(closing, 5)
    assert queue.queue.empty()
    await asyncio.wait_for(queue.close(), 5)  # closing again returns at once
    await asyncio.wait_for(queue.close(immediate=True), 5)


async def test_an_immediate_close_drops_the_unread_events_but_a_tap_keeps_its_own() -> None:
    manager = LlamonQueueManager()
    queue = await manager.create("t-1")
    tapped = await manager.tap("t-1")
    assert tapped is not None
    done = _status(TaskState.completed, final=True)
    await queue.enqueue_event(done)
    await asyncio.wait_for(queue.close(immediate=True), 5)
    assert queue.queue.empty()
    assert await asyncio.wait_for(_read_all(EventConsumer(tapped)), 5) == [done]
