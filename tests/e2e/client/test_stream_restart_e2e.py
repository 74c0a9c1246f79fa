"""``AgentClient.stream`` when the server process dies mid-stream and a new one starts on
the same port and SQLite store: the chunks before stay delivered once, the task's end as
the new server reports it (``failed`` / ``worker_lost``) is raised typed, and the next call
is answered (a real ``llamon serve`` subprocess, SIGKILL, a real restart)."""

from __future__ import annotations

import asyncio
import socket
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
from a2a.types import TaskState, TextPart

from llamon_agent.client import (
    AgentClient,
    ArtifactChunk,
    RemoteUnavailableError,
    RetryClock,
    RetryPolicy,
    StreamEvent,
    clear_card_cache,
)
from llamon_agent.core.codes import ErrorCode
from tests._support.a2a_server import user_message
from tests._support.serve import READY_TIMEOUT, llamon_serve

TARGET = "tests._support.stream_agent:agent"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.reason("worker_lost")
async def test_a_server_restarted_mid_stream_ends_the_stream_typed(tmp_path: Path) -> None:
    clear_card_cache()
    port = str(_free_port())
    options = ("--store", "sqlite", "--port", port)
    waits: list[float] = []
    async with AsyncExitStack() as servers:
        process, url = await servers.enter_async_context(
            llamon_serve(tmp_path, *options, target=TARGET)
        )

        async def restart_while_waiting(seconds: float) -> None:
            """The retry's wait: the new server starts (on the same port) meanwhile."""
            waits.append(seconds)
            if len(waits) == 1:
                await servers.enter_async_context(llamon_serve(tmp_path, *options, target=TARGET))

        policy = RetryPolicy(max_attempts=4, base_delay=0.5, deadline=None)
        clock = RetryClock(sleep=restart_while_waiting, random=lambda: 1.0)
        async with AgentClient(url, retry=policy, clock=clock) as client:
            events = client.stream(user_message("go"))
            seen: list[StreamEvent] = []
            async with asyncio.timeout(READY_TIMEOUT):
                while len([e for e in seen if isinstance(e, ArtifactChunk) and e.text]) < 2:
                    seen.append(await anext(events))
                process.kill()
                await process.wait()
                with pytest.raises(RemoteUnavailableError) as caught:
                    seen.extend([event async for event in events])
                following = await client.send("next")
    texts = [
        p.root.text
        for e in seen
        if isinstance(e, ArtifactChunk)
        for p in e.parts
        if isinstance(p.root, TextPart)
    ]
    assert texts == ["c0 ", "c1 "]
    error = caught.value
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "worker_lost",
        True,
    )
    task_id = next(e.task_id for e in seen if isinstance(e, ArtifactChunk))
    assert error.task_id == task_id
    assert waits == [0.5]  # one refused reconnection, then the new server answered
    assert (following.state, following.text) == (TaskState.completed, "answered next")
