"""``AgentClient.stream`` against a plain a2a-sdk server (not llamon): its own event order,
no error data, its own resubscribe -- and a connection cut by a proxy mid-stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Part, Task, TaskState, TaskStatus, TextPart

from llamon_agent.client import (
    AgentClient,
    ArtifactChunk,
    FinalEvent,
    RemoteInternalError,
    RetryPolicy,
    StreamEvent,
    clear_card_cache,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from tests._support.a2a_server import make_card, running_server
from tests._support.cutting_proxy import cutting_proxy

TIMEOUT = 20.0
PATIENCE = 0.05
NO_WAIT = RetryPolicy(base_delay=0.0, max_delay=0.0)
ARTIFACT = b'"kind":"artifact-update"'
"""The proxy counts only artifact events: the cut falls before the same chunk however many
progress nudges (``ping``) the test needed before it."""


class PlainStreamer(AgentExecutor):
    """A plain a2a-sdk agent: for ``go``, one appended chunk per ``chunk`` command, a
    progress status per ``ping``, completes on ``end`` and fails (text only) on ``fail``;
    anything else is echoed at once."""

    def __init__(self) -> None:
        self.commands: asyncio.Queue[str] = asyncio.Queue()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = Task(
            id=str(context.task_id),
            context_id=str(context.context_id),
            status=TaskStatus(state=TaskState.submitted),
            history=[context.message],
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if context.get_user_input() != "go":
            await updater.add_artifact(
                [Part(root=TextPart(text=f"plain {context.get_user_input()}"))], name="answer"
            )
            await updater.complete()
            return
        index = 0
        while (command := await self.commands.get()) != "end":
            if command == "fail":
                await updater.failed(updater.new_agent_message([Part(root=TextPart(text="down"))]))
                return
            if command == "ping":
                await updater.start_work(updater.new_agent_message([Part(root=TextPart(text="…"))]))
                continue
            await updater.add_artifact(
                [Part(root=TextPart(text=f"p{index} "))],
                artifact_id="answer",
                name="answer",
                append=index > 0,
            )
            index += 1
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@pytest.fixture
def agent() -> PlainStreamer:
    return PlainStreamer()


@pytest.fixture
async def plain(agent: PlainStreamer) -> AsyncIterator[str]:
    handler = DefaultRequestHandler(agent, InMemoryTaskStore())
    app = A2AStarletteApplication(make_card(streaming=True), handler).build()
    async with running_server(app) as url:
        yield url


def part_texts(events: list[StreamEvent]) -> list[str]:
    return [
        part.root.text
        for event in events
        if isinstance(event, ArtifactChunk)
        for part in event.parts
        if isinstance(part.root, TextPart)
    ]


async def read_chunk(
    events: AsyncIterator[StreamEvent], seen: list[StreamEvent], agent: PlainStreamer
) -> None:
    """Read on until a chunk with text; while none comes, the agent reports progress."""
    pending = asyncio.ensure_future(anext(events))
    try:
        for _ in range(int(TIMEOUT / PATIENCE)):
            done, _ = await asyncio.wait({pending}, timeout=PATIENCE)
            if not done:
                await agent.commands.put("ping")
                continue
            seen.append(pending.result())
            if isinstance(seen[-1], ArtifactChunk) and seen[-1].text:
                return
            pending = asyncio.ensure_future(anext(events))
        raise TimeoutError("no chunk came")
    finally:
        if not pending.done():
            pending.cancel()


async def read_rest(events: AsyncIterator[StreamEvent], seen: list[StreamEvent]) -> None:
    async for event in events:
        seen.append(event)


async def test_a_plain_server_streams_to_the_client(plain: str, agent: PlainStreamer) -> None:
    async with AgentClient(plain) as client:
        events = client.stream("go")
        seen: list[StreamEvent] = []
        for _ in range(3):
            await agent.commands.put("chunk")
            await read_chunk(events, seen, agent)
        await agent.commands.put("end")
        seen += [event async for event in events]
        following = await client.send("next")
    assert part_texts(seen) == ["p0 ", "p1 ", "p2 "]
    final = seen[-1]
    assert isinstance(final, FinalEvent)
    assert (final.result.state, final.result.text) == (TaskState.completed, "p0 p1 p2 ")
    assert following.text == "plain next"


async def test_a_plain_server_cut_mid_stream_delivers_every_chunk_once(
    plain: str, agent: PlainStreamer
) -> None:
    """The cut comes while the caller is not reading, and the task ends before it reads
    again: the stored task gives the chunk lost on the wire and the rest, once."""
    # the proxy cuts the stream before its third artifact event: p2 is lost on the wire
    async with (
        cutting_proxy(plain, {1: 2}, only=ARTIFACT) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
        AgentClient(plain) as checker,
    ):
        events = client.stream("go")
        seen: list[StreamEvent] = []
        for _ in range(2):
            await agent.commands.put("chunk")
            await read_chunk(events, seen, agent)
        for command in ("chunk", "chunk", "end"):
            await agent.commands.put(command)
        await asyncio.wait_for(proxy.cut_event.wait(), TIMEOUT)
        task_id = seen[-1].task_id  # type: ignore[union-attr]
        while (await checker.get(task_id)).state != TaskState.completed:
            pass  # each poll is a real round trip
        seen += [event async for event in events]
        following = await client.send("next")
    assert proxy.cut_done == 1
    assert part_texts(seen) == ["p0 ", "p1 ", "p2 ", "p3 "]
    final = seen[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.text == "p0 p1 p2 p3 "
    assert following.text == "plain next"


async def test_a_plain_server_followed_again_gives_the_task_as_it_stores_it(
    plain: str, agent: PlainStreamer
) -> None:
    """Followed again while it streams (resubscribe), a2a-sdk 0.3's own server stores a
    chunk sent after the resubscription twice (its request and its resubscriber extend one
    shared artifact; llamon's server copies events). The client gives the caller the task
    as the server stores it, each stored part once: what the caller holds is what
    ``tasks/get`` answers."""
    async with (
        cutting_proxy(plain, {1: 2}, only=ARTIFACT) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
    ):
        events = client.stream("go")
        seen: list[StreamEvent] = []
        for _ in range(5):
            await agent.commands.put("chunk")
            await read_chunk(events, seen, agent)
        await agent.commands.put("end")
        seen += [event async for event in events]
        final = seen[-1]
        assert isinstance(final, FinalEvent)
        assert final.result.task_id is not None
        stored = await client.get(final.result.task_id)
        following = await client.send("next")
    assert proxy.cut_done == 1
    assert part_texts(seen)[:4] == ["p0 ", "p1 ", "p2 ", "p3 "]  # p2 lost on the wire
    assert "".join(part_texts(seen)) == final.result.text == stored.text
    assert following.text == "plain next"


@pytest.mark.reason("remote_task_failed")
async def test_a_plain_task_failing_after_a_cut_raises_typed(
    plain: str, agent: PlainStreamer
) -> None:
    async with (
        cutting_proxy(plain, {1: 1}, only=ARTIFACT) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
    ):
        events = client.stream("go")
        seen: list[StreamEvent] = []
        for _ in range(2):
            await agent.commands.put("chunk")
            await read_chunk(events, seen, agent)
        await agent.commands.put("fail")
        with pytest.raises(RemoteInternalError) as caught:
            await read_rest(events, seen)
        following = await client.send("next")
    assert proxy.cut_done == 1
    assert part_texts(seen) == ["p0 ", "p1 "]
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        ErrorCode.INTERNAL_ERROR,
        "remote_task_failed",
        "down",
    )
    assert following.text == "plain next"


async def test_following_a_cut_stream_again_is_a_remote_resume_event(
    plain: str, agent: PlainStreamer
) -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    async with (
        cutting_proxy(plain, {1: 2}, only=ARTIFACT) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
        AgentClient(plain) as checker,
    ):
        with event_scope(bus, task_id="caller-task"):
            events = client.stream("go")
            seen: list[StreamEvent] = []
            for _ in range(2):
                await agent.commands.put("chunk")
                await read_chunk(events, seen, agent)
            for command in ("chunk", "chunk", "end"):
                await agent.commands.put(command)
            await asyncio.wait_for(proxy.cut_event.wait(), TIMEOUT)
            task_id = seen[-1].task_id  # type: ignore[union-attr]
            while (await checker.get(task_id)).state != TaskState.completed:
                pass  # each poll is a real round trip
            seen += [event async for event in events]
    assert await bus.flush()
    [resumed] = [e for e in got if e.type == "remote.resume"]
    assert (resumed.stage, resumed.task_id) == ("a2a_call", "caller-task")
    assert resumed.trace_metadata == {"resume": "stream_broke", "remote_task_id": task_id}
    assert part_texts(seen) == ["p0 ", "p1 ", "p2 ", "p3 "]
