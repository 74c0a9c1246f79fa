"""``wrap_tool_output_normalizer`` over a fake remote call: every failure kind, no network."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Iterable
from typing import Any

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
    CallToolResult,
    ImageContent,
    TextContent,
    Tool,
)

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.mcp import (
    MCPProtocolError,
    MCPTool,
    MCPToolTimeoutError,
    MCPToolUnavailableError,
    RequestBudget,
    unavailable_text,
    wrap_tool_output_normalizer,
)

TOOL = Tool(
    name="lookup",
    description="Looks a book up.",
    input_schema={
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    },
)
UNAVAILABLE = "Upstream tool 'lookup' temporarily unavailable. Retry may succeed."


class FakeRemote:
    """Answers (or raises) the given outcomes in order; records the arguments it got."""

    def __init__(self, outcomes: Iterable[CallToolResult | BaseException]) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, arguments: dict[str, Any]) -> CallToolResult:
        self.calls.append(arguments)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def make(
    *outcomes: CallToolResult | BaseException, budget: RequestBudget | None = None
) -> tuple[MCPTool, FakeRemote]:
    remote = FakeRemote(outcomes)
    tool = wrap_tool_output_normalizer(TOOL, remote, budget=budget or RequestBudget())
    return tool, remote


def text_result(text: str, *, is_error: bool = False, structured: Any = None) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        is_error=is_error,
        structured_content=structured,
    )


def refused() -> OSError:
    return ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")


def test_the_tool_satisfies_the_loop_protocol() -> None:
    tool, _ = make()
    assert tool.name == "lookup"
    assert tool.description == "Looks a book up."
    assert tool.parameters["required"] == ["title"]
    spec = tool.to_spec()
    assert (spec.name, spec.description, spec.parameters) == (
        "lookup",
        "Looks a book up.",
        tool.parameters,
    )


async def test_success_passes_text_and_structured_content_through() -> None:
    tool, remote = make(text_result("Dune by Frank Herbert", structured={"author": "Herbert"}))
    out = await tool.call({"title": "Dune"})
    assert (out.text, out.is_error, out.structured, out.reason) == (
        "Dune by Frank Herbert",
        False,
        {"author": "Herbert"},
        None,
    )
    assert remote.calls == [{"title": "Dune"}]


async def test_structured_only_results_are_shown_as_json_and_media_as_a_marker() -> None:
    tool, _ = make(
        CallToolResult(content=[], structured_content={"n": 1}),
        CallToolResult(content=[ImageContent(type="image", data="AAAA", mime_type="image/png")]),
    )
    assert (await tool.call({"title": "x"})).text == '{"n": 1}'
    assert (await tool.call({"title": "x"})).text == "[image: image/png]"


async def test_missing_argument_is_an_observation_and_the_server_is_not_called() -> None:
    tool, remote = make()
    out = await tool.call({})
    assert (out.text, out.is_error, out.reason) == (
        "Missing required argument: title",
        True,
        "invalid_arguments",
    )
    assert remote.calls == []


async def test_wrong_type_is_an_observation_and_the_server_is_not_called() -> None:
    tool, remote = make()
    out = await tool.call({"title": 42})
    assert out.text == "Invalid argument type: title should be a string, not an integer"
    assert out.is_error
    assert remote.calls == []


async def test_a_tool_error_result_is_an_observation_scrubbed() -> None:
    tool, _ = make(
        text_result("Error executing tool lookup: No book titled 'X'.", is_error=True),
        text_result(
            "Error executing tool lookup: token=ghp_abcdefghijklmnopqrstuvwxyz0123", is_error=True
        ),
        CallToolResult(content=[], is_error=True),
    )
    first = await tool.call({"title": "X"})
    assert (first.text, first.is_error, first.reason) == (
        "Error executing tool lookup: No book titled 'X'.",
        True,
        "tool_error",
    )
    second = await tool.call({"title": "X"})
    assert "ghp_" not in second.text
    assert "[REDACTED" in second.text
    empty = await tool.call({"title": "X"})
    assert empty.text == "Tool 'lookup' failed without a message."


async def test_server_side_validation_text_becomes_one_line_without_values() -> None:
    pydantic_text = (
        "Error executing tool lookup: 1 validation error for lookupArguments\n"
        "limit\n"
        "  Input should be less than or equal to 20 "
        "[type=less_than_equal, input_value=99, input_type=int]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/less_than_equal"
    )
    tool, _ = make(text_result(pydantic_text, is_error=True))
    out = await tool.call({"title": "x"})
    assert out.text == "Invalid argument: limit: Input should be less than or equal to 20"
    assert out.reason == "invalid_arguments"


@pytest.mark.reason(
    "upstream_tool_unavailable", "network_error", "connection_closed", "session_lost", "http_error"
)
@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (refused(), "network_error"),
        (httpx2.ConnectError("All connection attempts failed"), "network_error"),
        (MCPError(code=CONNECTION_CLOSED, message="Connection closed"), "connection_closed"),
        (
            ExceptionGroup("unhandled errors in a TaskGroup", [httpx2.ConnectError("refused")]),
            "network_error",
        ),
        (
            ExceptionGroup("outer", [ExceptionGroup("inner", [refused()])]),
            "network_error",
        ),
        (MCPError(code=INVALID_REQUEST, message="Session terminated"), "session_lost"),
        (MCPError(code=INTERNAL_ERROR, message="Server returned an error response"), "http_error"),
    ],
    ids=[
        "ECONNREFUSED",
        "httpx2.ConnectError",
        "MCPError-32000",
        "ExceptionGroup",
        "nested-group",
        "session-lost",
        "http-error",
    ],
)
async def test_unavailable_twice_observed_then_escalated(failure: Exception, reason: str) -> None:
    budget = RequestBudget()
    tool, _ = make(failure, failure, failure, budget=budget)
    for count in (1, 2):
        out = await tool.call({"title": "Dune"})
        assert (out.text, out.is_error, out.reason) == (
            UNAVAILABLE,
            True,
            "upstream_tool_unavailable",
        )
        assert budget.failures("lookup") == count
    with pytest.raises(MCPToolUnavailableError) as raised:
        await tool.call({"title": "Dune"})
    exc = raised.value
    assert isinstance(exc, ComponentInvokeError)
    assert exc.__cause__ is failure
    found = classify_exception(exc)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        reason,
        True,
    )
    assert exc.details == {"tool": "lookup", "attempts": 3}


@pytest.mark.parametrize(
    "failure",
    [
        MCPError(code=REQUEST_TIMEOUT, message="Timed out after 0.1s waiting for 'tools/call'"),
        httpx2.ReadTimeout("read timed out"),
        TimeoutError(),
    ],
    ids=["MCPError-32001", "httpx2.ReadTimeout", "asyncio.TimeoutError"],
)
async def test_timeouts_twice_observed_then_escalated_as_timeout_error(
    failure: Exception,
) -> None:
    tool, _ = make(failure, failure, failure)
    assert (await tool.call({"title": "Dune"})).text == UNAVAILABLE
    assert (await tool.call({"title": "Dune"})).text == UNAVAILABLE
    with pytest.raises(asyncio.TimeoutError) as raised:
        await tool.call({"title": "Dune"})
    assert isinstance(raised.value, MCPToolTimeoutError)
    assert raised.value.__cause__ is failure
    found = classify_exception(raised.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_TIMEOUT,
        "timeout",
        True,
    )


async def test_failures_count_per_tool_and_mix_kinds() -> None:
    budget = RequestBudget()
    tool, _ = make(refused(), TimeoutError(), refused(), budget=budget)
    other = wrap_tool_output_normalizer(
        Tool(name="other", input_schema={"type": "object"}),
        FakeRemote([refused(), refused()]),
        budget=budget,
    )
    assert (await tool.call({"title": "a"})).is_error
    assert (await other.call({})).text == unavailable_text("other")
    assert (await tool.call({"title": "a"})).is_error
    assert (await other.call({})).is_error
    assert budget.snapshot() == {"lookup": 2, "other": 2}
    with pytest.raises(MCPToolUnavailableError):  # the 3rd failure decides the kind
        await tool.call({"title": "a"})


async def test_successes_do_not_reset_the_count_within_a_request() -> None:
    tool, _ = make(refused(), text_result("ok"), refused(), refused())
    assert (await tool.call({"title": "a"})).is_error
    assert not (await tool.call({"title": "a"})).is_error
    assert (await tool.call({"title": "a"})).is_error
    with pytest.raises(MCPToolUnavailableError):
        await tool.call({"title": "a"})


async def test_a_new_budget_starts_at_zero_and_reset_clears() -> None:
    first = RequestBudget()
    tool, _ = make(refused(), refused(), budget=first)
    await tool.call({"title": "a"})
    await tool.call({"title": "a"})
    assert first.failures("lookup") == 2
    second = RequestBudget()
    tool2, _ = make(refused(), budget=second)
    assert (await tool2.call({"title": "a"})).text == UNAVAILABLE
    assert second.failures("lookup") == 1
    first.reset()
    assert first.failures("lookup") == 0


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (INVALID_PARAMS, "No book titled 'Nothing' in the catalog."),
        (INVALID_REQUEST, "This bookshop is read-only; ordering is switched off."),
        (-32601, "Method not found"),
    ],
)
async def test_a_protocol_error_escalates_at_once_and_is_not_retriable(
    code: int, message: str
) -> None:
    budget = RequestBudget()
    error = MCPError(code=code, message=message)
    tool, _ = make(error, budget=budget)
    with pytest.raises(MCPProtocolError) as raised:
        await tool.call({"title": "Nothing"})
    exc = raised.value
    assert isinstance(exc, ComponentInvokeError)
    assert exc.__cause__ is error
    assert exc.mcp_code == code
    assert message not in str(exc)  # the server's text stays in the process
    found = classify_exception(exc)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "mcp_error",
        False,
    )
    assert budget.snapshot() == {}


async def test_other_failures_propagate_unchanged() -> None:
    request = httpx2.Request("POST", "http://mcp.example/mcp")
    unauthorized = httpx2.HTTPStatusError(
        "401", request=request, response=httpx2.Response(401, request=request)
    )
    bug = ValueError("a bug in the client")
    tool, _ = make(unauthorized, bug)
    with pytest.raises(httpx2.HTTPStatusError) as raised:
        await tool.call({"title": "a"})
    assert classify_exception(raised.value).code is ErrorCode.AUTH_REQUIRED
    with pytest.raises(ValueError, match="a bug"):
        await tool.call({"title": "a"})
    assert tool.budget.snapshot() == {}


async def test_cancellation_is_not_a_failure() -> None:
    tool, _ = make(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await tool.call({"title": "a"})
    assert tool.budget.snapshot() == {}


def test_budget_needs_a_positive_threshold() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RequestBudget(0)


async def test_a_threshold_of_one_escalates_the_first_failure() -> None:
    tool, _ = make(refused(), budget=RequestBudget(1))
    with pytest.raises(MCPToolUnavailableError):
        await tool.call({"title": "a"})


async def test_escalations_make_failure_records_with_the_classified_reason() -> None:
    closed = MCPError(code=CONNECTION_CLOSED, message="Connection closed")
    tool, _ = make(closed, budget=RequestBudget(1))
    with pytest.raises(MCPToolUnavailableError) as raised:
        await tool.call({"title": "a"})
    record = FailureRecord.from_exception(raised.value)
    assert (record.reason, record.error_code, record.retryable) == (
        "connection_closed",
        ErrorCode.UPSTREAM_UNAVAILABLE,
        True,
    )
    assert record.stage == "mcp_call"
    assert record.tool == "lookup"
    assert record.evidence["attempts"] == 1

    refusal = MCPError(code=INVALID_PARAMS, message="no")
    tool, _ = make(refusal)
    with pytest.raises(MCPProtocolError) as protocol:
        await tool.call({"title": "a"})
    record = FailureRecord.from_exception(protocol.value)
    assert (record.reason, record.retryable, record.evidence["mcp_code"]) == (
        "mcp_error",
        False,
        INVALID_PARAMS,
    )


@pytest.mark.parametrize("error", [MCPToolUnavailableError, MCPToolTimeoutError, MCPProtocolError])
def test_escalations_are_marked_for_tool_loops(error: type[Exception]) -> None:
    assert getattr(error, "__llamon_escalate__", False) is True
