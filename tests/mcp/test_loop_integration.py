"""MCP tools inside the native loop: the model reads the normalizer's exact lines, a
transient failure's retry is not blocked as a repeat, and the 3rd strike ends the run."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx2
from examples.bookshop_mcp_server import build_server

from llamon_agent.loop import ScriptedModel, ToolMessage, ToolRegistry, run_loop, tool_call
from llamon_agent.mcp import MCPToolLoader, RequestBudget, wrap_tool_output_normalizer


def _tool_texts(transcript: list[Any]) -> list[str]:
    return [m.content for m in transcript if isinstance(m, ToolMessage)]


async def test_mcp_observations_reach_the_model_verbatim() -> None:
    model = ScriptedModel(
        [
            [tool_call("order_book", {})],
            [tool_call("search_books", {"query": ""})],
            [tool_call("search_books", {"query": "tolkien", "limit": 1})],
            "Found it.",
        ]
    )
    async with MCPToolLoader(build_server()).session() as tools:
        outcome = await run_loop(model, ToolRegistry(tools).view(), "find tolkien")
    assert outcome.status == "completed"
    texts = _tool_texts(list(outcome.transcript))
    assert texts[0] == "Missing required argument: title"
    assert "The query is empty" in texts[1]
    assert [r.result.error_code for r in outcome.tool_results] == [
        "invalid_arguments",
        "tool_error",
        None,
    ]


class _Remote:
    name = "get_book"
    description = "The catalog entry of one book."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    }
    output_schema = None


async def test_transient_failures_are_retried_then_escalate_on_the_third() -> None:
    calls = 0

    async def refused(arguments: dict[str, Any]) -> Any:
        nonlocal calls
        calls += 1
        raise httpx2.ConnectError("refused")

    tool = wrap_tool_output_normalizer(_Remote(), refused, budget=RequestBudget())
    same = {"title": "Dune"}
    model = ScriptedModel(
        [
            [tool_call("get_book", same)],
            [tool_call("get_book", same)],
            [tool_call("get_book", same)],
            "unreachable",
        ]
    )
    outcome = await run_loop(model, ToolRegistry([tool]).view(), "dune?")
    assert calls == 3, "an invited retry is not blocked as a repeated call"
    assert _tool_texts(list(outcome.transcript)) == [
        "Upstream tool 'get_book' temporarily unavailable. Retry may succeed.",
        "Upstream tool 'get_book' temporarily unavailable. Retry may succeed.",
    ]
    assert outcome.status == "tool_escalated"
    assert outcome.classification is not None
    assert outcome.classification.as_tuple()[0].value == "UPSTREAM_UNAVAILABLE"
    assert outcome.classification.retriable is True
