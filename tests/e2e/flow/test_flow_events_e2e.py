"""A served flow's runner events: its nodes, then the task's failure at the failed node."""

from __future__ import annotations

from typing import Any

from a2a.types import TaskState

from llamon_agent.a2a.server import create_app
from llamon_agent.core.events import EventBus, RunnerEvent
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests.e2e.flow.test_flow_e2e import example_flow


async def test_a_served_flow_reports_each_node_and_where_it_failed(checkpointer: Any) -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    app = create_app(example_flow().compile(checkpointer=checkpointer), make_card(), events=bus)
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("math"))
        assert task.status.state == TaskState.failed
        assert await bus.flush()
        again = await send(client, user_message("again"))  # the next request is answered
        assert again.status.state == TaskState.failed
    mine = [e for e in got if e.task_id == task.id]
    assert [(e.type, e.node) for e in mine] == [
        ("task.submitted", None),
        ("task.working", None),
        ("node.started", "fetch_subject"),
        ("node.completed", "fetch_subject"),
        ("node.started", "rag_search"),
        ("node.failed", "rag_search"),
        ("task.failed", "rag_search"),
    ]
    failed = mine[-1]
    assert failed.stage == "flow_node"
    assert (failed.trace_metadata["failure_reason"], failed.trace_metadata["error_code"]) == (
        "component_invoke_error",
        "UPSTREAM_UNAVAILABLE",
    )
    assert {e.context_id for e in mine} == {task.context_id}
