"""A recorded ``RetryClock``: every wait is written down and added to a fake clock at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from llamon_agent.client import RetryClock


class Recorded:
    """``waits`` lists each wait asked for, in seconds; ``now`` is the fake monotonic
    time (the sum of the waits); the jitter is ``jitter`` (1.0: the full ceiling).
    ``on_sleep`` (optional) is awaited on each wait, with its number (1 for the first)."""

    def __init__(
        self,
        *,
        jitter: float = 1.0,
        on_sleep: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.now = 0.0
        self.waits: list[float] = []
        self.jitter = jitter
        self.on_sleep = on_sleep

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            await self.on_sleep(len(self.waits))

    def clock(self) -> RetryClock:
        return RetryClock(sleep=self.sleep, monotonic=lambda: self.now, random=lambda: self.jitter)
