"""Project fixtures; ``stub_executor_run`` is re-exported for tests that import it from here,
``with_and_without_a_tracer_provider`` (``tests._support.otel``) for every test to use.

``stop_sse_watcher``: sse-starlette starts one shutdown-watcher task per event loop and
never stops it. Each async test has its own loop, so the task of a closed loop was left
pending and, when the garbage collector met it later, asyncio logged "Task was destroyed
but it is pending!" at ERROR in whichever test was running then. The watcher is stopped
before the test's loop closes.
"""

import asyncio
from collections.abc import AsyncIterator

import pytest

from llamon_agent.testing import stub_executor_run
from tests._support.otel import with_and_without_a_tracer_provider

__all__ = ["stop_sse_watcher", "stub_executor_run", "with_and_without_a_tracer_provider"]


@pytest.fixture(autouse=True)
async def stop_sse_watcher() -> AsyncIterator[None]:
    """Cancel sse-starlette's shutdown watcher of this test's loop when the test ends."""
    yield
    watchers = [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__name__", "") == "_shutdown_watcher"
    ]
    for task in watchers:
        task.cancel()
    await asyncio.gather(*watchers, return_exceptions=True)
