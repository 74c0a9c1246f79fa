"""``AgentClient.stream`` against real llamon servers on 127.0.0.1: typed events, a failure
after chunks, a pause for input, a card that does not stream, and connections cut by a
proxy mid-stream (each chunk reaches the caller once, none is lost)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState, TextPart

from llamon_agent.a2a.agent import AgentContext, Chunk, FinalOutput
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores, open_stores
from llamon_agent.client import (
    AgentClient,
    ArtifactChunk,
    CardMismatchError,
    FinalEvent,
    RemoteRateLimitedError,
    RemoteUnavailableError,
    RetryClock,
    RetryPolicy,
    StatusEvent,
    StreamEvent,
    clear_card_cache,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server, user_message
from tests._support.cutting_proxy import cutting_proxy

TIMEOUT = 20.0
NO_WAIT = RetryPolicy(base_delay=0.0, max_delay=0.0)
"""Reconnect at once (no wait to inject: every backoff is 0 s)."""
PATIENCE = 0.05
"""Seconds a test waits for a chunk before the agent reports progress (not a sleep)."""


class GatedAgent:
    """Streams one chunk per ``chunk`` command, fails on ``busy``, ends on ``end``; any
    other text than ``go`` is answered at once (``ask``: a pause for input)."""

    def __init__(self) -> None:
        self.commands: asyncio.Queue[str] = asyncio.Queue()
        self.runs: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.runs.append(f"invoke {ctx.text}")
        return f"answered {ctx.text}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
        self.runs.append(f"stream {ctx.text}")
        if ctx.text == "ask":
            yield FinalOutput(HITLInterrupt(payload={"question": "Which year?"}))
            return
        if ctx.text != "go":
            yield f"answered {ctx.text}"
            return
        index = 0
        while (command := await self.commands.get()) != "end":
            if command == "busy":
                raise_application_error(
                    ErrorCode.RATE_LIMITED,
                    "quota_exceeded",
                    message="the quota is used up",
                    retriable=True,
                    retryAfterMs=1500,
                )
            if command == "ping":
                await ctx.progress("still working")
                continue
            yield f"c{index} "
            index += 1


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@asynccontextmanager
async def served(agent: object, stores: Stores | None = None, **card: Any) -> AsyncIterator[str]:
    kwargs: dict[str, Any] = {}
    if stores is not None:
        kwargs = {"task_store": stores.task_store, "push_config_store": stores.push_config_store}
    async with running_server(create_app(agent, make_card(**card), **kwargs)) as url:
        yield url


class Collected:
    """Reads a stream in the background; the test waits for the chunks it expects."""

    def __init__(self, events: AsyncIterator[StreamEvent]) -> None:
        self.events: list[StreamEvent] = []
        self._queue: asyncio.Queue[StreamEvent | BaseException] = asyncio.Queue()
        self.task = asyncio.create_task(self._read(events))

    async def _read(self, events: AsyncIterator[StreamEvent]) -> None:
        try:
            async for event in events:
                self.events.append(event)
                await self._queue.put(event)
        except BaseException as exc:
            await self._queue.put(exc)
            raise

    async def chunk(self, agent: GatedAgent | None = None) -> ArtifactChunk:
        """The next chunk that brings text. With ``agent``: while none comes, the agent
        reports progress now and then (a chunk sent while the client was reattaching
        reaches it with the task's next event)."""
        for _ in range(int(TIMEOUT / PATIENCE)):
            try:
                event = await asyncio.wait_for(self._queue.get(), PATIENCE)
            except TimeoutError:
                if agent is not None:
                    await agent.commands.put("ping")
                continue
            if isinstance(event, BaseException):
                raise event
            if isinstance(event, ArtifactChunk) and event.text:
                return event
        raise TimeoutError("no chunk came")

    @property
    def texts(self) -> list[str]:
        """The text of each part of every chunk, in order."""
        return part_texts(self.events)

    async def end(self) -> FinalEvent:
        await asyncio.wait_for(self.task, TIMEOUT)
        final = self.events[-1]
        assert isinstance(final, FinalEvent)
        return final


def part_texts(events: list[StreamEvent]) -> list[str]:
    return [
        part.root.text
        for event in events
        if isinstance(event, ArtifactChunk)
        for part in event.parts
        if isinstance(part.root, TextPart)
    ]


async def drive(
    agent: GatedAgent, stream: Collected, commands: list[str], *, nudge: bool = False
) -> None:
    """Send each command; after each ``chunk``, wait until the caller holds it (``nudge``:
    the agent reports progress while it waits, see ``Collected.chunk``)."""
    for command in commands:
        await agent.commands.put(command)
        if command == "chunk":
            await stream.chunk(agent if nudge else None)


async def assert_next_answered(client: AgentClient) -> None:
    result = await client.send("next")
    assert (result.state, result.text) == (TaskState.completed, "answered next")


# -- an unbroken stream ----------------------------------------------------------------


async def test_stream_yields_statuses_chunks_and_the_final_result() -> None:
    agent = GatedAgent()
    async with served(agent) as url, AgentClient(url) as client:
        stream = Collected(client.stream("go"))
        await drive(agent, stream, ["ping", "chunk", "chunk", "end"])
        final = await stream.end()
        await assert_next_answered(client)
    statuses = [(e.state, e.text) for e in stream.events if isinstance(e, StatusEvent)]
    assert statuses == [
        (TaskState.submitted, ""),
        (TaskState.working, ""),
        (TaskState.working, "still working"),
    ]
    chunks = [
        (e.text, e.append, e.last_chunk) for e in stream.events if isinstance(e, ArtifactChunk)
    ]
    # llamon closes the artifact with one lastChunk event holding it whole: nothing new
    assert chunks == [("c0 ", False, False), ("c1 ", True, False), ("", True, True)]
    result = final.result
    assert (result.state, result.text, result.needs_input) == (TaskState.completed, "c0 c1 ", False)
    assert result.task_id is not None
    assert all(e.task_id == result.task_id for e in stream.events if isinstance(e, ArtifactChunk))


async def test_a_task_failing_after_chunks_raises_typed_and_keeps_the_chunks() -> None:
    agent = GatedAgent()
    async with served(agent) as url, AgentClient(url) as client:
        stream = Collected(client.stream("go"))
        await drive(agent, stream, ["chunk", "chunk", "busy"])
        with pytest.raises(RemoteRateLimitedError) as caught:
            await asyncio.wait_for(stream.task, TIMEOUT)
        await assert_next_answered(client)
    assert stream.texts == ["c0 ", "c1 "]
    error = caught.value
    assert (error.code, error.reason, error.retriable, error.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "quota_exceeded",
        True,
        1500,
    )
    assert error.task_id is not None
    assert error.agent == "test-agent"


async def test_a_pause_for_input_ends_the_stream_with_a_result_that_needs_input() -> None:
    agent = GatedAgent()
    async with served(agent) as url, AgentClient(url) as client:
        events = [event async for event in client.stream("ask")]
        final = events[-1]
        assert isinstance(final, FinalEvent)
        assert (final.result.state, final.result.needs_input, final.result.question) == (
            TaskState.input_required,
            True,
            "Which year?",
        )
        resumed = await client.resume(final.result, "1990")
        assert resumed.state == TaskState.completed


@pytest.mark.reason("card_mismatch_error")
async def test_a_card_without_streaming_is_refused_before_anything_is_sent() -> None:
    agent = GatedAgent()
    async with served(agent, streaming=False) as url, AgentClient(url) as client:
        with pytest.raises(CardMismatchError) as caught:
            async for _ in client.stream("go"):
                pass  # pragma: no cover - nothing is yielded
        assert agent.runs == []
        await assert_next_answered(client)
    assert str(caught.value) == (
        "agent 'test-agent' does not stream: its card does not declare "
        "capabilities.streaming (use send() instead)"
    )
    found = classify_exception(caught.value)
    assert (found.code, found.reason) == (ErrorCode.INVALID_INPUT, "card_mismatch_error")


async def test_a_part_the_card_does_not_accept_is_refused_before_anything_is_sent() -> None:
    from a2a.types import FilePart, FileWithUri, Part

    agent = GatedAgent()
    picture = Part(root=FilePart(file=FileWithUri(uri="http://x/p.png", mime_type="image/png")))
    async with served(agent) as url, AgentClient(url) as client:
        with pytest.raises(CardMismatchError, match="does not accept image/png"):
            async for _ in client.stream([picture]):
                pass  # pragma: no cover - nothing is yielded
    assert agent.runs == []


# -- a cut connection ----------------------------------------------------------------------
# llamon's stream: 1 Task, 2 status working, 3 c0, 4 c1, 5 c2 ... The proxy cuts the first
# SSE response before its 5th event: c2 is lost on the wire and must come from the task.


@pytest.mark.parametrize(
    "cuts",
    [{1: 4}, {1: 4, 2: 1}, {1: 4, 2: 0}],
    ids=["stream-cut", "stream-and-resubscribe-cut", "resubscribe-cut-at-once"],
)
async def test_a_cut_stream_delivers_every_chunk_once(stores: Stores, cuts: dict[int, int]) -> None:
    agent = GatedAgent()
    async with (
        served(agent, stores) as url,
        cutting_proxy(url, cuts) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
    ):
        stream = Collected(client.stream("go"))
        await drive(agent, stream, ["chunk", "chunk", "chunk"], nudge=True)  # c2: cut
        assert proxy.cut_done >= 1
        await drive(agent, stream, ["chunk", "chunk", "end"], nudge=True)
        final = await stream.end()
        await assert_next_answered(client)
    assert proxy.cut_done == len(cuts)
    assert stream.texts == ["c0 ", "c1 ", "c2 ", "c3 ", "c4 "]
    appended = [e.append for e in stream.events if isinstance(e, ArtifactChunk) and e.text]
    assert appended == [False] + [True] * (len(appended) - 1)
    assert (final.result.state, final.result.text) == (TaskState.completed, "c0 c1 c2 c3 c4 ")
    assert [e for e in stream.events if isinstance(e, FinalEvent)] == [final]


async def test_a_failure_after_a_cut_raises_typed_after_every_chunk() -> None:
    agent = GatedAgent()
    async with (
        served(agent) as url,
        cutting_proxy(url, {1: 4}) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
    ):
        stream = Collected(client.stream("go"))
        await drive(agent, stream, ["chunk", "chunk", "chunk", "chunk", "busy"], nudge=True)
        with pytest.raises(RemoteRateLimitedError) as caught:
            await asyncio.wait_for(stream.task, TIMEOUT)
        await assert_next_answered(client)
    assert proxy.cut_done == 1
    assert stream.texts == ["c0 ", "c1 ", "c2 ", "c3 "]
    assert (caught.value.reason, caught.value.retry_after_ms) == ("quota_exceeded", 1500)


async def test_a_task_that_ends_while_disconnected_is_read_once(stores: Stores) -> None:
    """The cut comes while the caller is not reading, and the task ends before it reads
    again: the stored task gives the missing chunks, once, and the final result."""
    agent = GatedAgent()
    seen: list[StreamEvent] = []

    async def pull_chunk(events: AsyncIterator[StreamEvent]) -> str:
        while True:
            seen.append(await asyncio.wait_for(anext(events), TIMEOUT))
            if isinstance(seen[-1], ArtifactChunk) and seen[-1].text:
                return seen[-1].task_id

    async with (
        served(agent, stores) as url,
        cutting_proxy(url, {1: 4}) as proxy,
        AgentClient(proxy.url, retry=NO_WAIT) as client,
        AgentClient(url) as checker,
    ):
        events = client.stream("go")
        for _ in range(2):
            await agent.commands.put("chunk")
            task_id = await pull_chunk(events)
        for command in ("chunk", "chunk", "end"):  # c2 is cut; the rest ends the task
            await agent.commands.put(command)
        await asyncio.wait_for(proxy.cut_event.wait(), TIMEOUT)
        while (await checker.get(task_id)).state != TaskState.completed:
            pass  # each poll is a real round trip
        seen.extend([event async for event in events])
        await assert_next_answered(client)
    assert part_texts(seen) == ["c0 ", "c1 ", "c2 ", "c3 "]  # c2 and c3 in one chunk
    final = seen[-1]
    assert isinstance(final, FinalEvent)
    assert final.result.text == "c0 c1 c2 c3 "


# -- a task that cannot be followed: another replica ------------------------------------


@pytest.mark.reason("remote_stream_lost")
async def test_a_task_that_cannot_be_followed_is_lost_after_the_retry_budget(
    tmp_path: Path,
) -> None:
    """Two replicas share one SQLite store; the stream runs on the first, the proxy sends
    the reconnection to the second: it reads the task but cannot follow it (no stream of
    it there), so the client polls with the policy's backoff, then gives up typed."""
    first_stores = await open_stores("sqlite", home=tmp_path)
    second_stores = await open_stores("sqlite", home=tmp_path)
    agent = GatedAgent()
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    policy = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=4.0, deadline=None)
    try:
        async with (
            served(agent, first_stores) as first,
            served(GatedAgent(), second_stores) as second,
            cutting_proxy(first, {1: 3}) as proxy,
            AgentClient(proxy.url, clock=RetryClock(sleep=sleep, random=lambda: 1.0)) as client,
        ):
            stream = Collected(client.stream(user_message("go"), retry=policy))
            await drive(agent, stream, ["chunk"])
            proxy.target_port = int(second.rsplit(":", 1)[1])
            await agent.commands.put("chunk")  # cut: the proxy drops it
            with pytest.raises(RemoteUnavailableError) as caught:
                await asyncio.wait_for(stream.task, TIMEOUT)
            assert stream.texts == ["c0 ", "c1 "]  # c1 read from the shared store
            task_id = caught.value.task_id
            assert task_id is not None
            await agent.commands.put("end")
            async with AgentClient(first) as checker:
                while (await checker.get(task_id)).state != TaskState.completed:
                    pass
            await assert_next_answered(client)
    finally:
        await first_stores.close()
        await second_stores.close()
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "remote_stream_lost",
        True,
    )
    assert waits == [0.5, 1.0]  # full jitter at its ceiling: 0.5 s, then 1 s
