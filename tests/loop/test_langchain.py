"""``to_langchain_tools``: our tools as LangChain ``StructuredTool``s, failures as the
native loop's observation text."""

from __future__ import annotations

from typing import Any

import pytest
from examples.bookshop_mcp_server import build_server
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent

from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.loop import ScriptedModel, ToolRegistry, run_loop, tool_call
from llamon_agent.loop import ToolMessage as LoopToolMessage
from llamon_agent.loop.langchain import to_langchain_tools
from llamon_agent.mcp import MCPToolLoader
from tests.loop.conftest import Calls, FlakyRemote


def _by_name(tools: list[StructuredTool]) -> dict[str, StructuredTool]:
    return {t.name: t for t in tools}


def _call(name: str, args: dict[str, Any], id: str = "c1") -> dict[str, Any]:
    return {"type": "tool_call", "id": id, "name": name, "args": args}


async def _native_text(registry: ToolRegistry, name: str, args: dict[str, Any]) -> str:
    """What the native loop shows the model for this one call."""
    outcome = await run_loop(ScriptedModel([tool_call(name, args), "ok"]), registry, "go")
    [message] = [m for m in outcome.transcript if isinstance(m, LoopToolMessage)]
    return message.content


def test_each_tool_keeps_its_name_description_and_schema(registry: ToolRegistry) -> None:
    tools = to_langchain_tools(registry)
    assert [t.name for t in tools] == ["add_numbers", "lookup", "explode", "refuse"]
    add = tools[0]
    assert add.description == "Add two integers."
    assert add.args_schema == dict(registry.view("add_numbers").specs()[0].parameters)
    assert add.args == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert add.response_format == "content_and_artifact"


async def test_a_success_returns_the_loop_text_and_the_value(
    registry: ToolRegistry, calls: Calls
) -> None:
    lookup = _by_name(to_langchain_tools(registry.view("lookup")))["lookup"]
    assert await lookup.ainvoke({"key": "k"}) == '{"key": "k", "value": "K"}'

    message = await lookup.ainvoke(_call("lookup", {"key": "k"}))
    assert isinstance(message, ToolMessage)
    assert (message.tool_call_id, message.status) == ("c1", "success")
    assert message.content == await _native_text(registry, "lookup", {"key": "k"})
    assert message.artifact == {"key": "k", "value": "K"}
    assert calls.count("lookup") == 3


async def test_invalid_arguments_come_back_as_the_observation(
    registry: ToolRegistry, calls: Calls
) -> None:
    add = _by_name(to_langchain_tools(registry))["add_numbers"]
    text = await add.ainvoke({"a": "two", "b": 3})
    assert text.startswith("invalid_arguments: field 'a': Input should be a valid integer")
    assert text == await _native_text(registry, "add_numbers", {"a": "two", "b": 3})
    assert await add.ainvoke({"a": 1}) == "invalid_arguments: field 'b': Field required"

    message = await add.ainvoke(_call("add_numbers", {"a": 1, "b": 2, "c": 3}))
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert message.content == "invalid_arguments: field 'c': Extra inputs are not permitted"
    assert calls.count("add_numbers") == 0


async def test_a_handler_error_is_a_tool_error_observation(registry: ToolRegistry) -> None:
    explode = _by_name(to_langchain_tools(registry))["explode"]
    message = await explode.ainvoke(_call("explode", {"reason": "x"}))
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert isinstance(message.content, str)
    assert message.content.startswith("tool_error: Tool 'explode' failed (incident ")
    assert "hunter2" not in message.content


async def test_a_tools_own_failure_reads_as_in_the_loop(registry: ToolRegistry) -> None:
    refuse = _by_name(to_langchain_tools(registry))["refuse"]
    text = await refuse.ainvoke({"customer": "acme"})
    assert text == "customer_not_found: No customer 'acme'; ask for the id."
    assert text == await _native_text(registry, "refuse", {"customer": "acme"})


async def test_an_escalation_propagates() -> None:
    [remote] = to_langchain_tools([FlakyRemote()])
    with pytest.raises(ComponentInvokeError, match="failed 3 times"):
        await remote.ainvoke(_call("flaky_remote", {}))


async def test_mcp_tools_keep_the_normalizer_lines() -> None:
    async with MCPToolLoader(build_server()).session() as mcp_tools:
        tools = _by_name(to_langchain_tools(mcp_tools))
        missing = await tools["order_book"].ainvoke(_call("order_book", {}))
        found = await tools["search_books"].ainvoke({"query": "gibson"})
    assert isinstance(missing, ToolMessage)
    assert (missing.status, missing.content) == ("error", "Missing required argument: title")
    assert "Neuromancer" in found


async def test_tool_node_turns_failures_into_error_tool_messages(
    registry: ToolRegistry,
) -> None:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode(to_langchain_tools(registry)))
    builder.add_edge(START, "tools")
    graph = builder.compile()
    asked = AIMessage(
        content="",
        tool_calls=[
            {"id": "a", "name": "add_numbers", "args": {"a": 2, "b": 3}},
            {"id": "b", "name": "add_numbers", "args": {"a": "x", "b": 3}},
        ],
    )
    result = await graph.ainvoke({"messages": [asked]})
    _, ok, failed = result["messages"]
    assert (ok.tool_call_id, ok.content, ok.status) == ("a", "5", "success")
    assert (failed.tool_call_id, failed.status) == ("b", "error")
    assert failed.content.startswith("invalid_arguments: field 'a'")


class _ToolCallingFake(GenericFakeChatModel):
    """A chat model that plays its messages; ``bind_tools`` is a no-op."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_create_react_agent_runs_our_tools(registry: ToolRegistry) -> None:
    model = _ToolCallingFake(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[{"id": "c1", "name": "add_numbers", "args": {"a": "x", "b": 1}}],
                ),
                AIMessage(
                    content="",
                    tool_calls=[{"id": "c2", "name": "add_numbers", "args": {"a": 4, "b": 1}}],
                ),
                AIMessage(content="It is 5."),
            ]
        )
    )
    agent = create_react_agent(model, to_langchain_tools(registry.view("add_numbers")))
    state = await agent.ainvoke({"messages": [("user", "4 + 1?")]})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.status) for m in tool_messages] == [
        ("c1", "error"),
        ("c2", "success"),
    ]
    assert tool_messages[0].content == await _native_text(
        registry, "add_numbers", {"a": "x", "b": 1}
    )
    assert state["messages"][-1].content == "It is 5."
