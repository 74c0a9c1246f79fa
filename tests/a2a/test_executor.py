"""Executor contracts checked in process (no HTTP): flow context, auth-required, and the
invariant when the event queue itself fails."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    DataPart,
    Message,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
)

from llamon_agent.a2a.agent import AgentContext, FlowContext
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.testing import stub_executor_run
from tests._support.parts import data_of


def _failed_data(events: list[Event]) -> dict[str, Any]:
    failed = next(
        e
        for e in events
        if isinstance(e, TaskStatusUpdateEvent) and e.status.state == TaskState.failed
    )
    assert failed.status.message is not None
    return next(p.root.data for p in failed.status.message.parts if isinstance(p.root, DataPart))


class FlowLike:
    """An agent whose failure_context hook reports where its flow stopped."""

    def __init__(self, *, hook_fails: bool = False) -> None:
        self.hook_fails = hook_fails

    async def invoke(self, ctx: AgentContext) -> str:
        raise ComponentInvokeError("rag down")

    async def failure_context(self, ctx: AgentContext, exc: BaseException) -> FlowContext:
        if self.hook_fails:
            raise RuntimeError("checkpoint unreadable")
        return FlowContext(
            node_id="rag_search",
            node_kind="business",
            completed_nodes=("fetch_subject",),
            outputs={"fetch_subject": {"subject": "math"}},
        )


async def test_flow_context_hook_fills_node_flow_and_artifacts() -> None:
    events = await stub_executor_run(agent=FlowLike())
    data = _failed_data(events)
    assert data["node"] == {"id": "rag_search", "kind": "business"}
    assert data["flow"] == {"completedNodes": ["fetch_subject"]}
    artifacts = [e for e in events if isinstance(e, TaskArtifactUpdateEvent)]
    assert [a.artifact.name for a in artifacts] == ["fetch_subject"]
    assert data_of(artifacts[0].artifact.parts[0]) == {"subject": "math"}
    failed_index = next(
        i
        for i, e in enumerate(events)
        if isinstance(e, TaskStatusUpdateEvent) and e.status.state == TaskState.failed
    )
    assert events.index(artifacts[0]) < failed_index, "artifacts go out before failed"


async def test_a_failing_flow_context_hook_still_answers() -> None:
    events = await stub_executor_run(agent=FlowLike(hook_fails=True))
    data = _failed_data(events)
    assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert "node" not in data


async def test_auth_required_interrupt() -> None:
    events = await stub_executor_run(
        agent_returns=HITLInterrupt(
            payload={"authUrl": "https://login.example"}, kind="auth-required"
        )
    )
    last = events[-1]
    assert isinstance(last, TaskStatusUpdateEvent)
    assert (last.status.state, last.final) == (TaskState.auth_required, True)


class BrokenQueue(EventQueue):
    """Accepts events until the final status, then refuses (a queue failure)."""

    async def enqueue_event(self, event: Event) -> None:
        if isinstance(event, TaskStatusUpdateEvent) and event.final:
            raise RuntimeError("queue is gone")
        await super().enqueue_event(event)


async def test_the_terminal_state_reaches_the_store_when_the_queue_fails() -> None:
    store = InMemoryTaskStore()
    message = Message(
        role=Role.user, parts=[Part(root=TextPart(text="x"))], message_id=str(uuid.uuid4())
    )
    context = RequestContext(
        request=MessageSendParams(message=message),
        call_context=ServerCallContext(state={"method": "message/send"}),
    )
    task = Task(
        id=str(context.task_id),
        context_id=str(context.context_id),
        status=TaskStatus(state=TaskState.working),
    )
    await store.save(task)

    async def agent(ctx: AgentContext) -> str:
        raise ComponentInvokeError("down")

    await CustomAgentExecutor(agent, task_store=store).execute(context, BrokenQueue())
    saved = await store.get(task.id)
    assert saved is not None
    assert saved.status.state == TaskState.failed
    assert saved.status.message is not None
    data = next(p.root.data for p in saved.status.message.parts if isinstance(p.root, DataPart))
    assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"


async def test_each_failure_is_logged_once_as_a_scrubbed_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import json
    import logging

    with caplog.at_level(logging.INFO, logger="llamon_agent.failures"):
        await stub_executor_run(
            agent_dispatch_raises=ComponentInvokeError(
                "lookup failed", tool="check_account", api_key="sk-abcdefghijklmnopqrstuvwx"
            )
        )
    lines = [r for r in caplog.records if r.name == "llamon_agent.failures"]
    assert len(lines) == 1
    record = json.loads(lines[0].getMessage().split(" ", 4)[4])
    assert (record["stage"], record["reason"], record["error_code"]) == (
        "execute",
        "component_invoke_error",
        "UPSTREAM_UNAVAILABLE",
    )
    assert record["evidence"]["tool"] == "check_account"
    assert record["evidence"]["api_key_present"] is True
    assert "sk-abcdefghijkl" not in caplog.text
