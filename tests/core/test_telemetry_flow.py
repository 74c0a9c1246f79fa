"""Flow node spans (``core.telemetry``): ``flow_node {node}`` for each node run, the
failure rule on a node that raised (stage ``flow_node``), a pause is no failure, and a
served flow's node spans are children of its task's ``invoke_agent`` span."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.trace import StatusCode

from llamon_agent import END, START, GraphBuilder
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.core.telemetry import invoke_agent_span
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.otel import span_exporter, span_texts, spans_named

SENTINEL = "sk-flow-SENTINEL-0b7e"


def fetch(state: dict[str, Any]) -> dict[str, Any]:
    return {"subject": "s-1"}


async def search(state: dict[str, Any]) -> dict[str, Any]:
    raise ComponentInvokeError(f"search backend refused token {SENTINEL}")


async def ask(state: dict[str, Any]) -> Any:
    if "birthday" not in state:
        return HITLInterrupt(payload={"question": "birthday?"})
    return {"output": state["birthday"]}


async def test_each_node_run_has_a_span_and_a_failed_node_is_marked() -> None:
    exporter = span_exporter()
    builder = (
        GraphBuilder(name="lookup")
        .node("fetch", fetch, node_kind="business")
        .node("search", search, node_kind="retrieval")
        .edge(START, "fetch")
        .edge("fetch", "search")
        .edge("search", END)
    )
    graph = builder.compile(checkpointer=InMemorySaver())
    with invoke_agent_span("flow-agent", task_id="t-1", context_id="c-1") as outer:
        try:
            await graph.ainvoke({"query": "go"}, {"configurable": {"thread_id": "t-1"}})
        except ComponentInvokeError:
            pass
        else:  # pragma: no cover - the node raises
            raise AssertionError("the search node did not fail")
    spans = spans_named(exporter, "flow_node ")
    assert [span.name for span in spans] == ["flow_node fetch", "flow_node search"]
    fetched, searched = spans
    assert dict(fetched.attributes or {}) == {
        "llamon.flow.name": "lookup",
        "llamon.flow.node": "fetch",
        "llamon.flow.node_kind": "business",
    }
    assert fetched.status.status_code == StatusCode.UNSET
    assert dict(searched.attributes or {}) == {
        "llamon.flow.name": "lookup",
        "llamon.flow.node": "search",
        "llamon.flow.node_kind": "retrieval",
        "error.type": "component_invoke_error",
        "llamon.error_code": "UPSTREAM_UNAVAILABLE",
        "llamon.stage": "flow_node",
    }
    assert searched.status.status_code == StatusCode.ERROR
    outer_id = outer.get_span_context().span_id
    assert [span.parent.span_id if span.parent else None for span in spans] == [outer_id] * 2
    assert [text for text in span_texts(exporter) if SENTINEL in text] == []


async def test_a_paused_node_is_not_a_failure() -> None:
    exporter = span_exporter()
    graph = (
        GraphBuilder(name="survey").node("ask", ask).edge(START, "ask").edge("ask", END)
    ).compile(checkpointer=InMemorySaver())
    paused = await graph.ainvoke({"query": "hi"}, {"configurable": {"thread_id": "t-2"}})
    assert "__interrupt__" in paused
    (span,) = spans_named(exporter, "flow_node ")
    assert span.status.status_code == StatusCode.UNSET
    assert "error.type" not in dict(span.attributes or {})
