"""A server that stops leaves nothing running behind it, over real HTTP on 127.0.0.1.

A stream whose client left while the agent still works keeps a consumer in the
background; a stopping server cancels it and the run, and waits for them, so no task is
left pending when the event loop closes (it would be destroyed while pending).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import post, request, text_message


class Stuck:
    """Streams one chunk, then waits for ``release`` (never set by the test)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.chunked = asyncio.Event()

    async def invoke(self, ctx: AgentContext) -> str:
        return f"echo {ctx.text}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        if ctx.text != "stuck":
            yield f"echo {ctx.text}"
            return
        yield "first "
        self.chunked.set()
        await self.release.wait()
        yield "never"


def _left_behind() -> list[asyncio.Task[object]]:
    """Pending tasks but this one and sse-starlette's watcher (one per event loop, started
    by the first SSE response: the library's, not the server's)."""
    current = asyncio.current_task()
    return [
        task
        for task in asyncio.all_tasks()
        if task is not current
        and not task.done()
        and getattr(task.get_coro(), "__name__", "") != "_shutdown_watcher"
    ]


async def test_a_stopping_server_cancels_a_left_streams_consumer_and_its_run() -> None:
    agent = Stuck()
    before = set(_left_behind())
    async with (
        running_server(create_app(agent, make_card())) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        body = request("message/stream", {"message": text_message("stuck")})
        async with http.stream("POST", url, json=body) as response:
            async for line in response.aiter_lines():
                if agent.chunked.is_set() and line.startswith("data:"):
                    break  # the caller leaves mid-stream; the run goes on
        reply = await post(http, url, request("message/send", {"message": text_message("next")}))
        assert reply["result"]["status"]["state"] == "completed"
    left = [task for task in _left_behind() if task not in before]
    assert left == [], [task.get_name() for task in left]


async def test_a_background_task_started_after_the_server_stopped_is_cancelled() -> None:
    app = create_app(Stuck(), make_card())
    handler = app.state.llamon_request_handler
    async with running_server(app) as url, httpx.AsyncClient(timeout=10) as http:
        card = await http.get(f"{url}/.well-known/agent-card.json")  # the server is up
        assert card.status_code == 200
    never = asyncio.Event()
    late = asyncio.create_task(never.wait(), name="continue_consuming:late")
    handler._track_background_task(late)  # a stream's consumer whose caller left just now
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(late, 5)
    assert late.cancelled()
