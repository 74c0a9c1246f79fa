"""MCP tools under a fault plan: each fault fails the call the way the real failure does,
so the normalizer's strikes, escalations and observations are what the run shows.

A real bookshop ``MCPServer`` over streamable HTTP on 127.0.0.1, loaded by
``MCPToolLoader``; the native loop with a ``ScriptedModel`` calls it inside
``fault_scope(plan)``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from examples.bookshop_mcp_server import build_server

from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.core.faults import (
    FaultPlan,
    McpConnectionDrop,
    ToolRaises,
    ToolReturnsError,
    ToolSlow,
    ToolTimeout,
    fault_scope,
)
from llamon_agent.loop import LoopOutcome, ScriptedModel, ToolMessage, ToolRegistry, run_loop
from llamon_agent.loop import tool_call as call
from llamon_agent.mcp import MCPTool, MCPToolLoader
from tests.mcp.conftest import HttpServer, serving

UNAVAILABLE = "Upstream tool 'get_book' temporarily unavailable. Retry may succeed."
DUNE = {"title": "Dune"}


@pytest.fixture
async def bookshop() -> AsyncIterator[HttpServer]:
    async with serving(build_server()) as running:
        yield running


async def _run(
    url: str, plan: FaultPlan, script: list[Any], bus: EventBus | None = None
) -> tuple[LoopOutcome, list[MCPTool]]:
    async with MCPToolLoader(url, name="bookshop").session() as tools:
        with fault_scope(plan):
            if bus is None:
                outcome = await run_loop(ScriptedModel(script), ToolRegistry(tools).view(), "go")
            else:
                with event_scope(bus, task_id="t-1"):
                    outcome = await run_loop(
                        ScriptedModel(script), ToolRegistry(tools).view(), "go"
                    )
        return outcome, tools


def _tool_texts(outcome: LoopOutcome) -> list[str]:
    return [m.content for m in outcome.transcript if isinstance(m, ToolMessage)]


def _three_calls() -> list[Any]:
    return [[call("get_book", DUNE)], [call("get_book", DUNE)], [call("get_book", DUNE)], "no"]


async def test_tools_carry_their_server_and_whether_they_change_anything(
    bookshop: HttpServer,
) -> None:
    async with MCPToolLoader(bookshop.url, name="bookshop").session() as tools:
        by_name = {tool.name: tool for tool in tools}
        assert {name: tool.mutating for name, tool in by_name.items()} == {
            "search_books": False,
            "get_book": False,
            "order_book": True,
        }
        assert {tool.server for tool in tools} == {"bookshop"}
        # the next call of the same session is still answered
        assert (await by_name["get_book"].call(DUNE)).is_error is False


@pytest.mark.reason("timeout")
async def test_tool_timeout_strikes_twice_then_escalates_upstream_timeout(
    bookshop: HttpServer,
) -> None:
    plan = FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")])
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    outcome, _ = await _run(bookshop.url, plan, _three_calls(), bus)
    assert await bus.flush()
    assert _tool_texts(outcome) == [UNAVAILABLE, UNAVAILABLE]
    assert outcome.status == "tool_escalated"
    assert outcome.classification is not None
    assert (outcome.classification.code.value, outcome.classification.reason) == (
        "UPSTREAM_TIMEOUT",
        "timeout",
    )
    strikes = [e.trace_metadata for e in got if e.type == "mcp.transport_failure"]
    assert [(m["strike"], m["failure_reason"], m["error_code"]) for m in strikes] == [
        (1, "timeout", "UPSTREAM_TIMEOUT"),
        (2, "timeout", "UPSTREAM_TIMEOUT"),
        (3, "timeout", "UPSTREAM_TIMEOUT"),
    ]
    assert [e.type for e in got if e.type in ("mcp.escalated", "lab.fault_injected")] == [
        "lab.fault_injected",
        "lab.fault_injected",
        "lab.fault_injected",
        "mcp.escalated",
    ]
    assert plan.fired == {"tool_timeout:get_book": 3}


@pytest.mark.reason("connection_closed")
async def test_connection_drop_after_one_call_strikes_twice_then_escalates(
    bookshop: HttpServer,
) -> None:
    plan = FaultPlan(
        [McpConnectionDrop(kind="mcp_connection_drop", server="bookshop", after_calls=1)]
    )
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    script = [[call("search_books", {"query": "dune"})], *_three_calls()]
    outcome, _ = await _run(bookshop.url, plan, script, bus)
    assert await bus.flush()
    texts = _tool_texts(outcome)
    assert "Dune" in texts[0]  # the call before the drop reached the server
    assert texts[1:] == [UNAVAILABLE, UNAVAILABLE]
    strikes = [e.trace_metadata for e in got if e.type == "mcp.transport_failure"]
    assert [(m["strike"], m["limit"], m["failure_reason"]) for m in strikes] == [
        (1, 3, "connection_closed"),
        (2, 3, "connection_closed"),
        (3, 3, "connection_closed"),
    ]
    assert outcome.status == "tool_escalated"
    assert outcome.classification is not None
    assert (
        outcome.classification.code.value,
        outcome.classification.reason,
        outcome.classification.retriable,
    ) == ("UPSTREAM_UNAVAILABLE", "connection_closed", True)
    assert plan.fired == {"mcp_connection_drop:bookshop": 3}


async def test_tool_raises_escalates_unmapped_at_once(bookshop: HttpServer) -> None:
    plan = FaultPlan([ToolRaises(kind="tool_raises", tool="get_book", message="disk on fire")])
    outcome, _ = await _run(bookshop.url, plan, _three_calls())
    assert outcome.status == "tool_escalated"
    assert outcome.classification is not None
    assert (outcome.classification.code.value, outcome.classification.mapped) == (
        "INTERNAL_ERROR",
        False,
    )
    assert _tool_texts(outcome) == []
    assert plan.fired == {"tool_raises:get_book": 1}


@pytest.mark.reason("tool_error")
async def test_tool_error_is_an_observation_and_the_run_goes_on(bookshop: HttpServer) -> None:
    plan = FaultPlan([ToolReturnsError(kind="tool_error", tool="get_book", message="shelf empty")])
    script = [[call("get_book", DUNE)], [call("search_books", {"query": "dune"})], "done"]
    outcome, _ = await _run(bookshop.url, plan, script)
    assert outcome.status == "completed"
    texts = _tool_texts(outcome)
    assert texts[0] == "shelf empty"
    assert "Dune" in texts[1]  # the other tool of the same server is not touched
    assert [r.result.error_code for r in outcome.tool_results] == ["tool_error", None]


async def test_tool_slow_answers_after_the_delay(bookshop: HttpServer) -> None:
    plan = FaultPlan([ToolSlow(kind="tool_slow", tool="get_book", delay_ms=200)])
    started = time.monotonic()
    outcome, _ = await _run(bookshop.url, plan, [[call("get_book", DUNE)], "done"])
    assert time.monotonic() - started >= 0.2
    assert outcome.status == "completed"
    assert '"title":"Dune"' in _tool_texts(outcome)[0].replace(" ", "")


async def test_without_a_plan_nothing_is_injected(bookshop: HttpServer) -> None:
    outcome, _ = await _run(bookshop.url, FaultPlan(), [[call("get_book", DUNE)], "done"])
    assert outcome.status == "completed"
    assert "Frank Herbert" in _tool_texts(outcome)[0]
