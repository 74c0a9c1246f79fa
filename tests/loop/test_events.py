"""EventSink: ``post`` builds and publishes at once, and hands back only a handler's call."""

from __future__ import annotations

import logging

import pytest

from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.loop.events import EventSink


async def test_post_without_a_handler_publishes_at_once_and_returns_nothing() -> None:
    bus = EventBus()
    seen: list[RunnerEvent] = []
    bus.subscribe_inline(seen.append)
    with event_scope(bus, task_id="t-1", context_id="c-1"):
        sink = EventSink(run_id="r-1")
    pending = sink.post("step.started", "tool_loop", round_number=2, tool="add", step_id="s1")
    assert pending is None
    [event] = seen
    assert (event.type, event.run_id, event.round, event.tool, event.step_id) == (
        "step.started",
        "r-1",
        2,
        "add",
        "s1",
    )
    assert (event.task_id, event.context_id, event.trace_metadata) == ("t-1", "c-1", {})


async def test_post_with_nobody_listening_builds_nothing() -> None:
    assert EventSink(run_id="r-1").post("step.started", "tool_loop", round_number=1) is None
    idle = EventSink(run_id="r-1", bus=EventBus())  # a bus without subscribers
    assert idle.post("step.started", "tool_loop", round_number=1) is None


async def test_post_with_a_handler_calls_it_only_when_awaited_and_logs_its_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    async def handler(event: RunnerEvent) -> None:
        calls.append(event.type)
        if event.type == "run.failed":
            raise RuntimeError("handler broke: token=abc123")

    sink = EventSink(handler, run_id="r-1")
    pending = sink.post("run.started", "tool_loop", round_number=0, metadata={"max_rounds": 3})
    assert pending is not None
    assert calls == []
    await pending
    assert calls == ["run.started"]
    with caplog.at_level(logging.WARNING, logger="llamon_agent.loop"):
        failing = sink.post("run.failed", "tool_loop", round_number=1)
        assert failing is not None
        await failing  # logged, never raised
    assert calls == ["run.started", "run.failed"]
    assert [r.getMessage() for r in caplog.records] == [
        "on_event handler raised RuntimeError on run.failed; ignored"
    ]
    await sink.emit("run.completed", "tool_loop", round_number=1)  # emit still works
    assert calls[-1] == "run.completed"
