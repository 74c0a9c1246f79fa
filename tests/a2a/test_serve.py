"""The startup heap is frozen out of full garbage collections (``create_app(gc_freeze=)``),
by ``create_app`` itself and so by ``serve_agent`` / ``llamon serve``."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from llamon_agent.a2a.card import lint_agent_card
from llamon_agent.a2a.serve import ServeOptions, default_card, serve_agent
from llamon_agent.a2a.server import GC_THRESHOLDS, create_app, freeze_startup_heap
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message


async def pong(ctx: object) -> str:
    return "pong"


@pytest.fixture(autouse=True)
def thawed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with nothing frozen (earlier servers in this process froze it)."""
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    monkeypatch.delenv("LLAMON_DATABASE_URL", raising=False)
    gc.unfreeze()
    yield
    gc.unfreeze()


async def _frozen_while_serving(gc_freeze: bool) -> int:
    app = create_app(pong, make_card(), gc_freeze=gc_freeze)
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("hi"))
        assert task.status.state.value == "completed"
        return gc.get_freeze_count()


async def test_create_app_freezes_the_startup_heap() -> None:
    assert await _frozen_while_serving(gc_freeze=True) > 10_000  # imports, the app


async def test_gc_freeze_can_be_turned_off() -> None:
    assert await _frozen_while_serving(gc_freeze=False) == 0


def test_freezing_happens_once_per_process() -> None:
    freeze_startup_heap()
    frozen = gc.get_freeze_count()
    freeze_startup_heap()  # a second app in the same process: nothing more is frozen
    assert gc.get_freeze_count() == frozen


def test_startup_raises_default_gc_thresholds_and_keeps_chosen_ones() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        freeze_startup_heap()
        assert gc.get_threshold() == GC_THRESHOLDS
        gc.unfreeze()
        gc.set_threshold(5_000, 20, 20)  # the process chose its own: kept
        freeze_startup_heap()
        assert gc.get_threshold() == (5_000, 20, 20)
    finally:
        gc.set_threshold(*before)


async def test_serve_agent_passes_its_option_on() -> None:
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shutdown = asyncio.Event()
    options = ServeOptions(port=0, store="sqlite", gc_freeze=False)
    server = asyncio.create_task(
        serve_agent(pong, make_card(), options, on_ready=ready.set_result, shutdown=shutdown)
    )
    try:
        url = await asyncio.wait_for(ready, timeout=30)
        async with a2a_client(url.rstrip("/")) as client:
            await send(client, user_message("hi"))
        assert gc.get_freeze_count() == 0
    finally:
        shutdown.set()
        await asyncio.wait_for(server, timeout=30)


async def agent(ctx: object) -> str:  # no docstring: the card describes it by default
    return "x"


async def lookup(ctx: object) -> str:
    return "x"


def test_the_default_card_describes_an_agent_without_a_docstring() -> None:
    generic = default_card(agent, "http://127.0.0.1:1/").description
    named = default_card(lookup, "http://127.0.0.1:1/").description
    assert generic == (
        "Answers text or JSON messages over A2A. A failure comes back as a failed task "
        "carrying an errorCode and reason."
    )
    assert named.startswith("The 'lookup' agent: answers text or JSON messages over A2A.")
    for description in (generic, named):
        card = default_card(agent, "http://127.0.0.1:1/").model_copy(
            update={"description": description}
        )
        assert not [f for f in lint_agent_card(card) if f.rule.startswith("description")]
