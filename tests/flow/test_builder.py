"""``GraphBuilder`` without a state type: every node sees the whole state so far."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from llamon_agent import END, START, GraphBuilder
from llamon_agent.core.hitl import DEFAULT_RESUME_KEY, HITLInterrupt


def node_a(state: dict[str, Any]) -> dict[str, Any]:
    return {"x": 1}


def node_b(state: dict[str, Any]) -> dict[str, Any]:
    return {"y": state["x"] + 1}


def a_then_b(builder: GraphBuilder) -> Any:
    return (
        builder.node("a", node_a)
        .node("b", node_b)
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .compile(checkpointer=InMemorySaver())
    )


async def test_untyped_state_carries_every_node_update() -> None:
    graph = a_then_b(GraphBuilder())
    config = {"configurable": {"thread_id": "t-1"}}
    final = await graph.ainvoke({"query": "go"}, config)
    assert final == {"query": "go", "x": 1, "y": 2}
    assert (await graph.aget_state(config)).values == final


async def test_typed_state_is_unchanged() -> None:
    class State(TypedDict, total=False):
        query: str
        x: int
        y: int

    final = await a_then_b(GraphBuilder(State)).ainvoke(
        {"query": "go"}, {"configurable": {"thread_id": "t-1"}}
    )
    assert final == {"query": "go", "x": 1, "y": 2}


async def test_a_later_update_of_a_key_wins_and_none_changes_nothing() -> None:
    def again(state: dict[str, Any]) -> dict[str, Any]:
        return {"x": state["x"] + 10}

    def nothing(state: dict[str, Any]) -> None:
        return None

    graph = (
        GraphBuilder()
        .node("a", node_a)
        .node("again", again)
        .node("nothing", nothing)
        .edge(START, "a")
        .edge("a", "again")
        .edge("again", "nothing")
        .compile()
    )
    assert await graph.ainvoke({}) == {"x": 11}


async def test_parallel_branches_both_land_in_the_state() -> None:
    def left(state: dict[str, Any]) -> dict[str, Any]:
        return {"left": state["x"]}

    def right(state: dict[str, Any]) -> dict[str, Any]:
        return {"right": state["x"]}

    graph = (
        GraphBuilder()
        .node("a", node_a)
        .node("left", left)
        .node("right", right)
        .edge(START, "a")
        .edge("a", "left")
        .edge("a", "right")
        .compile()
    )
    assert await graph.ainvoke({}) == {"x": 1, "left": 1, "right": 1}


def one_node(fn: Any, state_schema: type[Any] | None = None) -> Any:
    return (
        GraphBuilder(state_schema)
        .node("ask", fn)
        .edge(START, "ask")
        .edge("ask", END)
        .compile(checkpointer=InMemorySaver())
    )


async def answered(graph: Any, answer: Any) -> Any:
    config = {"configurable": {"thread_id": "t-1"}}
    paused = await graph.ainvoke({"thread_id": "t-1"}, config)
    assert "__interrupt__" in paused
    return await graph.ainvoke(Command(resume=answer), config)


async def test_a_text_answer_goes_under_the_one_missing_key_the_node_read() -> None:
    def ask(state: dict[str, Any]) -> HITLInterrupt | None:
        if "city" not in state:
            return HITLInterrupt({"question": "Which city?"}, thread_id=state["thread_id"])
        return None

    assert await answered(one_node(ask), "Seoul") == {"thread_id": "t-1", "city": "Seoul"}


async def test_the_rule_holds_for_a_typed_state() -> None:
    class State(TypedDict, total=False):
        thread_id: str
        birthday: str
        output: str

    def ask(state: State) -> HITLInterrupt | dict[str, str]:
        if not state.get("birthday"):
            return HITLInterrupt({"question": "Birthday?"})
        return {"output": f"born {state['birthday']}"}

    final = await answered(one_node(ask, State), "1990-01-01")
    assert final["output"] == "born 1990-01-01"


async def test_an_explicit_resume_key_wins() -> None:
    def ask(state: dict[str, Any]) -> HITLInterrupt | dict[str, Any]:
        if not state.get("birthday"):
            return HITLInterrupt({"question": "Birthday?"}, resume_key="reply")
        return {}

    def ask_then_copy(state: dict[str, Any]) -> HITLInterrupt | dict[str, Any]:
        if "reply" in state:
            return {"birthday": state["reply"]}
        return ask(state)

    final = await answered(one_node(ask_then_copy), "1990-01-01")
    assert final == {"thread_id": "t-1", "reply": "1990-01-01", "birthday": "1990-01-01"}


async def test_no_or_several_missing_keys_mean_the_answer_key() -> None:
    def none_missing(state: dict[str, Any]) -> HITLInterrupt | None:
        if DEFAULT_RESUME_KEY not in state and state["thread_id"]:
            return HITLInterrupt({"question": "?"})
        return None

    def two_missing(state: dict[str, Any]) -> HITLInterrupt | None:
        if not (state.get("first") and state.get("last")) and DEFAULT_RESUME_KEY not in state:
            return HITLInterrupt({"question": "Your name?"})
        return None

    for node in (none_missing, two_missing):
        final = await answered(one_node(node), "Kim")
        assert final[DEFAULT_RESUME_KEY] == "Kim"


async def test_a_data_answer_is_merged_as_is() -> None:
    def ask(state: dict[str, Any]) -> HITLInterrupt | None:
        if not state.get("birthday"):
            return HITLInterrupt({"question": "Birthday?"})
        return None

    final = await answered(one_node(ask), {"birthday": "2000-02-02", "tz": "KST"})
    assert final == {"thread_id": "t-1", "birthday": "2000-02-02", "tz": "KST"}


async def test_a_node_that_returns_its_own_state_is_saved_as_a_plain_dict() -> None:
    def touch(state: dict[str, Any]) -> dict[str, Any]:
        state["seen"] = state.get("missing", True)
        return state

    graph = one_node(touch)
    config = {"configurable": {"thread_id": "t-1"}}
    assert await graph.ainvoke({"q": 1}, config) == {"q": 1, "seen": True}
    assert type((await graph.aget_state(config)).values) is dict
