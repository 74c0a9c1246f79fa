"""What a streaming client receives, event by event, over real HTTP on 127.0.0.1.

a2a-sdk's own client (ClientFactory, streaming) against llamon's ``create_app``: the
last chunk of every artifact is marked, the invoke fallback never repeats published
work, a resubscriber and the stored task hold each chunk once, a guardrail ends the
stream with a final status-update, and returned text and progress reach the caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from a2a.client import Client
from a2a.types import (
    DataPart,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
)

from llamon_agent.a2a.agent import AgentContext, Chunk, FinalOutput, GeneratorAgent
from llamon_agent.a2a.serve import load_target
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import Stores
from llamon_agent.demo import demo_agent_path
from llamon_agent.exceptions import ComponentInvokeError, GuardrailBlockedError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    stream,
    texts,
    user_message,
)
from tests._support.parts import data_of

TIMEOUT = 10

# -- helpers ---------------------------------------------------------------------------


@asynccontextmanager
async def served(agent: object, stores: Stores | None = None) -> AsyncIterator[str]:
    """``agent`` served by llamon's ``create_app`` (default or given stores)."""
    kwargs: dict[str, Any] = {}
    if stores is not None:
        kwargs = {"task_store": stores.task_store, "push_config_store": stores.push_config_store}
    async with running_server(create_app(agent, make_card(), **kwargs)) as url:
        yield url


def _values(parts: list[Part]) -> list[Any]:
    return [p.root.text if isinstance(p.root, TextPart) else data_of(p) for p in parts]


def updates(events: list[Any]) -> list[Any]:
    return [event[1] for event in events if isinstance(event, tuple) and event[1] is not None]


def artifact_updates(events: list[Any]) -> list[tuple[str | None, bool, bool, list[Any]]]:
    """(name, append, lastChunk, part values) of each artifact-update, in order."""
    return [
        (u.artifact.name, bool(u.append), bool(u.last_chunk), _values(u.artifact.parts))
        for u in updates(events)
        if isinstance(u, TaskArtifactUpdateEvent)
    ]


def final_status(events: list[Any]) -> TaskStatusUpdateEvent:
    """The stream's last event, which must be a final status-update."""
    last = updates(events)[-1]
    assert isinstance(last, TaskStatusUpdateEvent), last
    assert last.final is True
    return last


def status_data(update: TaskStatusUpdateEvent) -> dict[str, Any]:
    assert update.status.message is not None
    datas = [p.root.data for p in update.status.message.parts if isinstance(p.root, DataPart)]
    assert len(datas) == 1
    return datas[0]


def stored_artifacts(task: Task) -> list[tuple[str | None, list[Any]]]:
    return [(a.name, _values(a.parts)) for a in task.artifacts or []]


async def fetch(client: Client, task_id: str) -> Task:
    return await client.get_task(TaskQueryParams(id=task_id))


async def assert_next_answered(client: Client) -> None:
    """The server still answers: a stream of ``next`` completes."""
    events = await asyncio.wait_for(stream(client, user_message("next")), TIMEOUT)
    assert final_status(events).status.state == TaskState.completed


# -- 4. the last chunk of every artifact is marked -------------------------------------


async def chunking(ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
    command = ctx.text
    if command == "artifacts":
        await ctx.add_artifact({"rows": [1, 2]}, "fetch")
        yield FinalOutput({"answer": 42})
        return
    if command == "next":
        yield "ok"
        return
    for index in range(3):
        yield f"c{index} "
        if command == "fail" and index == 1:
            raise ComponentInvokeError("the model connection dropped")


async def test_the_last_chunk_of_a_streamed_artifact_is_marked(stores: Stores) -> None:
    async with served(chunking, stores) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("go"))
        fetched = await fetch(client, events[0][0].id)
        await assert_next_answered(client)
    chunks = ["c0 ", "c1 ", "c2 "]
    assert artifact_updates(events) == [
        ("response", False, False, ["c0 "]),
        ("response", True, False, ["c1 "]),
        ("response", True, False, ["c2 "]),
        ("response", False, True, chunks),  # the complete artifact, marked last
    ]
    ids = {
        u.artifact.artifact_id for u in updates(events) if isinstance(u, TaskArtifactUpdateEvent)
    }
    assert len(ids) == 1
    assert final_status(events).status.state == TaskState.completed
    assert stored_artifacts(events[-1][0]) == [("response", chunks)]  # the client's task
    assert fetched.status.state == TaskState.completed
    assert stored_artifacts(fetched) == [("response", chunks)]  # each chunk once


async def test_a_failed_stream_marks_the_last_chunk_of_what_was_sent(stores: Stores) -> None:
    async with served(chunking, stores) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("fail"))
        fetched = await fetch(client, events[0][0].id)
        await assert_next_answered(client)
    assert artifact_updates(events) == [
        ("response", False, False, ["c0 "]),
        ("response", True, False, ["c1 "]),
        ("response", False, True, ["c0 ", "c1 "]),
    ]
    failed = final_status(events)
    assert failed.status.state == TaskState.failed
    assert status_data(failed)["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert stored_artifacts(fetched) == [("response", ["c0 ", "c1 "])]


async def test_one_shot_artifacts_are_marked_last() -> None:
    async with served(chunking) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("artifacts"))
    assert artifact_updates(events) == [
        ("fetch", False, True, [{"rows": [1, 2]}]),
        ("result", False, True, [{"answer": 42}]),
    ]


# -- 5. the invoke fallback only when nothing was published ----------------------------


async def test_demo_partial_over_a_stream_keeps_one_artifact_and_no_second_run() -> None:
    agent = load_target(f"{demo_agent_path()}:agent")
    async with served(agent) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("partial"))
        fetched = await fetch(client, events[0][0].id)
        after = await stream(client, user_message("hello"))
    subject = {"subject": "Ada Lovelace", "source": "registry"}
    assert artifact_updates(events) == [("fetch_subject", False, True, [subject])]
    failed = final_status(events)
    assert failed.status.state == TaskState.failed
    assert status_data(failed)["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert stored_artifacts(fetched) == [("fetch_subject", [subject])]
    assert final_status(after).status.state == TaskState.completed


class ChargingAgent:
    """Publishes progress (a side effect done), then its stream fails; counts invokes."""

    def __init__(self) -> None:
        self.charges = 0
        self.invokes = 0

    async def invoke(self, ctx: AgentContext) -> str:
        self.invokes += 1
        if ctx.text == "next":
            return "ok"
        self.charges += 1
        return "charged"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk]:
        if ctx.text == "next":
            yield "ok"
            return
        self.charges += 1
        await ctx.progress("Charging the card")
        raise ComponentInvokeError("the receipt service did not answer")
        yield ""  # pragma: no cover - makes this a generator


async def test_no_fallback_after_progress_was_published() -> None:
    agent = ChargingAgent()
    async with served(agent) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("charge"))
        await assert_next_answered(client)
    assert (agent.charges, agent.invokes) == (1, 0)
    failed = final_status(events)
    assert failed.status.state == TaskState.failed
    assert status_data(failed)["errorReason"] == "component_invoke_error"
    assert artifact_updates(events) == []


async def test_stream_fallback_can_be_switched_off_per_agent() -> None:
    runs: list[str] = []

    async def once(ctx: AgentContext) -> AsyncIterator[Chunk]:
        runs.append(ctx.text)
        if ctx.text == "next":
            yield "ok"
            return
        raise ComponentInvokeError("the stream endpoint is down")
        yield ""  # pragma: no cover - makes this a generator

    agent = GeneratorAgent(once, stream_fallback=False)
    async with served(agent) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("go"))
        await assert_next_answered(client)
    assert runs == ["go", "next"]  # no second run of "go" through invoke
    failed = final_status(events)
    assert failed.status.state == TaskState.failed
    assert status_data(failed)["errorCode"] == "UPSTREAM_UNAVAILABLE"


# -- 6. a resubscriber and the stored task hold each chunk once -------------------------


class DrivenAgent:
    """Streams what the test tells it to: a progress ping, the next chunk, or the end."""

    def __init__(self) -> None:
        self.commands: asyncio.Queue[str] = asyncio.Queue()
        self.started = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        return "ok"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk]:
        if ctx.text == "next":
            yield "ok"
            return
        self.started.set()
        index = 0
        while (command := await self.commands.get()) != "end":
            if command == "ping":
                await ctx.progress("still working")
            else:
                yield f"c{index} "
                index += 1


async def _consume(events: AsyncIterator[Any], into: asyncio.Queue[Any], seen: list[Any]) -> None:
    async for event in events:
        copied = (
            (event[0].model_copy(deep=True), event[1].model_copy(deep=True) if event[1] else None)
            if isinstance(event, tuple)
            else event
        )
        seen.append(copied)
        await into.put(copied)


async def _next_chunk(events: asyncio.Queue[Any]) -> None:
    while True:
        event = await asyncio.wait_for(events.get(), TIMEOUT)
        if isinstance(event, tuple) and isinstance(event[1], TaskArtifactUpdateEvent):
            return


@pytest.mark.parametrize("late", [False, True], ids=["before-first-chunk", "after-a-chunk"])
async def test_resubscribe_holds_each_chunk_once(stores: Stores, late: bool) -> None:
    agent = DrivenAgent()
    async with (
        served(agent, stores) as url,
        a2a_client(url, streaming=True) as first,
        a2a_client(url, streaming=True) as second,
    ):
        main_queue: asyncio.Queue[Any] = asyncio.Queue()
        main_events: list[Any] = []
        main = asyncio.create_task(
            _consume(first.send_message(user_message("go")), main_queue, main_events)
        )
        await asyncio.wait_for(agent.started.wait(), TIMEOUT)
        task_id = (await asyncio.wait_for(main_queue.get(), TIMEOUT))[0].id
        if late:
            await agent.commands.put("chunk")
            await _next_chunk(main_queue)
        resub_queue: asyncio.Queue[Any] = asyncio.Queue()
        resub_events: list[Any] = []
        resub = asyncio.create_task(
            _consume(second.resubscribe(TaskIdParams(id=task_id)), resub_queue, resub_events)
        )
        for _ in range(200):  # ping until the resubscriber is attached (sees a ping)
            await agent.commands.put("ping")
            try:
                await asyncio.wait_for(resub_queue.get(), 0.05)
                break
            except TimeoutError:
                continue
        else:  # pragma: no cover - the server never attached the resubscriber
            pytest.fail("the resubscriber never received an event")
        for _ in range(2 if late else 3):
            await agent.commands.put("chunk")
            await _next_chunk(main_queue)
            await _next_chunk(resub_queue)
        running = await fetch(first, task_id)  # both consumers applied every chunk
        await agent.commands.put("end")
        await asyncio.wait_for(asyncio.gather(main, resub), TIMEOUT)
        fetched = await fetch(first, task_id)
        await assert_next_answered(first)
    chunks = ["c0 ", "c1 ", "c2 "]
    resub_expected = [
        ("response", True, False, ["c1 "]),
        ("response", True, False, ["c2 "]),
        ("response", False, True, chunks),
    ]
    if not late:
        resub_expected.insert(0, ("response", False, False, ["c0 "]))
    assert artifact_updates(resub_events) == resub_expected
    assert final_status(resub_events).status.state == TaskState.completed
    assert stored_artifacts(resub_events[-1][0]) == [("response", chunks)]  # resubscriber
    assert stored_artifacts(main_events[-1][0]) == [("response", chunks)]  # first client
    assert running.status.state == TaskState.working
    assert stored_artifacts(running) == [("response", chunks)]  # tasks/get while streaming
    assert stored_artifacts(fetched) == [("response", chunks)]  # tasks/get at the end


# -- 7. a guardrail ends the stream with a final status-update -------------------------


class GuardedAgent:
    """Streams a draft, then its guardrail blocks it (``hold`` holds chunks back)."""

    def __init__(self, *, hold: bool) -> None:
        self.hold_chunks = hold

    async def invoke(self, ctx: AgentContext) -> str:
        return "ok"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk]:
        if ctx.text == "next":
            yield "ok"
            return
        if ctx.text == "checked":
            yield "a "
            yield "b "
            await ctx.release_chunks()  # the guardrail passed on "a b "
            yield "c "
            return
        yield "unsafe draft "
        raise GuardrailBlockedError("blocked", violation_category="self-harm")


def _assert_guardrail_blocked(update: TaskStatusUpdateEvent | Task) -> None:
    assert update.status.state == TaskState.failed
    message = update.status.message
    assert message is not None
    data = [p.root.data for p in message.parts if isinstance(p.root, DataPart)]
    assert len(data) == 1
    assert data[0]["errorCode"] == "GUARDRAIL_BLOCKED"
    assert data[0]["guardrail"] == {"violationCategory": "self-harm"}


async def test_a_guardrail_in_a_stream_ends_it_with_a_final_status_update() -> None:
    async with (
        served(GuardedAgent(hold=False)) as url,
        a2a_client(url, streaming=True) as client,
    ):
        events = await stream(client, user_message("draft"))
        fetched = await fetch(client, events[0][0].id)
        await assert_next_answered(client)
    assert [type(u).__name__ for u in updates(events)] == [
        "TaskStatusUpdateEvent",  # working
        "TaskArtifactUpdateEvent",
        "TaskStatusUpdateEvent",  # failed, final
    ]
    assert artifact_updates(events) == [("response", False, False, ["unsafe draft "])]
    _assert_guardrail_blocked(final_status(events))
    _assert_guardrail_blocked(fetched)
    assert not fetched.artifacts  # the stored task keeps no artifact
    assert error_data(fetched)["errorCode"] == "GUARDRAIL_BLOCKED"


async def test_held_chunks_of_a_blocked_answer_are_never_sent() -> None:
    async with (
        served(GuardedAgent(hold=True)) as url,
        a2a_client(url, streaming=True) as client,
    ):
        events = await stream(client, user_message("draft"))
        fetched = await fetch(client, events[0][0].id)
        await assert_next_answered(client)
    assert artifact_updates(events) == []
    _assert_guardrail_blocked(final_status(events))
    assert "unsafe" not in fetched.model_dump_json()


async def test_held_chunks_go_out_when_released_and_at_the_end() -> None:
    async with (
        served(GuardedAgent(hold=True)) as url,
        a2a_client(url, streaming=True) as client,
    ):
        events = await stream(client, user_message("checked"))
        fetched = await fetch(client, events[0][0].id)
    assert artifact_updates(events) == [
        ("response", False, False, ["a ", "b "]),
        ("response", True, False, ["c "]),
        ("response", False, True, ["a ", "b ", "c "]),
    ]
    assert final_status(events).status.state == TaskState.completed
    assert stored_artifacts(fetched) == [("response", ["a ", "b ", "c "])]


# -- 8. returned text after emit, and progress ----------------------------------------


async def emit_then_return(ctx: AgentContext) -> str:
    if ctx.text == "next":
        return "ok"
    await ctx.emit("Looking it up. ")
    return "The answer is 42."


async def test_text_returned_after_emit_reaches_a_send() -> None:
    async with served(emit_then_return) as url, a2a_client(url) as client:
        task = await send(client, user_message("ask"))
        fetched = await fetch(client, task.id)
    expected = [("response", ["Looking it up. ", "The answer is 42."])]
    assert stored_artifacts(task) == expected
    assert stored_artifacts(fetched) == expected


async def test_text_returned_after_emit_reaches_a_stream() -> None:
    async with served(emit_then_return) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("ask"))
        fetched = await fetch(client, events[0][0].id)
        await assert_next_answered(client)
    assert artifact_updates(events) == [
        ("response", False, False, ["Looking it up. "]),
        ("response", True, False, ["The answer is 42."]),
        ("response", False, True, ["Looking it up. ", "The answer is 42."]),
    ]
    assert texts(fetched) == ["Looking it up. ", "The answer is 42."]


async def searching(ctx: AgentContext) -> str:
    if ctx.text == "next":
        return "ok"
    await ctx.progress("Searching 3 sources…", {"sources": 3})
    return "found it"


async def test_progress_is_a_working_status_update_and_no_artifact() -> None:
    async with served(searching) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("search"))
        fetched = await fetch(client, events[0][0].id)
        await assert_next_answered(client)
    progress = [
        u
        for u in updates(events)
        if isinstance(u, TaskStatusUpdateEvent) and u.status.message is not None
    ]
    assert len(progress) == 1
    assert progress[0].status.state == TaskState.working
    assert progress[0].final is False
    assert progress[0].status.message is not None
    assert _values(progress[0].status.message.parts) == ["Searching 3 sources…", {"sources": 3}]
    assert artifact_updates(events) == [("response", False, True, ["found it"])]
    assert final_status(events).status.state == TaskState.completed
    assert stored_artifacts(fetched) == [("response", ["found it"])]


async def test_a_resubscriber_that_goes_away_holds_nothing_up() -> None:
    agent = DrivenAgent()
    async with (
        served(agent) as url,
        a2a_client(url, streaming=True) as first,
        a2a_client(url, streaming=True) as second,
    ):
        main_queue: asyncio.Queue[Any] = asyncio.Queue()
        main_events: list[Any] = []
        main = asyncio.create_task(
            _consume(first.send_message(user_message("go")), main_queue, main_events)
        )
        await asyncio.wait_for(agent.started.wait(), TIMEOUT)
        task_id = (await asyncio.wait_for(main_queue.get(), TIMEOUT))[0].id
        resub_queue: asyncio.Queue[Any] = asyncio.Queue()
        resub = asyncio.create_task(
            _consume(second.resubscribe(TaskIdParams(id=task_id)), resub_queue, [])
        )
        for _ in range(200):  # ping until the resubscriber is attached (sees a ping)
            await agent.commands.put("ping")
            try:
                await asyncio.wait_for(resub_queue.get(), 0.05)
                break
            except TimeoutError:
                continue
        resub.cancel()  # the resubscriber disconnects and never reads again
        await asyncio.gather(resub, return_exceptions=True)
        for command in ("chunk", "chunk", "end"):
            await agent.commands.put(command)
        await asyncio.wait_for(main, TIMEOUT)
        fetched = await fetch(first, task_id)
        await assert_next_answered(first)
    assert final_status(main_events).status.state == TaskState.completed
    assert fetched.status.state == TaskState.completed
    assert stored_artifacts(fetched) == [("response", ["c0 ", "c1 "])]
