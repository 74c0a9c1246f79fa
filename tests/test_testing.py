"""The pattern users are given for checking an error answer in a unit test (kept as they
write it, with one narrowing assert for the type checker), plus the helper's options."""

import pytest
from a2a.types import DataPart, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.parts import texts_of
from tests.conftest import stub_executor_run  # the project's fixture


@pytest.mark.asyncio
async def test_mcp_failure_returns_upstream_unavailable() -> None:
    events = await stub_executor_run(
        agent_dispatch_raises=ComponentInvokeError("MCP down"),
    )

    failed = next(
        e
        for e in reversed(events)
        if isinstance(e, TaskStatusUpdateEvent) and e.status.state.value == "failed"
    )
    assert failed.status.message is not None
    data = next(p.root.data for p in failed.status.message.parts if isinstance(p.root, DataPart))

    assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert data["retriable"] is True


async def test_events_in_order_for_a_success() -> None:
    events = await stub_executor_run(agent_returns="fine", streaming=True)
    assert isinstance(events[0], Task)
    assert [e.status.state.value for e in events if isinstance(e, TaskStatusUpdateEvent)] == [
        "working",
        "completed",
    ]


async def test_a_blocking_send_skips_the_working_event() -> None:
    events = await stub_executor_run(agent_returns="fine")
    states = [e.status.state.value for e in events if isinstance(e, TaskStatusUpdateEvent)]
    assert states == ["completed"]
    artifacts = [e for e in events if isinstance(e, TaskArtifactUpdateEvent)]
    assert texts_of(artifacts[0].artifact.parts) == ["fine"]


async def test_input_required() -> None:
    events = await stub_executor_run(agent_returns=HITLInterrupt(payload={"question": "q?"}))
    last = events[-1]
    assert isinstance(last, TaskStatusUpdateEvent)
    assert last.status.state.value == "input-required"
    assert last.final is True
