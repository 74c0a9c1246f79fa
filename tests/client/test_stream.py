"""What a stream gives its caller, event by event: each part once (live chunks, the stored
task after a reconnection, a replaced artifact), statuses once, the end typed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from a2a.types import (
    Artifact,
    DataPart,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
)

from llamon_agent.client import (
    ArtifactChunk,
    FinalEvent,
    RemoteInvalidInputError,
    RemoteRateLimitedError,
    RetryPolicy,
    StatusEvent,
)
from llamon_agent.client.stream import _Follower, _with_quiet
from tests._support.a2a_server import make_card


def follower() -> _Follower:
    return _Follower(
        client=cast(Any, None),  # never used: these tests go through no wire
        card=make_card(),
        policy=RetryPolicy(),
    )


def text(value: str) -> Part:
    return Part(root=TextPart(text=value))


def chunk(*texts: str, append: bool, last: bool = False, artifact: str = "a") -> Any:
    return TaskArtifactUpdateEvent(
        task_id="t",
        context_id="c",
        artifact=Artifact(artifact_id=artifact, name="response", parts=[text(t) for t in texts]),
        append=append,
        last_chunk=last,
    )


def status(state: TaskState, said: str | None = None, *, final: bool = False) -> Any:
    message = None
    if said is not None:
        message = Message(role=Role.agent, parts=[text(said)], message_id=f"m-{said}")
    return TaskStatusUpdateEvent(
        task_id="t", context_id="c", status=TaskStatus(state=state, message=message), final=final
    )


def task(state: TaskState, *artifacts: tuple[str, list[str]], said: str | None = None) -> Task:
    message = None
    if said is not None:
        message = Message(role=Role.agent, parts=[text(said)], message_id=f"m-{said}")
    return Task(
        id="t",
        context_id="c",
        status=TaskStatus(state=state, message=message),
        artifacts=[
            Artifact(artifact_id=aid, name="response", parts=[text(t) for t in texts])
            for aid, texts in artifacts
        ]
        or None,
    )


def shown(events: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for event in events:
        if isinstance(event, ArtifactChunk):
            out.append(("chunk", event.artifact_id, event.text, event.append, event.last_chunk))
        elif isinstance(event, StatusEvent):
            out.append(("status", event.state, event.text))
    return out


def test_live_chunks_are_given_as_they_come_and_a_closing_whole_artifact_adds_nothing() -> None:
    f = follower()
    given = f.live(task(TaskState.submitted))
    given += f.live(status(TaskState.working))
    given += f.live(chunk("c0 ", append=False))
    given += f.live(chunk("c1 ", append=True))
    given += f.live(chunk("c0 ", "c1 ", append=False, last=True))  # llamon's closing event
    given += f.live(status(TaskState.completed, final=True))
    assert shown(given) == [
        ("status", TaskState.submitted, ""),
        ("status", TaskState.working, ""),
        ("chunk", "a", "c0 ", False, False),
        ("chunk", "a", "c1 ", True, False),
        ("chunk", "a", "", True, True),
    ]
    assert f.ended
    final = f.end()
    assert isinstance(final, FinalEvent)
    assert (final.result.state, final.result.text) == (TaskState.completed, "c0 c1 ")


def test_a_replaced_artifact_is_given_whole_with_append_false() -> None:
    f = follower()
    f.live(task(TaskState.working))
    f.live(chunk("draft ", append=False))
    assert shown(f.live(chunk("final ", append=False))) == [("chunk", "a", "final ", False, False)]


def test_the_stored_task_gives_only_what_the_caller_lacks() -> None:
    f = follower()
    f.live(task(TaskState.working))
    f.live(chunk("c0 ", append=False))
    stored = task(TaskState.working, ("a", ["c0 ", "c1 ", "c2 "]), ("b", ["b0 "]))
    assert shown(f.reconcile(stored)) == [
        ("chunk", "a", "c1 c2 ", True, False),
        ("chunk", "b", "b0 ", False, False),
    ]
    assert f.reconcile(stored) == []  # read again: nothing new
    assert not f.has_news(stored)
    diverged = task(TaskState.working, ("a", ["other "]), ("b", ["b0 "]))
    assert f.has_news(diverged)
    assert shown(f.reconcile(diverged)) == [("chunk", "a", "other ", False, False)]


def test_a_stored_task_behind_the_stream_gives_nothing_and_takes_nothing_back() -> None:
    f = follower()
    f.live(task(TaskState.working))
    f.live(chunk("c0 ", append=False))
    f.live(chunk("c1 ", append=True))
    lagging = task(TaskState.working, ("a", ["c0 "]))  # read before c1 was saved
    assert not f.has_news(lagging)
    assert f.reconcile(lagging) == []
    assert shown(f.live(chunk("c2 ", append=True))) == [("chunk", "a", "c2 ", True, False)]
    f.live(chunk("b0 ", append=False, artifact="b"))
    assert f.reconcile(task(TaskState.working, ("a", ["c0 "]))) == []  # "b" not saved yet
    f.live(status(TaskState.completed, final=True))
    final = f.end()
    assert final.result.text == "c0 c1 c2 b0 "  # the result holds what the stream gave


def test_a_live_replacement_by_a_shorter_artifact_is_still_given() -> None:
    f = follower()
    f.live(task(TaskState.working))
    f.live(chunk("c0 ", "c1 ", append=False))
    assert shown(f.live(chunk("c0 ", append=False))) == [("chunk", "a", "c0 ", False, False)]


def test_a_status_is_given_once_and_the_end_is_not_a_status() -> None:
    f = follower()
    f.live(task(TaskState.working))
    once = f.live(status(TaskState.working, "step 1")) + f.live(status(TaskState.working, "step 1"))
    assert shown(once) == [("status", TaskState.working, "step 1")]
    assert f.live(status(TaskState.input_required, "Which year?", final=True)) == []
    final = f.end()
    assert (final.result.needs_input, final.result.question) == (True, "Which year?")


def test_a_failed_task_raises_its_typed_error_at_the_end() -> None:
    f = follower()
    f.live(task(TaskState.working))
    f.live(chunk("c0 ", append=False))
    failed = status(TaskState.failed, "down")
    failed.status.message.parts.append(  # a llamon agent's error data
        Part(
            root=DataPart(
                data={
                    "errorCode": "RATE_LIMITED",
                    "errorReason": "quota_exceeded",
                    "retriable": True,
                    "retryAfterMs": 1500,
                }
            )
        )
    )
    f.live(failed)
    with pytest.raises(RemoteRateLimitedError) as caught:
        f.end()
    assert (caught.value.reason, caught.value.retry_after_ms, caught.value.task_id) == (
        "quota_exceeded",
        1500,
        "t",
    )
    plain = follower()
    plain.reconcile(task(TaskState.rejected, said="no"))
    with pytest.raises(RemoteInvalidInputError) as refused:
        plain.end()
    assert (refused.value.reason, refused.value.message) == ("remote_task_rejected", "no")


def test_a_message_reply_ends_the_stream_with_its_text() -> None:
    f = follower()
    f.live(Message(role=Role.agent, parts=[text("hi")], message_id="m"))
    assert f.ended
    assert f.end().result.text == "hi"


async def test_a_silent_stream_says_so_so_the_task_is_read_again() -> None:
    """A resubscriber left waiting on a run that already ended gets no event at all; the
    reader says when it has been quiet (the client then reads the task)."""
    release = asyncio.Event()
    reply = Message(role=Role.agent, parts=[text("late")], message_id="m")

    async def events() -> AsyncIterator[Any]:
        await release.wait()
        yield reply

    reader = _with_quiet(events(), 0.001)
    assert await anext(reader) is None  # quiet: nothing came in time
    release.set()
    after = [item async for item in reader]  # ends with the stream
    assert after[-1] is reply
    assert [item for item in after if item is not None] == [reply]
