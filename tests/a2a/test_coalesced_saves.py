"""Events read together share one save; nothing a caller is shown is unsaved.

A blocking send shows nothing before its run ends, and a stream shows an event only once
the task store holds it, so the events of a run already waiting to be read are stored by
one save (then streamed). A non-blocking send's first answer is stored before it is
answered. An event that waits alone is saved and sent at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client.base_client import BaseClient
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import MessageSendConfiguration, Task, TaskArtifactUpdateEvent, TaskState, TextPart

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.handler import COALESCED_MAX
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import (
    a2a_client,
    make_card,
    running_server,
    send,
    stream,
    texts,
    user_message,
)

DEADLINE = 10.0


pytestmark = pytest.mark.usefixtures("with_and_without_a_tracer_provider")


class RecordingStore(InMemoryTaskStore):
    """A real task store that keeps a copy of each save (state, artifact texts) and, while
    ``gate`` is closed, holds every save until it opens."""

    def __init__(self) -> None:
        super().__init__()
        self.saves: list[tuple[TaskState, list[str]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()
        self.ended = asyncio.Event()

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        self.saves.append((task.status.state, ["".join(texts(task))] if task.artifacts else []))
        await super().save(task.model_copy(deep=True), context)
        if task.status.state == TaskState.completed:
            self.ended.set()


class Chunks:
    """Streams ``count`` chunks at once, or one per ``step`` set by the test (``paced``)."""

    def __init__(self, count: int = 3, *, paced: bool = False) -> None:
        self.count = count
        self.paced = paced
        self.step = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        return "".join(f"c{i} " for i in range(self.count))

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        for i in range(self.count):
            if self.paced and i:
                await asyncio.wait_for(self.step.wait(), DEADLINE)
                self.step.clear()
            yield f"c{i} "


def parts_text(update: TaskArtifactUpdateEvent) -> list[str]:
    return [part.root.text for part in update.artifact.parts if isinstance(part.root, TextPart)]


def chunk_texts(events: list[Any]) -> list[list[str]]:
    return [
        parts_text(update) for _, update in events if isinstance(update, TaskArtifactUpdateEvent)
    ]


async def test_a_blocking_send_whose_events_come_together_is_saved_once() -> None:
    store = RecordingStore()

    async def answer(ctx: AgentContext) -> str:
        return "pong"

    app = create_app(answer, make_card(), task_store=store)
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("ping"))
        assert (task.status.state, texts(task)) == (TaskState.completed, ["pong"])
        assert store.saves == [(TaskState.completed, ["pong"])]
        stored = await InMemoryTaskStore.get(store, task.id)
        assert stored is not None
        assert texts(stored) == ["pong"]

        again = await send(client, user_message("ping"))  # the next request is answered
        assert again.status.state == TaskState.completed


async def test_a_stream_sends_no_event_before_the_store_holds_it() -> None:
    store, agent = RecordingStore(), Chunks(3)
    app = create_app(agent, make_card(), task_store=store)
    async with running_server(app) as url, a2a_client(url, streaming=True) as client:
        store.gate.clear()
        events: list[Any] = []

        async def read() -> None:
            async for event in client.send_message(user_message("go")):
                events.append(event)

        reading = asyncio.create_task(read())
        await asyncio.wait_for(store.waiting.wait(), DEADLINE)  # the run's save is held
        assert store.saves == []
        assert events == []
        store.gate.set()
        await asyncio.wait_for(reading, DEADLINE)
        assert events  # sent once the save returned
        assert store.saves == [(TaskState.completed, ["c0 c1 c2 "])]

        streamed = await stream(client, user_message("again"))  # the next request is answered
        assert chunk_texts(streamed) == [["c0 "], ["c1 "], ["c2 "], ["c0 ", "c1 ", "c2 "]]


async def test_a_stream_event_that_comes_alone_is_saved_and_sent_at_once() -> None:
    store, agent = RecordingStore(), Chunks(3, paced=True)
    app = create_app(agent, make_card(), task_store=store)
    async with running_server(app) as url, a2a_client(url, streaming=True) as client:
        seen: list[list[str]] = []
        async for _, update in client.send_message(user_message("go")):
            if isinstance(update, TaskArtifactUpdateEvent) and not update.last_chunk:
                seen.append(parts_text(update))
                # the chunk reached the caller while the agent waits: it was stored alone
                assert store.saves[-1][1] == ["".join(chunk for (chunk,) in seen)]
                agent.step.set()
        assert seen == [["c0 "], ["c1 "], ["c2 "]]
        assert store.saves[-1] == (TaskState.completed, ["c0 c1 c2 "])


async def test_a_long_burst_of_events_is_saved_at_least_every_coalesced_max() -> None:
    count = 4 * COALESCED_MAX
    store, agent = RecordingStore(), Chunks(count)
    app = create_app(agent, make_card(), task_store=store)
    async with running_server(app) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("burst"))
        assert len(chunk_texts(events)) == count + 1  # each chunk, then the whole artifact
        # events in a row: task, working, the chunks, the whole artifact, completed
        assert len(store.saves) >= (count + 4) // (COALESCED_MAX + 1)
        assert store.saves[-1] == (TaskState.completed, ["".join(f"c{i} " for i in range(count))])


async def test_a_non_blocking_sends_first_answer_is_stored_before_it_is_answered() -> None:
    store = RecordingStore()
    release = asyncio.Event()

    async def slow(ctx: AgentContext) -> str:
        await asyncio.wait_for(release.wait(), DEADLINE)
        return "done"

    app = create_app(slow, make_card(), task_store=store)
    async with running_server(app) as url, a2a_client(url) as client:
        message = user_message("later")
        configuration = MessageSendConfiguration(blocking=False)
        first = None
        assert isinstance(client, BaseClient)  # a2a-sdk's, which takes a configuration
        async for event in client.send_message(message, configuration=configuration):
            first = event
            break
        assert isinstance(first, tuple)
        task_id = first[0].id
        stored = await InMemoryTaskStore.get(store, task_id)
        assert stored is not None
        assert stored.status.state in (
            TaskState.submitted,
            TaskState.working,
        )
        release.set()
        await asyncio.wait_for(store.ended.wait(), DEADLINE)
        done = await InMemoryTaskStore.get(store, task_id)
        assert done is not None
        assert texts(done) == ["done"]
        assert (await send(client, user_message("next"))).status.state == TaskState.completed
