"""Project fixtures; ``stub_executor_run`` is re-exported for tests that import it from here.

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


@pytest.fixture(params=["untraced", "traced"])
def with_and_without_a_tracer_provider(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> bool:
    """Runs a test without a tracer provider (llamon's own paths where a2a-sdk's spans
    would record nothing) and with the process's SDK (``tests._support.otel.span_exporter``;
    a2a-sdk's traced paths): ``True`` when traced. Once any test installed the SDK, the
    rest of the suite runs traced only; a module that uses this (``pytestmark =
    pytest.mark.usefixtures(...)``) pins both. (The SDK is the process's own, never a
    provider of the test's: a tracer proxy binds for good to the first provider it sees.)
    The OpenTelemetry SDK is imported only here: a core install runs without it."""
    from opentelemetry import trace

    traced: bool = request.param == "traced"
    if traced:
        from tests._support.otel import span_exporter

        span_exporter()
    else:
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    return traced
