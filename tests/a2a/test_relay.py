"""The Redis event relay alone, against the shared Redis (a key prefix of each test's own)
and, for outages, a private ``redis-server`` the test stops."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from a2a.server.events.event_queue import Event
from a2a.types import (
    Artifact,
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

from llamon_agent.a2a.queues import LlamonQueueManager
from llamon_agent.a2a.relay import EventRelay, RelayUnavailableError, is_final_event
from llamon_agent.core.errors import error_data_for_exception
from tests._support.redis_server import (
    SHARED_REDIS_URL,
    delete_prefix,
    private_redis,
    unique_prefix,
)

TASK = "task-1"


@pytest.fixture
async def relay() -> AsyncIterator[EventRelay]:
    prefix = unique_prefix()
    relay = EventRelay(SHARED_REDIS_URL, prefix=prefix, maxlen=50, expire=120)
    try:
        yield relay
    finally:
        await relay.aclose()
        await delete_prefix(prefix)


def status(state: TaskState, *, final: bool = False, task_id: str = TASK) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=task_id, context_id="ctx", status=TaskStatus(state=state), final=final
    )


def chunk(text: str, *, task_id: str = TASK) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id="ctx",
        artifact=Artifact(artifact_id="a", parts=[Part(root=TextPart(text=text))]),
        append=True,
    )


def run_events() -> list[Event]:
    return [
        status(TaskState.working),
        chunk("c0"),
        chunk("c1"),
        status(TaskState.completed, final=True),
    ]


async def followed(relay: EventRelay, after: str = "0-0") -> list[tuple[str, Event]]:
    return [item async for item in relay.follow(TASK, after)]


async def test_follow_replays_every_event_in_order_and_ends_at_the_final_one(
    relay: EventRelay,
) -> None:
    ids = [await relay.publish(TASK, event) for event in run_events()]
    items = await asyncio.wait_for(followed(relay), 5)
    assert [stream_id for stream_id, _ in items] == ids
    assert [event for _, event in items] == run_events()


async def test_follow_after_an_id_gives_only_the_later_events(relay: EventRelay) -> None:
    ids = [await relay.publish(TASK, event) for event in run_events()]
    items = await asyncio.wait_for(followed(relay, after=ids[1]), 5)
    assert items == list(zip(ids[2:], run_events()[2:], strict=True))
    assert await relay.last(TASK) == (ids[-1], run_events()[-1])


async def test_every_event_kind_round_trips(relay: EventRelay) -> None:
    task = Task(id=TASK, context_id="ctx", status=TaskStatus(state=TaskState.submitted))
    message = Message(
        role=Role.agent, parts=[Part(root=TextPart(text="hi"))], message_id="m1", task_id=TASK
    )
    events: list[Event] = [task, chunk("x"), status(TaskState.working), message]
    for event in events:
        await relay.publish(TASK, event)
    assert [event for _, event in await asyncio.wait_for(followed(relay), 5)] == events
    entries = await relay.redis.xrange(relay.key(TASK), count=1)
    assert entries is not None
    fields = entries[0][1]
    assert fields is not None
    assert fields["kind"] == "task"


async def test_a_follower_waiting_before_the_run_receives_it_live_and_ends(
    relay: EventRelay,
) -> None:
    follower = asyncio.create_task(followed(relay))
    for event in run_events():
        relay.post(TASK, event)
    items = await asyncio.wait_for(follower, 5)
    assert [event for _, event in items] == run_events()


async def test_the_stream_is_capped_at_about_maxlen(relay: EventRelay) -> None:
    for i in range(600):
        relay.post(TASK, chunk(f"c{i}"))
    await relay.flush()
    config = await relay.redis.config_get("stream-node-max-entries")
    node = int(str(config["stream-node-max-entries"]))
    length = await relay.redis.xlen(relay.key(TASK))
    assert relay.maxlen <= length < relay.maxlen + node
    newest = await relay.last(TASK)
    assert newest is not None
    assert newest[1] == chunk("c599")


async def test_the_final_event_sets_the_expiry(relay: EventRelay) -> None:
    events = run_events()
    for event in events[:-1]:
        await relay.publish(TASK, event)
    assert await relay.redis.ttl(relay.key(TASK)) == -1  # kept while the run goes on
    await relay.publish(TASK, events[-1])
    assert 0 < await relay.redis.ttl(relay.key(TASK)) <= 120


async def test_input_required_is_final_too(relay: EventRelay) -> None:
    paused = status(TaskState.input_required, final=True)
    assert is_final_event(paused)
    await relay.publish(TASK, status(TaskState.working))
    await relay.publish(TASK, paused)
    assert [event for _, event in await asyncio.wait_for(followed(relay), 5)][-1] == paused
    assert 0 < await relay.redis.ttl(relay.key(TASK)) <= 120


async def test_a_blocked_follower_is_cancelled_at_once() -> None:
    prefix = unique_prefix()
    relay = EventRelay(SHARED_REDIS_URL, prefix=prefix, block=30)
    got = asyncio.Event()

    async def follow() -> None:
        async for _ in relay.follow(TASK):
            got.set()

    try:
        follower = asyncio.create_task(follow())
        await relay.publish(TASK, status(TaskState.working))
        await asyncio.wait_for(got.wait(), 5)  # it read one event, and waits for the next
        follower.cancel()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(follower, 2)
        assert loop.time() - started < 2
        assert await relay.redis.ping()  # the client still answers
    finally:
        await relay.aclose()
        await delete_prefix(prefix)


async def test_idle_ends_a_follow_with_no_event() -> None:
    prefix = unique_prefix()
    relay = EventRelay(SHARED_REDIS_URL, prefix=prefix, block=0.05)
    calls = 0

    async def idle() -> bool:
        nonlocal calls
        calls += 1
        return calls == 3

    try:
        items = [item async for item in relay.follow(TASK, idle=idle)]
        assert items == []
        assert calls == 3
    finally:
        await relay.aclose()
        await delete_prefix(prefix)


async def test_a_run_queue_posts_every_event_it_takes(relay: EventRelay) -> None:
    manager = LlamonQueueManager(relay.post)
    queue = await manager.create(TASK)
    for event in run_events():
        await queue.enqueue_event(event)
    await queue.close(immediate=True)  # nobody reads it here
    await queue.enqueue_event(chunk("after close"))  # dropped, as locally
    await relay.flush()
    assert [event for _, event in await asyncio.wait_for(followed(relay), 5)] == run_events()
    assert await relay.redis.xlen(relay.key(TASK)) == 4


async def test_redis_down_one_warning_without_address_and_the_next_publish_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llamon_agent.a2a")
    async with private_redis() as server:
        relay = EventRelay(server.url, block=0.2)
        try:
            await relay.publish(TASK, status(TaskState.working))
            await server.stop()
            for event in run_events():
                relay.post(TASK, event)  # never raises, never waits
            await relay.flush()
            relay.post(TASK, chunk("more"))
            await relay.flush()
            warnings = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.a2a"]
            assert len(warnings) == 1, warnings
            assert warnings[0].startswith("event relay: Redis did not answer (ConnectionError)")
            assert str(server.port) not in warnings[0]
            assert "127.0.0.1" not in warnings[0]
            with pytest.raises(RelayUnavailableError) as raised:
                await relay.publish(TASK, chunk("x"))
            data = error_data_for_exception(raised.value)
            assert (data.error_code, data.error_reason, data.retriable) == (
                "UPSTREAM_UNAVAILABLE",
                "event_relay_unavailable",
                True,
            )
            with pytest.raises(RelayUnavailableError):
                await asyncio.wait_for(followed(relay), 5)
            await server.start()  # the same port again: Redis answers once more
            ids = [await relay.publish(TASK, event) for event in run_events()]
            items = await asyncio.wait_for(followed(relay), 5)
            assert [stream_id for stream_id, _ in items] == ids
        finally:
            await relay.aclose()


async def test_without_a_relay_a_run_queue_is_the_plain_one() -> None:
    manager = LlamonQueueManager()
    queue = await manager.create(TASK)
    assert type(queue).__name__ == "_TaskQueue"
    posted: list[tuple[str, Event]] = []
    relayed = await LlamonQueueManager(
        lambda task_id, event: posted.append((task_id, event))
    ).create(TASK)
    await relayed.enqueue_event(chunk("c0"))
    assert posted == [(TASK, chunk("c0"))]
    await queue.close(immediate=True)
    await relayed.close(immediate=True)


def test_a_relay_needs_a_url_or_a_client_and_positive_bounds() -> None:
    with pytest.raises(ValueError, match="a Redis URL or a client"):
        EventRelay()
    with pytest.raises(ValueError, match="must be positive"):
        EventRelay(SHARED_REDIS_URL, maxlen=0)


async def test_the_settings_bound_a_relay_made_without_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLAMON_RELAY_MAXLEN", "40")
    monkeypatch.setenv("LLAMON_RELAY_EXPIRE_SECONDS", "30")
    prefix = unique_prefix()
    relay = EventRelay(SHARED_REDIS_URL, prefix=prefix)  # what create_app(redis_url=) makes
    try:
        assert (relay.maxlen, relay.expire) == (40, 30.0)
        for i in range(400):
            relay.post(TASK, chunk(f"c{i}"))
        await relay.flush()
        config = await relay.redis.config_get("stream-node-max-entries")
        node = int(str(config["stream-node-max-entries"]))
        assert 40 <= await relay.redis.xlen(relay.key(TASK)) < 40 + node
        await relay.publish(TASK, status(TaskState.completed, final=True))
        assert 0 < await relay.redis.ttl(relay.key(TASK)) <= 30
    finally:
        await relay.aclose()
        await delete_prefix(prefix)


def test_bounds_given_in_code_win_over_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMON_RELAY_MAXLEN", "40")
    monkeypatch.setenv("LLAMON_RELAY_EXPIRE_SECONDS", "30")
    relay = EventRelay(SHARED_REDIS_URL, maxlen=7, expire=9)
    assert (relay.maxlen, relay.expire) == (7, 9)
    monkeypatch.delenv("LLAMON_RELAY_MAXLEN")
    monkeypatch.delenv("LLAMON_RELAY_EXPIRE_SECONDS")
    defaults = EventRelay(SHARED_REDIS_URL)
    assert (defaults.maxlen, defaults.expire) == (10_000, 600.0)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("LLAMON_RELAY_MAXLEN", "0", "LLAMON_RELAY_MAXLEN must be a whole number >= 1, got '0'"),
        (
            "LLAMON_RELAY_EXPIRE_SECONDS",
            "soon",
            "LLAMON_RELAY_EXPIRE_SECONDS must be a number of seconds > 0, got 'soon'",
        ),
    ],
)
def test_a_setting_that_is_not_a_positive_number_is_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name) as raised:
        EventRelay(SHARED_REDIS_URL)
    assert str(raised.value) == says
