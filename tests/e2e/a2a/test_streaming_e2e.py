"""message/stream over real HTTP: chunks, mid-stream failure, fallback, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import (
    DataPart,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    stream,
    user_message,
)
from tests._support.parts import artifacts_of, message_of, texts_of


class StreamingAgent:
    """Streams three chunks; fails where told to. Counts its invoke fallbacks."""

    def __init__(self) -> None:
        self.invokes = 0
        self.started = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        self.invokes += 1
        return "invoked answer"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        command = ctx.text
        if command == "fail-before":
            raise ComponentInvokeError("stream endpoint down")
        if command == "hang":
            self.started.set()
            await asyncio.Event().wait()
        for index in range(3):
            yield f"chunk{index} "
            if command == "fail-mid" and index == 1:
                raise ComponentInvokeError("mid-stream failure")


@pytest.fixture
def agent() -> StreamingAgent:
    return StreamingAgent()


@pytest.fixture
async def server(agent: StreamingAgent, stores: Stores) -> AsyncIterator[str]:
    """The streaming agent served on each store kind (memory, SQLite, PostgreSQL)."""
    app = create_app(
        agent, make_card(), task_store=stores.task_store, push_config_store=stores.push_config_store
    )
    async with running_server(app) as url:
        yield url


def _updates(events: list[Any]) -> list[Any]:
    return [update for _, update in events if update is not None]


def _chunk_texts(events: list[Any]) -> list[str]:
    """The text of each chunk event (not of the closing lastChunk event)."""
    return [
        part.root.text
        for update in _updates(events)
        if isinstance(update, TaskArtifactUpdateEvent) and not update.last_chunk
        for part in update.artifact.parts
        if isinstance(part.root, TextPart)
    ]


async def test_stream_success_sends_chunks_once(server: str, agent: StreamingAgent) -> None:
    async with a2a_client(server, streaming=True) as client:
        events = await stream(client, user_message("go"))
    assert _chunk_texts(events) == ["chunk0 ", "chunk1 ", "chunk2 "]
    final_task = events[-1][0]
    assert final_task.status.state == TaskState.completed
    assert len(final_task.artifacts) == 1
    assert "".join(p.root.text for p in final_task.artifacts[0].parts) == "chunk0 chunk1 chunk2 "
    assert agent.invokes == 0


async def test_stream_failing_midway(server: str, agent: StreamingAgent) -> None:
    async with a2a_client(server, streaming=True) as client:
        events = await stream(client, user_message("fail-mid"))
        task_id = events[-1][0].id
        fetched = await client.get_task(TaskQueryParams(id=task_id))
    assert _chunk_texts(events) == ["chunk0 ", "chunk1 "]
    statuses = [u for u in _updates(events) if isinstance(u, TaskStatusUpdateEvent)]
    failed = [u for u in statuses if u.status.state == TaskState.failed]
    assert len(failed) == 1
    assert failed[0].final is True
    failed_parts = message_of(failed[0].status.message).parts
    data = [p.root.data for p in failed_parts if isinstance(p.root, DataPart)]
    assert data[0]["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert any(isinstance(p.root, TextPart) for p in failed_parts)
    assert agent.invokes == 0, "no fallback to invoke after the first chunk"
    assert fetched.status.state == TaskState.failed
    assert len(artifacts_of(fetched.artifacts)) == 1, "no duplicate artifact"
    assert "".join(texts_of(artifacts_of(fetched.artifacts)[0].parts)) == "chunk0 chunk1 "
    assert error_data(fetched)["errorReason"] == "component_invoke_error"


async def test_stream_failing_before_first_chunk_falls_back_once(
    server: str, agent: StreamingAgent
) -> None:
    async with a2a_client(server, streaming=True) as client:
        events = await stream(client, user_message("fail-before"))
    assert agent.invokes == 1
    final_task = events[-1][0]
    assert final_task.status.state == TaskState.completed
    assert [p.root.text for a in final_task.artifacts for p in a.parts] == ["invoked answer"]


async def test_cancel_a_running_task(server: str, agent: StreamingAgent) -> None:
    async with a2a_client(server, streaming=True) as client:
        events: list[Any] = []
        first_event = asyncio.Event()

        async def consume() -> None:
            async for event in client.send_message(user_message("hang")):
                events.append(event)
                first_event.set()

        consumer = asyncio.create_task(consume())
        await asyncio.wait_for(agent.started.wait(), timeout=10)
        await asyncio.wait_for(first_event.wait(), timeout=10)
        task_id = events[0][0].id
        canceled = await client.cancel_task(TaskIdParams(id=task_id))
        await asyncio.wait_for(consumer, timeout=10)
        fetched = await client.get_task(TaskQueryParams(id=task_id))
    assert canceled.status.state == TaskState.canceled
    assert fetched.status.state == TaskState.canceled
    assert events[-1][0].status.state == TaskState.canceled
