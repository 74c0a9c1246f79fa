"""Which replicas are alive, through Redis, and the end of a dead one's tasks (the ``redis``
extra).

A server given ``create_app(redis_url=...)`` (``llamon serve --redis-url``) has a relay
(``a2a.relay``) and, with it, liveness: while it serves, it beats in Redis, and it ends
the unfinished tasks of any replica that stopped beating. Without ``redis_url`` nothing of
this exists: a crashed worker's tasks are ended when a process with its worker id starts
(``reconcile_orphaned_tasks`` at startup).

* A beat (every ``beat`` seconds, default 5, ``LLAMON_HEARTBEAT_SECONDS``):
  ``SET llamon:worker:{worker id}`` with a time to live of ``lease`` seconds (default 15,
  ``LLAMON_WORKER_LEASE_SECONDS``) and ``SADD llamon:workers {worker id}`` (the roster), in
  one script, so the key exists whenever the worker is on the roster.
* A sweep (after a beat, on every replica, one at a time): each roster member other than
  this worker whose key is gone -- no beat for a whole lease: killed, crashed, paused, cut
  off from Redis -- is claimed by a script that removes it from the roster only while its
  key is still gone, so exactly one sweeper claims a dead worker. The claimer ends the dead
  worker's ``submitted`` / ``working`` tasks stamped with its id (``metadata["llamon.worker"]``;
  never unstamped tasks, never another worker's) as ``failed``: ``UPSTREAM_UNAVAILABLE`` /
  ``worker_lost``, retriable (``end_unfinished_tasks(..., stamped_only=True)``). If
  that fails (the task store does not answer), the worker goes back on the roster and a
  later sweep tries again.
* What the caller sees: ``tasks/get`` of a task whose replica died answers ``failed`` /
  ``worker_lost`` at most ``lease`` + ``beat`` seconds (plus the time to end the tasks)
  after the replica's last beat.
* A replica sweeps only once its own beats have succeeded for a whole lease without a gap:
  after Redis did not answer (or the process or Redis stalled for more than a lease),
  every lease may have run out, and the replicas that are alive get one lease to beat again
  before any of them is taken for dead.
* A worker that finds its own key or roster entry gone (it was paused for longer than the
  lease, and its tasks may have been ended) logs one WARNING and registers again; after a
  Redis outage it noticed, that is expected and not logged.
* Redis not answering: one WARNING (never the address; again only after Redis answered
  once more), beats go on being tried every ``beat`` seconds, and nothing else stops.
* ``aclose`` (a clean shutdown, after the server ended its own tasks): deletes this
  worker's key and takes it off the roster, so nobody sweeps it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, cast

from a2a.server.tasks import TaskStore

from llamon_agent._extras import requires_extra
from llamon_agent.a2a.relay import RelayUnavailableError
from llamon_agent.a2a.stores.failures import FailureStore
from llamon_agent.a2a.stores.reconcile import end_unfinished_tasks
from llamon_agent.core.settings import (
    HEARTBEAT_ENV,
    WORKER_LEASE_ENV,
    heartbeat_setting,
    worker_lease_setting,
)

with requires_extra("redis", "worker liveness"):
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

__all__ = [
    "DEFAULT_BEAT",
    "DEFAULT_LEASE",
    "DEFAULT_PREFIX",
    "EndTasks",
    "Liveness",
    "check_redis",
    "ending_tasks_of",
    "intervals",
]

logger = logging.getLogger("llamon_agent.a2a")

DEFAULT_PREFIX: Final = "llamon:"
"""The keys' prefix: a worker's key is ``{prefix}worker:{id}``, the roster ``{prefix}workers``."""
DEFAULT_BEAT: Final = 5.0
"""Seconds between two beats."""
DEFAULT_LEASE: Final = 15.0
"""Seconds a beat lasts: a worker without a beat for that long is taken for dead."""
_CONNECT_TIMEOUT: Final = 2.0
_CLOSE_TIMEOUT: Final = 5.0

EndTasks = Callable[[str], Awaitable[Sequence[str]]]
"""Ends the unfinished tasks of the dead worker named; the ids it ended."""

# KEYS[1] the worker's key, KEYS[2] the roster; ARGV[1] the worker id, ARGV[2] the lease
# in ms. Returns {1 if the key was still there, 1 if the worker was not on the roster}.
_BEAT: Final = """
local kept = redis.call('SET', KEYS[1], '1', 'PX', ARGV[2], 'XX')
if not kept then redis.call('SET', KEYS[1], '1', 'PX', ARGV[2]) end
local added = redis.call('SADD', KEYS[2], ARGV[1])
if kept then return {1, added} end
return {0, added}
"""
# KEYS[1] the dead worker's key, KEYS[2] the roster; ARGV[1] its id. 1: claimed here.
_CLAIM: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
return redis.call('SREM', KEYS[2], ARGV[1])
"""


def intervals(beat: float | None = None, lease: float | None = None) -> tuple[float, float]:
    """``(beat, lease)``: the ones given, else ``LLAMON_HEARTBEAT_SECONDS`` /
    ``LLAMON_WORKER_LEASE_SECONDS``, else 5 s / 15 s. ``ValueError`` naming the setting
    when one is not a number > 0, or when the lease is not longer than the beat."""
    beat = beat if beat is not None else heartbeat_setting() or DEFAULT_BEAT
    lease = lease if lease is not None else worker_lease_setting() or DEFAULT_LEASE
    if not beat > 0:
        raise ValueError(f"the heartbeat ({HEARTBEAT_ENV}) must be above 0 seconds")
    if not lease > beat:
        raise ValueError(
            f"the worker lease ({WORKER_LEASE_ENV}, {lease:g} s) must be longer than the "
            f"heartbeat ({HEARTBEAT_ENV}, {beat:g} s); three beats or more is usual"
        )
    return beat, lease


def ending_tasks_of(task_store: TaskStore, failures: FailureStore | None) -> EndTasks:
    """The ``EndTasks`` of a server on ``task_store``: ``end_unfinished_tasks`` for the
    dead worker, stamped tasks only, each failure kept in ``failures``."""

    async def end_tasks(worker: str) -> list[str]:
        return await end_unfinished_tasks(task_store, failures, worker=worker, stamped_only=True)

    return end_tasks


async def check_redis(url: str) -> None:
    """``RelayUnavailableError`` (its cause chained) when Redis at ``url`` does not answer
    a ``PING`` within a few seconds; a server refuses to start then."""
    client = Redis.from_url(
        url, socket_connect_timeout=_CONNECT_TIMEOUT, socket_timeout=_CONNECT_TIMEOUT
    )
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        raise RelayUnavailableError from exc
    finally:
        with contextlib.suppress(RedisError, OSError):
            await client.aclose()


class Liveness:
    """This worker's beats in Redis and the sweeps that end dead workers' tasks (see the
    module docstring).

    ``url`` is a ``redis://`` URL; ``client`` (instead) a ``redis.asyncio.Redis`` made with
    ``decode_responses=True``, closed by ``aclose`` all the same. ``end_tasks`` ends a dead
    worker's tasks (``ending_tasks_of(store, failures)``). ``beat`` / ``lease``: seconds,
    as ``intervals`` resolves them (``ValueError`` there). ``start`` beats once and then
    in the background; ``beat()`` and ``sweep()`` are one step each.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Redis | None = None,
        worker: str,
        end_tasks: EndTasks,
        prefix: str = DEFAULT_PREFIX,
        beat: float | None = None,
        lease: float | None = None,
    ) -> None:
        if (url is None) == (client is None):
            raise ValueError("give Liveness a Redis URL or a client, not both")
        self.beat_seconds, self.lease_seconds = intervals(beat, lease)
        if client is None:
            assert url is not None  # noqa: S101 - checked above
            timeout = min(self.beat_seconds, _CONNECT_TIMEOUT)
            client = Redis.from_url(
                url,
                decode_responses=True,
                socket_connect_timeout=timeout,
                socket_timeout=max(timeout, 1.0),
            )
        self.redis: Redis = client
        self.worker = worker
        self.prefix = prefix
        self._end_tasks = end_tasks
        self._beat_script = self.redis.register_script(_BEAT)
        self._claim_script = self.redis.register_script(_CLAIM)
        self._runner: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[list[str]] | None = None
        self._registered = False  # a beat succeeded once: a lost key is news from then on
        self._failing = False  # a WARNING said Redis does not answer
        self._last_ok: float | None = None
        self._healthy_since: float | None = None
        self.beating = asyncio.Event()
        """Set while this worker's beats succeed (cleared when Redis does not answer)."""
        self.sweeps = 0
        """Background sweeps completed so far."""

    def key(self, worker: str) -> str:
        """The key whose presence says ``worker`` is alive."""
        return f"{self.prefix}worker:{worker}"

    @property
    def roster(self) -> str:
        """The set of the workers that beat (and have not stopped cleanly)."""
        return f"{self.prefix}workers"

    async def beat(self) -> bool:
        """Renew this worker's lease and roster entry; whether either had been lost (the
        key expired or a sweeper claimed this worker). ``RedisError`` / ``OSError`` when
        Redis does not answer."""
        lease_ms = max(1, round(self.lease_seconds * 1000))
        reply = await self._beat_script(
            keys=[self.key(self.worker), self.roster], args=[self.worker, lease_ms]
        )
        kept, added = (int(value) for value in cast("list[int]", reply))
        return not kept or bool(added)

    async def sweep(self) -> list[str]:
        """Claim each roster member (not this worker) whose key is gone and end its tasks;
        the workers claimed here. ``RedisError`` / ``OSError`` when Redis does not answer."""
        members = cast("set[str]", await self.redis.smembers(self.roster))
        others = sorted(member for member in members if member != self.worker)
        if not others:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for worker in others:
            pipe.exists(self.key(worker))
        alive = await pipe.execute()
        claimed: list[str] = []
        for worker, present in zip(others, alive, strict=True):
            if present:
                continue
            won = await self._claim_script(keys=[self.key(worker), self.roster], args=[worker])
            if int(cast("int", won)) != 1:
                continue  # it beat again, or another sweeper claimed it
            claimed.append(worker)
            await self._end(worker)
        return claimed

    async def _end(self, worker: str) -> None:
        """End ``worker``'s tasks; on failure, put it back on the roster for a later sweep."""
        logger.warning(
            "worker liveness: worker %r has not beaten for %g s; ending its unfinished tasks "
            "failed/worker_lost",
            worker,
            self.lease_seconds,
        )
        try:
            await self._end_tasks(worker)
        except Exception as exc:  # any failure: a later sweep tries again
            logger.warning(
                "worker liveness: the tasks of worker %r could not be ended (%s); a later "
                "sweep tries again",
                worker,
                type(exc).__name__,
            )
            await self.redis.sadd(self.roster, worker)

    async def start(self) -> None:
        """Beat once (a failure is the one WARNING), then beat and sweep in the background
        until ``aclose``."""
        await self._step()
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Beat every ``beat_seconds`` until cancelled; a failure of any kind is logged (its
        type only) and the next beat comes all the same."""
        while True:
            await asyncio.sleep(self.beat_seconds)
            try:
                await self._step()
            except Exception as exc:  # anything else: the beats must go on
                logger.warning("worker liveness: a beat failed (%s)", type(exc).__name__)

    async def _step(self) -> None:
        """One beat, its logging and health bookkeeping, and a sweep when one is due."""
        started = time.monotonic()
        stalled = self._last_ok is not None and started - self._last_ok > self.lease_seconds
        try:
            lost = await self.beat()
        except (RedisError, OSError) as exc:
            self.beating.clear()
            self._healthy_since = None
            if not self._failing:
                self._failing = True
                logger.warning(
                    "worker liveness: Redis did not answer (%s); this worker's heartbeat is "
                    "tried again every %g s, and dead replicas' tasks are not ended until "
                    "Redis answers",
                    type(exc).__name__,
                    self.beat_seconds,
                )
            return
        # after an outage the key may simply have run out meanwhile (or Redis restarted
        # empty): that is no news; after a pause of this process (stalled) it is
        recovering = self._failing
        if self._failing:
            self._failing = False
            logger.info("worker liveness: Redis answers again")
        if lost and self._registered and not recovering:
            logger.warning(
                "worker liveness: this worker's lease ran out (it did not beat for %g s) "
                "and another replica may have ended its tasks; registered again",
                self.lease_seconds,
            )
        self._registered = True
        self.beating.set()
        now = time.monotonic()
        if stalled or self._healthy_since is None:
            self._healthy_since = now
        self._last_ok = now
        due = now - self._healthy_since >= self.lease_seconds
        if due and (self._sweeper is None or self._sweeper.done()):
            self._sweeper = asyncio.get_running_loop().create_task(self._quiet_sweep())

    async def _quiet_sweep(self) -> list[str]:
        """``sweep``, with Redis not answering left to the next beat to report."""
        try:
            claimed = await self.sweep()
        except (RedisError, OSError):
            return []
        except Exception as exc:  # anything else: the next sweep comes all the same
            logger.warning("worker liveness: a sweep failed (%s)", type(exc).__name__)
            return []
        self.sweeps += 1
        return claimed

    async def aclose(self) -> None:
        """Stop beating (a sweep under way may finish, a few seconds at most), delete this
        worker's key, leave the roster, close the client."""
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        if self._sweeper is not None and not self._sweeper.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._sweeper, _CLOSE_TIMEOUT)
        with contextlib.suppress(RedisError, OSError):
            pipe = self.redis.pipeline(transaction=True)
            pipe.delete(self.key(self.worker))
            pipe.srem(self.roster, self.worker)
            await pipe.execute()
        self.beating.clear()
        await self.redis.aclose()
