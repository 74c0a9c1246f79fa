"""``build_react_graph``: the tool loop as a LangGraph graph, with the native loop's rules."""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.types import TaskState
from examples.bookshop_mcp_server import build_server
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.graph import GraphAgent
from llamon_agent.a2a.server import create_app
from llamon_agent.exceptions import ComponentInvokeError, LlamonApplicationError
from llamon_agent.loop import (
    AssistantMessage,
    ChatMessage,
    RawToolCall,
    ScriptedModel,
    SystemMessage,
    ToolMessage,
    ToolRegistry,
    UserMessage,
    run_loop,
    tool_call,
)
from llamon_agent.loop.react import (
    build_react_graph,
    message_from_dict,
    message_to_dict,
    run_tool_calls,
)
from llamon_agent.mcp import MCPToolLoader
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)
from tests.loop.conftest import Calls, FlakyRemote


def _tool_messages(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in state["messages"] if m["role"] == "tool"]


async def test_a_run_calls_a_tool_then_answers(registry: ToolRegistry, calls: Calls) -> None:
    model = ScriptedModel(
        [
            tool_call("add_numbers", {"a": 2, "b": 3}),
            lambda messages: f"The sum is {messages[-1].content}.",
        ]
    )
    graph = build_react_graph(model, registry.view("add_numbers"), system_prompt="Be brief.")
    state = await graph.ainvoke({"query": "What is 2 + 3?"})

    assert state["output"] == "The sum is 5."
    assert [m["role"] for m in state["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert calls.count("add_numbers") == 1
    first, second = model.calls
    assert first.messages == (SystemMessage("Be brief."), UserMessage("What is 2 + 3?"))
    assert first.tool_names == ("add_numbers",)
    assert second.messages[-1] == ToolMessage("call_1", "add_numbers", "5")
    assert state["rounds"] == 2


async def test_unknown_tool_and_invalid_arguments_continue_as_observations(
    registry: ToolRegistry, calls: Calls
) -> None:
    model = ScriptedModel(
        [
            tool_call("delete_everything", {}, id="u1"),
            tool_call("add_numbers", {"a": "two", "b": 3}, id="v1"),
            "I could not add them.",
        ]
    )
    state = await build_react_graph(model, registry.view("add_numbers")).ainvoke({"query": "go"})

    assert state["output"] == "I could not add them."
    unknown, invalid = _tool_messages(state)
    assert unknown == {
        "role": "tool",
        "tool_call_id": "u1",
        "name": "delete_everything",
        "content": "unknown_tool: No tool named 'delete_everything' in this run. "
        "Available tools: add_numbers.",
        "is_error": True,
    }
    assert invalid["tool_call_id"] == "v1"
    assert invalid["is_error"] is True
    assert invalid["content"].startswith("invalid_arguments: field 'a': Input should be")
    assert calls.count("add_numbers") == 0
    assert model.calls[2].messages[-1] == message_from_dict(invalid)


@pytest.mark.reason(
    "unknown_tool", "malformed_arguments", "invalid_arguments", "repeated_tool_call"
)
async def test_every_observation_reads_as_in_the_native_loop(registry: ToolRegistry) -> None:
    def script() -> ScriptedModel:
        return ScriptedModel(
            [
                tool_call("nope"),
                tool_call("add_numbers", '{"a": 1,'),
                tool_call("add_numbers", {"a": 1, "b": 2, "c": 3}),
                tool_call("refuse", {"customer": "acme"}),
                [tool_call("lookup", {"key": "k"}), tool_call("lookup", {"key": "k"})],
                tool_call("lookup", {"key": "k"}),  # a repeat across rounds, too
                tool_call("add_numbers", {"a": 1, "b": 2}),
                "done",
            ]
        )

    native = await run_loop(script(), registry.view(), "go", max_rounds=20)
    state = await build_react_graph(script(), registry.view()).ainvoke({"query": "go"})

    expected = [m for m in native.transcript if isinstance(m, ToolMessage)]
    got = [message_from_dict(m) for m in _tool_messages(state)]
    assert got == expected
    tool_messages = [m for m in got if isinstance(m, ToolMessage)]
    assert [m.content.split(":")[0] for m in tool_messages if m.is_error] == [
        "unknown_tool",
        "malformed_arguments",
        "invalid_arguments",
        "customer_not_found",
        "repeated_tool_call",
        "repeated_tool_call",
    ]
    assert state["output"] == native.answer == "done"


async def test_a_handler_that_raises_is_a_tool_error_observation(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("explode", {"reason": "x"}), "sorry"])
    state = await build_react_graph(model, registry).ainvoke({"query": "go"})
    [failed] = _tool_messages(state)
    assert failed["is_error"] is True
    assert failed["content"].startswith("tool_error: Tool 'explode' failed (incident ")
    assert "hunter2" not in json.dumps(state)
    assert state["output"] == "sorry"


async def test_an_escalating_tool_fails_the_run(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("flaky_remote"), "never reached"])
    graph = build_react_graph(model, [*registry, FlakyRemote()])
    with pytest.raises(ComponentInvokeError, match="failed 3 times"):
        await graph.ainvoke({"query": "go"})
    assert len(model.calls) == 1


async def test_an_empty_answer_fails_as_invalid_model_response(registry: ToolRegistry) -> None:
    graph = build_react_graph(ScriptedModel(["  "]), registry)
    with pytest.raises(LlamonApplicationError) as caught:
        await graph.ainvoke({"query": "go"})
    assert (caught.value.code.value, caught.value.reason, caught.value.retriable) == (
        "UPSTREAM_UNAVAILABLE",
        "invalid_model_response",
        True,
    )


async def test_a_model_that_never_stops_hits_the_recursion_limit(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": str(i)}) for i in range(50)])
    graph = build_react_graph(model, registry.view("lookup"))
    with pytest.raises(GraphRecursionError):
        await graph.ainvoke({"query": "loop"}, {"recursion_limit": 9})
    assert len(model.calls) == 4  # prompt + 4 x (agent, tools) = 9 steps


async def test_the_state_is_json_and_survives_a_checkpointer(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": "a"}), "first", "second"])
    graph = build_react_graph(
        model, registry.view("lookup"), system_prompt="sys", checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    await graph.ainvoke({"query": "one"}, config)
    saved = (await graph.aget_state(config)).values
    assert json.loads(json.dumps(saved)) == saved
    assert saved["last_call"] == ["lookup", '{"key": "a"}']

    # a second turn on the thread goes on from the saved transcript, the guard reset
    state = await graph.ainvoke({"query": "two"}, config)
    assert state["output"] == "second"
    assert [m["role"] for m in state["messages"]].count("system") == 1
    assert model.calls[2].messages[-2:] == (
        AssistantMessage(content="first"),
        UserMessage("two"),
    )
    assert state["last_call"] is None
    assert state["rounds"] == 1


def test_messages_round_trip_through_json() -> None:
    messages: list[ChatMessage] = [
        SystemMessage("s"),
        UserMessage("u"),
        AssistantMessage("thinking", (RawToolCall("c1", "t", '{"a": 1}'),)),
        AssistantMessage(None),
        ToolMessage("c1", "t", "error: no", is_error=True),
    ]
    dicts = json.loads(json.dumps([message_to_dict(m) for m in messages]))
    assert [message_from_dict(d) for d in dicts] == messages
    with pytest.raises(ValueError, match="role 'robot'"):
        message_from_dict({"role": "robot"})


async def test_run_tool_calls_runs_one_round_like_the_loop(registry: ToolRegistry) -> None:
    calls = [tool_call("add_numbers", {"a": 1, "b": 2}, id="c1"), tool_call("nope", id="c2")]
    done = await run_tool_calls(registry, calls)
    assert [m.content for m in done.messages] == [
        "3",
        "unknown_tool: No tool named 'nope' in this run. "
        "Available tools: add_numbers, lookup, explode, refuse.",
    ]
    assert [r.call.id for r in done.results] == ["c1", "c2"]
    assert done.previous == ("nope", "{}")


# ---------------------------------------------------------------- served over A2A


async def test_served_over_http_answers_completed(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            tool_call("add_numbers", {"a": 20, "b": 22}),
            lambda messages: f"The answer is {messages[-1].content}.",
        ]
    )
    graph = build_react_graph(model, registry.view("add_numbers"))
    async with running_server(create_app(graph, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("20 + 22?"))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["The answer is 42."]
    assert model.calls[0].messages == (UserMessage("20 + 22?"),)


@pytest.mark.reason("max_tool_iterations_exceeded")
async def test_served_a_model_that_loops_forever_fails_retriable(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": str(i)}) for i in range(50)])
    agent = GraphAgent(build_react_graph(model, registry.view("lookup")), recursion_limit=7)
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("loop forever"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "max_tool_iterations_exceeded",
        True,
    )
    assert len(model.calls) == 3


async def test_served_recursion_limit_shows_the_sdks_message_not_langgraphs_hint(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([*[tool_call("lookup", {"key": str(i)}) for i in range(3)], "done"])
    agent = GraphAgent(build_react_graph(model, registry.view("lookup")), recursion_limit=7)
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("loop"))
        following = await send(client, user_message("answer now"))
    sdk_message = "The agent reached its limit of steps before finishing; retrying may succeed."
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["errorMessage"]) == (
        "UPSTREAM_UNAVAILABLE",
        "max_tool_iterations_exceeded",
        sdk_message,
    )
    assert task.status.message is not None
    shown = json.dumps(task.status.message.model_dump(mode="json"))
    assert sdk_message in shown
    for hint in ("recursion_limit", "troubleshooting", "langchain", "http"):
        assert hint not in shown.lower()
    assert following.status.state == TaskState.completed
    assert texts(following) == ["done"]


async def test_served_an_escalating_tool_fails_the_task(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("flaky_remote"), "never reached"])
    graph = build_react_graph(model, ToolRegistry([*registry, FlakyRemote()]))
    async with running_server(create_app(graph, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("go"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "component_invoke_error",
        True,
    )
    assert data["node"]["id"] == "tools"


# ---------------------------------------------------------------- MCP tools


async def test_mcp_tools_in_the_graph_show_the_normalizer_lines() -> None:
    model = ScriptedModel(
        [
            tool_call("order_book", {}, id="o1"),
            tool_call("search_books", {"query": "gibson"}, id="s1"),
            lambda messages: f"Found: {messages[-1].content}",
        ]
    )
    async with MCPToolLoader(build_server()).session() as tools:
        graph = build_react_graph(model, tools)
        state = await graph.ainvoke({"query": "order a book"})

    missing = model.calls[1].messages[-1]
    assert missing == ToolMessage(
        "o1", "order_book", "Missing required argument: title", is_error=True
    )
    found = model.calls[2].messages[-1]
    assert isinstance(found, ToolMessage)
    assert not found.is_error
    assert "Neuromancer" in found.content
    assert state["output"].startswith("Found: ")
    assert set(model.calls[0].tool_names) == {"search_books", "get_book", "order_book"}


async def test_served_with_one_mcp_session_per_request() -> None:
    model = ScriptedModel(
        [
            tool_call("order_book", {"quantity": 1}),
            lambda messages: f"I need a title. ({messages[-1].content})",
        ]
    )
    bookshop = MCPToolLoader(build_server())

    async def agent(ctx: AgentContext) -> str | None:
        async with bookshop.session() as tools:
            graph = build_react_graph(model, tools)
            state = await graph.ainvoke({"query": ctx.text}, {"recursion_limit": 20})
            output: str | None = state["output"]
            return output

    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("order something"))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["I need a title. (Missing required argument: title)"]
