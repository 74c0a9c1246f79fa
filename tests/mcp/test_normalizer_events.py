"""An MCP tool's runner events: each call, each transport strike, the escalation."""

from __future__ import annotations

import pytest

from llamon_agent.core.events import EventBus, RunnerEvent, event_scope
from llamon_agent.mcp import MCPToolUnavailableError
from tests.mcp.test_normalizer import make, text_result


async def test_calls_strikes_and_the_escalation_are_events() -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    refused = ConnectionRefusedError("ECONNREFUSED 10.0.0.7:8080")
    tool, _ = make(
        text_result("Dune, 1965"),
        text_result("no such book", is_error=True),
        refused,
        refused,
        refused,
    )
    with event_scope(bus, task_id="t-1"):
        await tool.call({"title": "Dune"})
        await tool.call({"title": "Dune"})
        await tool.call({})  # the schema check refuses it; the server is not called
        await tool.call({"title": "Dune"})
        await tool.call({"title": "Dune"})
        with pytest.raises(MCPToolUnavailableError):
            await tool.call({"title": "Dune"})
    assert await bus.flush()
    assert [(e.type, e.stage, e.tool, e.task_id) for e in got] == [
        ("mcp.call", "mcp_call", "lookup", "t-1"),
        ("mcp.call", "mcp_call", "lookup", "t-1"),
        ("mcp.call", "mcp_call", "lookup", "t-1"),
        ("mcp.transport_failure", "mcp_call", "lookup", "t-1"),
        ("mcp.call", "mcp_call", "lookup", "t-1"),
        ("mcp.transport_failure", "mcp_call", "lookup", "t-1"),
        ("mcp.call", "mcp_call", "lookup", "t-1"),
        ("mcp.transport_failure", "mcp_call", "lookup", "t-1"),
        ("mcp.escalated", "mcp_call", "lookup", "t-1"),
    ]
    outcomes = [
        (e.trace_metadata["outcome"], e.trace_metadata.get("failure_reason"))
        for e in got
        if e.type == "mcp.call"
    ]
    assert outcomes == [
        ("ok", None),
        ("is_error", "tool_error"),
        ("invalid_arguments", "invalid_arguments"),
        ("is_error", "upstream_tool_unavailable"),
        ("is_error", "upstream_tool_unavailable"),
    ]
    strikes = [e.trace_metadata for e in got if e.type == "mcp.transport_failure"]
    assert [(m["strike"], m["limit"], m["failure_reason"]) for m in strikes] == [
        (1, 3, "network_error"),
        (2, 3, "network_error"),
        (3, 3, "network_error"),
    ]
    escalated = got[-1].trace_metadata
    assert (escalated["error_code"], escalated["retryable"]) == ("UPSTREAM_UNAVAILABLE", True)
    assert "10.0.0.7" not in str([e.trace_metadata for e in got])
