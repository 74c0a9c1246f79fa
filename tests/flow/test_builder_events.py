"""A flow's nodes emit node.started / completed / failed / interrupted runner events."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from llamon_agent import END, START, GraphBuilder
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError


def fetch(state: Any) -> dict[str, Any]:  # sync: LangGraph runs it in a worker thread
    return {"subject": "kim"}


async def bill(state: Any) -> dict[str, Any]:
    if state.get("fail"):
        raise ComponentInvokeError("billing is down")
    return {"billed": True}


async def ask(state: Any) -> dict[str, Any] | HITLInterrupt:
    if "answer" not in state:
        return HITLInterrupt(payload={"question": "which plan?"}, resume_key="answer")
    return {"plan": state["answer"]}


def _flow(*nodes: str) -> Any:
    builder = GraphBuilder()
    functions = {"fetch": fetch, "bill": bill, "ask": ask}
    previous = START
    for name in nodes:
        builder.node(name, functions[name], node_kind="business")
        builder.edge(previous, name)
        previous = name
    builder.edge(previous, END)
    return builder.compile(checkpointer=InMemorySaver())


async def _run(graph: Any, state: dict[str, Any]) -> list[RunnerEvent]:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    with (
        event_scope(bus, task_id="task-1", context_id="ctx-1"),
        contextlib.suppress(ComponentInvokeError),
    ):
        await graph.ainvoke(state, {"configurable": {"thread_id": "t-1"}})
    assert await bus.flush()
    return got


async def test_completed_nodes_emit_started_and_completed() -> None:
    events = await _run(_flow("fetch", "bill"), {})
    assert [(e.type, e.node, e.stage) for e in events] == [
        ("node.started", "fetch", "flow_node"),
        ("node.completed", "fetch", "flow_node"),
        ("node.started", "bill", "flow_node"),
        ("node.completed", "bill", "flow_node"),
    ]
    assert {(e.task_id, e.context_id) for e in events} == {("task-1", "ctx-1")}
    assert {e.trace_metadata["node_kind"] for e in events} == {"business"}


@pytest.mark.reason("component_invoke_error")
async def test_a_failing_node_emits_node_failed_with_its_reason() -> None:
    events = await _run(_flow("fetch", "bill"), {"fail": True})
    assert [(e.type, e.node) for e in events][-2:] == [
        ("node.started", "bill"),
        ("node.failed", "bill"),
    ]
    meta = events[-1].trace_metadata
    assert (meta["failure_reason"], meta["error_code"], meta["retryable"]) == (
        "component_invoke_error",
        "UPSTREAM_UNAVAILABLE",
        True,
    )


async def test_a_node_asking_the_caller_emits_node_interrupted() -> None:
    events = await _run(_flow("fetch", "ask"), {})
    assert [(e.type, e.node) for e in events][-2:] == [
        ("node.started", "ask"),
        ("node.interrupted", "ask"),
    ]


async def test_without_a_listener_no_event_is_built() -> None:
    graph = _flow("fetch", "bill")
    assert await graph.ainvoke({}, {"configurable": {"thread_id": "t-2"}}) == {
        "subject": "kim",
        "billed": True,
    }
