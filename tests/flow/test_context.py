"""``extract_flow_error_context`` reads a ``GraphBuilder`` flow's completed nodes from its
latest checkpoint and answers exactly what walking the state history answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import pytest
from langgraph.graph import StateGraph
from langgraph.types import Command, Send

from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.flow import END, START, GraphBuilder, extract_flow_error_context
from llamon_agent.flow.builder import COMPLETED_CHANNEL, untyped_state


async def from_history(graph: Any, thread_id: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The completed nodes and their outputs, read from the whole state history."""
    config = {"configurable": {"thread_id": thread_id}}
    completed: list[str] = []
    outputs: dict[str, Any] = {}
    snapshots = [snapshot async for snapshot in graph.aget_state_history(config)]
    for snapshot in reversed(snapshots):
        for task in snapshot.tasks:
            if task.name in ("__start__", "__end__") or task.error or task.result is None:
                continue
            if task.name not in outputs:
                completed.append(task.name)
            outputs[task.name] = task.result
    return tuple(completed), outputs


def no_history_walk(graph: Any) -> None:
    """Make reading the state history fail: the answer must come from the checkpoint."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the state history was walked")

    graph.aget_state_history = refuse


async def run_to_failure(graph: Any, value: Any, thread_id: str) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    with pytest.raises(ComponentInvokeError):
        await graph.ainvoke(value, config)


async def assert_same_as_history(graph: Any, thread_id: str) -> Any:
    completed, outputs = await from_history(graph, thread_id)
    history_walk = graph.aget_state_history
    no_history_walk(graph)
    try:
        ctx = await extract_flow_error_context(graph, thread_id)
    finally:
        graph.aget_state_history = history_walk
    assert ctx is not None
    assert ctx.completed_nodes == completed
    assert dict(ctx.outputs) == outputs
    return ctx


async def fail(state: Any) -> Any:
    raise ComponentInvokeError("down")


def returning(value: Any) -> Callable[[Any], Any]:
    async def node(state: Any) -> Any:
        return value

    return node


async def test_a_long_loop_answers_from_the_latest_checkpoint(checkpointer: Any) -> None:
    async def loop(state: dict[str, Any]) -> dict[str, Any]:
        return {"count": state.get("count", 0) + 1}

    async def route(state: dict[str, Any]) -> str:
        return "loop" if state["count"] < 25 else "fail"

    graph = (
        GraphBuilder()
        .node("loop", loop, node_kind="business")
        .node("fail", fail, node_kind="llm")
        .edge(START, "loop")
        .conditional_edges("loop", route, ["loop", "fail"])
        .edge("fail", END)
        .compile(checkpointer=checkpointer)
    )
    await run_to_failure(graph, {"count": 0}, "t")
    ctx = await assert_same_as_history(graph, "t")
    assert (ctx.node_id, ctx.node_kind) == ("fail", "llm")
    assert ctx.completed_nodes == ("loop",)
    assert ctx.outputs == {"loop": {"count": 25}}


async def test_parallel_nodes_keep_the_history_order(checkpointer: Any) -> None:
    # Added in reverse alphabetical order: the history lists a step's tasks in the
    # order the nodes were added, not by name.
    graph = (
        GraphBuilder()
        .node("zeta", returning({"z": 1}))
        .node("alpha", returning({"a": 1}))
        .node("mid", returning({"m": 1}))
        .node("broken", fail)
        .node("after", returning({"after": 1}))
        .edge(START, "zeta")
        .edge(START, "alpha")
        .edge("zeta", "mid")
        .edge("alpha", "mid")
        .edge("mid", "broken")
        .edge("mid", "after")
        .edge("broken", END)
        .edge("after", END)
        .compile(checkpointer=checkpointer)
    )
    await run_to_failure(graph, {}, "t")
    ctx = await assert_same_as_history(graph, "t")
    assert ctx.node_id == "broken"
    assert ctx.completed_nodes == ("zeta", "alpha", "mid", "after")


async def test_fan_out_with_send_keeps_the_last_output() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    async def each(state: dict[str, Any]) -> dict[str, Any]:
        return {"seen": state["item"]}

    def spread(state: dict[str, Any]) -> list[Send]:
        return [Send("each", {"item": item}) for item in (1, 2, 3)]

    graph = (
        GraphBuilder()
        .node("first", returning({"items": 3}))
        .node("each", each)
        .node("broken", fail)
        .edge(START, "first")
        .conditional_edges("first", spread, ["each"])
        .edge("each", "broken")
        .edge("broken", END)
        .compile(checkpointer=InMemorySaver())
    )
    await run_to_failure(graph, {}, "t")
    ctx = await assert_same_as_history(graph, "t")
    assert ctx.completed_nodes == ("first", "each")


async def test_an_answered_question_then_a_failure(checkpointer: Any) -> None:
    async def ask(state: dict[str, Any]) -> Any:
        if not state.get("answer"):
            return HITLInterrupt(payload={"question": "?"}, resume_key="answer")
        return {"asked": True}

    graph = (
        GraphBuilder()
        .node("before", returning({"before": 1}))
        .node("ask", ask)
        .node("broken", fail)
        .edge(START, "before")
        .edge("before", "ask")
        .edge("ask", "broken")
        .edge("broken", END)
        .compile(checkpointer=checkpointer)
    )
    config = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({}, config)
    with pytest.raises(ComponentInvokeError):
        await graph.ainvoke(Command(resume="yes"), config)
    ctx = await assert_same_as_history(graph, "t")
    assert ctx.completed_nodes == ("before", "ask")
    assert ctx.outputs["ask"] == {"answer": "yes", "asked": True}


async def test_plain_values_and_nothing_returned(checkpointer: Any) -> None:
    graph = (
        GraphBuilder()
        .node("silent", returning(None))
        .node("plain", returning("a text"))
        .node("broken", fail)
        .edge(START, "silent")
        .edge("silent", "plain")
        .edge("plain", "broken")
        .edge("broken", END)
        .compile(checkpointer=checkpointer)
    )
    await run_to_failure(graph, {}, "t")
    ctx = await assert_same_as_history(graph, "t")
    assert ctx.completed_nodes == ("plain",)


class Typed(TypedDict, total=False):
    query: str
    answer: str


async def test_a_typed_state(checkpointer: Any) -> None:
    graph = (
        GraphBuilder(Typed)
        .node("silent", returning(None))
        .node("answer", returning({"answer": "a"}))
        .node("broken", fail)
        .edge(START, "silent")
        .edge("silent", "answer")
        .edge("answer", "broken")
        .edge("broken", END)
        .compile(checkpointer=checkpointer)
    )
    await run_to_failure(graph, {"query": "q"}, "t")
    ctx = await assert_same_as_history(graph, "t")
    assert ctx.outputs == {"silent": {}, "answer": {"answer": "a"}}


async def test_a_second_run_on_the_thread_adds_to_the_first(checkpointer: Any) -> None:
    async def maybe_fail(state: dict[str, Any]) -> dict[str, Any]:
        if state.get("again"):
            raise ComponentInvokeError("down")
        return {"checked": True}

    graph = (
        GraphBuilder()
        .node("first", returning({"first": 1}))
        .node("check", maybe_fail)
        .edge(START, "first")
        .edge("first", "check")
        .edge("check", END)
        .compile(checkpointer=checkpointer)
    )
    config = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({}, config)
    await run_to_failure(graph, {"again": True}, "t")
    ctx = await assert_same_as_history(graph, "t")
    assert ctx.node_id == "check"
    assert ctx.completed_nodes == ("first", "check")


async def test_a_thread_begun_without_the_record_walks_its_history(checkpointer: Any) -> None:
    async def maybe_fail(state: dict[str, Any]) -> dict[str, Any]:
        if state.get("again"):
            raise ComponentInvokeError("down")
        return {"checked": True}

    older: StateGraph[Any] = StateGraph(untyped_state())
    older.add_node("first", returning({"first": 1}))  # type: ignore[arg-type]
    older.add_node("check", maybe_fail)
    older.add_edge(START, "first")
    older.add_edge("first", "check")
    older.add_edge("check", END)
    config: Any = {"configurable": {"thread_id": "t"}}
    start: dict[str, Any] = {}
    await older.compile(checkpointer=checkpointer).ainvoke(start, config)

    graph = (
        GraphBuilder()
        .node("first", returning({"first": 1}))
        .node("check", maybe_fail)
        .edge(START, "first")
        .edge("first", "check")
        .edge("check", END)
        .compile(checkpointer=checkpointer)
    )
    await run_to_failure(graph, {"again": True}, "t")
    state = await checkpointer.aget_tuple(config)
    assert state.checkpoint["channel_values"][COMPLETED_CHANNEL]["since"] != 0
    ctx = await extract_flow_error_context(graph, "t")
    assert ctx is not None
    assert ctx.completed_nodes == ("first", "check")
    assert (ctx.completed_nodes, dict(ctx.outputs)) == await from_history(graph, "t")


async def test_the_record_stays_out_of_the_flow_output(checkpointer: Any) -> None:
    graph = (
        GraphBuilder()
        .node("only", returning({"x": 1}))
        .edge(START, "only")
        .edge("only", END)
        .compile(checkpointer=checkpointer)
    )
    config = {"configurable": {"thread_id": "t"}}
    assert await graph.ainvoke({"q": 1}, config) == {"q": 1, "x": 1}
    assert (await graph.aget_state(config)).values == {"q": 1, "x": 1}
    assert [c async for c in graph.astream({"q": 2}, config, stream_mode="values")] == [
        {"q": 2, "x": 1},
        {"q": 2, "x": 1},
    ]


def test_a_flow_with_the_record_still_draws() -> None:
    graph = (
        GraphBuilder()
        .node("first", returning({"x": 1}))
        .node("second", returning({"y": 1}))
        .edge(START, "first")
        .conditional_edges("first", lambda state: "second", ["second"])
        .edge("second", END)
        .compile()
    )
    drawn = graph.get_graph().draw_mermaid()
    assert "first" in drawn
    assert "second" in drawn
    typed = GraphBuilder(Typed).node("only", returning(None)).edge(START, "only").compile()
    assert "only" in typed.get_graph().draw_mermaid()
