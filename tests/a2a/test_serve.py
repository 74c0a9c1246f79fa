"""``serve_agent``: what it does to the process around serving (``gc.freeze``)."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from llamon_agent.a2a.serve import ServeOptions, serve_agent

from .server_utils import a2a_client, make_card, send, user_message


async def pong(ctx: object) -> str:
    return "pong"


async def _freeze_counts(options: ServeOptions) -> tuple[int, int]:
    """Frozen objects while serving (after one request) and after serving ended."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shutdown = asyncio.Event()
    server = asyncio.create_task(
        serve_agent(pong, make_card(), options, on_ready=ready.set_result, shutdown=shutdown)
    )
    try:
        url = await asyncio.wait_for(ready, timeout=30)
        async with a2a_client(url.rstrip("/")) as client:
            task = await send(client, user_message("hi"))
        assert task.status.state.value == "completed"
        serving = gc.get_freeze_count()
    finally:
        shutdown.set()
        await asyncio.wait_for(server, timeout=30)
    return serving, gc.get_freeze_count()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    monkeypatch.delenv("LLAMON_DATABASE_URL", raising=False)


async def test_startup_objects_are_frozen_while_serving_and_thawed_after() -> None:
    serving, after = await _freeze_counts(ServeOptions(port=0, store="sqlite"))
    assert serving > 10_000  # the imports and the app, out of the collector's full passes
    assert after == 0


async def test_gc_freeze_can_be_turned_off() -> None:
    serving, after = await _freeze_counts(ServeOptions(port=0, store="memory", gc_freeze=False))
    assert (serving, after) == (0, 0)
