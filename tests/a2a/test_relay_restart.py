"""The Redis event relay across a Redis restart (a private ``redis-server``, stopped and
started again on its port): the relay's idle pooled connections died with the server, and
the first command after it is back must not fail on one of them."""

from __future__ import annotations

from a2a.types import TaskState, TaskStatus, TaskStatusUpdateEvent

from llamon_agent.a2a.relay import EventRelay
from tests._support.redis_server import private_redis

TASK = "task-1"


def _end() -> TaskStatusUpdateEvent:
    status = TaskStatus(state=TaskState.completed)
    return TaskStatusUpdateEvent(task_id=TASK, context_id="ctx", status=status, final=True)


async def test_after_a_redis_restart_every_call_is_answered_at_once() -> None:
    async with private_redis() as redis:
        relay = EventRelay(redis.url, block=0.1)
        try:
            assert await relay.last(TASK) is None  # a pooled connection now exists
            await redis.stop()
            await redis.start()
            # each call reconnects its dead pooled connection instead of failing
            assert await relay.last(TASK) is None
            entry = await relay.publish(TASK, _end())
            assert await relay.request_cancel(TASK) == 0
            followed = [item async for item in relay.follow(TASK)]
            assert followed == [(entry, _end())]
        finally:
            await relay.aclose()


async def test_after_a_redis_restart_a_publish_first_is_answered_too() -> None:
    async with private_redis() as redis:
        relay = EventRelay(redis.url, block=0.1)
        try:
            await relay.publish(TASK, _end())
            await redis.stop()
            await redis.start()
            entry = await relay.publish(TASK, _end())  # the pipeline reconnects as well
            last = await relay.last(TASK)
            assert last == (entry, _end())
        finally:
            await relay.aclose()
