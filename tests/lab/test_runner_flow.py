"""A flow (``GraphBuilder``) as the lab's target in process: completed, a node's failure,
a question back to the caller, and an assertion that does not hold."""

from __future__ import annotations

from typing import Any

from llamon_agent import END, START, GraphBuilder
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.lab import Case
from llamon_agent.lab.runner import run_cases


async def lookup(state: dict[str, Any]) -> dict[str, Any]:
    query = str(state.get("query", ""))
    if "broken" in query:
        raise ComponentInvokeError("the search index did not answer")
    return {"found": query.upper()}


async def answer(state: dict[str, Any]) -> dict[str, Any] | HITLInterrupt:
    if "ask" in str(state.get("query", "")):
        return HITLInterrupt(payload={"question": "Which edition?"})
    return {"output": f"result: {state['found']}"}


FLOW = (
    GraphBuilder()
    .node("lookup", lookup, node_kind="business")
    .node("answer", answer, node_kind="llm")
    .edge(START, "lookup")
    .edge("lookup", "answer")
    .edge("answer", END)
)


def case(name: str, query: str, **assertions: Any) -> Case:
    return Case.model_validate(
        {"name": name, "mode": "execute", "query": query, "assertions": assertions}
    )


async def test_a_flow_runs_cases_like_any_agent() -> None:
    report = await run_cases(
        FLOW,
        [
            case("ok", "dune", final_state="completed", artifact_contains="result: DUNE"),
            case(
                "node-fails",
                "broken dune",
                final_state="failed",
                error_code="UPSTREAM_UNAVAILABLE",
                allowed_failure_reasons=["component_invoke_error"],
            ),
            case("asks", "ask dune", final_state="input-required"),
            case("wrong", "dune", final_state="failed"),
        ],
    )
    ok, fails, asks, wrong = report.results
    assert ok.passed, ok.message
    assert fails.passed, fails.message
    assert asks.passed, asks.message
    assert wrong.outcome == "failed"
    assert wrong.message == "final_state: ended completed"
    # the flow's runner events were read: its nodes, no tool steps
    assert ok.event_source == "events"
    assert [event["node"] for event in ok.events if event["type"] == "node.started"] == [
        "lookup",
        "answer",
    ]
    assert ok.steps == []
    failed_nodes = [e["node"] for e in fails.events if e["type"] == "node.failed"]
    assert failed_nodes == ["lookup"]
    assert fails.triage is not None
    assert fails.triage["reason"] == "component_invoke_error"
