"""Worker liveness alone: ``Liveness`` instances on the shared Redis (a key prefix of each
test's own) over one real PostgreSQL task store, and, for outages, a private
``redis-server`` the test stops or pauses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, cast

import pytest
from a2a.types import DataPart, Task, TaskState, TaskStatus, TextPart
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.liveness import Liveness, ending_tasks_of, intervals
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import WORKER_METADATA_KEY, Stores, open_stores
from llamon_agent.a2a.stores.failures import FailureQuery
from tests._support.a2a_server import make_card, running_server
from tests._support.redis_server import (
    SHARED_REDIS_URL,
    delete_prefix,
    private_redis,
    unique_prefix,
)
from tests._support.stores import postgres_schema

BEAT = 0.2
LEASE = 1.0
SLACK = 1.0
"""Seconds a sweep may take beyond lease + beat on a busy machine (ending the tasks, two
cores shared)."""
WAIT = 10.0


async def until(condition: Callable[[], Awaitable[bool]], within: float = WAIT) -> None:
    """Return once ``condition()`` is true; ``TimeoutError`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not await condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {within} s")
        await asyncio.sleep(0.02)


async def _is(state: Awaitable[TaskState], expected: TaskState) -> bool:
    return await state is expected


async def _true(value: bool) -> bool:
    return value


def task(task_id: str, state: TaskState, worker: str | None) -> Task:
    metadata = {WORKER_METADATA_KEY: worker} if worker is not None else None
    return Task(id=task_id, context_id="ctx", status=TaskStatus(state=state), metadata=metadata)


async def state_of(stores: Stores, task_id: str) -> TaskState:
    got = await stores.task_store.get(task_id)
    assert got is not None
    return got.status.state


def error_data(got: Task) -> tuple[str, dict[str, Any]]:
    assert got.status.message is not None
    text_part, data_part = (part.root for part in got.status.message.parts)
    assert isinstance(text_part, TextPart)
    assert isinstance(data_part, DataPart)
    return text_part.text, data_part.data


class Fleet:
    """Stores (one per replica, one database) and ``Liveness`` instances on one prefix."""

    def __init__(self, stack: AsyncExitStack, dsn: str, url: str, prefix: str) -> None:
        self.stack = stack
        self.dsn = dsn
        self.url = url
        self.prefix = prefix

    async def stores(self) -> Stores:
        stores = await open_stores("postgres", dsn=self.dsn)
        self.stack.push_async_callback(stores.close)
        return stores

    async def liveness(
        self, worker: str, stores: Stores | None = None, *, url: str | None = None
    ) -> Liveness:
        stores = stores or await self.stores()
        liveness = Liveness(
            url or self.url,
            worker=worker,
            end_tasks=ending_tasks_of(stores.task_store, stores.failures),
            prefix=self.prefix,
            beat=BEAT,
            lease=LEASE,
        )
        self.stack.push_async_callback(liveness.aclose)
        return liveness


@asynccontextmanager
async def fleet(url: str = SHARED_REDIS_URL) -> AsyncIterator[Fleet]:
    prefix = unique_prefix()
    async with postgres_schema() as dsn, AsyncExitStack() as stack:
        try:
            yield Fleet(stack, dsn, url, prefix)
        finally:
            await stack.aclose()
            await delete_prefix(prefix, url)


async def roster(liveness: Liveness) -> set[str]:
    return cast("set[str]", await liveness.redis.smembers(liveness.roster))


async def failure_rows(stores: Stores, task_id: str) -> int:
    assert stores.failures is not None
    await stores.failures.flush()
    page = await stores.failures.query(FailureQuery(task_id=task_id))
    return len(page.rows)


@pytest.mark.reason("worker_lost")
async def test_a_replica_that_stops_beating_has_its_working_tasks_failed_within_the_bound() -> None:
    async with fleet() as running:
        shared = await running.stores()
        seeded = [
            task("a-working", TaskState.working, "worker-a"),
            task("a-submitted", TaskState.submitted, "worker-a"),
            task("a-completed", TaskState.completed, "worker-a"),
            task("a-input", TaskState.input_required, "worker-a"),
            task("unstamped", TaskState.working, None),
            task("b-working", TaskState.working, "worker-b"),
            task("c-working", TaskState.working, "worker-c"),
            task("z-working", TaskState.working, "worker-z"),  # never on the roster
        ]
        for item in seeded:
            await shared.task_store.save(item)
        sweepers = [
            await running.liveness("worker-b", shared),
            await running.liveness("worker-c"),  # another replica, its own connections
        ]
        for sweeper in sweepers:
            await sweeper.start()
        dead = await running.liveness("worker-a")
        await dead.beat()  # registered, then it never beats again
        last_beat = time.monotonic()

        async def ended() -> bool:
            return await state_of(shared, "a-working") is TaskState.failed

        await until(ended)
        elapsed = time.monotonic() - last_beat
        assert LEASE - 0.05 <= elapsed <= LEASE + BEAT + SLACK, elapsed
        await until(lambda: _is(state_of(shared, "a-submitted"), TaskState.failed), LEASE)

        got = await shared.task_store.get("a-working")
        assert got is not None
        text, data = error_data(got)
        assert text == "The worker running this task stopped before it finished."
        assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
            "UPSTREAM_UNAVAILABLE",
            "worker_lost",
            True,
        )
        untouched = {item.id: item for item in seeded[2:]}
        for task_id, before in untouched.items():
            assert await shared.task_store.get(task_id) == before, task_id
        assert await roster(sweepers[0]) == {"worker-b", "worker-c"}
        # both sweepers kept sweeping after the claim; the tasks were ended once
        counts = [sweeper.sweeps for sweeper in sweepers]
        await until(
            lambda: _true(all(s.sweeps > n + 1 for s, n in zip(sweepers, counts, strict=True)))
        )
        assert await failure_rows(shared, "a-working") == 1
        assert await failure_rows(shared, "a-submitted") == 1


@pytest.mark.reason("worker_lost")
async def test_sweepers_racing_claim_each_dead_worker_exactly_once() -> None:
    async with fleet() as running:
        shared = await running.stores()
        dead = [f"dead-{i}" for i in range(5)]
        for worker in dead:
            await shared.task_store.save(task(f"{worker}-task", TaskState.working, worker))
            await (await running.liveness(worker)).beat()
        sweepers = [await running.liveness(f"sweeper-{i}") for i in range(3)]

        async def all_expired() -> bool:
            return not await sweepers[0].redis.exists(*(sweepers[0].key(w) for w in dead))

        await until(all_expired)
        claims = await asyncio.gather(*(sweeper.sweep() for sweeper in sweepers))
        claimed = [worker for claim in claims for worker in claim]
        assert sorted(claimed) == dead  # each exactly once, across the three
        for worker in dead:
            assert await state_of(shared, f"{worker}-task") is TaskState.failed
            assert await failure_rows(shared, f"{worker}-task") == 1
        again = await asyncio.gather(*(sweeper.sweep() for sweeper in sweepers))
        assert again == [[], [], []]


async def test_a_live_worker_is_never_claimed_and_a_clean_close_leaves_the_roster() -> None:
    async with fleet() as running:
        shared = await running.stores()
        await shared.task_store.save(task("a-working", TaskState.working, "worker-a"))
        alive = await running.liveness("worker-a")
        await alive.start()
        sweeper = await running.liveness("worker-b", shared)
        assert await sweeper.sweep() == []  # its key is there
        assert await roster(sweeper) == {"worker-a"}
        await alive.aclose()
        assert await roster(sweeper) == set()
        assert not await sweeper.redis.exists(alive.key("worker-a"))
        assert await sweeper.sweep() == []  # gone cleanly: its tasks are not the sweeper's
        assert await state_of(shared, "a-working") is TaskState.working


async def test_a_worker_whose_lease_ran_out_warns_once_and_registers_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llamon_agent.a2a")
    async with fleet() as running:
        worker = await running.liveness("worker-a")
        await worker.start()
        # as if it was paused past its lease and another replica claimed it
        await worker.redis.delete(worker.key("worker-a"))
        await worker.redis.srem(worker.roster, "worker-a")

        async def back() -> bool:
            present = await worker.redis.exists(worker.key("worker-a"))
            return bool(present) and "worker-a" in await roster(worker)

        await until(back)
        warnings = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.a2a"]
        assert warnings == [
            "worker liveness: this worker's lease ran out (it did not beat for 1 s) and "
            "another replica may have ended its tasks; registered again"
        ]


async def test_a_worker_paused_past_its_lease_warns_once_and_registers_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llamon_agent.a2a")
    async with fleet() as running:
        worker = await running.liveness("worker-a")
        await worker.start()
        key = worker.key("worker-a")
        blocking = SyncRedis.from_url(SHARED_REDIS_URL)
        try:
            # the whole process pauses (its event loop does not run) until its key ran out
            deadline = time.monotonic() + WAIT
            while blocking.exists(key):
                assert time.monotonic() < deadline, "the key did not run out"
        finally:
            blocking.close()

        async def back() -> bool:
            return bool(await worker.redis.exists(key))

        await until(back)
        warnings = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.a2a"]
        assert warnings == [
            "worker liveness: this worker's lease ran out (it did not beat for 1 s) and "
            "another replica may have ended its tasks; registered again"
        ]


async def test_redis_down_one_warning_without_address_beats_resume_without_restart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="llamon_agent.a2a")
    async with private_redis() as server, fleet(server.url) as running:
        worker = await running.liveness("worker-a")
        await worker.start()
        assert worker.beating.is_set()
        await server.stop()

        async def warned() -> bool:
            return not worker.beating.is_set()

        await until(warned)
        await server.start()  # the same port, empty: beats resume, without a restart
        await until(lambda: _true(worker.beating.is_set()))
        assert await worker.redis.exists(worker.key("worker-a")) == 1
        assert await roster(worker) == {"worker-a"}
        records = [r for r in caplog.records if r.name == "llamon_agent.a2a"]
        warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings  # no "lease ran out" after an outage
        assert warnings[0].startswith("worker liveness: Redis did not answer (ConnectionError)")
        assert str(server.port) not in warnings[0]
        assert "127.0.0.1" not in warnings[0]
        infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
        assert infos == ["worker liveness: Redis answers again"]


class Partition:
    """A TCP proxy on 127.0.0.1 to the shared Redis that can cut every replica off from it
    (connections dropped, new ones refused) while Redis itself runs on, and heal."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def heal(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 6379)
        self._writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}


async def test_after_being_cut_off_past_the_lease_no_live_replica_is_taken_for_dead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llamon_agent.a2a")
    partitions = [Partition(), Partition()]  # A's and B's way to Redis
    for partition in partitions:
        await partition.heal()
    async with fleet() as running:
        shared = await running.stores()
        await shared.task_store.save(task("a-working", TaskState.working, "worker-a"))
        await shared.task_store.save(task("b-working", TaskState.working, "worker-b"))
        a, b = [
            await running.liveness(worker, shared, url=partition.url)
            for worker, partition in zip(("worker-a", "worker-b"), partitions, strict=True)
        ]
        for replica in (a, b):
            await replica.start()
        keys = [a.key("worker-a"), a.key("worker-b")]
        for partition in partitions:
            await partition.cut()  # Redis runs on: every lease runs out meanwhile
        admin = Redis.from_url(SHARED_REDIS_URL, decode_responses=True)
        running.stack.push_async_callback(admin.aclose)

        async def leases_ran_out() -> bool:
            cut_off = not a.beating.is_set() and not b.beating.is_set()
            return cut_off and not await admin.exists(*keys)

        await until(leases_ran_out)
        await partitions[1].heal()  # B first: it beats, A's key is still gone ...
        await until(lambda: _true(b.beating.is_set()))
        await partitions[0].heal()  # ... and A is back within B's next lease
        counts = [a.sweeps, b.sweeps]

        async def swept_twice() -> bool:
            return a.sweeps >= counts[0] + 2 and b.sweeps >= counts[1] + 2

        await until(swept_twice)
        assert await roster(a) == {"worker-a", "worker-b"}
        assert await state_of(shared, "a-working") is TaskState.working
        assert await state_of(shared, "b-working") is TaskState.working
        claims = [r.getMessage() for r in caplog.records if "has not beaten" in r.getMessage()]
        assert claims == []
    for partition in partitions:
        await partition.cut()


async def test_ending_the_tasks_failing_puts_the_worker_back_for_a_later_sweep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="llamon_agent.a2a")
    async with fleet() as running:
        calls: list[str] = []

        async def end_tasks(worker: str) -> list[str]:
            calls.append(worker)
            if len(calls) == 1:
                raise ConnectionRefusedError("db at 10.0.0.7:5432 refused")
            return []

        sweeper = Liveness(
            running.url,
            worker="worker-b",
            end_tasks=end_tasks,
            prefix=running.prefix,
            beat=BEAT,
            lease=LEASE,
        )
        running.stack.push_async_callback(sweeper.aclose)
        await (await running.liveness("worker-a")).beat()

        async def expired() -> bool:
            return not await sweeper.redis.exists(sweeper.key("worker-a"))

        await until(expired)
        assert await sweeper.sweep() == ["worker-a"]
        assert await roster(sweeper) == {"worker-a"}  # back: not ended yet
        assert await sweeper.sweep() == ["worker-a"]
        assert calls == ["worker-a", "worker-a"]
        assert await roster(sweeper) == set()
        warnings = [
            r.getMessage() for r in caplog.records if "could not be ended" in r.getMessage()
        ]
        assert warnings == [
            "worker liveness: the tasks of worker 'worker-a' could not be ended "
            "(ConnectionRefusedError); a later sweep tries again"
        ]


def test_intervals_come_from_arguments_settings_or_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLAMON_HEARTBEAT_SECONDS", raising=False)
    monkeypatch.delenv("LLAMON_WORKER_LEASE_SECONDS", raising=False)
    assert intervals() == (5.0, 15.0)
    monkeypatch.setenv("LLAMON_HEARTBEAT_SECONDS", "2")
    monkeypatch.setenv("LLAMON_WORKER_LEASE_SECONDS", "7.5")
    assert intervals() == (2.0, 7.5)
    assert intervals(0.2, 1) == (0.2, 1.0)
    with pytest.raises(ValueError, match="must be longer than the heartbeat"):
        intervals(3, 3)
    monkeypatch.setenv("LLAMON_HEARTBEAT_SECONDS", "0")
    with pytest.raises(ValueError, match="LLAMON_HEARTBEAT_SECONDS must be a number"):
        intervals()
    with pytest.raises(ValueError, match="a Redis URL or a client"):
        Liveness(worker="w", end_tasks=lambda worker: _no_tasks())


async def _no_tasks() -> list[str]:
    return []


async def test_create_app_with_a_redis_url_beats_while_serving_and_leaves_on_shutdown() -> None:
    worker = f"test-{uuid.uuid4().hex}"
    async with postgres_schema() as dsn:
        stores = await open_stores("postgres", dsn=dsn)
        try:
            executor = CustomAgentExecutor(echo, task_store=stores.task_store, worker=worker)
            app = create_app(
                echo,
                make_card(),
                task_store=stores.task_store,
                executor=executor,
                redis_url=SHARED_REDIS_URL,
                heartbeat=BEAT,
                worker_lease=LEASE,
            )
            liveness = app.state.llamon_liveness
            assert isinstance(liveness, Liveness)
            assert (liveness.beat_seconds, liveness.lease_seconds, liveness.worker) == (
                BEAT,
                LEASE,
                worker,
            )
            admin = Redis.from_url(SHARED_REDIS_URL, decode_responses=True)
            try:
                async with running_server(app):

                    async def registered() -> bool:
                        return bool(await admin.sismember("llamon:workers", worker))

                    await until(registered)  # at startup, once the app's lifespan began
                    assert await admin.exists(f"llamon:worker:{worker}") == 1
                assert await admin.exists(f"llamon:worker:{worker}") == 0
                assert not await admin.sismember("llamon:workers", worker)
            finally:
                await admin.aclose()
        finally:
            await stores.close()
    assert create_app(echo, make_card()).state.llamon_liveness is None  # no Redis: none


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"
