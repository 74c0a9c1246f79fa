"""MCPToolLoader over an in-process MCPServer (mcp's ``Client(server)``): the full table."""

from __future__ import annotations

import asyncio
import logging

import pytest
from mcp.server import MCPServer
from mcp.types import INVALID_REQUEST

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.mcp import (
    MCPProtocolError,
    MCPTool,
    MCPToolLoader,
    MCPToolTimeoutError,
    RequestBudget,
)
from tests.mcp.servers import SECRET, Probe, build_test_server

TOOLS = [
    "search_books",
    "get_book",
    "order_book",
    "explode",
    "echo",
    "wait_for_release",
    "pid",
    "leak",
]


def by_name(tools: list[MCPTool]) -> dict[str, MCPTool]:
    return {tool.name: tool for tool in tools}


async def test_lists_the_server_tools_once_with_their_schemas(server: MCPServer) -> None:
    session = MCPToolLoader(server).session()
    async with session as tools:
        assert [t.name for t in tools] == TOOLS
        get_book = by_name(tools)["get_book"]
        assert get_book.description == "The catalog entry of one book, by its exact title."
        assert get_book.parameters["required"] == ["title"]
        assert get_book.parameters["properties"]["title"]["type"] == "string"
        assert get_book.output_schema is not None
        assert [t.name for t in await session.to_tools()] == TOOLS  # listed once, cached
    assert session.closed


async def test_the_documented_spelling_to_tools_and_aclose(server: MCPServer) -> None:
    loader = MCPToolLoader(server)
    tools = await loader.to_tools()
    assert [t.name for t in tools] == TOOLS
    assert loader.budget is not None
    out = await by_name(tools)["echo"].call({"text": "hi"})
    assert out.text == "hi"
    await loader.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await by_name(tools)["echo"].call({"text": "hi"})


async def test_prefix_and_include(server: MCPServer, probe: Probe) -> None:
    loader = MCPToolLoader(server, tool_prefix="shop_", include=["echo", "get_book"])
    async with loader.session() as tools:
        assert [t.name for t in tools] == ["shop_get_book", "shop_echo"]
        echo = by_name(tools)["shop_echo"]
        assert echo.remote_name == "echo"
        assert (await echo.call({"text": "a", "times": 2})).text == "a a"
    assert probe.calls == [{"text": "a", "times": 2}]


async def test_success_gives_text_and_structured_content(server: MCPServer) -> None:
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["search_books"].call({"query": "gibson"})
    assert not out.is_error
    assert out.structured == {"result": [{"title": "Neuromancer", "author": "William Gibson"}]}
    assert "Neuromancer" in out.text


async def test_missing_argument_reaches_the_model_and_the_server_is_not_called(
    server: MCPServer, probe: Probe
) -> None:
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["echo"].call({"times": 2})
        assert (out.text, out.is_error, out.reason) == (
            "Missing required argument: text",
            True,
            "invalid_arguments",
        )
        assert probe.calls == []
        # the task goes on: the model fixes the call
        assert (await by_name(tools)["echo"].call({"text": "ok"})).text == "ok"


async def test_wrong_type_reaches_the_model_and_the_server_is_not_called(
    server: MCPServer, probe: Probe
) -> None:
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["echo"].call({"text": "x", "times": "twice"})
    assert (out.text, out.is_error) == (
        "Invalid argument type: times should be an integer, not a string",
        True,
    )
    assert probe.calls == []


async def test_server_side_validation_is_one_line(server: MCPServer) -> None:
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["search_books"].call({"query": "dune", "limit": 50})
    assert (out.text, out.reason) == (
        "Invalid argument: limit: Input should be less than or equal to 20",
        "invalid_arguments",
    )


async def test_tool_error_is_an_observation(server: MCPServer) -> None:
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["get_book"].call({"title": "Nothing"})
        again = await by_name(tools)["get_book"].call({"title": "Dune"})
    assert (out.text, out.is_error, out.reason) == (
        "Error executing tool get_book: No book titled 'Nothing' in the catalog. "
        "Try search_books first.",
        True,
        "tool_error",
    )
    assert not again.is_error


async def test_tool_error_text_is_scrubbed(server: MCPServer) -> None:
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["leak"].call({"title": "Dune"})
    assert out.is_error
    assert SECRET not in out.text
    assert (
        out.text
        == "Error executing tool leak: upstream rejected api_key=[REDACTED:api_key] for Dune"
    )


async def test_a_crash_is_an_observation_without_traceback_or_secret(
    server: MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    async with MCPToolLoader(server).session() as tools:
        out = await by_name(tools)["explode"].call({"title": "Dune"})
    assert (out.text, out.is_error, out.reason) == (
        "Error executing tool explode",
        True,
        "tool_error",
    )
    assert SECRET not in out.text
    # the traceback stays in the server's log
    assert any("raised an unexpected exception" in r.getMessage() for r in caplog.records)


@pytest.mark.reason("mcp_error")
async def test_mcp_error_from_a_tool_escalates_at_once() -> None:
    """MCPError means no model could have avoided it -> the host handles it."""
    server = build_test_server(read_only=True)
    async with MCPToolLoader(server).session() as tools:
        order = by_name(tools)["order_book"]
        with pytest.raises(MCPProtocolError) as raised:
            await order.call({"title": "Dune", "quantity": 1})
        assert order.budget.snapshot() == {}  # not a transport failure: nothing counted
        # the session is still usable for the rest of the request
        assert not (await by_name(tools)["get_book"].call({"title": "Dune"})).is_error
    exc = raised.value
    assert isinstance(exc, ComponentInvokeError)
    assert exc.mcp_code == INVALID_REQUEST
    assert exc.__cause__ is not None
    assert "read-only" in str(exc.__cause__)  # the server's message, kept in the cause
    assert "read-only" not in str(exc)
    found = classify_exception(exc)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "mcp_error",
        False,
    )


@pytest.mark.reason("upstream_tool_unavailable", "timeout")
async def test_timeouts_twice_observed_then_timeout_error(server: MCPServer, probe: Probe) -> None:
    loader = MCPToolLoader(server, read_timeout_seconds=0.1)
    try:
        async with loader.session() as tools:
            wait = by_name(tools)["wait_for_release"]
            for count in (1, 2):
                out = await wait.call({})
                assert (out.text, out.is_error, out.reason) == (
                    "Upstream tool 'wait_for_release' temporarily unavailable. Retry may succeed.",
                    True,
                    "upstream_tool_unavailable",
                )
                assert wait.budget.failures("wait_for_release") == count
            with pytest.raises(TimeoutError) as raised:
                await wait.call({})
            # a timeout keeps the connection: other tools still answer
            assert not (await by_name(tools)["pid"].call({})).is_error
    finally:
        probe.release.set()
    assert isinstance(raised.value, MCPToolTimeoutError)
    assert getattr(raised.value.__cause__, "code", None) == -32001
    found = classify_exception(raised.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_TIMEOUT,
        "timeout",
        True,
    )


async def test_counters_reset_per_request(server: MCPServer, probe: Probe) -> None:
    loader = MCPToolLoader(server, read_timeout_seconds=0.1)
    try:
        async with loader.session() as first_request:
            wait = by_name(first_request)["wait_for_release"]
            assert (await wait.call({})).is_error
            assert (await wait.call({})).is_error
            assert wait.budget.failures("wait_for_release") == 2
        second = loader.session()
        async with second as second_request:
            assert second.budget.failures("wait_for_release") == 0
            wait = by_name(second_request)["wait_for_release"]
            assert (await wait.call({})).is_error  # 1 of 3 again, not an escalation
            assert (await wait.call({})).is_error
            with pytest.raises(MCPToolTimeoutError):
                await wait.call({})
    finally:
        probe.release.set()


async def test_a_shared_budget_spans_sessions_when_asked(server: MCPServer, probe: Probe) -> None:
    budget = RequestBudget(2)
    loader = MCPToolLoader(server, read_timeout_seconds=0.1)
    try:
        async with loader.session(budget=budget) as one:
            assert (await by_name(one)["wait_for_release"].call({})).is_error
        async with loader.session(budget=budget) as two:
            with pytest.raises(MCPToolTimeoutError):
                await by_name(two)["wait_for_release"].call({})
    finally:
        probe.release.set()


async def test_a_released_call_answers(server: MCPServer, probe: Probe) -> None:
    async with MCPToolLoader(server).session() as tools:
        call = asyncio.create_task(by_name(tools)["wait_for_release"].call({}))
        await asyncio.wait_for(probe.started.wait(), timeout=10)
        probe.release.set()
        out = await asyncio.wait_for(call, timeout=10)
    assert (out.text, out.is_error) == ("released", False)


async def test_concurrent_calls_share_one_connection(server: MCPServer) -> None:
    async with MCPToolLoader(server).session() as tools:
        pid = by_name(tools)["pid"]
        outs = await asyncio.gather(*(pid.call({}) for _ in range(5)))
    assert len({o.text for o in outs}) == 1
    assert not any(o.is_error for o in outs)
