"""A benchmark agent that ticks: one artifact chunk every ``every`` ms, stamped with the time
it was handed to the server, so a reader on the same machine computes publish -> receive.

    llamon serve bench/ticking_agent.py:agent --port 0 ...
    python bench/a2a_servers.py raw-hold        (the same ticks from a raw a2a-sdk executor)

The caller's message text sets the run, as ``key=value`` words (unknown words are ignored):

``every=MS``     pause between two ticks (default 100)
``count=N``      ticks before the task completes (default 10; 0: no limit, see ``release``)
``lead=MS``      wait before the first tick (default 0), time for a second reader to subscribe
``release=PATH`` end (completed) as soon as the file PATH exists, even between ticks; one
                 poller per process looks for every watched path each ``RELEASE_POLL`` s

Each tick is the JSON object ``{"tick": i, "ns": time.time_ns()}`` (i from 1), taken just
before it is handed over: a ``message/stream`` sends it as an artifact-update event whose
DataPart holds it; ``message/send`` returns ``{"ticks": N}`` once done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from llamon_agent.a2a.agent import AgentContext, AgentOutput

__all__ = ["RELEASE_POLL", "TickSpec", "TickingAgent", "agent", "parse_spec", "ticks"]

RELEASE_POLL = 0.05
"""Seconds between two looks for the release files."""


@dataclass(frozen=True)
class TickSpec:
    """One run: ``every`` ms apart, ``count`` ticks (0: until released), after ``lead`` ms."""

    every: float = 100.0
    count: int = 10
    lead: float = 0.0
    release: str | None = None


def parse_spec(text: str) -> TickSpec:
    """The run ``text`` asks for (``every=20 count=100 lead=300 release=/tmp/x``)."""
    words = dict(word.partition("=")[::2] for word in text.split() if "=" in word)
    return TickSpec(
        every=float(words.get("every", 100)),
        count=int(words.get("count", 10)),
        lead=float(words.get("lead", 0)),
        release=words.get("release") or None,
    )


class _ReleaseWatch:
    """Sets each watched path's event once the file exists; one polling task per process."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._poller: asyncio.Task[None] | None = None

    def event(self, path: str) -> asyncio.Event:
        released = self._events.setdefault(path, asyncio.Event())
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll())
        return released

    async def _poll(self) -> None:
        while self._events:
            await asyncio.sleep(RELEASE_POLL)
            for path in _existing(list(self._events)):
                self._events.pop(path).set()


def _existing(paths: list[str]) -> list[str]:
    """The ``paths`` whose file exists (a local ``stat`` each: microseconds, not I/O waits)."""
    return [path for path in paths if os.path.exists(path)]


_WATCH = _ReleaseWatch()


async def _pause(seconds: float, released: asyncio.Event | None) -> None:
    """Sleep ``seconds``, or less when ``released`` is set meanwhile."""
    if released is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(released.wait(), seconds)


async def ticks(spec: TickSpec) -> AsyncIterator[dict[str, int]]:
    """The run's ticks, each stamped with ``time.time_ns()`` as it is yielded."""
    released = _WATCH.event(spec.release) if spec.release else None
    if spec.lead:
        await _pause(spec.lead / 1000, released)
    seq = 0
    while released is None or not released.is_set():
        seq += 1
        yield {"tick": seq, "ns": time.time_ns()}
        if spec.count and seq >= spec.count:
            return
        await _pause(spec.every / 1000, released)


class TickingAgent:
    """Streams the ticks; a blocking send runs them and answers ``{"ticks": N}``."""

    stream_fallback = False  # a failed stream must not run the ticks a second time

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        count = 0
        async for _tick in ticks(parse_spec(ctx.text)):
            count += 1
        return {"ticks": count}

    async def stream(self, ctx: AgentContext) -> AsyncIterator[dict[str, int]]:
        async for tick in ticks(parse_spec(ctx.text)):
            yield tick


agent = TickingAgent()
