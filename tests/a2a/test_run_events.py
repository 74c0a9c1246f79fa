"""Reading a run's events: the same events and ends as a2a-sdk's ``EventConsumer.consume_all``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from a2a.server.events import Event, EventConsumer, EventQueue
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
)
from opentelemetry import trace

from llamon_agent.a2a.queues import LlamonQueueManager
from llamon_agent.a2a.run_events import ends_reading, read_events, run_events, watch_agent
from tests._support.otel import spans_of_a_provider_of_its_own

WAIT = 5.0


def _status(state: TaskState, *, final: bool) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id="t-1", context_id="c-1", status=TaskStatus(state=state), final=final
    )


def _task(state: TaskState) -> Task:
    return Task(id="t-1", context_id="c-1", status=TaskStatus(state=state))


def _message() -> Message:
    return Message(
        role=Role.agent, parts=[Part(root=TextPart(text="hi"))], message_id="m-1", task_id="t-1"
    )


async def _read(
    events: Callable[[EventConsumer], AsyncIterator[Event]], queue: EventQueue
) -> list[Event]:
    return [event async for event in events(EventConsumer(queue))]


async def _queue_with(*events: Event) -> EventQueue:
    queue = await LlamonQueueManager().create("t-1")
    for event in events:
        await queue.enqueue_event(event)
    return queue


ENDS: list[tuple[str, list[Event]]] = [
    (
        "a final status-update",
        [_status(TaskState.working, final=False), _status(TaskState.completed, final=True)],
    ),
    ("a message", [_message()]),
    ("a task asking for input", [_task(TaskState.input_required)]),
    ("a failed task", [_task(TaskState.failed)]),
]


@pytest.mark.parametrize(("case", "read"), ENDS, ids=[case for case, _ in ENDS])
async def test_reading_stops_after_the_runs_end_as_a2a_sdks_consumer_does(
    case: str, read: list[Event]
) -> None:
    after = _status(TaskState.working, final=False)  # published after the end: not read
    mine = await _queue_with(*read, after)
    sdks = await _queue_with(*read, after)

    got = await asyncio.wait_for(_read(run_events, mine), WAIT)
    expected = await asyncio.wait_for(_read(EventConsumer.consume_all, sdks), WAIT)

    assert got == expected == read, case
    assert mine.is_closed()
    assert sdks.is_closed()
    assert mine.queue.empty()  # the end closes the queue at once: the rest is dropped


async def test_a_task_that_goes_on_is_read_until_the_queue_closes() -> None:
    working = _task(TaskState.working)
    queue = await _queue_with(working)
    reader = asyncio.ensure_future(_read(run_events, queue))
    await asyncio.sleep(0)
    assert not reader.done()  # the run goes on: the reader waits for more
    await queue.close(immediate=True)  # the run ended without an end event
    assert await asyncio.wait_for(reader, WAIT) == [working]


async def test_events_published_while_reading_are_read_in_order() -> None:
    queue = await LlamonQueueManager().create("t-1")
    published = [
        _status(TaskState.submitted, final=False),
        _status(TaskState.working, final=False),
        _status(TaskState.completed, final=True),
    ]

    async def agent() -> None:
        for event in published:
            await queue.enqueue_event(event)
            await asyncio.sleep(0)  # the reader takes each one as it comes

    reader = asyncio.ensure_future(_read(run_events, queue))
    await asyncio.wait_for(agent(), WAIT)
    assert await asyncio.wait_for(reader, WAIT) == published


async def test_the_agents_failure_is_raised_while_the_reader_waits() -> None:
    queue = await LlamonQueueManager().create("t-1")
    consumer = EventConsumer(queue)
    consumer._timeout = 0.01  # a2a-sdk's look at the agent's task, made quick
    started = asyncio.Event()

    async def agent() -> None:
        await queue.enqueue_event(_status(TaskState.working, final=False))
        started.set()
        raise RuntimeError("the agent broke")

    producer = asyncio.ensure_future(agent())
    producer.add_done_callback(consumer.agent_task_callback)
    read: list[Event] = []

    async def reader() -> None:
        async for event in run_events(consumer):
            read.append(event)

    with pytest.raises(RuntimeError, match="the agent broke"):
        await asyncio.wait_for(reader(), WAIT)
    assert started.is_set()
    assert read == [_status(TaskState.working, final=False)]


def test_ends_reading_is_a2a_sdks_list() -> None:
    assert ends_reading(_message())
    assert ends_reading(_status(TaskState.completed, final=True))
    assert not ends_reading(_status(TaskState.working, final=False))
    for state in TaskState:
        expected = state in {
            TaskState.completed,
            TaskState.canceled,
            TaskState.failed,
            TaskState.rejected,
            TaskState.unknown,
            TaskState.input_required,
        }
        assert ends_reading(_task(state)) is expected, state


async def test_with_a_tracer_provider_the_events_are_a2a_sdks_consume_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = spans_of_a_provider_of_its_own(monkeypatch)
    done = _status(TaskState.completed, final=True)
    queue = await _queue_with(done)
    assert await asyncio.wait_for(_read(read_events, queue), WAIT) == [done]
    names = {span.name for span in exporter.get_finished_spans()}
    assert "a2a.server.events.event_consumer.EventConsumer.consume_all" in names

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)  # no provider: llamon's reading
    queue = await _queue_with(done)
    stream = read_events(EventConsumer(queue))
    assert getattr(stream, "__name__", None) == "run_events"
    assert [event async for event in stream] == [done]


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
async def test_the_agents_failure_is_noted_by_the_watched_callback(
    traced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = spans_of_a_provider_of_its_own(monkeypatch)
    if not traced:
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    queue = await LlamonQueueManager().create("t-1")
    consumer = EventConsumer(queue)
    consumer._timeout = 0.01
    go = asyncio.Event()

    async def agent() -> None:
        await go.wait()
        raise RuntimeError("the agent broke")

    producer = asyncio.ensure_future(agent())
    producer.add_done_callback(consumer.agent_task_callback)  # as a2a-sdk's handler does
    watch_agent(consumer, producer)
    go.set()

    async def reader() -> list[Event]:
        return [event async for event in run_events(consumer)]

    with pytest.raises(RuntimeError, match="the agent broke"):
        await asyncio.wait_for(reader(), WAIT)
    names = [span.name for span in exporter.get_finished_spans()]
    callback = "a2a.server.events.event_consumer.EventConsumer.agent_task_callback"
    assert names.count(callback) == (1 if traced else 0)
